//! Keeps `probe noise`'s own threads off the CPUs it measures: a thread of
//! hostknob that wakes on a measured CPU is noise the probe made itself.
//! Every thread of the process is moved to the allowed CPUs outside
//! `--cpus` before the measuring threads start; threads created later
//! inherit the creator's mask (sched_setaffinity(2): a child created by
//! clone(2) inherits its parent's CPU affinity mask), so the main thread's
//! covers them. The masks are restored when the run ends. The hostknob
//! binary uses the system allocator: there are no jemalloc background
//! threads to move.

use crate::cpulist::CpuList;

/// The masks as found, restored on drop.
pub struct Pinned {
    saved: Vec<(i32, Vec<u64>)>,
}

fn mask(cpus: &[u32]) -> Vec<u64> {
    let top = cpus.iter().max().copied().unwrap_or(0);
    let mut m = vec![0u64; top as usize / 64 + 1];
    for &c in cpus {
        m[c as usize / 64] |= 1 << (c % 64);
    }
    m
}

/// Sets thread `tid`'s mask (0: the calling thread).
fn set_mask(tid: i32, m: &[u64]) -> std::io::Result<()> {
    // SAFETY: the kernel reads `m.len() * 8` bytes.
    if unsafe { libc::sched_setaffinity(tid, m.len() * 8, m.as_ptr().cast()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn get_mask(tid: i32) -> std::io::Result<Vec<u64>> {
    let mut words = 16;
    loop {
        let mut m = vec![0u64; words];
        // SAFETY: the kernel writes at most `words * 8` bytes.
        if unsafe { libc::sched_getaffinity(tid, words * 8, m.as_mut_ptr().cast()) } == 0 {
            return Ok(m);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) || words >= 1 << 16 {
            return Err(e);
        }
        words *= 2;
    }
}

/// This process's threads now. Our own process, wherever `--root` points.
fn own_threads() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Moves every thread of the process to `allowed` minus `measured`; a
/// warning instead when no CPU is left for them.
pub fn others_off(measured: &CpuList, allowed: &CpuList) -> (Pinned, Option<String>) {
    move_threads(measured, allowed, own_threads)
}

/// `others_off` over the threads `list` names.
fn move_threads(
    measured: &CpuList,
    allowed: &CpuList,
    list: impl Fn() -> Vec<i32>,
) -> (Pinned, Option<String>) {
    let mut pinned = Pinned { saved: Vec::new() };
    let rest: Vec<u32> = allowed
        .as_slice()
        .iter()
        .copied()
        .filter(|&c| !measured.contains(c))
        .collect();
    if rest.is_empty() {
        return (
            pinned,
            Some(format!(
                "no CPU outside --cpus {measured} is allowed to hostknob (allowed: {allowed}): its own threads may run on the measured CPUs, and their wakeups count as noise there; leave one CPU out of --cpus"
            )),
        );
    }
    let m = mask(&rest);
    // Again until no new thread appears: one may have been created meanwhile.
    loop {
        let fresh: Vec<i32> = list()
            .into_iter()
            .filter(|t| pinned.saved.iter().all(|(s, _)| s != t))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for tid in fresh {
            let Ok(before) = get_mask(tid) else {
                pinned.saved.push((tid, Vec::new()));
                continue;
            };
            if set_mask(tid, &m).is_ok() {
                pinned.saved.push((tid, before));
            } else {
                pinned.saved.push((tid, Vec::new()));
            }
        }
    }
    (pinned, None)
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for (tid, m) in &self.saved {
            if !m.is_empty() {
                // A thread that has ended since is not an error.
                let _ = set_mask(*tid, m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed_of(tid: i32) -> Vec<u64> {
        let mut m = get_mask(tid).unwrap();
        while m.last() == Some(&0) {
            m.pop();
        }
        m
    }

    #[test]
    fn every_thread_moves_off_the_measured_cpus_and_back() {
        let allowed = crate::probe::allowed_cpus().unwrap();
        let Some(&last) = allowed.as_slice().last().filter(|_| allowed.len() > 1) else {
            return; // one CPU: nothing to move to
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let found = allowed_of(tid);
        let measured: CpuList = std::iter::once(last).collect();
        // Only these two threads: the test harness runs other tests beside this one.
        let me = unsafe { libc::gettid() };
        let (pinned, warning) = move_threads(&measured, &allowed, || vec![me, tid]);
        assert!(warning.is_none());
        let rest = mask(
            &allowed
                .as_slice()
                .iter()
                .copied()
                .filter(|&c| c != last)
                .collect::<Vec<_>>(),
        );
        assert_eq!(allowed_of(tid), rest, "an existing thread");
        assert_eq!(allowed_of(0), rest, "the calling thread");
        // A thread started now inherits the mask.
        let later = std::thread::spawn(|| allowed_of(0)).join().unwrap();
        assert_eq!(later, rest, "a thread started during the run");
        drop(pinned);
        assert_eq!(allowed_of(tid), found, "restored");
        stop_tx.send(()).unwrap();
        helper.join().unwrap();
        // No CPU left: nothing moves, and the warning says so.
        let (_p, w) = move_threads(&allowed, &allowed, || vec![me, tid]);
        assert!(w.unwrap().contains("no CPU outside --cpus"));
        assert_eq!(allowed_of(0), found, "not moved");
    }
}
