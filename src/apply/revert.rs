//! revert: put back what the journal recorded, read it back, record it.

use serde::Serialize;

use super::group::{self, Change, ChangeGroup};
use super::record::{ledger_entry_for, who};
use super::write::{self};
use super::{ApplyError, ApplyOptions, Session, validate};
use crate::journal::{self};
use crate::knob::WriteMode;
use crate::manifest::{Manifest, ledger};
use crate::root::Root;
use crate::schema::Persistence;

/// What revert restored for one knob.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct KnobRevert {
    pub id: String,
    /// Read before the restore -> read after it.
    pub changes: Vec<ChangeGroup>,
    /// What the restore does not show yet: an IRQ whose effective affinity
    /// stays on the CPU the knob chose until its next interrupt.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RevertOutcome {
    pub host: String,
    pub knobs: Vec<KnobRevert>,
    /// Files restored and read back.
    pub restored: usize,
    /// Files that no longer hold what hostknob wrote: someone else changed
    /// them since, so they were not written (unless `--force`) and stay in
    /// the journal. Revert exits 1 when there are any.
    pub left_alone: Vec<LeftAlone>,
    /// Entries written in another boot: the reboot reset those kernel values,
    /// so they were dropped from the journal without a write.
    pub stale: Vec<Stale>,
    /// Threads (`thread-affinity`) that exited since the apply: nothing to
    /// restore, dropped from the journal without a write.
    pub exited: usize,
    pub journal: String,
    pub ledger: Option<String>,
    /// Why the ledger could not record this revert (a full or read-only
    /// state directory). The files are restored all the same: putting the
    /// host back matters more than its history.
    pub unrecorded: Option<String>,
}

/// A journaled file revert did not write over.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LeftAlone {
    pub knob: String,
    pub path: String,
    /// What it held after hostknob wrote it (the value written, in older entries).
    pub wrote: Option<String>,
    /// What it holds now (`None`: the file is gone).
    pub now: Option<String>,
    /// Who changed it, when known (a later apply of another knob, a running
    /// service that sets such files).
    pub by: Option<String>,
}

/// A journal entry from another boot.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Stale {
    pub knob: String,
    pub path: String,
    /// The boot it was written in.
    pub boot: String,
}

/// Restores what the journal recorded for `ids` (every entry when empty),
/// in dependency order (the reverse, but the governor before EPP), reads each file back, records it in the ledger and
/// drops the restored entries from the journal. `manifest` (when it loads)
/// names the knobs' persistence in the ledger; revert does not need it.
/// A file that no longer holds what hostknob wrote is left alone (with
/// `force`, restored anyway); entries from another boot are dropped.
pub fn revert(
    s: &Session,
    manifest: Option<&Manifest>,
    ids: &[String],
    wait: bool,
    force: bool,
) -> Result<RevertOutcome, ApplyError> {
    let opts = ApplyOptions {
        wait,
        ..ApplyOptions::default()
    };
    revert_forced(s, manifest, ids, &opts, force)
}

/// [`revert`] with apply's options: `record` (a ledger entry) and `lock_held`
/// (the caller holds the lock) are what verify's legs need.
pub fn revert_with(
    s: &Session,
    manifest: Option<&Manifest>,
    ids: &[String],
    opts: &ApplyOptions,
) -> Result<RevertOutcome, ApplyError> {
    revert_forced(s, manifest, ids, opts, false)
}

