//! The record: what the ledger and the knob's history say was applied here,
//! and the latest evidence; turns drift into lost-on-reboot.

use serde::Serialize;

use super::status::{Judged, Status};
use crate::knob::Target;
use crate::manifest::Knob;
use crate::manifest::ledger::{self, Action};
use crate::schema::{HistoryAction, Persistence};

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub timestamp: String,
    /// improved, regressed, no-detectable-effect or inconclusive.
    pub verdict: Option<String>,
    pub summary: Option<String>,
    /// applied / as found of the verified metric: the geometric mean of the
    /// per-round ratios (entries before it was recorded: the median ratio).
    pub ratio: Option<f64>,
    /// What the idle counters showed over the applied legs: `honoured`,
    /// `not-honoured` or `not-checked` (absent before verify recorded it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub honoured: Option<String>,
    /// The entry's per-round samples file beside the ledger: `present`, or
    /// `missing` with why (absent: the entry holds its rounds inline, or has
    /// none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<crate::manifest::ledger_samples::SamplesState>,
}

/// The knob's latest `verified` event in the ledger.
pub(super) fn latest_verified<'l>(
    id: &str,
    ledger: &'l [ledger::Entry],
) -> Option<&'l ledger::Entry> {
    ledger
        .iter()
        .rev()
        .find(|e| e.knob == id && e.action == ledger::Action::Verified)
}

/// The figures of the knob's latest `verified` event (its samples file is
/// looked at by the caller, which knows where the ledger is).
pub(super) fn latest_evidence(id: &str, ledger: &[ledger::Entry]) -> Option<Evidence> {
    let e = latest_verified(id, ledger)?;
    Some(Evidence {
        samples: None,
        timestamp: e.timestamp.clone(),
        verdict: e
            .evidence
            .as_ref()
            .and_then(|v| v["verdict"].as_str())
            .map(str::to_string),
        summary: e.note.clone(),
        ratio: e
            .evidence
            .as_ref()
            .and_then(|v| v["ratio"].as_f64().or_else(|| v["median_ratio"].as_f64())),
        honoured: e
            .evidence
            .as_ref()
            .and_then(|v| v["honoured"]["status"].as_str())
            .map(str::to_string),
    })
}

/// What applied this knob here last, if it was applied and not reverted since.
pub(super) struct Applied {
    pub(super) when: u64,
    pub(super) label: String,
    pub(super) persistence: Persistence,
    /// The files it changed, with their values before (ledger entries only).
    changes: Vec<ledger::Change>,
}

impl Applied {
    /// The value `target` had before the apply: from the change naming its
    /// path, or the group (`cpu*`) covering it and its CPUs.
    fn before(&self, target: &Target) -> Option<&str> {
        self.changes
            .iter()
            .find(|c| {
                c.path == target.path
                    || (glob::Pattern::new(&c.path).is_ok_and(|p| p.matches(&target.path))
                        && match (&c.cpus, &target.cpus) {
                            (Some(group), Some(own)) => {
                                own.as_slice().iter().all(|cpu| group.contains(*cpu))
                            }
                            _ => true,
                        })
            })
            .and_then(|c| c.before.as_deref())
    }
}

pub(super) fn last_applied(knob: &Knob, host: &str, ledger: &[ledger::Entry]) -> Option<Applied> {
    let mut events: Vec<(u64, bool, Applied)> = Vec::new();
    for e in ledger
        .iter()
        .filter(|e| e.knob == knob.id && e.host == host)
    {
        let Some(when) = e.when() else { continue };
        let applied = match e.action {
            Action::Applied => true,
            Action::Reverted => false,
            _ => continue,
        };
        events.push((
            when,
            applied,
            Applied {
                when,
                label: format!("ledger {}", e.timestamp),
                persistence: e.persistence,
                changes: e.changes.clone(),
            },
        ));
    }
    for h in knob.history.iter().filter(|h| h.hosts.matches(host)) {
        let applied = match h.action {
            HistoryAction::Applied => true,
            HistoryAction::Reverted => false,
            _ => continue,
        };
        events.push((
            h.when,
            applied,
            Applied {
                when: h.when,
                label: format!("history {}", h.date),
                persistence: h.persistence,
                changes: Vec::new(),
            },
        ));
    }
    events.sort_by_key(|(when, _, _)| *when);
    match events.pop() {
        Some((_, true, a)) => Some(a),
        _ => None,
    }
}

/// A thread's start (seconds since the epoch) when it started after the
/// apply `applied` in this boot: its path holds its start in clock ticks
/// since boot (proc(5), field 22 of `stat`).
fn started_since(target: &Target, applied: u64, boot: Option<u64>) -> Option<u64> {
    let boot = boot.filter(|b| *b <= applied)?;
    let t = crate::task::parse_path(&target.path)?;
    let ticks = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|t| *t > 0)?;
    let at = boot + t.start / ticks;
    (at > applied).then_some(at)
}

/// Turns drift into lost-on-reboot when the record says it was applied here,
/// runtime only, before the current boot.
pub(super) fn tell_the_story(j: &mut Judged, applied: Option<&Applied>, boot: Option<u64>) {
    let Some(a) = applied else { return };
    if j.status != Status::Drift {
        return;
    }
    let now = j.target.current.as_deref().unwrap_or("absent");
    let back = match a.before(j.target) {
        Some(b) if j.target.restore.as_deref() == Some(b) => {
            format!(" (back to {b}, its value before the apply)")
        }
        _ => String::new(),
    };
    let when = crate::schema::rfc3339(a.when);
    if let Some(at) = started_since(j.target, a.when, boot) {
        j.detail = format!(
            "{}: started at {} (after the apply, {}, {when}), so the knob never covered it: {}; apply again to cover it",
            j.target.label.as_deref().unwrap_or(&j.target.path),
            crate::schema::rfc3339(at),
            a.label,
            j.detail
        );
        return;
    }
    match (a.persistence, boot) {
        (Persistence::Runtime, Some(b)) if b > a.when => {
            j.status = Status::LostOnReboot;
            j.detail = format!(
                "applied runtime-only ({}); the host booted at {} since, and the value is {now} again{back}: \
                 the reboot undid it",
                a.label,
                crate::schema::rfc3339(b)
            );
        }
        (Persistence::Runtime, Some(_)) => {
            j.detail = format!(
                "{}; applied in this boot ({}, {when}) and changed since by something else",
                j.detail, a.label
            );
        }
        (Persistence::Runtime, None) => {
            j.detail = format!(
                "{}; applied runtime-only ({}), but this tree has no boot time (/proc/stat btime), \
                 so whether a reboot undid it cannot be told",
                j.detail, a.label
            );
        }
        (p, _) => {
            j.detail = format!(
                "{}; applied with persistence {p} ({}) and not in effect",
                j.detail, a.label
            );
        }
    }
}
