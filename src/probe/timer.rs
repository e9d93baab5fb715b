//! `probe timer`: timer wakeup lateness by cyclictest's method.
//!
//! A thread sleeps with absolute `clock_nanosleep(CLOCK_MONOTONIC,
//! TIMER_ABSTIME)` until `next`, reads the clock on waking, and records
//! `now - next`; `next` then advances by the interval, and, as cyclictest does,
//! keeps advancing past `now` when a wake came later than a whole interval.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::pmqos::{self, PmQosSetting};
use super::{Cpus, HostFacts, Latency, Overhead, now_ns, pin_current_thread};
use crate::root::Root;

#[derive(Clone, Debug)]
pub struct Options {
    pub interval: Duration,
    pub loops: usize,
    pub cpu: Option<u32>,
    pub priority: Option<u32>,
    pub mlock: bool,
    pub pmqos_us: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimerResult {
    pub probe: String,
    #[serde(flatten)]
    pub latency: Latency,
    pub settings: Settings,
    pub overhead: Overhead,
    /// Intervals skipped because a wake came more than one interval late.
    pub overruns: u64,
    /// True when a signal (Ctrl-C) stopped the run before its last loop:
    /// the numbers are from the `samples` taken, of `settings.loops`.
    pub partial: bool,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: it completed.
    pub interrupted: Option<String>,
    pub duration_ms: u64,
    #[serde(skip)]
    pub raw: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub interval_us: u64,
    pub loops: usize,
    /// The CPU the thread was pinned to; null: not pinned.
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority; null: SCHED_OTHER.
    pub priority: Option<u32>,
    pub mlock: bool,
    pub clock: String,
    pub pm_qos: PmQosSetting,
    pub host: HostFacts,
}

fn set_fifo(priority: u32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: priority as i32,
    };
    // Linux applies this to the calling thread only.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!("--priority {priority}: cannot use SCHED_FIFO (it needs root or CAP_SYS_NICE)")
        });
    }
    Ok(())
}

/// `mlockall` for the run; unlocked again on drop.
struct MemLock;

impl MemLock {
    fn new() -> Result<MemLock> {
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            return Err(std::io::Error::last_os_error())
                .context("--mlock: mlockall failed (see `ulimit -l`; root is not limited)");
        }
        Ok(MemLock)
    }
}

impl Drop for MemLock {
    fn drop(&mut self) {
        unsafe { libc::munlockall() };
    }
}

pub fn run(root: &Root, opts: &Options) -> Result<TimerResult> {
    if opts.loops == 0 {
        bail!("--loops 0: at least one loop is needed");
    }
    let interval_ns = opts.interval.as_nanos() as u64;
    if interval_ns < 1000 {
        bail!("--interval: must be at least 1 µs");
    }
    let cpu = match opts.cpu {
        Some(c) => Some(Cpus::read(root)?.check("--cpu", c)?),
        None => None,
    };
    let host = HostFacts::read(root);
    let hold = opts.pmqos_us.map(|us| pmqos::hold(root, us)).transpose()?;
    let lock = if opts.mlock {
        Some(MemLock::new()?)
    } else {
        None
    };
    let loops = opts.loops;
    let priority = opts.priority;
    let start = now_ns();
    let ticker = crate::progress::Ticker::start("timer", Some(loops as u64), move || {
        // Draw from a CPU other than the timer's.
        if let (Some(c), Ok(allowed)) = (cpu, super::allowed_cpus())
            && let Some(&other) = allowed.as_slice().iter().find(|&&o| o != c)
        {
            let _ = pin_current_thread(other);
        }
    });
    let ticker = &ticker;
    let (raw, overruns, overhead) = std::thread::scope(|s| {
        s.spawn(move || -> Result<(Vec<u64>, u64, Overhead)> {
            if let Some(c) = cpu {
                pin_current_thread(c)?;
            }
            if let Some(p) = priority {
                set_fifo(p)?;
            }
            let _sleeper = super::interrupt::register();
            let (clock_read_ns, clock_read_min_ns) = super::clock_cost();
            let per_sample_ns = super::median_of(10_000, || {
                let next = now_ns();
                now_ns() - next
            });
            // A non-zero fill touches every page of the results before the
            // first sample (zeroed memory may be mapped lazily).
            let mut lat = vec![u64::MAX; loops];
            let mut overruns = 0;
            let mut next = now_ns() + interval_ns;
            let mut taken = 0;
            for slot in lat.iter_mut() {
                if !super::go_on(super::interrupt::sleep_until(next))? {
                    break;
                }
                taken += 1;
                let now = now_ns();
                *slot = now.saturating_sub(next);
                next += interval_ns;
                while now > next {
                    next += interval_ns;
                    overruns += 1;
                }
                ticker.tick();
            }
            lat.truncate(taken);
            Ok((
                lat,
                overruns,
                Overhead {
                    clock_read_ns,
                    clock_read_min_ns,
                    per_sample_ns,
                    wake_call_ns: None,
                },
            ))
        })
        .join()
        .expect("timer thread panicked")
    })?;
    let duration_ms = (now_ns() - start) / 1_000_000;
    drop(lock);
    let pm_qos = PmQosSetting::of(&hold);
    drop(hold);
    let interrupted = (raw.len() < loops).then(super::interrupted_by).flatten();
    Ok(TimerResult {
        probe: super::Probe::Timer.as_str().into(),
        latency: Latency::from_ns(&raw)?,
        settings: Settings {
            interval_us: interval_ns / 1000,
            loops,
            cpu,
            priority,
            mlock: opts.mlock,
            clock: "CLOCK_MONOTONIC, absolute clock_nanosleep".into(),
            pm_qos,
            host,
        },
        overhead,
        overruns,
        partial: interrupted.is_some(),
        interrupted,
        duration_ms,
        raw,
    })
}

/// What `verify` compares of a run.
impl super::latency::IntoLatencyRun for TimerResult {
    fn into_latency_run(self) -> Result<super::latency::LatencyRun> {
        super::refuse_partial(&self.interrupted)?;
        Ok(super::latency::LatencyRun {
            split: None,
            samples: self.raw.iter().map(|&v| v as f64).collect(),
            settings: serde_json::to_value(&self.settings)?,
            warnings: Vec::new(),
            lost: None,
            evidence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::latency::IntoLatencyRun;

    /// `verify` reports complete rounds only: a run a signal cut short
    /// (printed by `probe` as partial) is refused as a leg.
    #[test]
    fn verify_refuses_a_run_a_signal_cut_short() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let opts = Options {
            interval: Duration::from_millis(1),
            loops: 5,
            cpu: None,
            priority: None,
            mlock: false,
            pmqos_us: None,
        };
        let complete = run(&root, &opts).unwrap();
        assert!(!complete.partial && complete.interrupted.is_none());
        let mut cut = complete.clone();
        let run = complete.into_latency_run().unwrap();
        assert_eq!(run.samples.len(), 5);
        cut.partial = true;
        cut.interrupted = Some("SIGINT".into());
        let e = cut
            .into_latency_run()
            .err()
            .expect("a partial leg is refused");
        assert_eq!(e.to_string(), "interrupted by SIGINT");
    }
}
