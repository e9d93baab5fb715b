//! `report`: many hosts' `audit --format json` outputs as one fleet view:
//! which hosts drift on which knob (hosts grouped where they agree, counted,
//! their names compressed as `web-[001-040]`), what is lost on reboot or
//! unpersisted, the latest verify evidence per knob, manifest revisions and
//! competing managers; `--compare` says what changed between two rounds.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use serde::Serialize;

use crate::audit::Status;

pub mod compare;
mod hostlist;
mod read;
mod render;

pub use compare::{FleetChange, compare};
pub use hostlist::compress;
pub use read::input_files;
pub use render::{csv, junit, markdown, table};

use read::{AuditIn, describe, parse_status, read_one};

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FleetReport {
    pub hosts: Vec<HostLine>,
    /// Host names given by more than one input file: each file is its own
    /// entry, named `HOST (FILE)` in every list.
    pub clashes: Vec<HostClash>,
    /// Hosts with the same status and value on every knob.
    pub host_groups: Vec<HostGroup>,
    pub knobs: Vec<FleetKnob>,
    /// Host-knob pairs per status.
    pub summary: BTreeMap<Status, usize>,
    /// Hosts per manifest revision their audit ran against (`unknown`: an audit before revisions).
    pub manifest_revisions: Vec<HostSet>,
    /// Tuning managers found on hosts (`NAME` or `NAME PROFILE`), with the hosts.
    pub competing_managers: Vec<HostSet>,
    /// Hosts per hostknob version that wrote their audit (`unknown`: not said).
    pub hostknob_versions: Vec<HostSet>,
    /// Hosts whose `audited_at` is older than `--max-age` (value: the age limit).
    pub stale: HostSet,
    /// Inputs that could not be read, with why; the other hosts are reported.
    pub unreadable: Vec<UnreadableInput>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct UnreadableInput {
    pub file: String,
    pub reason: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostLine {
    /// The name this entry goes by in the report's lists: the host, or
    /// `HOST (FILE)` when another input names the same host.
    pub host: String,
    /// The audit output this host was read from.
    pub file: String,
    pub boot_time: Option<String>,
    pub audited_at: Option<String>,
    pub hostknob_version: Option<String>,
    pub manifest_revision: Option<String>,
    /// Competing tuning managers on this host (`NAME` or `NAME PROFILE`).
    pub competing_managers: Vec<String>,
    /// Knobs per status on this host.
    pub summary: BTreeMap<Status, usize>,
    /// Whether the host's audit would exit 2 (drift, unsupported, lost-on-reboot, not-honoured).
    pub fails: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostClash {
    pub host: String,
    pub files: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostGroup {
    pub hosts: Vec<String>,
    pub count: usize,
    /// `hosts` with numbered runs compressed: `web-[001-040,042], db-1`.
    pub compressed: String,
    /// Knobs per status, the same on each of these hosts.
    pub summary: BTreeMap<Status, usize>,
}

/// A set of hosts sharing one value (a manifest revision, a manager).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostSet {
    pub value: String,
    pub hosts: Vec<String>,
    pub count: usize,
    pub compressed: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FleetKnob {
    pub id: String,
    /// The desired values hosts were audited against (more than one when
    /// manifests differ between hosts).
    pub desired: Vec<String>,
    /// Hosts that agree on status and current value.
    pub groups: Vec<KnobGroup>,
    /// Hosts whose status fails the audit (drift, unsupported, lost-on-reboot, not-honoured).
    pub drifting: Vec<String>,
    pub lost_on_reboot: Vec<String>,
    /// In effect, but nothing makes it survive a reboot.
    pub unpersisted: Vec<String>,
    /// Hosts where something persists it, with what.
    pub persisted_by: BTreeMap<String, String>,
    /// Each host's latest verify of the knob, newest first.
    pub evidence: Vec<HostEvidence>,
    /// Hosts whose evidence no longer describes them, with what changed
    /// (`kernel 6.1.0 -> 6.18.44`).
    pub evidence_stale: BTreeMap<String, String>,
    /// Hosts where the knob is in effect with no verified entry for their
    /// hardware class.
    pub unverified_here: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobGroup {
    pub status: Status,
    pub current: String,
    pub hosts: Vec<String>,
    pub count: usize,
    /// `hosts` with numbered runs compressed.
    pub compressed: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostEvidence {
    pub host: String,
    pub timestamp: String,
    pub verdict: Option<String>,
    pub ratio: Option<f64>,
    pub summary: Option<String>,
}

impl FleetReport {
    /// 2 when any host fails its audit, as `audit` exits for one host; 1
    /// with `strict` when an input could not be read.
    pub fn exit_code(&self, strict: bool) -> i32 {
        if strict && !self.unreadable.is_empty() {
            1
        } else if self.hosts.iter().any(|h| h.fails) {
            2
        } else {
            0
        }
    }
}

struct HostIn {
    file: PathBuf,
    audit: AuditIn,
    statuses: Vec<Status>,
    /// Knob id -> its first entry in `audit.knobs`: a knob is found in
    /// constant time, so the report stays linear in the knobs read.
    index: HashMap<String, usize>,
}

fn host_set(value: String, mut hosts: Vec<String>) -> HostSet {
    hosts.sort();
    HostSet {
        value,
        count: hosts.len(),
        compressed: compress(&hosts),
        hosts,
    }
}

fn read_host(f: &std::path::Path) -> Result<HostIn> {
    let audit = read_one(f)?;
    let statuses = audit
        .knobs
        .iter()
        .map(|k| parse_status(f, &k.id, &k.status))
        .collect::<Result<Vec<_>>>()?;
    let mut index = HashMap::with_capacity(audit.knobs.len());
    for (i, k) in audit.knobs.iter().enumerate() {
        index.entry(k.id.clone()).or_insert(i);
    }
    Ok(HostIn {
        file: f.to_path_buf(),
        audit,
        statuses,
        index,
    })
}

/// Host-knob entries one report reads: 5,000 hosts of 200 knobs each.
pub const MAX_ENTRIES: usize = 1_000_000;

/// The test suite's bound in place of [`MAX_ENTRIES`]
/// (`HOSTKNOB_TEST_REPORT_MAX_ENTRIES=N`, read only by its binary), so the
/// refusal is tested on inputs of kilobytes rather than a gigabyte.
pub const MAX_ENTRIES_VAR: &str = "HOSTKNOB_TEST_REPORT_MAX_ENTRIES";

fn max_entries() -> usize {
    crate::test_hooks::var(MAX_ENTRIES_VAR)
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_ENTRIES)
}

type ReadAll = (
    BTreeMap<String, HostIn>,
    Vec<HostClash>,
    Vec<UnreadableInput>,
);

/// Reads every file; entries are keyed by host name, or by `HOST (FILE)`
/// when two files name one host (both kept, the clash listed). A file that
/// cannot be read is listed with why; only when none can is it an error.
fn read_all(files: &[PathBuf]) -> Result<ReadAll> {
    let mut read = Vec::new();
    let mut unreadable = Vec::new();
    let mut first_error = None;
    let mut entries = 0usize;
    let max = max_entries();
    for f in files {
        match read_host(f) {
            Ok(h) => {
                entries += h.audit.knobs.len();
                if entries > max {
                    anyhow::bail!(
                        "{}: the inputs read so far hold {entries} host-knob entries, over the {max} one report reads at once (about 1 GB): report on a part of the fleet at a time",
                        f.display()
                    );
                }
                read.push(h)
            }
            Err(e) => {
                let file = f.display().to_string();
                let text = format!("{e:#}");
                let reason = text
                    .strip_prefix(&format!("{file}: "))
                    .unwrap_or(&text)
                    .to_string();
                unreadable.push(UnreadableInput { file, reason });
                first_error.get_or_insert(e);
            }
        }
    }
    if let (true, Some(e)) = (read.is_empty(), first_error) {
        return Err(e);
    }
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, h) in read.iter().enumerate() {
        by_name.entry(h.audit.host.clone()).or_default().push(i);
    }
    let mut labels = vec![String::new(); read.len()];
    let mut clashes = Vec::new();
    for (name, idx) in &by_name {
        if let [one] = idx.as_slice() {
            labels[*one] = name.clone();
            continue;
        }
        let base = |i: usize| {
            read[i]
                .file
                .file_name()
                .map_or_else(String::new, |b| b.to_string_lossy().into_owned())
        };
        let bases: Vec<String> = idx.iter().map(|&i| base(i)).collect();
        let unique = bases
            .iter()
            .enumerate()
            .all(|(a, x)| bases.iter().enumerate().all(|(b, y)| a == b || x != y));
        for (&i, b) in idx.iter().zip(&bases) {
            let file = if unique {
                b.clone()
            } else {
                read[i].file.display().to_string()
            };
            labels[i] = format!("{name} ({file})");
        }
        clashes.push(HostClash {
            host: name.clone(),
            files: idx
                .iter()
                .map(|&i| read[i].file.display().to_string())
                .collect(),
        });
    }
    Ok((labels.into_iter().zip(read).collect(), clashes, unreadable))
}

/// Whether an audit's `audited_at` is older than `max_age` at `now` (an
/// audit that does not say when it ran is not called stale).
fn is_stale(audited_at: Option<&str>, now: SystemTime, max_age: Duration) -> bool {
    audited_at
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|age| age > max_age)
}

/// Reads every file and builds the fleet view; hosts audited more than
/// `max_age` before `now` are listed as stale.
pub fn build(files: &[PathBuf], now: SystemTime, max_age: Duration) -> Result<FleetReport> {
    let (hosts, clashes, unreadable) = read_all(files)?;

    let knob_ids: BTreeSet<&str> = hosts
        .values()
        .flat_map(|h| h.index.keys().map(String::as_str))
        .collect();

    let mut summary = BTreeMap::new();
    let mut lines = Vec::new();
    let mut revisions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut managers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stale = Vec::new();
    // Per host: knob -> (status, current); hosts with equal maps form a group.
    let mut fingerprints: BTreeMap<Vec<(String, Status, String)>, Vec<String>> = BTreeMap::new();
    for (name, h) in &hosts {
        let mut per = BTreeMap::new();
        let mut print = Vec::new();
        for (k, st) in h.audit.knobs.iter().zip(&h.statuses) {
            *per.entry(*st).or_insert(0) += 1;
            *summary.entry(*st).or_insert(0) += 1;
            print.push((k.id.clone(), *st, describe(&k.current)));
        }
        print.sort();
        fingerprints.entry(print).or_default().push(name.clone());
        let rev = h.audit.manifest_revision.clone();
        revisions
            .entry(rev.clone().unwrap_or_else(|| "unknown".into()))
            .or_default()
            .push(name.clone());
        let competing: Vec<String> = h
            .audit
            .competing_managers
            .iter()
            .map(|m| match &m.profile {
                Some(p) => format!("{} {p}", m.name),
                None => m.name.clone(),
            })
            .collect();
        for m in &competing {
            managers.entry(m.clone()).or_default().push(name.clone());
        }
        versions
            .entry(
                h.audit
                    .hostknob_version
                    .clone()
                    .unwrap_or_else(|| "unknown".into()),
            )
            .or_default()
            .push(name.clone());
        if is_stale(h.audit.audited_at.as_deref(), now, max_age) {
            stale.push(name.clone());
        }
        lines.push(HostLine {
            host: name.clone(),
            file: h.file.display().to_string(),
            boot_time: h.audit.boot_time.clone(),
            audited_at: h.audit.audited_at.clone(),
            hostknob_version: h.audit.hostknob_version.clone(),
            manifest_revision: rev,
            competing_managers: competing,
            fails: h.statuses.iter().any(|s| s.fails()),
            summary: per,
        });
    }
    let mut host_groups: Vec<HostGroup> = fingerprints
        .into_iter()
        .map(|(print, hosts)| {
            let mut summary = BTreeMap::new();
            for (_, st, _) in &print {
                *summary.entry(*st).or_insert(0) += 1;
            }
            HostGroup {
                count: hosts.len(),
                compressed: compress(&hosts),
                hosts,
                summary,
            }
        })
        .collect();
    host_groups.sort_by(|a, b| {
        b.hosts
            .len()
            .cmp(&a.hosts.len())
            .then(a.hosts.cmp(&b.hosts))
    });

    let knobs = knob_ids.iter().map(|id| fleet_knob(id, &hosts)).collect();
    let by_size = |mut v: Vec<HostSet>| {
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.value.cmp(&b.value)));
        v
    };
    Ok(FleetReport {
        hosts: lines,
        clashes,
        host_groups,
        knobs,
        summary,
        manifest_revisions: by_size(revisions.into_iter().map(|(v, h)| host_set(v, h)).collect()),
        competing_managers: by_size(managers.into_iter().map(|(v, h)| host_set(v, h)).collect()),
        hostknob_versions: by_size(versions.into_iter().map(|(v, h)| host_set(v, h)).collect()),
        stale: host_set(humantime::format_duration(max_age).to_string(), stale),
        unreadable,
    })
}

/// One knob across the fleet: hosts grouped by status and value, who drifts, the evidence.
fn fleet_knob(id: &str, hosts: &BTreeMap<String, HostIn>) -> FleetKnob {
    let mut k = FleetKnob {
        id: id.to_string(),
        desired: Vec::new(),
        groups: Vec::new(),
        drifting: Vec::new(),
        lost_on_reboot: Vec::new(),
        unpersisted: Vec::new(),
        persisted_by: BTreeMap::new(),
        evidence: Vec::new(),
        evidence_stale: BTreeMap::new(),
        unverified_here: Vec::new(),
    };
    // Constant-time lookups: a fleet whose hosts all differ stays linear.
    let mut desired: HashSet<&str> = HashSet::new();
    let mut group_at: HashMap<(Status, String), usize> = HashMap::new();
    for (name, h) in hosts {
        let Some(&i) = h.index.get(id) else {
            continue;
        };
        let (kin, st) = (&h.audit.knobs[i], &h.statuses[i]);
        if desired.insert(&kin.desired) {
            k.desired.push(kin.desired.clone());
        }
        let current = describe(&kin.current);
        match group_at.get(&(*st, current.clone())) {
            Some(&g) => k.groups[g].hosts.push(name.clone()),
            None => {
                group_at.insert((*st, current.clone()), k.groups.len());
                k.groups.push(KnobGroup {
                    status: *st,
                    current,
                    hosts: vec![name.clone()],
                    count: 0,
                    compressed: String::new(),
                });
            }
        }
        if st.fails() {
            k.drifting.push(name.clone());
        }
        match st {
            Status::LostOnReboot => k.lost_on_reboot.push(name.clone()),
            Status::Unpersisted => k.unpersisted.push(name.clone()),
            _ => {}
        }
        if let Some(by) = &kin.persisted_by {
            k.persisted_by.insert(name.clone(), by.clone());
        }
        match kin.evidence_status.as_deref() {
            Some("evidence-stale") => {
                let d = kin.evidence_detail.as_deref().unwrap_or("");
                let d = d.strip_prefix("evidence-stale: ").unwrap_or(d);
                k.evidence_stale.insert(name.clone(), d.to_string());
            }
            Some("unverified-here") => k.unverified_here.push(name.clone()),
            _ => {}
        }
        if let Some(e) = &kin.evidence {
            k.evidence.push(HostEvidence {
                host: name.clone(),
                timestamp: e.timestamp.clone(),
                verdict: e.verdict.clone(),
                ratio: e.ratio,
                summary: e.summary.clone(),
            });
        }
    }
    for g in &mut k.groups {
        g.count = g.hosts.len();
        g.compressed = compress(&g.hosts);
    }
    // Attention first: failing statuses, then the larger groups.
    k.groups.sort_by(|a, b| {
        b.status
            .fails()
            .cmp(&a.status.fails())
            .then(b.hosts.len().cmp(&a.hosts.len()))
            .then(a.hosts.cmp(&b.hosts))
    });
    k.evidence.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    k
}
