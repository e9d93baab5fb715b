//! revert: put back what the journal recorded, read it back, record it.

use serde::Serialize;

use super::group::{self, Change, ChangeGroup};
use super::record::{ledger_entry_for, who};
use super::write::{self};
use super::{ApplyError, ApplyOptions, Session, validate};
use crate::journal::{self};
use crate::knob::WriteMode;
use crate::manifest::{Manifest, ledger};
use crate::schema::Persistence;

/// What revert restored for one knob.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct KnobRevert {
    pub id: String,
    /// Read before the restore -> read after it.
    pub changes: Vec<ChangeGroup>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RevertOutcome {
    pub host: String,
    pub knobs: Vec<KnobRevert>,
    /// Files restored and read back.
    pub restored: usize,
    pub journal: String,
    pub ledger: Option<String>,
}

/// Restores what the journal recorded for `ids` (every entry when empty),
/// in dependency order (the reverse, but the governor before EPP), reads each file back, records it in the ledger and
/// drops the restored entries from the journal. `manifest` (when it loads)
/// names the knobs' persistence in the ledger; revert does not need it.
pub fn revert(
    s: &Session,
    manifest: Option<&Manifest>,
    ids: &[String],
    wait: bool,
) -> Result<RevertOutcome, ApplyError> {
    let opts = ApplyOptions {
        wait,
        ..ApplyOptions::default()
    };
    revert_with(s, manifest, ids, &opts)
}

/// [`revert`] with apply's options: `record` (a ledger entry) and `lock_held`
/// (the caller holds the lock) are what verify's legs need.
pub fn revert_with(
    s: &Session,
    manifest: Option<&Manifest>,
    ids: &[String],
    opts: &ApplyOptions,
) -> Result<RevertOutcome, ApplyError> {
    let root = s.root();
    let journal = s.journal();
    let refused = |e: anyhow::Error| ApplyError::Refused(format!("{e:#}"));
    // The lock (and the state directory) only when there is something to do.
    let peek = journal.load().map_err(refused)?;
    let _lock = if opts.lock_held || (peek.entries.is_empty() && peek.torn.is_none()) {
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

    let mut restored: Vec<(&journal::Entry, Option<String>)> = Vec::new();
    let mut failed = Vec::new();
    let mut order = chosen.clone();
    crate::knob::rules::restore_order(&mut order, |e| e.path.as_str());
    for e in order {
        let was = write::content(root, &e.path).ok().flatten();
        match write::restore(root, e) {
            Ok(()) => restored.push((e, was)),
            Err(f) => failed.push(f.why),
        }
    }
    // Reported in journal order.
    let index: std::collections::HashMap<*const journal::Entry, usize> = chosen
        .iter()
        .enumerate()
        .map(|(i, e)| (*e as *const journal::Entry, i))
        .collect();
    restored.sort_by_key(|(e, _)| index.get(&(*e as *const journal::Entry)).copied());
    let paths: Vec<String> = restored.iter().map(|(e, _)| e.path.clone()).collect();
    if !paths.is_empty() {
        journal.forget(&paths).map_err(|e| {
            ApplyError::Unrecorded(format!(
                "the restored files could not be dropped from the journal: {e:#}"
            ))
        })?;
    } else if let Some(torn) = &loaded.torn {
        journal.repair(torn).map_err(refused)?;
    }

    let mut knobs: Vec<KnobRevert> = Vec::new();
    for (e, _) in &restored {
        if !knobs.iter().any(|k| k.id == e.knob) {
            knobs.push(KnobRevert {
                id: e.knob.clone(),
                changes: Vec::new(),
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
    let mut outcome = RevertOutcome {
        host: s.ctx.name.clone(),
        restored: restored.len(),
        knobs,
        journal: journal.path().display().to_string(),
        ledger: None,
    };
    if opts.record && !outcome.knobs.is_empty() {
        let user = who();
        let history = ledger::read_for(
            &s.manifest_dir,
            &s.ctx.name,
            &ledger::Identity::of(s.root()),
        )
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
        outcome.ledger = Some(
            ledger::path_for(&s.manifest_dir, &s.ctx.name)
                .display()
                .to_string(),
        );
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
