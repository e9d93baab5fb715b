//! `apply` and `revert`: change a host safely, and undo it.
//!
//! apply: plan every write of the chosen knobs; check every write before the
//! first (values the host accepts, values before that can be restored,
//! permission asked without writing); take the state directory's lock;
//! journal the values before (fsynced) before the first write; write in an
//! order that respects kernel dependencies ([`plan::phase`]), reading each
//! file back; on any failure restore what was written, in reverse, and read
//! that back too; on success append to the ledger.
//!
//! revert: put back what the journal recorded (the values before the first
//! apply since the journal began), read them back, record it, and drop those
//! entries from the journal. It works after a crash at any point of an apply.
//!
//! Both are library functions (`verify` runs them); the commands are thin.

pub mod group;
mod hooks;
pub mod plan;
pub mod validate;
pub mod write;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::journal::{self, Journal, Lock, LockError};
use crate::knob::{Blocked, HostCtx, KindName, KnobKind, Write, WriteMode};
use crate::manifest::schema::Persistence;
use crate::manifest::{Knob, Manifest, ledger};
use crate::root::Root;
use group::{Change, ChangeGroup};
use plan::{Planned, Step};
use write::Put;

pub use hooks::{DELAY_VAR, GATE_VAR};

/// One host to change: its root, name, manifest directory and state directory.
pub struct Session<'r> {
    pub host: HostCtx<'r>,
    /// Where the ledger is (`<manifest>/ledger/<host>.yaml`).
    pub manifest_dir: PathBuf,
    /// The state directory on the real filesystem (lock and journal).
    pub state_dir: PathBuf,
}

impl<'r> Session<'r> {
    /// `state_dir` is the configured one (`--state-dir`), resolved under the root.
    pub fn new(root: &'r Root, host: String, manifest_dir: &Path, state_dir: &Path) -> Session<'r> {
        Session {
            host: HostCtx::new(root, host),
            manifest_dir: manifest_dir.to_path_buf(),
            state_dir: journal::state_dir(root, state_dir),
        }
    }

    pub fn root(&self) -> &'r Root {
        self.host.root
    }

    pub fn journal(&self) -> Journal {
        Journal::open(&self.state_dir)
    }

    /// Appends an event to this host's ledger.
    pub fn record(&self, entry: &ledger::Entry) -> Result<(), ApplyError> {
        ledger::append(&self.manifest_dir, entry)
            .map(drop)
            .map_err(|e| ApplyError::Unrecorded(format!("the ledger could not be written: {e:#}")))
    }

    /// Takes the state directory's lock (or waits for it, with `wait`).
    pub fn lock(&self, wait: bool) -> Result<Lock, ApplyError> {
        Lock::acquire(&self.state_dir, wait).map_err(|e| self.lock_refusal(e))
    }

    fn lock_refusal(&self, e: LockError) -> ApplyError {
        match e {
            LockError::Held(m) => ApplyError::Refused(m),
            LockError::Unavailable(_) if unsafe { libc::geteuid() } != 0 => {
                ApplyError::Refused(format!("needs root to write {}", self.state_dir.display()))
            }
            LockError::Unavailable(e) => ApplyError::Refused(format!("{e:#}")),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// Plan and check only: no lock, no journal, no write.
    pub dry_run: bool,
    /// Wait for another hostknob's lock instead of failing at once.
    pub wait: bool,
    /// Append to the ledger (verify's own legs may not want an entry each).
    pub record: bool,
    /// The caller already holds the state directory's lock (verify holds it
    /// across all its legs).
    pub lock_held: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            dry_run: false,
            wait: false,
            record: true,
            lock_held: false,
        }
    }
}

