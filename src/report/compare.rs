//! `report --compare OLD NEW`: what changed between two audit rounds: hosts
//! added or gone, and per knob the hosts that started or stopped failing it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::{FleetReport, build, compress};
use crate::audit::Status;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FleetChange {
    /// The inputs of the earlier and the later round.
    pub old: Vec<String>,
    pub new: Vec<String>,
    pub hosts_added: Vec<String>,
    pub hosts_gone: Vec<String>,
    /// Knobs some host started or stopped failing (hosts in both rounds only).
    pub knobs: Vec<KnobChange>,
    /// Host entries in both rounds.
    pub hosts_in_both: usize,
    /// Hosts failing their audit in the later round.
    pub failing_now: usize,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobChange {
    pub id: String,
    /// Hosts failing this knob now that did not before.
    pub started_drifting: Vec<HostChange>,
    /// Hosts that failed it before and do not now.
    pub stopped_drifting: Vec<HostChange>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostChange {
    pub host: String,
    /// `None`: the knob was not audited on this host in that round.
    pub before: Option<Status>,
    pub now: Option<Status>,
}

impl FleetChange {
    /// 2 when a knob started drifting somewhere (a CI gate on "worse than
    /// before"), else 0.
    pub fn exit_code(&self) -> i32 {
        if self.knobs.iter().any(|k| !k.started_drifting.is_empty()) {
            2
        } else {
            0
        }
    }
}

/// host -> knob -> status.
fn statuses(r: &FleetReport) -> BTreeMap<&str, BTreeMap<&str, Status>> {
    let mut out: BTreeMap<&str, BTreeMap<&str, Status>> = r
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), BTreeMap::new()))
        .collect();
    for k in &r.knobs {
        for g in &k.groups {
            for h in &g.hosts {
                out.entry(h.as_str())
                    .or_default()
                    .insert(k.id.as_str(), g.status);
            }
        }
    }
    out
}

pub fn compare(old_inputs: &[PathBuf], new_inputs: &[PathBuf]) -> Result<FleetChange> {
    // Every file must read: a host whose audit is unreadable would show as gone.
    let whole = |inputs: &[PathBuf]| -> Result<FleetReport> {
        let r = build(
            &super::input_files(inputs)?,
            std::time::SystemTime::now(),
            std::time::Duration::MAX,
        )?;
        match r.unreadable.first() {
            Some(u) => anyhow::bail!("{}: {}", u.file, u.reason),
            None => Ok(r),
        }
    };
    let old = whole(old_inputs)?;
    let new = whole(new_inputs)?;
    let (was, now) = (statuses(&old), statuses(&new));
    let before: BTreeSet<&str> = was.keys().copied().collect();
    let after: BTreeSet<&str> = now.keys().copied().collect();
    let list = |s: BTreeSet<&&str>| s.into_iter().map(|h| h.to_string()).collect::<Vec<_>>();
    let mut knobs: BTreeMap<&str, KnobChange> = BTreeMap::new();
    for host in before.intersection(&after) {
        let (w, n) = (&was[host], &now[host]);
        let ids: BTreeSet<&str> = w.keys().chain(n.keys()).copied().collect();
        for id in ids {
            let (b, a) = (w.get(id).copied(), n.get(id).copied());
            let failed = b.is_some_and(|s| s.fails());
            let fails = a.is_some_and(|s| s.fails());
            if failed == fails {
                continue;
            }
            let entry = knobs.entry(id).or_insert_with(|| KnobChange {
                id: id.to_string(),
                started_drifting: Vec::new(),
                stopped_drifting: Vec::new(),
            });
            let change = HostChange {
                host: host.to_string(),
                before: b,
                now: a,
            };
            if fails {
                entry.started_drifting.push(change);
            } else {
                entry.stopped_drifting.push(change);
            }
        }
    }
    let show = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
    Ok(FleetChange {
        old: show(old_inputs),
        new: show(new_inputs),
        hosts_added: list(after.difference(&before).collect()),
        hosts_gone: list(before.difference(&after).collect()),
        knobs: knobs.into_values().collect(),
        hosts_in_both: before.intersection(&after).count(),
        failing_now: new.hosts.iter().filter(|h| h.fails).count(),
    })
}

fn hosts(changes: &[HostChange]) -> String {
    let names: Vec<String> = changes.iter().map(|c| c.host.clone()).collect();
    compress(&names)
}

fn word(s: Option<Status>) -> &'static str {
    s.map_or("absent", Status::as_str)
}

/// Per change: its statuses, `drift (was ok)`, the most common first.
fn transitions(changes: &[HostChange]) -> String {
    let mut by: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for c in changes {
        *by.entry((word(c.now), word(c.before))).or_default() += 1;
    }
    by.into_iter()
        .map(|((now, was), n)| format!("{n} {now} (was {was})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// (headline, rows of knob, change, count, hosts, statuses).
fn rows(c: &FleetChange) -> (String, Vec<Vec<String>>) {
    let started: usize = c.knobs.iter().map(|k| k.started_drifting.len()).sum();
    let stopped: usize = c.knobs.iter().map(|k| k.stopped_drifting.len()).sum();
    let mut head = format!(
        "{} hosts in both rounds; {} added, {} gone; {started} host-knob pairs started drifting, {stopped} stopped; {} hosts failing now",
        c.hosts_in_both,
        c.hosts_added.len(),
        c.hosts_gone.len(),
        c.failing_now
    );
    if !c.hosts_added.is_empty() {
        head.push_str(&format!("\nadded: {}", compress(&c.hosts_added)));
    }
    if !c.hosts_gone.is_empty() {
        head.push_str(&format!("\ngone: {}", compress(&c.hosts_gone)));
    }
    let mut rows = Vec::new();
    for k in &c.knobs {
        for (what, list) in [
            ("started drifting", &k.started_drifting),
            ("stopped drifting", &k.stopped_drifting),
        ] {
            if !list.is_empty() {
                rows.push(vec![
                    k.id.clone(),
                    what.to_string(),
                    list.len().to_string(),
                    hosts(list),
                    transitions(list),
                ]);
            }
        }
    }
    (head, rows)
}

const HEADER: [&str; 5] = ["knob", "change", "count", "hosts", "statuses"];

pub fn table(c: &FleetChange) -> String {
    let (head, rows) = rows(c);
    let mut out = head + "\n\n";
    if !rows.is_empty() {
        out.push_str(&crate::render::grid(
            "Knobs that changed between the rounds",
            &HEADER,
            rows,
        ));
    }
    out
}

pub fn markdown(c: &FleetChange) -> String {
    let (head, rows) = rows(c);
    let mut out = format!("# Fleet changes\n\n{}\n\n", head.replace('\n', "\n\n"));
    if !rows.is_empty() {
        out.push_str("## Knobs that changed between the rounds\n\n");
        out.push_str(&crate::render::markdown::table(&HEADER, &rows));
    }
    out
}
