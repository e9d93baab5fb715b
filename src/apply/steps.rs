//! The write engine apply and its re-plan after channels (`requeue`) share:
//! journal the values before, write the steps in order reading each back,
//! roll back what was touched on a failure.

use std::collections::HashSet;

use super::plan::{Planned, Step};
use super::write::{self, Put};
use super::{ApplyError, Session, hooks};
use crate::journal::{self, Journal};
use crate::knob::{HostCtx, KnobKind, Write, WriteMode};
use crate::manifest::ledger;
use crate::root::Root;

/// Records what each file read back after the writes, so that revert can
/// tell when someone else changed it since. Without it revert compares the
/// words written, so a failure here (a full disk) is only said.
pub(super) fn confirm_seen(root: &Root, journal: &Journal, entries: &[journal::Entry]) {
    let seen: Vec<(String, String, String)> = entries
        .iter()
        .filter_map(|e| {
            let now = write::content(root, &e.path).ok().flatten()?;
            Some((e.knob.clone(), e.path.clone(), now))
        })
        .collect();
    if let Err(e) = journal.confirm(&seen) {
        eprintln!(
            "hostknob: warning: could not record what the files read back in the journal ({e:#}); \
             revert compares them with the values written instead"
        );
    }
}

/// Records every file's value before the first write, durably. Returns the
/// entries (this apply's own record, index for index with the steps) and
/// the `(knob, path)` pairs the journal did not hold yet.
pub(super) fn journal_before(
    root: &Root,
    journal: &Journal,
    planned: &Planned,
) -> Result<(Vec<journal::Entry>, Vec<journal::Slot>), ApplyError> {
    let known: HashSet<(String, String)> = journal
        .entries()
        .map_err(|e| ApplyError::Refused(format!("{e:#}")))?
        .into_iter()
        .map(|e| (e.knob, e.path))
        .collect();
    let entries = journal_entries(root, planned).map_err(ApplyError::Refused)?;
    journal.record(&entries).map_err(|e| {
        ApplyError::Refused(format!(
            "cannot write the journal {}: {e:#}",
            journal.path().display()
        ))
    })?;
    let fresh = entries
        .iter()
        .map(|e| (e.knob.clone(), e.path.clone()))
        .filter(|slot| !known.contains(slot))
        .collect();
    Ok((entries, fresh))
}

/// A step the kernel refused and its kind left out: its index and why.
pub(super) type LeftOut = Vec<(usize, String)>;

/// Writes every step in order, reading each back; on the first failure
/// restores what was touched, in reverse. A write the kernel refused and
/// the knob's kind leaves out ([`KnobKind::leaves_out`]) is skipped and
/// returned instead.
pub(super) fn write_in_order(
    s: &Session,
    planned: &Planned,
    journal: &Journal,
    entries: &[journal::Entry],
    fresh: &[journal::Slot],
) -> Result<LeftOut, ApplyError> {
    let root = s.root();
    let hooks = hooks::Hooks::from_env();
    let mut touched: Vec<usize> = Vec::new();
    let mut left_out = LeftOut::new();
    for (i, st) in planned.steps.iter().enumerate() {
        hooks.before_write(i);
        let knob = planned.knobs[st.knob].knob;
        let domain: Vec<u32> = st
            .write
            .cpus
            .iter()
            .flat_map(|c| c.as_slice().to_vec())
            .collect();
        let what = match st.write.mode {
            WriteMode::File => Put::File(&st.write.after),
            WriteMode::Msr => Put::Msr {
                bits: &st.write.after,
                cpus: &domain,
            },
            WriteMode::Affinity | WriteMode::Sched => Put::Thread(&st.write.after),
            _ => Put::Attribute(&st.write.after),
        };
        let result = write::put(root, &st.write.path, what, || {
            confirm(knob.spec.as_ref(), &s.ctx, &st.write)
        });
        if let Err(f) = result {
            if let Some(why) = f
                .errno
                .filter(|_| !f.touched)
                .and_then(|e| knob.spec.leaves_out(&st.write, e))
            {
                left_out.push((i, why));
                continue;
            }
            if f.touched {
                touched.push(i);
            }
            return Err(rollback(root, journal, entries, &touched, fresh, f.why));
        }
        touched.push(i);
    }
    // MSRs go last ([`crate::knob::rules::MSR_PHASE`]); read each again once
    // everything is written, since a write may have made the kernel change it.
    for st in planned
        .steps
        .iter()
        .filter(|st| st.write.mode == WriteMode::Msr)
    {
        let knob = planned.knobs[st.knob].knob;
        if let Err(why) = confirm(knob.spec.as_ref(), &s.ctx, &st.write) {
            let why = format!("{}: after every write of the apply: {why}", st.write.path);
            return Err(rollback(root, journal, entries, &touched, fresh, why));
        }
    }
    Ok(left_out)
}

