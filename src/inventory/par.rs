//! Reading on all cores. The calling thread works too and the work is taken in
//! small chunks from a shared counter: a helper thread can start a millisecond
//! late (its CPU has to wake from an idle state, and in a VM its vCPU has to be
//! scheduled), and then the caller has simply done more of the work.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads worth running for a pass large enough to split, the caller
/// included (at most 8): the CPUs this process may run on, or fewer under a
/// cgroup CPU quota, which `available_parallelism` reads (22 system calls).
/// Asked once per process, and only by such passes.
pub fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8)
    })
}

/// The CPUs this process may run on (its affinity mask), at most 8: one
/// system call. Enough to decide on one helper for a few milliseconds of
/// work, where a quota's period (100 ms by default) is never reached.
pub fn allowed_cpu_count() -> usize {
    static ALLOWED: OnceLock<usize> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let allowed = affinity_words()
            .map(|w| w.iter().map(|w| w.count_ones() as usize).sum())
            .unwrap_or(1);
        allowed.clamp(1, 8)
    })
}

/// Starts `n` helper threads in `scope`, each running `f`. Linux puts a new
/// thread on its parent's CPU, where it waits behind the busy parent until
/// the load balancer moves it: 1.5-3 ms on the 2-vCPU development VM, longer
/// than a live `inventory`. So each helper that finds itself on the parent's
/// CPU moves off it (its affinity set to the allowed CPUs but that one and
/// the host's isolated and nohz_full CPUs, then back to all of them, so
/// nothing stays pinned), and the parent yields once to let it: the helper
/// is running elsewhere about 0.15 ms after the spawn.
pub fn spawn_helpers<'scope, R: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    n: usize,
    f: &'scope (impl Fn() -> R + Sync),
) -> Vec<std::thread::ScopedJoinHandle<'scope, R>> {
    let parent = unsafe { libc::sched_getcpu() };
    let helpers: Vec<_> = (0..n)
        .map(|_| {
            scope.spawn(move || {
                leave_cpu(parent);
                f()
            })
        })
        .collect();
    if n > 0 {
        unsafe { libc::sched_yield() };
    }
    helpers
}

/// Moves the calling thread off `cpu` if it is there and may run elsewhere.
fn leave_cpu(cpu: libc::c_int) {
    if cpu < 0 || unsafe { libc::sched_getcpu() } != cpu {
        return;
    }
    let Ok(all) = affinity_words() else {
        return;
    };
    let mut away = all.clone();
    for c in std::iter::once(cpu as u32).chain(reserved_cpus().iter().copied()) {
        if let Some(w) = away.get_mut(c as usize / 64) {
            *w &= !(1u64 << (c % 64));
        }
    }
    if away.iter().all(|&w| w == 0) {
        return;
    }
    let set = |words: &[u64]| unsafe {
        libc::sched_setaffinity(0, words.len() * 8, words.as_ptr().cast())
    };
    if set(&away) == 0 {
        set(&all);
    }
}

/// CPUs a helper is never moved to, even when allowed: those this host
/// keeps for latency-sensitive work (`isolated`, `nohz_full`). Read from
/// the running host whatever `--root` is: the helper runs here.
fn reserved_cpus() -> &'static [u32] {
    static RESERVED: OnceLock<Vec<u32>> = OnceLock::new();
    RESERVED.get_or_init(|| {
        ["isolated", "nohz_full"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(format!("/sys/devices/system/cpu/{f}")).ok())
            .filter_map(|t| crate::cpulist::CpuList::parse(super::trim_text(&t)).ok())
            .flat_map(|l| l.as_slice().to_vec())
            .collect()
    })
}

/// The calling thread's CPU affinity as 64-bit words, with a mask that grows
/// until the kernel's fits (EINVAL means too small), as glibc's CPU_ALLOC
/// callers do: hosts with more than 1,024 CPUs work.
pub fn affinity_words() -> std::io::Result<Vec<u64>> {
    let mut words = 16; // 1,024 CPUs
    loop {
        let mut mask = vec![0u64; words];
        // SAFETY: the kernel writes at most `words * 8` bytes into `mask`.
        let rc = unsafe { libc::sched_getaffinity(0, words * 8, mask.as_mut_ptr().cast()) };
        if rc == 0 {
            return Ok(mask);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) || words >= 1 << 16 {
            return Err(e);
        }
        words *= 2;
    }
}

/// Items handed out in chunks to whichever thread asks next.
pub struct Shared<'a, I> {
    items: &'a [I],
    chunk: usize,
    next: AtomicUsize,
}

