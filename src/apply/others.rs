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
