//! apply: plan, check, journal, write in order, read back, roll back on failure.

use std::collections::HashSet;

use super::outcome::{ApplyOutcome, Skipped, apply_groups, knob_apply};
use super::plan::{self, Planned};
use super::record::{ledger_entry, who};
use super::steps::{LeftOut, confirm_seen, journal_before, write_in_order};
use super::{ApplyError, ApplyOptions, Session, validate};
use crate::journal::{self, Journal, Lock, LockError};
use crate::knob::{HostCtx, Write, WriteMode};
use crate::manifest::{Knob, Manifest, ledger};
use crate::schema::Persistence;

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
    super::requeue::rewrite_reset(root, &planned, &journal, &entries, &fresh)?;
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

/// Each knob's caveats, as things stand on the host now.
pub(super) fn fill_caveats(outcome: &mut ApplyOutcome, planned: &Planned, host: &HostCtx) {
    for (k, p) in outcome.knobs.iter_mut().zip(&planned.knobs) {
        k.caveats = caveats(p.knob, host);
    }
}

/// Whether a caveat already says the value is gone after a reboot.
fn says_lost_at_boot(caveat: &str) -> bool {
    let c = caveat.to_lowercase();
    c.contains("boot")
        && ["not survive", "lost", "not persist", "gone"]
            .iter()
            .any(|w| c.contains(w))
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
            // The knob's own caveat may already say it; the advice is what is new.
            let said = out.iter().any(|c| says_lost_at_boot(c));
            format!(
                "{}to make it permanent set `persistence: {}` at {at} and run `hostknob persist \
                 {id} --install`",
                if said {
                    ""
                } else {
                    "runtime only: lost at the next boot; "
                },
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
            // Most reasons already name the command; say it once. Where the
            // mechanism cannot run here, persist would refuse: no advice.
            Ok(Err(why))
                if why.contains(&format!("hostknob persist {id} --install"))
                    || why.contains("would never run here") =>
            {
                format!("not persistent yet: {why}")
            }
            Ok(Err(why)) => format!(
                "not persistent yet: {why}; `hostknob persist {id} --install` makes it permanent"
            ),
            Err(e) => e.message,
        },
    };
    out.push(crate::advice::runnable(line));
    out
}
