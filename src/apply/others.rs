//! Who changed a journaled file after hostknob wrote it, as far as the host
//! shows: a later apply of another knob on the same file, or a running
//! service that sets such files (tuned, power-profiles-daemon).

use super::Session;
use crate::journal::Entry;
use crate::knob::Service;

/// Names the likely writer of `e`'s file, which now reads `now`; `services`
/// caches the running services across calls.
pub(super) fn who_changed(
    s: &Session,
    entries: &[Entry],
    e: &Entry,
    now: Option<&str>,
    services: &mut Option<String>,
) -> Option<String> {
    let at = entries.iter().position(|x| std::ptr::eq(x, e))?;
    if let Some(later) = entries[at + 1..]
        .iter()
        .rev()
        .find(|x| x.path == e.path && x.knob != e.knob && x.holds_ours(now))
    {
        return Some(format!(
            "knob {}, applied after {} (revert {} first, or both together)",
            later.knob, e.knob, later.knob
        ));
    }
    let running = services.get_or_insert_with(|| running_services(s));
    (!running.is_empty()).then(|| running.clone())
}

/// The services known to set such files that run now, with their PIDs.
fn running_services(s: &Session) -> String {
    let procs = s.ctx.processes();
    Service::ALL
        .iter()
        .filter_map(|svc| {
            let comm = svc.comm()?;
            let pids: Vec<String> = procs
                .iter()
                .filter(|p| p.comm == comm)
                .map(|p| p.pid.to_string())
                .collect();
            (!pids.is_empty()).then(|| {
                format!(
                    "{} is running (PID {})",
                    svc.unit().trim_end_matches(".service"),
                    pids.join(", ")
                )
            })
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Refuses a knob whose files another knob's unreverted entries cover:
/// its `as found` would carry that knob's value (verify starts with this).
pub fn others_on_files(
    journaled: &[Entry],
    knob: &crate::manifest::Knob,
    host: &crate::knob::HostCtx,
) -> Result<(), String> {
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    let paths: std::collections::HashSet<&str> =
        survey.targets.iter().map(|t| t.path.as_str()).collect();
    let theirs: Vec<&Entry> = journaled
        .iter()
        .filter(|e| e.knob != knob.id && paths.contains(e.path.as_str()))
        .collect();
    let Some(first) = theirs.first() else {
        return Ok(());
    };
    let mut ids: Vec<&str> = theirs.iter().map(|e| e.knob.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    Err(format!(
        "{} shares files with {} (unreverted in the journal: {} of its files, {} among them): its \
         `as found` leg would carry that value; run `hostknob revert {}` first",
        knob.id,
        ids.join(", "),
        theirs.len(),
        first.path,
        ids.join(" ")
    ))
}

/// For each knob with writes planned whose files tuned's active profile sets
/// differently: the knob's id, and what tuned sets and where (empty: no fight).
pub fn tuned_fights(
    host: &crate::knob::HostCtx,
    planned: &super::plan::Planned,
) -> Vec<(String, String)> {
    let knobs: Vec<&super::plan::KnobPlan> = planned
        .knobs
        .iter()
        .filter(|p| !p.writes.is_empty())
        .collect();
    if knobs.is_empty() {
        return Vec::new();
    }
    let Some(tuned) = crate::audit::coexist::ActiveTuned::read(host) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in knobs {
        let Ok(survey) = p.knob.spec.survey(host) else {
            continue;
        };
        let written: Vec<crate::knob::Target> = survey
            .targets
            .into_iter()
            .filter(|t| p.writes.iter().any(|w| w.path == t.path))
            .collect();
        if let Some(t) = tuned.setting(p.knob, &written).filter(|t| !t.agrees) {
            out.push((
                p.knob.id.clone(),
                format!(
                    "{}: {} ({} on {}; this knob sets {})",
                    p.knob.id,
                    t.cite(),
                    t.sets,
                    t.path,
                    p.knob.spec.desired()
                ),
            ));
        }
    }
    out
}