/// Why an apply or a revert did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// Bad input, or a check before the first write failed: nothing was changed.
    Refused(String),
    /// A write or read-back failed; everything written was restored and read back.
    RolledBack { why: String, restored: usize },
    /// A write failed and restoring failed too: the host is partly changed.
    Stranded {
        why: String,
        unrestored: Vec<String>,
        journal: PathBuf,
    },
    /// Revert restored some files and not others (those stay in the journal).
    Incomplete {
        failed: Vec<String>,
        restored: usize,
        journal: PathBuf,
    },
    /// Applied and read back, but not recorded in the ledger.
    Unrecorded(String),
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Refused(m) => write!(f, "{m}: nothing was changed"),
            ApplyError::RolledBack { why, restored: 0 } => {
                write!(f, "{why}; nothing had been written: the host is as it was")
            }
            ApplyError::RolledBack { why, restored } => write!(
                f,
                "{why}; the {restored} files already written were restored and read back: \
                 the host is as it was"
            ),
            ApplyError::Stranded {
                why,
                unrestored,
                journal,
            } => write!(
                f,
                "{why}; restoring failed too ({}): the host is NOT as it was. The values before \
                 are in {}: fix the cause and run `hostknob revert --all`",
                unrestored.join("; "),
                journal.display()
            ),
            ApplyError::Incomplete {
                failed,
                restored,
                journal,
            } => write!(
                f,
                "restored {restored} files, but not {} ({}); they stay in {}: fix the cause and \
                 run revert again",
                failed.len(),
                failed.join("; "),
                journal.display()
            ),
            ApplyError::Unrecorded(m) => write!(
                f,
                "applied and read back, but {m}; `hostknob revert` restores the values before"
            ),
        }
    }
}

impl std::error::Error for ApplyError {}

/// A target left alone because this host lacks it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<crate::cpulist::CpuList>,
    pub reason: String,
}

/// What apply did (or would do) for one knob.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct KnobApply {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    pub persistence: Persistence,
    /// The writes, grouped where files change alike.
    pub changes: Vec<ChangeGroup>,
    pub skipped: Vec<Skipped>,
    pub notes: Vec<String>,
    /// The manifest's caveats, then what persists the knob (or does not).
    pub caveats: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ApplyOutcome {
    pub host: String,
    pub dry_run: bool,
    pub knobs: Vec<KnobApply>,
    /// Files written and read back.
    pub written: usize,
    /// Why apply would refuse (dry runs only: apply itself fails instead).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub journal: Option<String>,
    pub ledger: Option<String>,
}

/// The knobs `ids` names (or, with `all`, every knob for this host),
/// checked: each exists and targets this host.
pub fn select<'m>(
    manifest: &'m Manifest,
    host: &str,
    ids: &[String],
    all: bool,
) -> Result<Vec<&'m Knob>, ApplyError> {
    if all {
        return Ok(manifest
            .knobs
            .iter()
            .filter(|k| k.hosts.matches(host))
            .collect());
    }
    if ids.is_empty() {
        return Err(ApplyError::Refused(
            "name the knobs (ids from `hostknob knobs`), or pass --all".into(),
        ));
    }
    let mut out: Vec<&Knob> = Vec::new();
    for id in ids {
        let knob = manifest.get(id).ok_or_else(|| {
            ApplyError::Refused(format!(
                "no knob with id {id:?} in the manifest {}",
                manifest.dir.display()
            ))
        })?;
        if !knob.hosts.matches(host) {
            return Err(ApplyError::Refused(format!(
                "{}:{}: hosts: knob {id} does not target host {host} (hosts: {})",
                knob.source.file.display(),
                knob.source.first_line,
                knob.hosts
            )));
        }
        if !out.iter().any(|k| k.id == knob.id) {
            out.push(knob);
        }
    }
    Ok(out)
}

