//! Did the kernel do what the knob asked? A knob can read back as set and
//! still be ignored: the `haltpoll` cpuidle governor enters a state whose
//! `disable` reads 1. Around each leg, the idle-state counters of the CPUs
//! the probe sleeps on are read; after each applied leg, what the kernel did
//! is compared with what the knob asked:
//!
//! - a state that reads disabled whose `usage` rose;
//! - a state deeper (exit latency) than the CPU's resume-latency limit
//!   (`power/pm_qos_resume_latency_us`; `n/a` allows polling only) entered;
//! - under a `pm-qos` hold, a state deeper (exit latency) than the held
//!   latency entered;
//! - a knob file that no longer reads as set at the end of the leg (a
//!   governor or EPP changed back mid-run);
//! - where no cpuidle driver runs, an idle knob at all ([`crate::knob::ignored`]):
//!   the idle loop never reads it, and there are no counters to watch.

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::inventory::{cpu_states, resume_latency_path};
use crate::root::Root;

/// At most this many CPUs are watched: the sleeper and the first of the target.
const MAX_CPUS: usize = 16;

/// One idle state's counters on one CPU, or their change over a leg.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct StateCount {
    pub cpu: u32,
    pub state: String,
    pub latency_us: Option<u64>,
    /// `disable` as read at the end of the leg.
    pub disabled: bool,
    /// Entries (`usage`).
    pub entries: u64,
    /// Residency (`time`), µs.
    pub residency_us: u64,
}

/// The CPUs to watch: the sleeper first, then target CPUs, at most `MAX_CPUS`.
pub fn watched(sleeper: u32, target: Option<&CpuList>) -> Vec<u32> {
    let mut cpus = vec![sleeper];
    if let Some(t) = target {
        cpus.extend(
            t.as_slice()
                .iter()
                .filter(|&&c| c != sleeper)
                .take(MAX_CPUS - 1),
        );
    }
    cpus
}

/// Every idle state's counters on `cpus` now (states that cannot be read are left out).
pub fn read(root: &Root, cpus: &[u32]) -> Vec<StateCount> {
    let mut out = Vec::new();
    for &cpu in cpus {
        let Ok(states) = cpu_states(root, cpu) else {
            continue;
        };
        for st in states {
            let (Some(entries), Some(residency_us)) = (st.usage, st.time_us) else {
                continue;
            };
            out.push(StateCount {
                cpu,
                state: st.name,
                latency_us: st.latency_us,
                disabled: st.disabled.unwrap_or(false),
                entries,
                residency_us,
            });
        }
    }
    out
}

/// `after - before`, per CPU and state (`disabled` as read after).
pub fn delta(before: &[StateCount], after: &[StateCount]) -> Vec<StateCount> {
    after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.cpu == a.cpu && b.state == a.state);
            StateCount {
                entries: a.entries.saturating_sub(b.map_or(a.entries, |b| b.entries)),
                residency_us: a
                    .residency_us
                    .saturating_sub(b.map_or(a.residency_us, |b| b.residency_us)),
                ..a.clone()
            }
        })
        .collect()
}

/// Adds `d` into the running totals `sum`.
pub fn accumulate(sum: &mut Vec<StateCount>, d: &[StateCount]) {
    for s in d {
        match sum
            .iter_mut()
            .find(|x| x.cpu == s.cpu && x.state == s.state)
        {
            Some(x) => {
                x.entries += s.entries;
                x.residency_us += s.residency_us;
                x.disabled |= s.disabled;
            }
            None => sum.push(s.clone()),
        }
    }
}

/// The resume-latency limit of `cpu` in µs: `Some(0)` for `n/a` (polling only),
/// `None` for no limit (`0`) or an unreadable file.
pub fn resume_limit_us(root: &Root, cpu: u32) -> Option<u64> {
    crate::inventory::resume_limit_us(&root.read_string(&resume_latency_path(cpu)).ok()?)
}

