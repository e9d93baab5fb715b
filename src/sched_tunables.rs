//! The scheduler's tunables by kernel release, as data: `/sys/kernel/debug/sched/*`
//! since Linux 5.13 ("sched: Move SCHED_DEBUG sysctl to debugfs",
//! kernel/sched/debug.c `sched_init_debug`), `/proc/sys/kernel/sched_*`
//! (CONFIG_SCHED_DEBUG) and `numa_balancing_*` before; EEVDF (6.6) removed
//! `latency_ns` and `wakeup_granularity_ns` and renamed `min_granularity_ns`
//! `base_slice_ns`. Read by the `sched-tunable` kind and by tuned's import
//! (`peers::tuned`, which may not ask `knob`); with the debugfs mount both
//! need on the live host.

use std::sync::Mutex;

pub const DEBUGFS: &str = "/sys/kernel/debug";
pub const SCHED_DIR: &str = "/sys/kernel/debug/sched";

/// `(major, minor)`: the release a file appeared or went.
type Release = (u64, u64);

/// The release the tunables moved to debugfs.
const DEBUGFS_SINCE: Release = (5, 13);
/// EEVDF: "sched/fair: Commit to EEVDF" and "sched/debug: Rename
/// sysctl_sched_min_granularity to sysctl_sched_base_slice".
const EEVDF: Release = (6, 6);

/// One tunable of kernel/sched/debug.c.
#[derive(Debug)]
pub struct Tunable {
    /// Its name under `/sys/kernel/debug/sched/`.
    pub name: &'static str,
    /// Its name under `/proc/sys/kernel/` before 5.13; `None` when it had none.
    pub proc: Option<&'static str>,
    /// The release it appeared in, and why it did not exist before.
    pub since: Option<(Release, &'static str)>,
    /// The release it went, and why.
    pub until: Option<(Release, &'static str)>,
    /// What the kernel takes: before 5.13 the sysctl's `extra1..extra2`
    /// (kernel/sysctl.c, kernel/sched/fair.c), after it `debugfs_create_u32`'s u32.
    pub proc_range: (u64, u64),
    pub debugfs_range: (u64, u64),
    /// Scaled by `tunable_scaling` (kernel/sched/fair.c `update_sysctl`):
    /// set again from its boot value times the factor whenever a CPU goes
    /// on- or offline or a root domain is rebuilt (`rq_online_fair`,
    /// `rq_offline_fair`), which undoes a debugfs write (a u32 with no
    /// handler, unlike the sysctl before 5.13, which kept the boot value
    /// in step).
    pub rescaled: bool,
}

const U32: (u64, u64) = (0, u32::MAX as u64);
const INT: (u64, u64) = (0, i32::MAX as u64);
/// kernel/sysctl.c, `min_sched_granularity_ns`..`max_sched_granularity_ns`.
const GRANULARITY: (u64, u64) = (100_000, 1_000_000_000);
const GONE_EEVDF: &str = "removed with EEVDF in 6.6 (\"sched/fair: Commit to EEVDF\"): the slice is base_slice_ns, no successor for this one";

pub const TUNABLES: &[Tunable] = &[
    Tunable {
        name: "latency_ns",
        proc: Some("sched_latency_ns"),
        since: None,
        until: Some((EEVDF, GONE_EEVDF)),
        proc_range: GRANULARITY,
        debugfs_range: U32,
        rescaled: true,
    },
    Tunable {
        name: "min_granularity_ns",
        proc: Some("sched_min_granularity_ns"),
        since: None,
        until: Some((
            EEVDF,
            "renamed base_slice_ns with EEVDF in 6.6 (\"sched/debug: Rename sysctl_sched_min_granularity to sysctl_sched_base_slice\")",
        )),
        proc_range: GRANULARITY,
        debugfs_range: U32,
        rescaled: true,
    },
    Tunable {
        name: "wakeup_granularity_ns",
        proc: Some("sched_wakeup_granularity_ns"),
        since: None,
        until: Some((EEVDF, GONE_EEVDF)),
        proc_range: (0, 1_000_000_000),
        debugfs_range: U32,
        rescaled: true,
    },
    Tunable {
        name: "base_slice_ns",
        proc: None,
        since: Some((
            EEVDF,
            "the name since 6.6 (EEVDF) of min_granularity_ns; before it, set min_granularity_ns",
        )),
        until: None,
        proc_range: U32,
        debugfs_range: U32,
        rescaled: true,
    },
    Tunable {
        name: "tunable_scaling",
        proc: Some("sched_tunable_scaling"),
        since: None,
        until: None,
        // SCHED_TUNABLESCALING_NONE, LOG, LINEAR: `sched_scaling_write` refuses END and above.
        proc_range: (0, 2),
        debugfs_range: (0, 2),
        rescaled: false,
    },
    Tunable {
        name: "migration_cost_ns",
        proc: Some("sched_migration_cost_ns"),
        since: None,
        until: None,
        proc_range: INT,
        debugfs_range: U32,
        rescaled: false,
    },
    Tunable {
        name: "nr_migrate",
        proc: Some("sched_nr_migrate"),
        since: None,
        until: None,
        proc_range: INT,
        debugfs_range: U32,
        rescaled: false,
    },
    Tunable {
        name: "numa_balancing/scan_delay_ms",
        proc: Some("numa_balancing_scan_delay_ms"),
        since: None,
        until: None,
        proc_range: INT,
        debugfs_range: U32,
        rescaled: false,
    },
    Tunable {
        name: "numa_balancing/scan_period_min_ms",
        proc: Some("numa_balancing_scan_period_min_ms"),
        since: None,
        until: None,
        proc_range: INT,
        debugfs_range: U32,
        rescaled: false,
    },
    Tunable {
        name: "numa_balancing/scan_period_max_ms",
        proc: Some("numa_balancing_scan_period_max_ms"),
        since: None,
        until: None,
        proc_range: INT,
        debugfs_range: U32,
        rescaled: false,
    },
    Tunable {
        name: "numa_balancing/scan_size_mb",
        proc: Some("numa_balancing_scan_size_mb"),
        // kernel/sysctl.c: `extra1 = SYSCTL_ONE`.
        since: None,
        until: None,
        proc_range: (1, i32::MAX as u64),
        debugfs_range: U32,
        rescaled: false,
    },
];

/// The options of tuned's scheduler plugin for these (`_get_config_options`).
pub const TUNED_OPTIONS: [&str; 10] = [
    "sched_min_granularity_ns",
    "sched_latency_ns",
    "sched_wakeup_granularity_ns",
    "sched_tunable_scaling",
    "sched_migration_cost_ns",
    "sched_nr_migrate",
    "numa_balancing_scan_delay_ms",
    "numa_balancing_scan_period_min_ms",
    "numa_balancing_scan_period_max_ms",
    "numa_balancing_scan_size_mb",
];

/// tuned's option -> the tunable's name here (`_get_sched_knob_path`'s
/// `namespace/knob`): `sched_X` is `X`, `numa_balancing_X` is `numa_balancing/X`.
pub fn from_tuned(option: &str) -> &'static str {
    let name = option.strip_prefix("sched_").unwrap_or(option);
    TUNABLES
        .iter()
        .find(|t| t.name == name || t.name.replace('/', "_") == name)
        .map_or("", |t| t.name)
}

pub fn tunable(name: &str) -> Option<&'static Tunable> {
    TUNABLES.iter().find(|t| t.name == name)
}