/// Plans, checks, journals, writes, reads back and records `knobs`.
pub fn apply(
    s: &Session,
    knobs: &[&Knob],
    opts: &ApplyOptions,
) -> Result<ApplyOutcome, ApplyError> {
    let root = s.root();
    // A held lock fails at once; a state directory this user cannot write is
    // reported after the checks, which name the host file that needs root.
    let lock =
        match (!opts.dry_run && !opts.lock_held).then(|| Lock::acquire(&s.state_dir, opts.wait)) {
            Some(Err(LockError::Held(m))) => return Err(ApplyError::Refused(m)),
            other => other,
        };
    let planned = plan::plan(&s.host, knobs).map_err(ApplyError::Refused)?;
    validate::values(&planned).map_err(ApplyError::Refused)?;
    let ledger_path = ledger::path_for(&s.manifest_dir, &s.host.name);
    let permitted = validate::permissions(
        root,
        planned
            .steps
            .iter()
            .map(|st| (st.write.path.as_str(), st.write.mode == WriteMode::File)),
        false,
    )
    .and_then(|_| match opts.record && !planned.steps.is_empty() {
        true => validate::ledger_writable(&ledger_path),
        false => Ok(()),
    });
    let mut outcome = ApplyOutcome {
        host: s.host.name.clone(),
        dry_run: opts.dry_run,
        knobs: planned.knobs.iter().map(knob_apply).collect(),
        written: 0,
        warnings: Vec::new(),
        journal: None,
        ledger: None,
    };
    if opts.dry_run {
        if let Err(m) = permitted {
            outcome.warnings.push(format!("apply would refuse: {m}"));
        }
        fill_caveats(&mut outcome, &planned, &s.host);
        return Ok(outcome);
    }
    permitted.map_err(ApplyError::Refused)?;
    let _lock = match lock {
        Some(Ok(l)) => Some(l),
        Some(Err(e)) => return Err(s.lock_refusal(e)),
        None if opts.lock_held => None,
        None => unreachable!("only dry runs go without the lock"),
    };
    if planned.steps.is_empty() {
        fill_caveats(&mut outcome, &planned, &s.host);
        return Ok(outcome);
    }

    let journal = s.journal();
    let (entries, fresh) = journal_before(root, &journal, &planned)?;
    write_in_order(s, &planned, &journal, &entries, &fresh)?;
    outcome.written = planned.steps.len();
    outcome.journal = Some(journal.path().display().to_string());
    // What persists each knob is known only now (an allocator's drop-in is its persistence).
    fill_caveats(&mut outcome, &planned, &s.host);
    if opts.record {
        let user = who();
        for p in planned.knobs.iter().filter(|p| !p.writes.is_empty()) {
            let entry = ledger_entry(
                &s.host.name,
                p.knob,
                ledger::Action::Applied,
                apply_groups(&p.writes),
                &user,
            );
            s.record(&entry)?;
        }
        outcome.ledger = Some(ledger_path.display().to_string());
    }
    Ok(outcome)
}

/// Records every file's value before the first write, durably. Returns the
/// entries (this apply's own record, index for index with the steps) and
/// the paths the journal did not hold yet.
fn journal_before(
    root: &Root,
    journal: &Journal,
    planned: &Planned,
) -> Result<(Vec<journal::Entry>, Vec<String>), ApplyError> {
    let known: HashSet<String> = journal
        .entries()
        .map_err(|e| ApplyError::Refused(format!("{e:#}")))?
        .into_iter()
        .map(|e| e.path)
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
        .map(|e| e.path.clone())
        .filter(|p| !known.contains(p))
        .collect();
    Ok((entries, fresh))
}

/// Writes every step in order, reading each back; on the first failure
/// restores what was touched, in reverse.
fn write_in_order(
    s: &Session,
    planned: &Planned,
    journal: &Journal,
    entries: &[journal::Entry],
    fresh: &[String],
) -> Result<(), ApplyError> {
    let root = s.root();
    let hooks = hooks::Hooks::from_env();
    let mut touched: Vec<usize> = Vec::new();
    for (i, st) in planned.steps.iter().enumerate() {
        hooks.before_write(i);
        let knob = planned.knobs[st.knob].knob;
        let what = match st.write.mode {
            WriteMode::File => Put::File(&st.write.after),
            _ => Put::Attribute(&st.write.after),
        };
        let result = write::put(root, &st.write.path, what, || {
            confirm(knob.spec.as_ref(), &s.host, &st.write)
        });
        if let Err(f) = result {
            if f.touched {
                touched.push(i);
            }
            return Err(rollback(root, journal, entries, &touched, fresh, f.why));
        }
        touched.push(i);
    }
    Ok(())
}