/// The findings of one applied leg: what the kernel did against what was asked.
/// `held_us`: the latency a `pm-qos` knob held on `/dev/cpu_dma_latency` during
/// the leg; the governor must not pick a state whose exit latency exceeds it.
pub fn findings(root: &Root, leg: &[StateCount], held_us: Option<u64>) -> Vec<String> {
    let mut out = Vec::new();
    for s in leg.iter().filter(|s| s.entries > 0) {
        if let (Some(held), Some(lat)) = (held_us, s.latency_us)
            && lat > held
        {
            out.push(format!(
                "CPU {}: `{}` (exit latency {lat} µs) was entered {} times in the applied leg while {} µs was held on /dev/cpu_dma_latency",
                s.cpu, s.state, s.entries, held
            ));
        } else if s.disabled {
            out.push(format!(
                "CPU {}: `{}` reads disabled but was entered {} times ({} µs) in the applied leg",
                s.cpu, s.state, s.entries, s.residency_us
            ));
        } else if let (Some(limit), Some(lat)) = (resume_limit_us(root, s.cpu), s.latency_us)
            && lat > limit
        {
            out.push(format!(
                "CPU {}: `{}` (exit latency {lat} µs) was entered {} times in the applied leg, above the resume-latency limit of {}",
                s.cpu,
                s.state,
                s.entries,
                if limit == 0 { "n/a (polling only)".to_string() } else { format!("{limit} µs") }
            ));
        }
    }
    out
}

/// The likely cause of a disabled state being entered, when it is known.
/// The honoured status from the applied legs' findings, with a warning
/// when the kernel did not do what the knob asked.
#[allow(clippy::too_many_arguments)]
pub(super) fn conclude(
    root: &Root,
    id: &str,
    kind: crate::knob::KindName,
    mut findings: Vec<String>,
    cpus: Vec<u32>,
    overrule: Option<super::Decision>,
    applied_legs: usize,
    warnings: &mut Vec<String>,
) -> super::Honoured {
    // No idle counters to read where no cpuidle driver runs: the kernel's
    // own rule says the knob is not acted on, which no leg can contradict.
    let inert = crate::knob::ignored::not_applicable(root, kind);
    if let Some(why) = &inert
        && applied_legs > 0
    {
        findings.insert(0, format!("the kernel ignores {id} here: {why}"));
    }
    let honoured = super::Honoured {
        status: match (findings.is_empty(), overrule) {
            (false, _) => "not-honoured",
            // No applied leg ran to its end (an interrupt): no evidence either way.
            (true, _) if applied_legs == 0 => "not-checked",
            // Nothing entered, nothing to check: not a "yes".
            (true, Some(super::Decision::NotExercised)) => "not-checked",
            (true, _) => "honoured",
        },
        cause: (!findings.is_empty() && inert.is_none())
            .then(|| likely_cause(root))
            .flatten(),
        findings,
        cpus,
    };
    if honoured.status == "not-honoured" {
        warnings.push(format!(
            "{id} is not honoured by the kernel: {}{}",
            honoured.findings[0],
            honoured
                .cause
                .as_ref()
                .map(|c| format!("; likely cause: {c}"))
                .unwrap_or_default()
        ));
    }
    honoured
}

pub fn likely_cause(root: &Root) -> Option<String> {
    let gov = crate::knob::ignored::cpuidle_governor(root)?;
    (gov == "haltpoll").then(|| {
        "the cpuidle governor is `haltpoll`, which ignores per-state disable; the `menu` and `teo` governors honour it (/sys/devices/system/cpu/cpuidle/current_governor)".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entered(state: &str, latency_us: u64, entries: u64) -> StateCount {
        StateCount {
            cpu: 1,
            state: state.into(),
            latency_us: Some(latency_us),
            disabled: false,
            entries,
            residency_us: 10 * entries,
        }
    }

    #[test]
    fn a_state_deeper_than_a_held_pm_qos_latency_is_not_honoured() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sys")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let leg = [
            entered("POLL", 0, 40),
            entered("C1", 2, 9),
            entered("C6", 170, 3),
        ];
        let f = findings(&root, &leg, Some(20));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains("`C6`") && f[0].contains("20 µs was held"),
            "{f:?}"
        );
        // Held at 200 µs, C6 is allowed; with no hold, no resume limit: nothing.
        assert!(findings(&root, &leg, Some(200)).is_empty());
        assert!(findings(&root, &leg, None).is_empty());
        // Not entered: nothing to say.
        assert!(findings(&root, &[entered("C6", 170, 0)], Some(20)).is_empty());
    }
}