/// Where a tunable is on a kernel.
#[derive(Debug, PartialEq)]
pub enum Where {
    At(String),
    /// Not on that kernel, and why.
    Gone(&'static str),
    /// The release is not known.
    Unknown,
}

/// Where `name` is on the kernel `release` (numbers: `[6, 1, 0]`).
pub fn locate(name: &str, release: &[u64]) -> Where {
    let Some(t) = tunable(name) else {
        return Where::Gone("no such tunable");
    };
    let (Some(&major), Some(&minor)) = (release.first(), release.get(1)) else {
        return Where::Unknown;
    };
    let r = (major, minor);
    if let Some((_, why)) = t.until.filter(|(at, _)| r >= *at) {
        return Where::Gone(why);
    }
    if let Some((_, why)) = t.since.filter(|(at, _)| r < *at) {
        return Where::Gone(why);
    }
    if r >= DEBUGFS_SINCE {
        return Where::At(format!("{SCHED_DIR}/{}", t.name));
    }
    match t.proc {
        Some(p) => Where::At(format!("/proc/sys/kernel/{p}")),
        None => Where::Gone("not a sysctl before 5.13"),
    }
}

/// A value the kernel takes for `name` anywhere (a number; the
/// tunable's own range).
pub fn check_value(name: &str, v: &str) -> Result<u64, String> {
    let n: u64 = v.trim().parse().map_err(|_| {
        "not a whole number of nanoseconds, milliseconds or a count as the name says".to_string()
    })?;
    let t = tunable(name).ok_or("no such tunable")?;
    let (lo, hi) = t.debugfs_range;
    if n < lo || n > hi {
        return Err(format!(
            "{n} is outside {lo}..{hi}, what the kernel takes for {name}"
        ));
    }
    Ok(n)
}

/// Mounts debugfs at /sys/kernel/debug on the live host when `path` is
/// under it and it is not mounted; unmounted at exit (`atexit`). Once per
/// process; an error is left for the read that follows to report.
pub fn mount_for(root: &crate::root::Root, path: &str) {
    static MOUNTED: Mutex<Option<bool>> = Mutex::new(None);
    if !root.is_live() || !path.starts_with(&format!("{DEBUGFS}/")) {
        return;
    }
    let mut done = MOUNTED.lock().unwrap_or_else(|e| e.into_inner());
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, at) = (c("debugfs"), c(DEBUGFS));
    if done.is_some() || is_debugfs(&at) {
        return;
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let ok = unsafe {
        libc::mount(
            src.as_ptr(),
            at.as_ptr(),
            src.as_ptr(),
            flags,
            std::ptr::null(),
        )
    } == 0;
    if ok {
        extern "C" fn unmount() {
            let at = std::ffi::CString::new(DEBUGFS).expect("no NUL");
            // Busy (another process has a file open): detached, gone once it closes.
            if unsafe { libc::umount2(at.as_ptr(), 0) } != 0 {
                unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) };
            }
        }
        unsafe { libc::atexit(unmount) };
    }
    *done = Some(ok);
}