fn revert_forced(
    s: &Session,
    manifest: Option<&Manifest>,
    ids: &[String],
    opts: &ApplyOptions,
    force: bool,
) -> Result<RevertOutcome, ApplyError> {
    let root = s.root();
    let journal = s.journal();
    let refused = |e: anyhow::Error| ApplyError::Refused(format!("{e:#}"));
    // The lock (and the state directory) only when there is something to do.
    let peek = journal.load().map_err(refused)?;
    let nothing = peek.entries.is_empty() && peek.torn.is_none() && !journal.exists();
    let _lock = if opts.lock_held || nothing {
        None
    } else {
        Some(s.lock(opts.wait)?)
    };
    let loaded = journal.load().map_err(refused)?;
    let entries = loaded.entries;
    for id in ids {
        let known =
            entries.iter().any(|e| &e.knob == id) || manifest.is_some_and(|m| m.get(id).is_some());
        if !known {
            return Err(ApplyError::Refused(format!(
                "no knob with id {id:?} in the manifest or the journal {}{}",
                journal.path().display(),
                crate::manifest::did_you_mean(
                    id,
                    entries.iter().map(|e| e.knob.as_str()).chain(
                        manifest
                            .into_iter()
                            .flat_map(|m| m.knobs.iter().map(|k| k.id.as_str()))
                    )
                )
            )));
        }
    }
    let chosen: Vec<&journal::Entry> = entries
        .iter()
        .filter(|e| ids.is_empty() || ids.contains(&e.knob))
        .collect();
    validate::permissions(
        root,
        chosen
            .iter()
            .map(|e| (e.path.as_str(), e.mode == WriteMode::File)),
        true,
    )
    .map_err(ApplyError::Refused)?;

    if opts.record && !chosen.is_empty() {
        s.ledger().check().map_err(|e| {
            ApplyError::Refused(format!(
                "{e}: revert records what it restores there; move the file aside and revert again"
            ))
        })?;
    }

    let step = restore_each(s, &entries, &chosen, force);
    let Step {
        restored,
        failed,
        left_alone,
        stale,
        exited,
    } = step;
    let mut gone: Vec<(String, String)> = restored
        .iter()
        .map(|(e, _)| (e.knob.clone(), e.path.clone()))
        .collect();
    gone.extend(
        stale
            .iter()
            .chain(&exited)
            .map(|e| (e.knob.clone(), e.path.clone())),
    );
    if !gone.is_empty() {
        journal.forget(&gone).map_err(|e| {
            ApplyError::Unrecorded(format!(
                "the restored files could not be dropped from the journal: {e:#}"
            ))
        })?;
    } else if let Some(torn) = &loaded.torn {
        journal.repair(torn).map_err(refused)?;
    }
    // Nothing left journaled: no state stays behind (the lock only when this
    // revert took it; verify holds its own across its legs).
    if _lock.is_some() && matches!(journal.remove_if_empty(), Ok(true)) {
        if let Some(lock) = _lock {
            let _ = lock.remove(root, &s.state_dir);
        }
    } else if opts.lock_held {
        let _ = journal.remove_if_empty();
    }

    let mut knobs = knob_changes(&restored);
    for k in &mut knobs {
        k.notes = lagging_interrupts(root, &restored, &k.id);
    }
    let mut outcome = RevertOutcome {
        host: s.ctx.name.clone(),
        restored: restored.len(),
        left_alone,
        stale: stale
            .iter()
            .map(|e| Stale {
                knob: e.knob.clone(),
                path: e.path.clone(),
                boot: e.boot.clone().unwrap_or_default(),
            })
            .collect(),
        exited: exited.len(),
        knobs,
        journal: journal.path().display().to_string(),
        ledger: None,
        unrecorded: None,
    };
    if opts.record && !outcome.knobs.is_empty() {
        record_reverts(s, manifest, &mut outcome);
    }
    if let Some(torn) = &loaded.torn
        && failed.is_empty()
    {
        return Err(ApplyError::TornJournal {
            restored: outcome.restored,
            message: journal.torn_message(torn),
        });
    }
    if !failed.is_empty() {
        return Err(ApplyError::Incomplete {
            failed,
            restored: outcome.restored,
            journal: journal.path().to_path_buf(),
        });
    }
    Ok(outcome)
}

/// One `reverted` ledger entry per knob restored; a ledger that cannot be
/// written is said in `unrecorded`, as the files are restored all the same.
fn record_reverts(s: &Session, manifest: Option<&Manifest>, outcome: &mut RevertOutcome) {
    if let Err(e) = try_record_reverts(s, manifest, outcome) {
        outcome.unrecorded = Some(e.to_string());
    }
}

fn try_record_reverts(
    s: &Session,
    manifest: Option<&Manifest>,
    outcome: &mut RevertOutcome,
) -> Result<(), ApplyError> {
    let user = who();
    let history = s
        .ledger()
        .read_for(&ledger::Identity::of(s.root()))
        .map(|(ours, _)| ours)
        .unwrap_or_default();
    for k in &outcome.knobs {
        let persistence = persistence_for(manifest, &history, &k.id);
        let entry = ledger_entry_for(
            &s.ctx.name,
            &k.id,
            persistence,
            ledger::Action::Reverted,
            k.changes.clone(),
            &user,
        );
        s.record(&entry)?;
    }
    outcome.ledger = Some(s.ledger().local_path().display().to_string());
    Ok(())
}

