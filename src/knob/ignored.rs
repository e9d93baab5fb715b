//! Knobs the kernel accepts and then ignores, known before the write. One
//! table for the three places that say so: `apply` (at plan time, in the dry
//! run and the summary), `audit` (`not-honoured`; `not-applicable` where no
//! cpuidle driver runs, whatever the value) and `verify` (the likely cause
//! of what the idle counters show, or not honoured without them).

use super::KindName;
use crate::inventory::{CPU_DIR, idle_states};
use crate::root::Root;

/// What about the host makes the kernel ignore the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// This cpuidle governor runs.
    Governor(&'static str),
    /// No cpuidle driver runs: see [`no_cpuidle`].
    NoCpuidle,
}

/// One rule: a kind whose value the host's idle loop does not act on.
pub struct IgnoredBy {
    pub kind: KindName,
    pub host: Host,
    /// Whether the rule holds for this desired value, given the exit latency
    /// (µs) of the deepest enabled non-polling state.
    pub holds: fn(desired: &str, deepest_exit_us: Option<u64>) -> bool,
    pub why: &'static str,
    pub source: &'static str,
}

/// A latency request (µs) the haltpoll governor ignores: anything but 0
/// (which it honours by polling), when its halt state exits slower.
fn latency_ignored_by_haltpoll(desired: &str, deepest_exit_us: Option<u64>) -> bool {
    match (desired.trim().parse::<u64>(), deepest_exit_us) {
        (Ok(limit), Some(exit)) => limit > 0 && exit > limit,
        _ => false,
    }
}

const NO_CPUIDLE_WHY: &str = "no cpuidle driver runs here (cpuidle `current_driver` reads `none`, or the kernel has no CONFIG_CPU_IDLE): the idle loop halts with the architecture's default idle and never reads a PM QoS latency request or an idle state's setting";
const NO_CPUIDLE_SOURCE: &str = "kernel/sched/idle.c: cpuidle_idle_call() calls default_idle_call() when cpuidle_not_available(); only the cpuidle governors read cpu_latency_qos_limit() and dev_pm_qos_raw_resume_latency() (drivers/cpuidle/governor.c: cpuidle_governor_latency_req())";

fn any_value(_: &str, _: Option<u64>) -> bool {
    true
}

/// A kind no idle loop reads where no cpuidle driver runs, whatever its value.
const fn without_cpuidle(kind: KindName) -> IgnoredBy {
    IgnoredBy {
        kind,
        host: Host::NoCpuidle,
        holds: any_value,
        why: NO_CPUIDLE_WHY,
        source: NO_CPUIDLE_SOURCE,
    }
}

pub const RULES: &[IgnoredBy] = &[
    without_cpuidle(KindName::PmQosResumeLatency),
    without_cpuidle(KindName::PmQos),
    without_cpuidle(KindName::CpuidleState),
    IgnoredBy {
        kind: KindName::CpuidleState,
        host: Host::Governor("haltpoll"),
        holds: |desired, _| desired == "disabled",
        why: "the cpuidle governor is `haltpoll`, which ignores per-state disable (the `menu` and `teo` governors honour it): the state is still entered",
        source: "drivers/cpuidle/governors/haltpoll.c: haltpoll_select() picks poll or halt and never reads a state's disable flag",
    },
    // `0` in pm_qos_resume_latency_us is "no constraint" and `n/a` a zero
    // request: neither parses as a limit above 0.
    IgnoredBy {
        kind: KindName::PmQosResumeLatency,
        host: Host::Governor("haltpoll"),
        holds: latency_ignored_by_haltpoll,
        why: "the cpuidle governor is `haltpoll`, which honours only a zero latency request (it then polls): any other limit leaves it entering its halt state, which exits slower",
        source: "drivers/cpuidle/governors/haltpoll.c: haltpoll_select() compares cpuidle_governor_latency_req() with 0 only",
    },
    IgnoredBy {
        kind: KindName::PmQos,
        host: Host::Governor("haltpoll"),
        holds: latency_ignored_by_haltpoll,
        why: "the cpuidle governor is `haltpoll`, which honours only a zero latency request (it then polls): any other limit leaves it entering its halt state, which exits slower",
        source: "drivers/cpuidle/governors/haltpoll.c: haltpoll_select() compares cpuidle_governor_latency_req() with 0 only",
    },
];

