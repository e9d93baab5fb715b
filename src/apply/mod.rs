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
//! apply since the journal began), newest apply first, read them back,
//! record it, and drop those entries from the journal; a file someone else
//! changed since is left alone, an entry from another boot is dropped. It
//! works after a crash at any point of an apply.
//!
//! Both are library functions (`verify` runs them); the commands are thin.

#[allow(clippy::module_inception)]
mod apply;
mod boot;
pub(crate) mod group;
mod hooks;
pub(crate) mod install;
mod others;
mod outcome;
pub(crate) mod plan;
mod pod;
mod record;
mod requeue;
mod reset;
mod revert;
mod steps;
pub(crate) mod validate;
pub(crate) mod write;

pub use apply::{apply, caveats, select};
pub use boot::{KnobNote, apply_each};
pub use others::{others_on_files, tuned_fights};
pub use outcome::{ApplyOutcome, KnobApply, Skipped};
pub use pod::apply_pod;
pub use record::{ledger_entry, who};
pub use revert::{KnobRevert, LeftAlone, RevertOutcome, Stale, revert, revert_with};

use std::fmt;
use std::path::{Path, PathBuf};

use crate::journal::{self, Journal, Lock, LockError};
use crate::knob::HostCtx;
use crate::manifest::{ledger, ledger_home};
use crate::root::Root;

#[cfg(feature = "test-hooks")]
pub use crate::root::APPEND_LIMIT_VAR;
#[cfg(feature = "test-hooks")]
pub use hooks::{DELAY_VAR, ERRNO_VAR, GATE_VAR, LOG_VAR};

/// One host to change: its root, name, manifest directory and state directory.
pub struct Session<'r> {
    /// The host's files and facts, as the knobs read them.
    pub ctx: HostCtx<'r>,
    /// The manifest (knobs; collected ledgers in `ledger/`, read only).
    pub manifest_dir: PathBuf,
    /// The state directory (lock and journal), a logical path under the root.
    pub state_dir: String,
}

impl<'r> Session<'r> {
    /// `state_dir` is the configured one (`--state-dir`), resolved under the root.
    pub fn new(root: &'r Root, host: String, manifest_dir: &Path, state_dir: &Path) -> Session<'r> {
        Session {
            ctx: HostCtx::new(root, host),
            manifest_dir: manifest_dir.to_path_buf(),
            state_dir: journal::state_dir(state_dir),
        }
    }

    pub fn root(&self) -> &'r Root {
        self.ctx.root
    }

    pub fn journal(&self) -> Journal<'r> {
        Journal::open(self.ctx.root, &self.state_dir)
    }

    /// The state directory's real path, for messages.
    pub fn state_path(&self) -> PathBuf {
        self.ctx.root.host_path(&self.state_dir)
    }

    /// This host's ledgers: its own in the state directory, the collected one.
    pub fn ledger(&self) -> ledger_home::Home<'r> {
        ledger_home::Home::new(
            self.root(),
            &self.ctx.name,
            &self.manifest_dir,
            &self.state_dir,
        )
    }

    /// Appends an event to this host's ledger (in the state directory).
    pub fn record(&self, entry: &ledger::Entry) -> Result<(), ApplyError> {
        let mut entry = entry.clone();
        entry.identity = ledger::Identity::of(self.root());
        self.ledger()
            .append(&entry)
            .map(drop)
            .map_err(|e| ApplyError::Unrecorded(format!("the ledger could not be written: {e:#}")))
    }

    /// Takes the state directory's lock (or waits for it, with `wait`).
    pub fn lock(&self, wait: bool) -> Result<Lock, ApplyError> {
        Lock::acquire(self.ctx.root, &self.state_dir, wait).map_err(|e| self.lock_refusal(e))
    }

    /// The lock for a change that journals nothing (`persist`): released
    /// with its file removed when the journal holds nothing, since a fully
    /// reverted host keeps no state.
    pub fn lock_unjournaled(&self, wait: bool) -> Result<TidyLock<'_, 'r>, ApplyError> {
        Ok(TidyLock {
            session: self,
            lock: Some(self.lock(wait)?),
        })
    }

    pub(crate) fn lock_refusal(&self, e: LockError) -> ApplyError {
        match e {
            LockError::Held(m) => ApplyError::Refused(m),
            LockError::Unavailable(_) if unsafe { libc::geteuid() } != 0 => ApplyError::Refused(
                format!("needs root to write {}", self.state_path().display()),
            ),
            LockError::Unavailable(e) => ApplyError::Refused(format!("{e:#}")),
        }
    }
}

/// A held lock that tidies its file on release when nothing is journaled.
pub struct TidyLock<'s, 'r> {
    session: &'s Session<'r>,
    lock: Option<Lock>,
}

impl Drop for TidyLock<'_, '_> {
    fn drop(&mut self) {
        let s = self.session;
        if let Some(lock) = self.lock.take()
            && !s.journal().exists()
        {
            let _ = lock.remove(s.root(), &s.state_dir);
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
    /// Apply knobs that tuned's active profile sets differently (said in
    /// `forced`); without it they are refused before the first write.
    pub force: bool,
    /// Only these knobs' fights with tuned are overridden (`--force=KNOB`).
    pub force_knobs: Vec<String>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            dry_run: false,
            wait: false,
            record: true,
            lock_held: false,
            force: false,
            force_knobs: Vec::new(),
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
    /// Revert restored every complete record, but the journal ended in a torn
    /// one (a crash or a full disk while it grew, or a journal cut short).
    TornJournal { restored: usize, message: String },
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
            ApplyError::TornJournal { restored, message } => write!(
                f,
                "restored the {restored} files the journal lists completely, but {message}. A \
                 torn record was being written when apply stopped, before it wrote those files; \
                 if the journal was cut short by something else, files it no longer lists may \
                 still be changed: compare them with `hostknob audit`"
            ),
            ApplyError::Unrecorded(m) => write!(
                f,
                "applied and read back, but {m}; `hostknob revert` restores the values before"
            ),
        }
    }
}

impl std::error::Error for ApplyError {}
