//! What on the host bends `probe noise`'s figures before it starts: a
//! clocksource without a vDSO read, and RT throttling of a SCHED_FIFO loop.

use anyhow::{Result, bail};

use crate::root::Root;

const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// Clocksources the vDSO cannot read (arch/x86/include/asm/vdso/gettimeofday.h
/// reads only `VDSO_CLOCKMODE_TSC`, `_PVCLOCK` and `_HVCLOCK`): every
/// `clock_gettime` is a system call, about a microsecond (hpet's register
/// read alone is several hundred ns).
const SLOW: [&str; 2] = ["hpet", "acpi_pm"];

/// The threshold below which a slow clocksource is refused: rtla osnoise's
/// default (kernel/trace/trace_osnoise.c, `run_osnoise`: `tracing_thresh`, or
/// 5000 ns when that is 0), well above one read.
pub const SLOW_CLOCK_MIN_THRESHOLD_NS: u64 = 5_000;

/// The clocksource, refusing a threshold its reads would cross on their
/// own; a warning when the threshold clears them.
pub fn clocksource(root: &Root, threshold_ns: u64) -> Result<(Option<String>, Option<String>)> {
    let cs = root
        .read_string(CLOCKSOURCE)
        .ok()
        .map(|t| t.trim().to_string());
    let Some(slow) = cs.as_deref().filter(|c| SLOW.contains(c)) else {
        return Ok((cs, None));
    };
    if threshold_ns < SLOW_CLOCK_MIN_THRESHOLD_NS {
        bail!(
            "--threshold {threshold_ns} ns: the clocksource is {slow} ({CLOCKSOURCE}), which the vDSO cannot read: every clock read is a system call of about a microsecond, so the probe's own reads would count as lost time; give --threshold 5us or more, or switch to tsc (echo tsc > {CLOCKSOURCE}) if the kernel trusts it"
        );
    }
    let warning = format!(
        "the clocksource is {slow}: every clock read is a system call of about a microsecond, so each gap includes one read and the loop sees fewer short gaps than with tsc"
    );
    Ok((cs, Some(warning)))
}

/// A warning when `--priority` meets RT throttling: a SCHED_FIFO thread that
/// never sleeps is stopped for `period - runtime` of each period while other
/// tasks wait (kernel/sched/rt.c `sched_rt_runtime_exceeded`; from Linux
/// 6.12 the fair server, kernel/sched/deadline.c, reserves the same 50 ms
/// per second for them), and that stop is lost time the probe made itself.
pub fn rt_throttling(root: &Root, priority: Option<u32>) -> Option<String> {
    let prio = priority?;
    let read = |f: &str| -> Option<i64> {
        root.read_string(&format!("/proc/sys/kernel/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let runtime = read("sched_rt_runtime_us")?;
    let period = read("sched_rt_period_us").unwrap_or(1_000_000);
    if runtime < 0 || runtime >= period {
        return None;
    }
    Some(format!(
        "--priority {prio}: RT throttling is on (kernel.sched_rt_runtime_us {runtime} of sched_rt_period_us {period}): while other tasks wait for a measured CPU, the measuring thread is stopped for up to {} ms of every {} ms, and that shows as lost time; set kernel.sched_rt_runtime_us=-1 for the run (and the fair server's runtime to 0 on Linux 6.12 and later), or measure without --priority",
        (period - runtime) / 1000,
        period / 1000
    ))
}