/// The cpuidle governor in use (`current_governor`, or `current_governor_ro`
/// on kernels before 5.x where it cannot be changed).
pub fn cpuidle_governor(root: &Root) -> Option<String> {
    ["current_governor", "current_governor_ro"]
        .iter()
        .find_map(|f| root.read_string(&format!("{CPU_DIR}/cpuidle/{f}")).ok())
        .map(|g| g.trim().to_string())
}

/// The exit latency of CPU `cpu`'s deepest enabled state that is not polling.
fn deepest_exit_us(root: &Root, cpu: u32) -> Option<u64> {
    idle_states::cpu_states(root, cpu)
        .ok()?
        .iter()
        .filter(|s| s.name != "POLL" && s.disabled != Some(true))
        .filter_map(|s| s.latency_us)
        .max()
}

/// Whether no cpuidle driver runs: `current_driver` reads `none`
/// (drivers/cpuidle/sysfs.c: show_current_driver()), or, on the live host,
/// there is no cpuidle directory at all (a kernel built without
/// CONFIG_CPU_IDLE). A capture without the directory says nothing.
pub fn no_cpuidle(root: &Root) -> bool {
    let dir = format!("{CPU_DIR}/cpuidle");
    match root.read_string(&format!("{dir}/current_driver")) {
        Ok(d) => d.trim() == "none",
        Err(_) => root.is_live() && root.exists(CPU_DIR) && !root.exists(&dir),
    }
}

/// The rule of the `NoCpuidle` kind for `kind` when no cpuidle driver runs:
/// whatever its value, the knob cannot act here (audit: `not-applicable`).
pub fn not_applicable(root: &Root, kind: KindName) -> Option<String> {
    let rule = RULES
        .iter()
        .find(|r| r.kind == kind && r.host == Host::NoCpuidle)?;
    no_cpuidle(root).then(|| format!("{} [{}]", rule.why, rule.source))
}

/// What audit calls a knob [`why`] gave `why` for: `not-applicable` where
/// no cpuidle driver runs (whatever it reads), else `not-honoured`.
pub fn audit_status(why: &str) -> &'static str {
    match why.starts_with(NO_CPUIDLE_WHY) {
        true => "not-applicable",
        false => "not-honoured",
    }
}

/// Why the kernel will ignore `desired` for a knob of `kind` on this host,
/// with the rule's source; `None` when it acts on it (or cannot be known).
pub fn why(root: &Root, kind: KindName, desired: &str, cpu: u32) -> Option<String> {
    if let Some(why) = not_applicable(root, kind) {
        return Some(why);
    }
    let rules: Vec<&IgnoredBy> = RULES
        .iter()
        .filter(|r| r.kind == kind && r.host != Host::NoCpuidle)
        .collect();
    if rules.is_empty() {
        return None;
    }
    let gov = cpuidle_governor(root)?;
    let deepest = deepest_exit_us(root, cpu);
    let rule = rules
        .into_iter()
        .find(|r| matches!(r.host, Host::Governor(g) if g == gov) && (r.holds)(desired, deepest))?;
    let exit = match (kind, deepest) {
        (KindName::CpuidleState, _) | (_, None) => String::new(),
        (_, Some(us)) => format!(" ({us} µs)"),
    };
    Some(format!("{}{exit} [{}]", rule.why, rule.source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haltpoll_honours_only_a_zero_latency_request() {
        assert!(latency_ignored_by_haltpoll("20", Some(100)));
        // Slower than the halt state's exit: satisfied anyway.
        assert!(!latency_ignored_by_haltpoll("20", Some(1)));
        // 0 is "no constraint" in sysfs; n/a is the zero request it polls for.
        assert!(!latency_ignored_by_haltpoll("0", Some(100)));
        assert!(!latency_ignored_by_haltpoll("n/a", Some(100)));
        assert!(!latency_ignored_by_haltpoll("20", None));
    }
}