/// Reads a written file back and checks it in the knob's words.
fn confirm(kind: &dyn KnobKind, host: &HostCtx, w: &Write) -> Result<(), String> {
    match kind.read_back(host, &w.path) {
        Ok(Some(v)) if kind.confirms(&w.expect, &v) => Ok(()),
        Ok(Some(v)) => Err(format!(
            "the write did not take: read back {v:?}, expected {:?}",
            w.expect
        )),
        Ok(None) => Err("the file is gone after the write".into()),
        Err(e) => Err(format!("cannot read it back: {e}")),
    }
}

/// Restores, in reverse, every step the apply touched, from this apply's own
/// record of the values before; reads each back.
fn rollback(
    root: &Root,
    journal: &Journal,
    entries: &[journal::Entry],
    touched: &[usize],
    fresh: &[String],
    why: String,
) -> ApplyError {
    let unrestored: Vec<String> = touched
        .iter()
        .rev()
        .filter_map(|&i| write::restore(root, &entries[i]).err())
        .map(|f| f.why)
        .collect();
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
fn journal_entries(root: &Root, planned: &Planned) -> Result<Vec<journal::Entry>, String> {
    let recorded = ledger::now_rfc3339();
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
                    if found.is_none() {
                        return Err(format!("{} is gone: nothing to record", w.path));
                    }
                    (w.before.clone(), found, Vec::new())
                }
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
            })
        })
        .collect()
}

fn apply_groups(writes: &[Write]) -> Vec<ChangeGroup> {
    group::group(writes.iter().map(|w| Change {
        path: &w.path,
        cpus: w.cpus.as_ref(),
        label: w.label.as_deref(),
        before: w.before.as_deref(),
        after: Some(&w.after),
    }))
}

fn knob_apply(p: &plan::KnobPlan) -> KnobApply {
    let k = p.knob;
    KnobApply {
        id: k.id.clone(),
        title: k.title.clone(),
        kind: k.kind,
        persistence: k.persistence,
        changes: apply_groups(&p.writes),
        skipped: p.skipped.iter().map(skipped).collect(),
        notes: p.notes.clone(),
        caveats: Vec::new(),
    }
}

/// Each knob's caveats, as things stand on the host now.
fn fill_caveats(outcome: &mut ApplyOutcome, planned: &Planned, host: &HostCtx) {
    for (k, p) in outcome.knobs.iter_mut().zip(&planned.knobs) {
        k.caveats = caveats(p.knob, host);
    }
}

fn skipped(b: &Blocked) -> Skipped {
    Skipped {
        path: b.path.clone(),
        cpus: b.cpus.clone(),
        reason: b.blocker.reason().to_string(),
    }
}

/// The knob's caveats, then what persists it here or what would.
pub fn caveats(knob: &Knob, host: &HostCtx) -> Vec<String> {
    let mut out = knob.caveats.clone();
    let id = &knob.id;
    let line = match knob.persistence {
        Persistence::Runtime => {
            let (at, durable) = crate::persist::how_to_persist(knob);
            format!(
                "runtime only: lost at the next boot; to make it permanent set `persistence: {}` \
                 at {at} and run `hostknob persist {id} --install`",
                durable.join(" | ")
            )
        }
        Persistence::Hold => {
            "held only while a process keeps the request open (`hostknob hold`)".into()
        }
        p => match crate::audit::persistence_of(knob, host) {
            Ok(Ok(by)) => format!("persisted ({p}): {by}"),
            Ok(Err(why)) if p == Persistence::Cmdline => format!(
                "not persistent yet: {why}; `hostknob persist {id}` prints the kernel arguments \
                 and how to add them"
            ),
            Ok(Err(why)) => format!(
                "not persistent yet: {why}; `hostknob persist {id} --install` makes it permanent"
            ),
            Err(e) => e.message,
        },
    };
    out.push(line);
    out
}