/// Per knob, what each restored file read before the restore and after it.
fn knob_changes(restored: &[(&journal::Entry, Option<String>)]) -> Vec<KnobRevert> {
    let mut knobs: Vec<KnobRevert> = Vec::new();
    for (e, _) in restored {
        if !knobs.iter().any(|k| k.id == e.knob) {
            knobs.push(KnobRevert {
                id: e.knob.clone(),
                changes: Vec::new(),
                notes: Vec::new(),
            });
        }
    }
    for k in &mut knobs {
        let mine: Vec<&(&journal::Entry, Option<String>)> =
            restored.iter().filter(|(e, _)| e.knob == k.id).collect();
        let afters: Vec<Option<String>> = mine.iter().map(|(e, _)| restored_text(e)).collect();
        k.changes = group::group(mine.iter().zip(&afters).map(|((e, was), after)| Change {
            path: &e.path,
            cpus: e.cpus.as_ref(),
            label: None,
            before: was.as_deref().map(str::trim),
            after: after.as_deref(),
        }));
    }
    knobs
}

/// IRQs restored by knob `id` whose `effective_affinity_list` still names a
/// CPU outside the restored `smp_affinity_list`: on x86 the kernel moves an
/// interrupt when it next fires (kernel/irq/manage.c, irq_set_affinity and
/// the pending move of arch/x86), so until then it stays where the knob put it.
fn lagging_interrupts(
    root: &Root,
    restored: &[(&journal::Entry, Option<String>)],
    id: &str,
) -> Vec<String> {
    restored
        .iter()
        .filter(|(e, _)| e.knob == id)
        .filter_map(|(e, _)| {
            let dir = e.path.strip_suffix("/smp_affinity_list")?;
            dir.strip_prefix("/proc/irq/")?;
            let read = |f: &str| {
                root.read_string(&format!("{dir}/{f}"))
                    .ok()
                    .and_then(|t| crate::cpulist::CpuList::parse(t.trim()).ok())
            };
            let (allowed, effective) = (read("smp_affinity_list")?, read("effective_affinity_list")?);
            effective
                .as_slice()
                .iter()
                .any(|c| !allowed.contains(*c))
                .then(|| {
                    format!(
                        "{dir}: effective affinity still {effective} (restored {allowed}): the kernel moves it at the interrupt's next occurrence"
                    )
                })
        })
        .collect()
}

/// What one pass over the chosen entries did.
struct Step<'j> {
    /// Each restored entry, in journal order, with what the file held before.
    restored: Vec<(&'j journal::Entry, Option<String>)>,
    failed: Vec<String>,
    left_alone: Vec<LeftAlone>,
    stale: Vec<&'j journal::Entry>,
    exited: Vec<&'j journal::Entry>,
}

