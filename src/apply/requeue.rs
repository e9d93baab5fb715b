//! The writes a channel change must come before: `nic-channels` makes and
//! removes queues and their IRQs (`crate::ethtool::queues`), so the
//! per-queue kinds and `irq-affinity` ([`rules::PER_QUEUE`]) are planned
//! again once the channel writes are made and read back, and written then,
//! in the same apply, lock and journal. Their first plan (against the
//! queues the channels will leave) is what refuses a queue that would not
//! exist; a failure after the channel writes rolls back both.

use super::outcome::{ApplyOutcome, Skipped, apply_groups, knob_apply};
use super::plan::{self, Planned};
use super::steps::{confirm_seen, journal_before, rollback, write_in_order};
use super::{ApplyError, Session, validate};
use crate::journal::{self, Journal};
use crate::knob::{Write, rules};
use crate::root::Root;

/// Takes out of `planned` the steps of the knobs to plan again after its
/// channel writes, and returns those knobs' indices (none without a
/// channel write).
pub(super) fn defer(planned: &mut Planned) -> Vec<usize> {
    if !planned
        .steps
        .iter()
        .any(|s| rules::is_channels(&s.write.path))
    {
        return Vec::new();
    }
    let later: Vec<usize> = (0..planned.knobs.len())
        .filter(|&i| rules::PER_QUEUE.contains(&planned.knobs[i].knob.kind))
        .collect();
    planned.steps.retain(|s| !later.contains(&s.knob));
    later
}

/// After the channel writes of `planned` (made: `entries`), the files of
/// knobs applied before that the change reset ([`super::reset`]) are
/// written again; a failure rolls back this apply.
pub(super) fn rewrite_reset(
    root: &Root,
    planned: &Planned,
    journal: &Journal,
    entries: &[journal::Entry],
    fresh: &[journal::Slot],
) -> Result<(), ApplyError> {
    let nics = super::reset::channel_nics(planned.steps.iter().map(|s| s.write.path.as_str()));
    if nics.is_empty() {
        return Ok(());
    }
    let all = journal.entries().unwrap_or_default();
    let applied: Vec<&journal::Entry> = all
        .iter()
        .filter(|e| !planned.knobs.iter().any(|p| p.knob.id == e.knob))
        .collect();
    let failed = super::reset::rewrite(root, &nics, &applied, &[]);
    if failed.is_empty() {
        return Ok(());
    }
    let every: Vec<usize> = (0..entries.len()).collect();
    Err(rollback(
        root,
        journal,
        entries,
        &every,
        fresh,
        failed.join("; "),
    ))
}

/// Plans the `later` knobs of `first` (already written: `entries`) on the
/// host as the channel writes left it, then journals, writes and reads
/// them back; on a failure restores those writes and `first`'s too.
/// `outcome` and `writes` (per knob of `first`) take the new writes.
#[allow(clippy::too_many_arguments)]
pub(super) fn after_channels(
    s: &Session,
    first: &Planned,
    later: &[usize],
    journal: &Journal,
    entries: &[journal::Entry],
    fresh: &[journal::Slot],
    outcome: &mut ApplyOutcome,
    writes: &mut [Vec<Write>],
) -> Result<(), ApplyError> {
    let root = s.root();
    let undo = |why: String| {
        let all: Vec<usize> = (0..entries.len()).collect();
        rollback(root, journal, entries, &all, fresh, why)
    };
    let knobs: Vec<_> = later.iter().map(|&i| first.knobs[i].knob).collect();
    let planned = plan::plan(&s.ctx, &knobs)
        .and_then(|p| validate::values(&p).map(|_| p))
        .map_err(|e| undo(format!("after the channel change: {e}")))?;
    let (entries2, fresh2) =
        journal_before(root, journal, &planned).map_err(|e| undo(e.to_string()))?;
    let left_out = match write_in_order(s, &planned, journal, &entries2, &fresh2) {
        Ok(l) => l,
        Err(ApplyError::RolledBack { why, .. }) => return Err(undo(why)),
        Err(ApplyError::Stranded {
            why,
            mut unrestored,
            journal: j,
        }) => {
            if let ApplyError::Stranded {
                unrestored: more, ..
            } = undo(why.clone())
            {
                unrestored.extend(more);
            }
            return Err(ApplyError::Stranded {
                why,
                unrestored,
                journal: j,
            });
        }
        Err(e) => return Err(e),
    };
    let kept: Vec<journal::Entry> = entries2
        .iter()
        .enumerate()
        .filter(|(i, _)| !left_out.iter().any(|(l, _)| l == i))
        .map(|(_, e)| e.clone())
        .collect();
    confirm_seen(root, journal, &kept);
    outcome.written += planned.steps.len() - left_out.len();
    for p in &planned.knobs {
        let Some(i) = outcome.knobs.iter().position(|k| k.id == p.knob.id) else {
            continue;
        };
        let mut done = p.writes.clone();
        let mut now = knob_apply(p, &s.ctx);
        for (l, why) in &left_out {
            let st = &planned.steps[*l];
            if planned.knobs[st.knob].knob.id == p.knob.id {
                done.retain(|w| w.path != st.write.path);
                now.refused.push(Skipped {
                    path: st.write.path.clone(),
                    cpus: st.write.cpus.clone(),
                    reason: why.clone(),
                });
            }
        }
        now.changes = apply_groups(&done);
        outcome.knobs[i] = now;
        writes[i] = done;
    }
    Ok(())
}