/// Who made the change: the user behind sudo, else the uid (and its name).
pub fn who() -> String {
    if let Ok(u) = std::env::var("SUDO_USER")
        && !u.trim().is_empty()
    {
        return u.trim().to_string();
    }
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => format!("uid {uid} ({})", u.name),
        _ => format!("uid {uid}"),
    }
}

pub fn ledger_entry(
    host: &str,
    knob: &Knob,
    action: ledger::Action,
    changes: Vec<ChangeGroup>,
    user: &str,
) -> ledger::Entry {
    ledger_entry_for(host, &knob.id, knob.persistence, action, changes, user)
}

fn ledger_entry_for(
    host: &str,
    knob: &str,
    persistence: Persistence,
    action: ledger::Action,
    changes: Vec<ChangeGroup>,
    user: &str,
) -> ledger::Entry {
    ledger::Entry {
        timestamp: ledger::now_rfc3339(),
        host: host.to_string(),
        knob: knob.to_string(),
        action,
        changes: changes.iter().map(ChangeGroup::to_ledger).collect(),
        persistence,
        user: Some(user.to_string()),
        hostknob: env!("CARGO_PKG_VERSION").to_string(),
        note: None,
        evidence: None,
    }
}

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
/// in reverse order, reads each file back, records it in the ledger and
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
    let _lock = if opts.lock_held {
        None
    } else {
        Some(s.lock(opts.wait)?)
    };
    let journal = s.journal();
    let entries = journal
        .entries()
        .map_err(|e| ApplyError::Refused(format!("{e:#}")))?;
    for id in ids {
        let known =
            entries.iter().any(|e| &e.knob == id) || manifest.is_some_and(|m| m.get(id).is_some());
        if !known {
            return Err(ApplyError::Refused(format!(
                "no knob with id {id:?} in the manifest or the journal {}",
                journal.path().display()
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
    for e in chosen.iter().rev() {
        let was = write::content(root, &e.path).ok().flatten();
        match write::restore(root, e) {
            Ok(()) => restored.push((e, was)),
            Err(f) => failed.push(f.why),
        }
    }
    restored.reverse();
    let paths: Vec<String> = restored.iter().map(|(e, _)| e.path.clone()).collect();
    if !paths.is_empty() {
        journal.forget(&paths).map_err(|e| {
            ApplyError::Unrecorded(format!(
                "the restored files could not be dropped from the journal: {e:#}"
            ))
        })?;
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
        host: s.host.name.clone(),
        restored: restored.len(),
        knobs,
        journal: journal.path().display().to_string(),
        ledger: None,
    };
    if opts.record && !outcome.knobs.is_empty() {
        let user = who();
        let history = ledger::read(&s.manifest_dir, &s.host.name).unwrap_or_default();
        for k in &outcome.knobs {
            let persistence = persistence_for(manifest, &history, &k.id);
            let entry = ledger_entry_for(
                &s.host.name,
                &k.id,
                persistence,
                ledger::Action::Reverted,
                k.changes.clone(),
                &user,
            );
            s.record(&entry)?;
        }
        outcome.ledger = Some(
            ledger::path_for(&s.manifest_dir, &s.host.name)
                .display()
                .to_string(),
        );
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
fn restored_text(e: &journal::Entry) -> Option<String> {
    match e.mode {
        WriteMode::File => e.before.clone(),
        _ => e.found.as_deref().map(|f| f.trim().to_string()),
    }
}

/// A reverted knob's persistence for the ledger: the manifest's, else the
/// one its last apply here recorded.
fn persistence_for(
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
