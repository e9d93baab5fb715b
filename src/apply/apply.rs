//! apply: plan, check, journal, write in order, read back, roll back on failure.

use std::collections::HashSet;

use serde::Serialize;

use super::group::{self, Change, ChangeGroup};
use super::plan::{self, Planned, Step};
use super::record::{ledger_entry, who};
use super::write::{self, Put};
use super::{ApplyError, ApplyOptions, Session, hooks, validate};
use crate::journal::{self, Journal, Lock, LockError};
use crate::knob::{Blocked, HostCtx, KindName, KnobKind, Write, WriteMode};
use crate::manifest::{Knob, Manifest, ledger};
use crate::root::Root;
use crate::schema::Persistence;

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
    /// Targets whose write the kernel refused and the kind left out, the
    /// apply going on (a managed IRQ before Linux 6.12, a SCHED_DEADLINE
    /// thread): nothing was written there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Skipped>,
    pub notes: Vec<String>,
    /// The manifest's caveats, then what persists the knob (or does not).
    pub caveats: Vec<String>,
    /// Why nothing is planned: the knob's `when:` fails on this host
    /// (`when: idle_driver == intel_idle; this host: haltpoll`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// Why the kernel will ignore the value once written (the haltpoll
    /// governor and per-state disable): known before the write, so said then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_honoured: Option<String>,
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
    /// Settings of tuned's active profile this apply overrides with `--force`
    /// (tuned undoes them on its next reapply).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forced: Vec<String>,
    pub journal: Option<String>,
    pub ledger: Option<String>,
    /// `apply --boot`: knobs for this host it leaves alone (their
    /// persistence is not a write at boot), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_at_boot: Vec<super::KnobNote>,
    /// `apply --boot`: knobs whose own apply failed (each was refused or
    /// rolled back alone; the others stand). Exit 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<super::KnobNote>,
}

impl ApplyOutcome {
    /// An outcome with no knob planned and nothing written yet.
    pub(super) fn nothing_yet(s: &Session, opts: &ApplyOptions) -> ApplyOutcome {
        ApplyOutcome {
            host: s.ctx.name.clone(),
            dry_run: opts.dry_run,
            knobs: Vec::new(),
            written: 0,
            warnings: Vec::new(),
            forced: Vec::new(),
            journal: None,
            ledger: None,
            not_at_boot: Vec::new(),
            failed: Vec::new(),
        }
    }
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
                "no knob with id {id:?} in the manifest {}{}",
                manifest.dir.display(),
                manifest.did_you_mean(id)
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
    // A held lock fails at once; the lock itself (and the state directory) is
    // made only once the checks passed and a write follows. A state directory
    // this user cannot write is reported after the checks, which name the host
    // file that needs root.
    let mut early_lock = None;
    if !opts.dry_run && !opts.lock_held {
        match Lock::check_free(root, &s.state_dir) {
            Err(LockError::Held(m)) if !opts.wait => return Err(ApplyError::Refused(m)),
            // It exists already: wait for it before reading the host, as the plan must.
            Err(LockError::Held(_)) => early_lock = Some(s.lock(true)?),
            _ => {}
        }
    }
    let planned = plan::plan(&s.ctx, knobs).map_err(ApplyError::Refused)?;
    validate::values(&planned).map_err(ApplyError::Refused)?;
    if let Some(id) = opts
        .force_knobs
        .iter()
        .find(|id| !planned.knobs.iter().any(|p| p.knob.id == **id))
    {
        return Err(ApplyError::Refused(format!(
            "--force={id}: no knob of this apply is named {id}; nothing was changed"
        )));
    }
    // `--force=KNOB` overrides that knob's fight only; plain --force every one.
    let (forced, fights): (Vec<_>, Vec<_>) = super::others::tuned_fights(&s.ctx, &planned)
        .into_iter()
        .partition(|(id, _)| opts.force || opts.force_knobs.contains(id));
    let forced: Vec<String> = forced.into_iter().map(|f| f.1).collect();
    let fights: Vec<String> = fights.into_iter().map(|f| f.1).collect();
    const UNDO: &str = "tuned would undo this on its next reapply; stop tuned, change its profile, or pass --force=KNOB for that knob";
    if !fights.is_empty() && !opts.dry_run {
        return Err(ApplyError::Refused(format!(
            "{}; {UNDO}",
            fights.join("; ")
        )));
    }
    let ledger_path = s.ledger().local_path();
    let permitted = validate::permissions(
        root,
        planned
            .steps
            .iter()
            .map(|st| (st.write.path.as_str(), st.write.mode == WriteMode::File)),
        false,
    )
    .and_then(|_| match opts.record && !planned.steps.is_empty() {
        true => validate::ledger_writable(&ledger_path).and_then(|_| {
            s.ledger().check().map_err(|e| {
                format!("{e}: apply records its change there; move the file aside first")
            })
        }),
        false => Ok(()),
    });
    let mut outcome = ApplyOutcome::nothing_yet(s, opts);
    outcome.knobs = planned
        .knobs
        .iter()
        .map(|p| knob_apply(p, &s.ctx))
        .collect();
    outcome.forced = forced;
    outcome.warnings.extend(
        fights
            .into_iter()
            .map(|f| format!("apply would refuse: {f}; {UNDO}")),
    );
    if opts.dry_run {
        if let Err(m) = permitted {
            outcome.warnings.push(format!("apply would refuse: {m}"));
        }
        fill_caveats(&mut outcome, &planned, &s.ctx);
        return Ok(outcome);
    }
    permitted.map_err(ApplyError::Refused)?;
    if planned.steps.is_empty() {
        fill_caveats(&mut outcome, &planned, &s.ctx);
        return Ok(outcome);
    }
    let _lock = match (opts.lock_held, early_lock) {
        (true, _) => None,
        (false, Some(l)) => Some(l),
        (false, None) => Some(s.lock(opts.wait)?),
    };