/// Reads a written file back and checks it in the knob's words.
pub(super) fn confirm(kind: &dyn KnobKind, host: &HostCtx, w: &Write) -> Result<(), String> {
    match kind.read_back(host, &w.path) {
        Ok(Some(v)) if kind.confirms(&w.expect, &v) => Ok(()),
        Ok(Some(v)) => Err(format!(
            "the write did not take: read back {v:?}, expected {:?}",
            w.expect
        )),
        // A thread that exited after its move: nothing left to check.
        Ok(None) if w.mode.is_thread() => Ok(()),
        Ok(None) => Err("the file is gone after the write".into()),
        Err(e) => Err(format!("cannot read it back: {e}")),
    }
}

/// Restores, in dependency order ([`crate::knob::rules::restore_order`]), every step the apply touched, from this apply's own
/// record of the values before; reads each back.
pub(super) fn rollback(
    root: &Root,
    journal: &Journal,
    entries: &[journal::Entry],
    touched: &[usize],
    fresh: &[journal::Slot],
    why: String,
) -> ApplyError {
    let mut order = touched.to_vec();
    crate::knob::rules::restore_order(&mut order, |&i| entries[i].path.as_str());
    let mut unrestored: Vec<String> = order
        .iter()
        .filter_map(|&i| write::restore(root, &entries[i]).err())
        .map(|f| f.why)
        .collect();
    // What the channels just put back reset, written again.
    let nics = super::reset::channel_nics(order.iter().map(|&i| entries[i].path.as_str()));
    if !nics.is_empty() {
        let all = journal.entries().unwrap_or_default();
        let applied: Vec<&journal::Entry> = all
            .iter()
            .filter(|e| !entries.iter().any(|x| x.knob == e.knob && x.path == e.path))
            .collect();
        let restored: Vec<&journal::Entry> = order.iter().map(|&i| &entries[i]).collect();
        unrestored.extend(super::reset::rewrite(root, &nics, &applied, &restored));
    }
    if !unrestored.is_empty() {
        return ApplyError::Stranded {
            why,
            unrestored,
            journal: journal.path().to_path_buf(),
        };
    }
    // The host is as it was: what this apply journaled is no longer a change.
    match journal.forget(fresh) {
        Ok(()) => ApplyError::RolledBack {
            why,
            restored: touched.len(),
        },
        Err(e) => ApplyError::RolledBack {
            why: format!("{why} (and the journal still lists the restored files: {e:#}; harmless)"),
            restored: touched.len(),
        },
    }
}

/// The journal entry of each step, read before the first write: the exact
/// content of each file and the value that restores it.
pub(super) fn journal_entries(
    root: &Root,
    planned: &Planned,
) -> Result<Vec<journal::Entry>, String> {
    let recorded = ledger::now_rfc3339();
    let boot = journal::boot_id(root);
    planned
        .steps
        .iter()
        .map(|st: &Step| {
            let w = &st.write;
            let found = write::content(root, &w.path)
                .map_err(|e| format!("cannot read {} to record it: {e}", w.path))?;
            let (before, found, created_dirs) = match w.mode {
                WriteMode::File => {
                    let dirs = match found {
                        None => root.missing_dirs(&w.path),
                        Some(_) => Vec::new(),
                    };
                    (found, None, dirs)
                }
                _ => {
                    // A thread may exit at any moment: its write then does nothing.
                    if found.is_none() && !w.mode.is_thread() {
                        return Err(format!("{} is gone: nothing to record", w.path));
                    }
                    (w.before.clone(), found, Vec::new())
                }
            };
            // A channel change in a tree: the queues it removes, as found.
            let queues = match crate::ethtool::Field::parse(&w.path) {
                Some(f) if crate::knob::rules::is_channels(&w.path) && !root.is_live() => {
                    crate::ethtool::queues::snapshot(root, &f.ifname)
                        .map_err(|e| format!("cannot record the queues of {}: {e}", f.ifname))?
                }
                _ => None,
            };
            Ok(journal::Entry {
                path: w.path.clone(),
                mode: w.mode,
                before,
                found,
                cpus: w.cpus.clone(),
                created_dirs,
                knob: planned.knobs[st.knob].knob.id.clone(),
                recorded: recorded.clone(),
                written: Some(w.after.clone()),
                seen: None,
                boot: boot.clone(),
                queues,
            })
        })
        .collect()
}
