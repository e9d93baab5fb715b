//! From knobs to the ordered writes of one apply.

use std::collections::BTreeMap;

use crate::knob::{Blocked, Blocker, HostCtx, Write};
use crate::manifest::Knob;

/// What one knob would write on this host.
pub struct KnobPlan<'m> {
    pub knob: &'m Knob,
    pub writes: Vec<Write>,
    /// Targets this host lacks (not-applicable): left alone, and said so.
    pub skipped: Vec<Blocked>,
    /// Targets that stop the apply: a value the host does not accept, or a
    /// file whose value cannot be read (and so cannot be restored).
    pub refused: Vec<Blocked>,
    pub notes: Vec<String>,
}

/// One write, in the order apply makes it.
pub struct Step {
    /// Index into [`Planned::knobs`].
    pub knob: usize,
    pub write: Write,
}

pub struct Planned<'m> {
    pub knobs: Vec<KnobPlan<'m>>,
    pub steps: Vec<Step>,
}

/// When a write must happen relative to others: the kernel refuses or
/// undoes some values unless another is in place first. A global boost (or
/// `no_turbo`, or the driver mode) before anything per policy; the governor
/// before the energy-performance preference (which `performance` pins).
/// Everything else keeps plan order between them.
pub fn phase(path: &str) -> u8 {
    const GLOBAL: [&str; 4] = [
        "/sys/devices/system/cpu/cpufreq/boost",
        "/sys/devices/system/cpu/intel_pstate/no_turbo",
        "/sys/devices/system/cpu/intel_pstate/status",
        "/sys/devices/system/cpu/amd_pstate/status",
    ];
    if GLOBAL.contains(&path) {
        return 0;
    }
    match path.rsplit('/').next() {
        Some("scaling_governor") => 1,
        Some("energy_performance_preference") => 3,
        _ => 2,
    }
}

/// Plans every knob and orders the writes. Errors are bad input found on
/// this host (`file:line: field: message`).
pub fn plan<'m>(host: &HostCtx, knobs: &[&'m Knob]) -> Result<Planned<'m>, String> {
    let mut plans = Vec::new();
    for &knob in knobs {
        let p = knob
            .spec
            .plan(host)
            .map_err(|e| knob.source.field_error(e).to_string())?;
        let (refused, skipped) = p
            .blocked
            .into_iter()
            .partition(|b| !matches!(b.blocker, Blocker::NotApplicable(_)));
        plans.push(KnobPlan {
            knob,
            writes: p.writes,
            skipped,
            refused,
            notes: p.notes,
        });
    }
    let mut steps: Vec<Step> = plans
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.writes.iter().map(move |w| Step {
                knob: i,
                write: w.clone(),
            })
        })
        .collect();
    steps.sort_by_key(|s| phase(&s.write.path));
    check_conflicts(&plans, &steps)?;
    Ok(Planned {
        knobs: plans,
        steps,
    })
}

/// Two knobs may write the same file only with the same value.
fn check_conflicts(plans: &[KnobPlan], steps: &[Step]) -> Result<(), String> {
    let mut seen: BTreeMap<&str, &Step> = BTreeMap::new();
    for s in steps {
        match seen.get(s.write.path.as_str()) {
            Some(first) if first.write.after != s.write.after => {
                return Err(format!(
                    "knobs {} and {} both write {} ({:?} and {:?}): choose one",
                    plans[first.knob].knob.id,
                    plans[s.knob].knob.id,
                    s.write.path,
                    first.write.after.trim(),
                    s.write.after.trim()
                ));
            }
            Some(_) => {}
            None => {
                seen.insert(&s.write.path, s);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_order_the_phases() {
        let gov = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor";
        let epp = "/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference";
        let boost = "/sys/devices/system/cpu/cpufreq/policy0/boost";
        let global = "/sys/devices/system/cpu/cpufreq/boost";
        let idle = "/sys/devices/system/cpu/cpu0/cpuidle/state3/disable";
        assert!(phase(global) < phase(boost));
        assert!(phase(gov) < phase(epp));
        assert!(phase(global) < phase(gov));
        assert_eq!(phase(idle), phase(boost));
        // The per-CPU link to the policy is the same file.
        assert_eq!(
            phase("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
            phase(gov)
        );
    }
}