    let journal = s.journal();
    let mut planned = planned;
    let later = super::requeue::defer(&mut planned);
    let (entries, fresh) = journal_before(root, &journal, &planned)?;
    let left_out = write_in_order(s, &planned, &journal, &entries, &fresh)?;
    let entries = leave_out(&journal, entries, &fresh, &left_out);
    confirm_seen(root, &journal, &entries);
    outcome.written = planned.steps.len() - left_out.len();
    let mut writes = written_per_knob(&planned, &left_out, &mut outcome);
    if !later.is_empty() {
        super::requeue::after_channels(
            s,
            &planned,
            &later,
            &journal,
            &entries,
            &fresh,
            &mut outcome,
            &mut writes,
        )?;
    }
    outcome.journal = Some(journal.path().display().to_string());
    // What persists each knob is known only now (an allocator's drop-in is its persistence).
    fill_caveats(&mut outcome, &planned, &s.ctx);
    if opts.record {
        let user = who();
        for (p, w) in planned.knobs.iter().zip(&writes) {
            if w.is_empty() {
                continue;
            }
            let entry = ledger_entry(
                &s.ctx.name,
                p.knob,
                ledger::Action::Applied,
                apply_groups(w),
                &user,
            );
            s.record(&entry)?;
        }
        outcome.ledger = Some(ledger_path.display().to_string());
    }
    Ok(outcome)
}

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

/// Drops the left-out steps' entries: the journal forgets those it did not
/// hold before (nothing was written there, and a restore would be refused too).
fn leave_out(
    journal: &Journal,
    entries: Vec<journal::Entry>,
    fresh: &[journal::Slot],
    left_out: &LeftOut,
) -> Vec<journal::Entry> {
    if left_out.is_empty() {
        return entries;
    }
    let out: HashSet<usize> = left_out.iter().map(|(i, _)| *i).collect();
    let gone: Vec<journal::Slot> = left_out
        .iter()
        .map(|(i, _)| (entries[*i].knob.clone(), entries[*i].path.clone()))
        .filter(|slot| fresh.contains(slot))
        .collect();
    if let Err(e) = journal.forget(&gone) {
        eprintln!(
            "hostknob: warning: the journal still lists files left out unwritten ({e:#}); \
             revert restores their unchanged values"
        );
    }
    entries
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !out.contains(i))
        .map(|(_, e)| e)
        .collect()
}

/// Each knob's writes made (without the left-out ones), with the outcome's
/// changes and skipped targets brought in line with them.
fn written_per_knob(
    planned: &Planned,
    left_out: &LeftOut,
    outcome: &mut ApplyOutcome,
) -> Vec<Vec<Write>> {
    let mut writes: Vec<Vec<Write>> = planned.knobs.iter().map(|p| p.writes.clone()).collect();
    for (i, why) in left_out {
        let st = &planned.steps[*i];
        writes[st.knob].retain(|w| w.path != st.write.path);
        outcome.knobs[st.knob].refused.push(Skipped {
            path: st.write.path.clone(),
            cpus: st.write.cpus.clone(),
            reason: why.clone(),
        });
    }
    if !left_out.is_empty() {
        for (k, w) in outcome.knobs.iter_mut().zip(&writes) {
            k.changes = apply_groups(w);
        }
    }
    writes
}

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
            WriteMode::Affinity => Put::Affinity(&st.write.after),
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
        Ok(None) if w.mode == WriteMode::Affinity => Ok(()),
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
    let unrestored: Vec<String> = order
        .iter()
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
                    if found.is_none() && w.mode != WriteMode::Affinity {
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
                written: Some(w.after.clone()),
                seen: None,
                boot: boot.clone(),
            })
        })
        .collect()
}