impl<'a, I> Shared<'a, I> {
    /// About eight chunks per thread: small enough to even out a late start,
    /// large enough that the counter is not contended.
    pub fn new(items: &'a [I]) -> Shared<'a, I> {
        let chunk = (items.len() / (allowed_cpu_count() * 8)).clamp(1, 64);
        Shared {
            items,
            chunk,
            next: AtomicUsize::new(0),
        }
    }

    /// Takes chunks until none is left: `f` of each item with its position.
    pub fn drain<R>(&self, f: &impl Fn(&I) -> R) -> Vec<(usize, R)> {
        let mut out = Vec::new();
        loop {
            let start = self.next.fetch_add(self.chunk, Ordering::Relaxed);
            if start >= self.items.len() {
                return out;
            }
            let end = (start + self.chunk).min(self.items.len());
            out.extend((start..end).map(|i| (i, f(&self.items[i]))));
        }
    }
}

/// Puts results taken out of order back in the order of their items.
pub fn in_order<R>(len: usize, parts: impl IntoIterator<Item = Vec<(usize, R)>>) -> Vec<R> {
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(len).collect();
    for (i, r) in parts.into_iter().flatten() {
        slots[i] = Some(r);
    }
    slots
        .into_iter()
        .map(|r| r.expect("every item is taken once"))
        .collect()
}

/// Runs `f` over `items` on all cores, keeping the order.
pub fn par_map<I: Sync, R: Send>(items: &[I], f: impl Fn(&I) -> R + Sync) -> Vec<R> {
    // A thread costs more than a few reads.
    if items.len() < 64 || threads() < 2 {
        return items.iter().map(&f).collect();
    }
    par_map_all(items, f)
}

/// Runs `f` over consecutive parts of `items` on all cores, in order: for a
/// pass over CPUs that must see its neighbours (an instance read through one
/// CPU covers the others that share it).
pub fn par_parts<I: Sync, R: Send>(items: &[I], f: impl Fn(&[I]) -> R + Sync) -> Vec<R> {
    if items.len() < 64 || threads() < 2 {
        return vec![f(items)];
    }
    let parts: Vec<&[I]> = items.chunks(items.len().div_ceil(threads() * 4)).collect();
    par_map_all(&parts, |p| f(p))
}

/// [`par_map`] without its lower bound on the number of items.
fn par_map_all<I: Sync, R: Send>(items: &[I], f: impl Fn(&I) -> R + Sync) -> Vec<R> {
    let shared = Shared::new(items);
    let work = || shared.drain(&f);
    in_order(items.len(), run_with_helpers(threads() - 1, &work))
}

/// `work` run here and on `helpers` more threads ([`spawn_helpers`]): what
/// each run returned, this thread's first.
pub fn run_with_helpers<R: Send>(helpers: usize, work: &(impl Fn() -> R + Sync)) -> Vec<R> {
    std::thread::scope(|s| {
        let spawned = spawn_helpers(s, helpers, work);
        let mut all = vec![work()];
        all.extend(
            spawned
                .into_iter()
                .map(|h| h.join().expect("reader thread")),
        );
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_mapped_once_in_order() {
        for n in [0, 1, 63, 64, 65, 1000, 4097] {
            let items: Vec<usize> = (0..n).collect();
            let calls = AtomicUsize::new(0);
            let out = par_map(&items, |&i| {
                calls.fetch_add(1, Ordering::Relaxed);
                i * 2
            });
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
            assert_eq!(calls.load(Ordering::Relaxed), n);
        }
    }

    /// A helper may be moved off its parent's CPU, but ends with the
    /// parent's affinity, and a parent allowed one CPU keeps its helper there.
    #[test]
    fn helpers_end_with_the_parents_affinity() {
        let here = affinity_words().unwrap();
        let seen = |f: &(dyn Fn() -> (Vec<u64>, i32) + Sync)| {
            std::thread::scope(|s| {
                spawn_helpers(s, 1, &f)
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            })
        };
        let probe = || (affinity_words().unwrap(), unsafe { libc::sched_getcpu() });
        for (mask, _) in seen(&probe) {
            assert_eq!(mask, here);
        }
        // One allowed CPU: nowhere to move to.
        std::thread::spawn(move || {
            let cpu = unsafe { libc::sched_getcpu() } as usize;
            let mut one = vec![0u64; here.len()];
            one[cpu / 64] = 1 << (cpu % 64);
            let rc = unsafe { libc::sched_setaffinity(0, one.len() * 8, one.as_ptr().cast()) };
            assert_eq!(rc, 0);
            let probe = || (affinity_words().unwrap(), unsafe { libc::sched_getcpu() });
            for (mask, ran_on) in seen(&probe) {
                assert_eq!(mask, one);
                assert_eq!(ran_on as usize, cpu);
            }
        })
        .join()
        .unwrap();
    }

    /// The CPUs the kernel says this process may use (`Cpus_allowed_list`),
    /// at most 8; the threads for a large pass are no more.
    #[test]
    fn allowed_cpu_count_are_the_affinity_mask_at_most_eight() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        let allowed = crate::cpulist::CpuList::parse(list.trim()).unwrap().len();
        assert_eq!(allowed_cpu_count(), allowed.clamp(1, 8), "{list}");
        assert!(threads() <= allowed_cpu_count());
    }

    #[test]
    fn a_late_helper_finds_the_work_done() {
        let items: Vec<u32> = (0..500).collect();
        let shared = Shared::new(&items);
        let first = shared.drain(&|&i| i + 1);
        let late = shared.drain(&|&i| i + 1);
        assert!(late.is_empty());
        assert_eq!(
            in_order(items.len(), [first, late]),
            (1..501).collect::<Vec<_>>()
        );
    }
}