/// include/uapi/linux/magic.h.
const DEBUGFS_MAGIC: libc::c_long = 0x6462_6720;

/// Whether debugfs is mounted at `at`, asked of the mount itself: a debugfs
/// without `sched/` (a kernel built without CONFIG_SCHED_DEBUG) is mounted
/// all the same, and mounting it again would stack a second mount there.
fn is_debugfs(at: &std::ffi::CStr) -> bool {
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(at.as_ptr(), &mut st) == 0 && st.f_type as libc::c_long == DEBUGFS_MAGIC }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kernel_has_its_own_names() {
        let at = |n, r: &[u64]| locate(n, r);
        assert_eq!(
            at("min_granularity_ns", &[5, 10, 0]),
            Where::At("/proc/sys/kernel/sched_min_granularity_ns".into())
        );
        assert_eq!(
            at("min_granularity_ns", &[6, 1, 0]),
            Where::At("/sys/kernel/debug/sched/min_granularity_ns".into())
        );
        assert!(
            matches!(at("min_granularity_ns", &[6, 6, 0]), Where::Gone(w) if w.contains("base_slice_ns"))
        );
        assert!(matches!(at("latency_ns", &[6, 18, 44]), Where::Gone(w) if w.contains("EEVDF")));
        assert_eq!(
            at("base_slice_ns", &[6, 6, 0]),
            Where::At("/sys/kernel/debug/sched/base_slice_ns".into())
        );
        assert!(matches!(at("base_slice_ns", &[6, 5, 9]), Where::Gone(_)));
        assert_eq!(
            at("numa_balancing/scan_size_mb", &[5, 4, 0]),
            Where::At("/proc/sys/kernel/numa_balancing_scan_size_mb".into())
        );
        assert_eq!(at("migration_cost_ns", &[]), Where::Unknown);
    }

    #[test]
    fn only_a_debugfs_mount_counts_as_one() {
        assert!(!is_debugfs(c"/proc"));
        assert!(!is_debugfs(c"/no/such/dir"));
    }

    #[test]
    fn the_scaled_ones_are_those_update_sysctl_sets() {
        let scaled: Vec<&str> = TUNABLES
            .iter()
            .filter(|t| t.rescaled)
            .map(|t| t.name)
            .collect();
        assert_eq!(
            scaled,
            [
                "latency_ns",
                "min_granularity_ns",
                "wakeup_granularity_ns",
                "base_slice_ns"
            ]
        );
    }

    #[test]
    fn tuned_options_name_tunables() {
        for o in TUNED_OPTIONS {
            assert!(tunable(from_tuned(o)).is_some(), "{o}");
        }
        assert_eq!(
            from_tuned("numa_balancing_scan_delay_ms"),
            "numa_balancing/scan_delay_ms"
        );
    }
}