/// Restores `chosen`, the newest apply first (a file two knobs wrote gets
/// the later knob's value before back first) and in dependency order within
/// that ([`crate::knob::rules::restore_order`], a stable sort, keeps the
/// reverse journal order among entries of one file).
fn restore_each<'j>(
    s: &Session,
    entries: &'j [journal::Entry],
    chosen: &[&'j journal::Entry],
    force: bool,
) -> Step<'j> {
    let root = s.root();
    let boot = journal::boot_id(root);
    let mut step = Step {
        restored: Vec::new(),
        failed: Vec::new(),
        left_alone: Vec::new(),
        stale: Vec::new(),
        exited: Vec::new(),
    };
    let mut order = chosen.to_vec();
    crate::knob::rules::restore_order(&mut order, |e| e.path.as_str());
    let mut services = None;
    let nics = super::reset::channel_nics(chosen.iter().map(|e| e.path.as_str()));
    // Files of queues the channels put back make again: restored after them.
    let mut after_channels: Vec<&journal::Entry> = Vec::new();
    for e in order {
        let was = write::content(root, &e.path).ok().flatten();
        if was.is_none()
            && e.mode == WriteMode::Attribute
            && super::reset::resets(root, &nics, &e.path)
        {
            after_channels.push(e);
            continue;
        }
        // From another boot: the reboot reset it only if it holds its value
        // as found again. Holding ours, the boot re-applied it (persistence):
        // restored. Holding a third value: left alone, as below.
        // A thread of another boot is gone whatever its number names now
        // (early threads get the same numbers and start times every boot).
        let other_boot_thread = e.mode.is_thread() && e.stale(boot.as_deref());
        if other_boot_thread
            || (e.stale(boot.as_deref()) && !force && e.holds_found(was.as_deref()))
        {
            step.stale.push(e);
            continue;
        }
        // A thread that exited (or whose number names another one now).
        if e.mode.is_thread() && was.is_none() {
            step.exited.push(e);
            continue;
        }
        // Another knob applied over this file later and stays applied: its
        // entry holds this one's value as its `before`, so restoring this one
        // now would make a later revert of that knob write ours back.
        let later = entries
            .iter()
            .skip_while(|x| !std::ptr::eq(*x, e))
            .skip(1)
            .find(|x| x.path == e.path && !chosen.iter().any(|c| std::ptr::eq(*c, *x)));
        if let Some(later) = later.filter(|_| !force) {
            step.left_alone.push(LeftAlone {
                knob: e.knob.clone(),
                path: e.path.clone(),
                wrote: e.seen.as_deref().or(e.written.as_deref()).map(|t| t.trim().to_string()),
                now: was.map(|t| t.trim().to_string()),
                by: Some(format!(
                    "changed by knob {}, applied after {} and still applied: revert {} first, or both together",
                    later.knob, e.knob, later.knob
                )),
            });
            continue;
        }
        if !force && !e.holds_ours(was.as_deref()) {
            let by = super::others::who_changed(s, entries, e, was.as_deref(), &mut services);
            step.left_alone.push(LeftAlone {
                knob: e.knob.clone(),
                path: e.path.clone(),
                wrote: e
                    .seen
                    .as_deref()
                    .or(e.written.as_deref())
                    .map(|t| t.trim().to_string()),
                now: was.map(|t| t.trim().to_string()),
                by,
            });
            continue;
        }
        match write::restore(root, e) {
            Ok(()) => step.restored.push((e, was)),
            Err(f) => step.failed.push(f.why),
        }
    }
    let restored_nics =
        super::reset::channel_nics(step.restored.iter().map(|(e, _)| e.path.as_str()));
    if !restored_nics.is_empty() {
        step.failed.extend(rewrite_reset(
            root,
            entries,
            chosen,
            &restored_nics,
            &step.restored,
        ));
    }
    for e in after_channels {
        match write::restore(root, e) {
            Ok(()) => step.restored.push((e, None)),
            Err(f) => step.failed.push(f.why),
        }
    }
    // Reported in journal order.
    let index: std::collections::HashMap<*const journal::Entry, usize> = chosen
        .iter()
        .enumerate()
        .map(|(i, e)| (*e as *const journal::Entry, i))
        .collect();
    step.restored
        .sort_by_key(|(e, _)| index.get(&(*e as *const journal::Entry)).copied());
    step.stale
        .sort_by_key(|e| index.get(&(*e as *const journal::Entry)).copied());
    step
}

/// After revert put channels back: the files of knobs still applied and
/// of the entries restored that the change reset, written again.
fn rewrite_reset<'j>(
    root: &Root,
    entries: &'j [journal::Entry],
    chosen: &[&'j journal::Entry],
    nics: &[String],
    restored: &[(&'j journal::Entry, Option<String>)],
) -> Vec<String> {
    let applied: Vec<&journal::Entry> = entries
        .iter()
        .filter(|x| !chosen.iter().any(|c| std::ptr::eq(*c, *x)))
        .collect();
    let back: Vec<&journal::Entry> = restored.iter().map(|(e, _)| *e).collect();
    super::reset::rewrite(root, nics, &applied, &back)
}

/// What a restored file reads now, as the ledger shows it.
pub(super) fn restored_text(e: &journal::Entry) -> Option<String> {
    match e.mode {
        WriteMode::File => e.before.clone(),
        _ => e.found.as_deref().map(|f| f.trim().to_string()),
    }
}

/// A reverted knob's persistence for the ledger: the manifest's, else the
/// one its last apply here recorded.
pub(super) fn persistence_for(
    manifest: Option<&Manifest>,
    history: &[ledger::Entry],
    id: &str,
) -> Persistence {
    manifest
        .and_then(|m| m.get(id))
        .map(|k| k.persistence)
        .or_else(|| {
            history
                .iter()
                .rev()
                .find(|e| e.knob == id && e.action == ledger::Action::Applied)
                .map(|e| e.persistence)
        })
        .unwrap_or(Persistence::Runtime)
}
