//! From knobs to the ordered writes of one apply.

use std::collections::BTreeMap;

use crate::knob::{Blocked, Blocker, HostCtx, Write, WriteMode, rules};
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
    /// Its `when:` fails here (`when: idle_driver == intel_idle; this host:
    /// haltpoll`): nothing is planned for it.
    pub not_applicable: Option<String>,
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

pub use crate::knob::rules::phase;

/// Plans every knob and orders the writes. Knobs are planned in dependency
/// order ([`rules::kind_phase`]), each against the state the writes before it
/// leave (an EPP knob sees the governor a governor knob of the same apply
/// writes). Errors are bad input found on this host (`file:line: field: message`).
pub fn plan<'m>(host: &HostCtx, knobs: &[&'m Knob]) -> Result<Planned<'m>, String> {
    let planned = plan_in_order(host, knobs);
    host.forget_assumed();
    let plans = planned?;
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
    crate::knob::cpufreq_limit::order_bounds(
        &mut steps,
        |s| (s.write.path.as_str(), s.write.after.as_str()),
        |s| plans[s.knob].knob.id.to_string(),
        |path| host.text(path)?.trim().parse().ok(),
    )?;
    check_conflicts(&plans, &steps)?;
    Ok(Planned {
        knobs: plans,
        steps,
    })
}

fn plan_in_order<'m>(host: &HostCtx, knobs: &[&'m Knob]) -> Result<Vec<KnobPlan<'m>>, String> {
    let mut order: Vec<usize> = (0..knobs.len()).collect();
    order.sort_by_key(|&i| rules::kind_phase(knobs[i].kind));
    let mut slots: Vec<Option<KnobPlan<'m>>> = knobs.iter().map(|_| None).collect();
    let facts = crate::inventory::facts::Facts::new(host.root);
    for i in order {
        let knob = knobs[i];
        let when = knob.conditions(&facts).map_err(|e| e.to_string())?;
        if let Some(why) = when.detail() {
            slots[i] = Some(KnobPlan {
                knob,
                writes: Vec::new(),
                skipped: Vec::new(),
                refused: Vec::new(),
                notes: Vec::new(),
                not_applicable: Some(why),
            });
            continue;
        }
        let p = knob
            .spec
            .plan(host)
            .map_err(|e| knob.source.field_error(e).to_string())?;
        // What later writes depend on (the driver mode, the governor).
        for w in p
            .writes
            .iter()
            .filter(|w| w.mode == WriteMode::Attribute && phase(&w.path) < rules::DEPENDENT_FREE)
        {
            host.assume_written(&w.path, w.after.trim());
        }
        // A PM QoS request lives while its file is open: apply, which exits,
        // cannot keep it; `hostknob hold` (or its unit) does.
        let (held, writes): (Vec<Write>, Vec<Write>) = p
            .writes
            .into_iter()
            .partition(|w| w.mode == WriteMode::Hold);
        let mut notes = p.notes;
        for w in held {
            notes.push(format!(
                "not written: the kernel keeps a request on {} only while its file is open, \
                 so it would end with this command; `hostknob hold {id}` holds {} µs \
                 (`persistence: hold` with `hostknob persist {id} --install` from boot)",
                w.path,
                w.after,
                id = knob.id
            ));
        }
        let (refused, skipped) = p
            .blocked
            .into_iter()
            .partition(|b| !matches!(b.blocker, Blocker::NotApplicable(_)));
        slots[i] = Some(KnobPlan {
            knob,
            writes,
            skipped,
            refused,
            notes,
            not_applicable: None,
        });
    }
    Ok(slots.into_iter().flatten().collect())
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
