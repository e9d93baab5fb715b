//! A wake-up sample in two parts, from the woken thread's own run delay
//! (`/proc/thread-self/schedstat`, second field: ns spent runnable but
//! waiting on a run queue; the kernel adds to it when the thread gets the
//! CPU). Read just before the thread blocks and just after it runs, its
//! change is the time this wake-up left it queued behind other work; the
//! rest of the latency is the wake itself (the request, the IPI, the idle
//! exit and the enqueue). The file is the probe's own thread, so it is read
//! directly, not through `--root`: like the clock, it is this machine.

use std::fs::File;
use std::os::unix::fs::FileExt;

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

pub const SOURCE: &str = "/proc/thread-self/schedstat";

/// The calling thread's schedstat, opened once.
pub struct RunDelay {
    file: File,
}

impl RunDelay {
    /// Opens the calling thread's file (call it on the thread measured).
    pub fn open() -> Result<RunDelay, String> {
        let file = File::open(SOURCE).map_err(|e| {
            format!("{SOURCE}: {e} (the kernel needs CONFIG_SCHED_INFO for run delays)")
        })?;
        let r = RunDelay { file };
        r.read()
            .map(|_| r)
            .ok_or_else(|| format!("{SOURCE} does not read as `<run ns> <run delay ns> <slices>`"))
    }

    /// The thread's run delay so far, ns.
    pub fn read(&self) -> Option<u64> {
        let mut buf = [0u8; 96];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        parse(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// The second of schedstat's three numbers.
fn parse(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Each sample's wake and wait for the CPU, over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Split {
    /// Where the run delays came from (`/proc/thread-self/schedstat`); null
    /// when they could not be read.
    pub source: Option<String>,
    /// Why there is no split (`source` null).
    pub reason: Option<String>,
    /// From the wake request until the sleeper was queued to run: the
    /// latency less the run delay, per sample.
    pub wake: Option<Summary>,
    /// From queued until it ran (the schedstat run-delay change), per sample.
    pub run_delay: Option<Summary>,
}

impl Split {
    pub fn of(latencies: &[u64], delays: &[Option<u64>], why: Option<String>) -> Split {
        let parts = parts(latencies.iter().copied().zip(delays.iter().copied()));
        match (why, parts) {
            (None, Some((wake, delay))) => Split {
                source: Some(SOURCE.into()),
                reason: None,
                wake: Summary::from_ns(&wake),
                run_delay: Summary::from_ns(&delay),
            },
            (why, _) => Split {
                source: None,
                reason: Some(why.unwrap_or_else(|| format!("{SOURCE} gave no run delay"))),
                wake: None,
                run_delay: None,
            },
        }
    }
}

/// The wake and run-delay parts of the samples that have a run delay.
pub fn parts(samples: impl Iterator<Item = (u64, Option<u64>)>) -> Option<(Vec<u64>, Vec<u64>)> {
    let (wake, delay): (Vec<u64>, Vec<u64>) = samples
        .filter_map(|(lat, d)| Some((lat.saturating_sub(d?), d?)))
        .unzip();
    (!wake.is_empty()).then_some((wake, delay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_reads_its_run_delay_and_a_sample_splits_in_two() {
        assert_eq!(parse("123 456 7\n"), Some(456));
        assert_eq!(parse("123\n"), None);
        let r = RunDelay::open().unwrap();
        assert!(r.read().is_some());
        let (w, d) = parts([(100, Some(30)), (50, None), (10, Some(20))].into_iter()).unwrap();
        assert_eq!((w, d), (vec![70, 0], vec![30, 20]));
        assert!(parts([(5, None)].into_iter()).is_none());
        let s = Split::of(&[100], &[None], Some("no file".into()));
        assert_eq!(
            (s.source, s.reason.as_deref(), s.wake),
            (None, Some("no file"), None)
        );
    }
}