pub(super) fn apply_groups(writes: &[Write]) -> Vec<ChangeGroup> {
    group::group(writes.iter().map(|w| Change {
        path: &w.path,
        cpus: w.cpus.as_ref(),
        label: w.label.as_deref(),
        before: w.before.as_deref(),
        after: Some(&w.after),
    }))
}

pub(super) fn knob_apply(p: &plan::KnobPlan, host: &HostCtx) -> KnobApply {
    let k = p.knob;
    // Judged before the first write, on the host as the plan found it.
    let not_honoured = p.not_applicable.is_none().then(|| {
        let cpu = p
            .writes
            .iter()
            .find_map(|w| w.cpus.as_ref()?.first())
            .unwrap_or(0);
        crate::knob::ignored::why(host.root, k.kind, &k.spec.desired(), cpu)
    });
    KnobApply {
        id: k.id.clone(),
        title: k.title.clone(),
        kind: k.kind,
        persistence: k.persistence,
        changes: apply_groups(&p.writes),
        skipped: p.skipped.iter().map(skipped).collect(),
        refused: Vec::new(),
        notes: p.notes.clone(),
        caveats: Vec::new(),
        not_applicable: p.not_applicable.clone(),
        not_honoured: not_honoured.flatten(),
    }
}

/// Each knob's caveats, as things stand on the host now.
pub(super) fn fill_caveats(outcome: &mut ApplyOutcome, planned: &Planned, host: &HostCtx) {
    for (k, p) in outcome.knobs.iter_mut().zip(&planned.knobs) {
        k.caveats = caveats(p.knob, host);
    }
}

pub(super) fn skipped(b: &Blocked) -> Skipped {
    Skipped {
        path: b.path.clone(),
        cpus: b.cpus.clone(),
        reason: b.blocker.reason().to_string(),
    }
}

/// The knob's caveats, then what persists it here or what would.
pub fn caveats(knob: &Knob, host: &HostCtx) -> Vec<String> {
    let mut out = knob.all_caveats();
    let id = &knob.id;
    let line = match knob.persistence {
        Persistence::Runtime => {
            let (at, durable) = crate::persist::how_to_persist(knob);
            if durable.is_empty() && knob.kind == crate::knob::KindName::ThreadAffinity {
                out.push(
                    "runtime only, and for the threads running now: a thread started later \
                     inherits its parent's CPUs; pair it with a systemd-cpu-affinity knob for \
                     what systemd starts"
                        .into(),
                );
                return out;
            }
            if durable.is_empty() {
                // The kind writes a service's own configuration file (irqbalance's):
                // the file is what the next start reads, so there is nothing to add.
                out.push(
                    "the file written is the configuration the service reads at every start: it \
                     survives a reboot as it is"
                        .into(),
                );
                return out;
            }
            format!(
                "runtime only: lost at the next boot; to make it permanent set `persistence: {}` \
                 at {at} and run `hostknob persist {id} --install`",
                durable.join(" | ")
            )
        }
        Persistence::Hold => match crate::persist::persistence_of(knob, host) {
            Ok(Ok(by)) => format!("held from boot by {by}"),
            _ => format!(
                "held only while a process keeps the request open: `hostknob hold {id}`, or \
                 `hostknob persist {id} --install` for {}",
                crate::persist::hold_unit::unit_name(id)
            ),
        },
        p => match crate::persist::persistence_of(knob, host) {
            Ok(Ok(by)) => format!("persisted ({p}): {by}"),
            Ok(Err(why)) if p == Persistence::Cmdline => format!(
                "not persistent yet: {why}; `hostknob persist {id}` prints the kernel arguments \
                 and how to add them"
            ),
            // Most reasons already name the command; say it once.
            Ok(Err(why)) if why.contains(&format!("hostknob persist {id} --install")) => {
                format!("not persistent yet: {why}")
            }
            Ok(Err(why)) => format!(
                "not persistent yet: {why}; `hostknob persist {id} --install` makes it permanent"
            ),
            Err(e) => e.message,
        },
    };
    out.push(line);
    out
}
