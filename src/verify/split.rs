//! The wakeup probe's split per leg: the wake itself and the wait for the
//! CPU after it (`probe::wake_split`), pooled over the rounds, so a knob that
//! speeds the wake but slows scheduling shows both.

use serde::Serialize;

use crate::root::Root;
use crate::stats::Summary;

/// Per leg (as found, applied): null where the probe gave no split.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct WakeSplit {
    pub legs: [Option<Parts>; 2],
    /// Why the split does not apply on this host (the idle exit is counted
    /// in the run delay, not the wake); null when it applies.
    pub not_applicable: Option<String>,
}

/// Why the wake/run split does not apply here, or `None`. The split counts
/// the idle exit in the wake only when the sleeper's CPU enqueues the task
/// itself after waking (the wake list, TTWU_QUEUE). Where the waker enqueues
/// it directly on the sleeper's run queue, the sleeper is queued while its
/// CPU still leaves idle, and that exit lands in the run delay:
/// - PREEMPT_RT kernels (`/sys/kernel/realtime` reads 1) turn TTWU_QUEUE off
///   (kernel/sched/features.h);
/// - before v6.0, `ttwu_queue_cond` used the wake list only between CPUs that
///   share no LLC (`cpus_share_cache`); v6.0 (commit f3dd3f674555) queues to
///   an idle CPU in the same LLC too.
pub fn not_applicable(root: &Root, sleeper: u32, waker: u32) -> Option<String> {
    if root
        .read_trimmed("/sys/kernel/realtime")
        .ok()
        .flatten()
        .as_deref()
        == Some("1")
    {
        return Some(
            "a PREEMPT_RT kernel (/sys/kernel/realtime is 1) runs without TTWU_QUEUE: the waker queues the sleeper itself, so the sleeper CPU's idle exit is counted as run delay, not wake".into(),
        );
    }
    let release = root
        .read_trimmed("/proc/sys/kernel/osrelease")
        .ok()
        .flatten()?;
    let mut v = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let major = v.next().flatten()?;
    if major >= 6 || !shares_llc(root, sleeper, waker) {
        return None;
    }
    Some(format!(
        "kernel {release} (before 6.0) queues a wakeup between CPUs that share the last-level cache directly on the sleeper's run queue, and the waker (CPU {waker}) shares it with the sleeper (CPU {sleeper}): the sleeper CPU's idle exit is counted as run delay, not wake"
    ))
}

/// Does `b` share `a`'s highest-level cache (`cache/indexN/level`)?
fn shares_llc(root: &Root, a: u32, b: u32) -> bool {
    let dir = format!("{}/cpu{a}/cache", crate::inventory::CPU_DIR);
    let Ok(names) = root.read_dir(&dir) else {
        return false;
    };
    let read = |i: u32, f: &str| {
        root.read_trimmed(&format!("{dir}/index{i}/{f}"))
            .ok()
            .flatten()
    };
    crate::inventory::numbered(&names, "index")
        .into_iter()
        .filter_map(|i| Some((read(i, "level")?.parse::<u32>().ok()?, i)))
        .max()
        .and_then(|(_, i)| read(i, "shared_cpu_list"))
        .and_then(|l| crate::cpulist::CpuList::parse(&l).ok())
        .is_some_and(|l| l.contains(b))
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Parts {
    /// From the wake request until the sleeper was queued to run.
    pub wake: Summary,
    /// From queued until it ran (the sleeper's schedstat run delay).
    pub run_delay: Summary,
}

/// The samples of each leg so far.
#[derive(Default)]
pub struct Pool {
    legs: [(Vec<u64>, Vec<u64>); 2],
    any: bool,
}

impl Pool {
    pub fn add(&mut self, applied: bool, split: Option<(Vec<u64>, Vec<u64>)>) {
        if let Some((w, d)) = split {
            let l = &mut self.legs[applied as usize];
            l.0.extend(w);
            l.1.extend(d);
            self.any = true;
        }
    }

    /// Null when no leg had a split (a probe without one); `not_applicable`
    /// from [`not_applicable`].
    pub fn report(&mut self, not_applicable: Option<String>) -> Option<WakeSplit> {
        if !self.any {
            return None;
        }
        let legs = std::mem::take(&mut self.legs).map(|(w, d)| {
            Some(Parts {
                wake: Summary::from_ns(&w)?,
                run_delay: Summary::from_ns(&d)?,
            })
        });
        Some(WakeSplit {
            legs,
            not_applicable,
        })
    }
}
