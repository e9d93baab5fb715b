//! `report`: many hosts' `audit --format json` outputs as one fleet view:
//! which hosts drift on which knob (hosts grouped where they agree), what is
//! lost on reboot or unpersisted, and the latest verify evidence per knob.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::audit::Status;

/// The fields of an audit output the report reads; others are ignored.
#[derive(Deserialize)]
struct AuditIn {
    schema: Option<u32>,
    host: String,
    boot_time: Option<String>,
    knobs: Vec<KnobIn>,
}

#[derive(Deserialize)]
struct KnobIn {
    id: String,
    status: String,
    desired: String,
    current: Vec<CurrentIn>,
    persisted_by: Option<String>,
    evidence: Option<EvidenceIn>,
}

#[derive(Deserialize)]
struct CurrentIn {
    cpus: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    value: Option<String>,
}

#[derive(Deserialize)]
struct EvidenceIn {
    timestamp: String,
    verdict: Option<String>,
    summary: Option<String>,
    /// `median_ratio` in audits before the paired-round verdict.
    #[serde(alias = "median_ratio")]
    ratio: Option<f64>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FleetReport {
    pub hosts: Vec<HostLine>,
    /// Hosts with the same status and value on every knob.
    pub host_groups: Vec<HostGroup>,
    pub knobs: Vec<FleetKnob>,
    /// Host-knob pairs per status.
    pub summary: BTreeMap<Status, usize>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostLine {
    pub host: String,
    /// The audit output this host was read from.
    pub file: String,
    pub boot_time: Option<String>,
    /// Knobs per status on this host.
    pub summary: BTreeMap<Status, usize>,
    /// Whether the host's audit would exit 2 (drift, unsupported, lost-on-reboot, not-honoured).
    pub fails: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HostGroup {
    pub hosts: Vec<String>,
    /// Knobs per status, the same on each of these hosts.
    pub summary: BTreeMap<Status, usize>,
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
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobGroup {
    pub status: Status,
    pub current: String,
    pub hosts: Vec<String>,
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
    /// 2 when any host fails its audit, as `audit` exits for one host.
    pub fn exit_code(&self) -> i32 {
        if self.hosts.iter().any(|h| h.fails) {
            2
        } else {
            0
        }
    }
}

/// The JSON files named, a directory standing for its `*.json` files.
pub fn input_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(a)
                .map_err(|e| anyhow!("{}: {e}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                .collect();
            if found.is_empty() {
                bail!("{}: no *.json audit outputs in this directory", a.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(a.clone());
        }
    }
    if files.is_empty() {
        bail!("name audit JSON files or a directory of them");
    }
    Ok(files)
}

/// The largest audit output `report` reads: a 4,096-CPU host's audit of a
/// large manifest is a few MB; the cap keeps a stray file from taking memory.
pub const INPUT_CAP: u64 = 64 << 20;

/// An input read the way host files are: a regular file (a FIFO or a
/// device is refused at once, never waited on), at most [`INPUT_CAP`] bytes.
fn read_input(path: &Path) -> Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let meta = f
        .metadata()
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a plain file"
        };
        bail!(
            "{}: is {what}, not a regular file: report reads audit JSON from regular files only",
            path.display()
        );
    }
    let too_big = || {
        anyhow!(
            "{}: larger than {} MiB, the most report reads from one audit output",
            path.display(),
            INPUT_CAP >> 20
        )
    };
    if meta.len() > INPUT_CAP {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(INPUT_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > INPUT_CAP {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: byte {}: not UTF-8 text, so not JSON",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// What tells an audit output from other JSON, read without building the
/// document in memory (a `serde_json::Value` is ten times the text).
#[derive(Deserialize)]
struct Head {
    schema: Option<serde_json::Value>,
    host_source: Option<serde::de::IgnoredAny>,
    summary: Option<serde::de::IgnoredAny>,
    knobs: Option<serde::de::IgnoredAny>,
}

fn read_one(path: &Path) -> Result<AuditIn> {
    let text = read_input(path)?;
    let head: Head = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: line {} column {}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    let want = u64::from(crate::inventory::SCHEMA_VERSION);
    let is_audit = head.host_source.is_some() && head.summary.is_some() && head.knobs.is_some();
    match &head.schema {
        _ if !is_audit => bail!(
            "{}: not a `hostknob audit --format json` output (no host_source, summary and knobs)",
            path.display()
        ),
        Some(v) if v.as_u64() == Some(want) => {}
        Some(v) => bail!(
            "{}: field `schema`: {v} is not audit schema {want}; this hostknob reads schema {want}",
            path.display()
        ),
        None => bail!(
            "{}: field `schema` missing: written by a hostknob older than schema {want}",
            path.display()
        ),
    }
    let audit: AuditIn =
        serde_json::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    debug_assert!(audit.schema.is_some());
    Ok(audit)
}

fn parse_status(path: &Path, knob: &str, s: &str) -> Result<Status> {
    Status::ALL
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| {
            anyhow!(
                "{}: knob {knob}: field `status`: unknown {s:?}",
                path.display()
            )
        })
}

/// `0-15: performance; 16-31: powersave`, as `audit` shows a current value.
fn describe(current: &[CurrentIn]) -> String {
    let word = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    match current {
        [] => "-".into(),
        [one] => word(&one.value),
        many => many
            .iter()
            .map(|c| match (&c.cpus, c.paths.as_slice()) {
                (Some(cpus), _) => format!("{cpus}: {}", word(&c.value)),
                (None, [p]) => format!("{p}: {}", word(&c.value)),
                (None, ps) => format!("{} files: {}", ps.len(), word(&c.value)),
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

struct HostIn {
    file: PathBuf,
    audit: AuditIn,
    statuses: Vec<Status>,
}

/// Reads every file and builds the fleet view. Two files for one host are an error.
pub fn build(files: &[PathBuf]) -> Result<FleetReport> {
    let mut hosts: BTreeMap<String, HostIn> = BTreeMap::new();
    for f in files {
        let audit = read_one(f)?;
        let statuses = audit
            .knobs
            .iter()
            .map(|k| parse_status(f, &k.id, &k.status))
            .collect::<Result<Vec<_>>>()?;
        if let Some(prev) = hosts.get(&audit.host) {
            bail!(
                "{}: host {} is also in {}: give one audit per host",
                f.display(),
                audit.host,
                prev.file.display()
            );
        }
        hosts.insert(
            audit.host.clone(),
            HostIn {
                file: f.clone(),
                audit,
                statuses,
            },
        );
    }

    let mut knob_ids: Vec<String> = Vec::new();
    for h in hosts.values() {
        for k in &h.audit.knobs {
            if !knob_ids.contains(&k.id) {
                knob_ids.push(k.id.clone());
            }
        }
    }
    knob_ids.sort();

    let mut summary = BTreeMap::new();
    let mut lines = Vec::new();
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
        lines.push(HostLine {
            host: name.clone(),
            file: h.file.display().to_string(),
            boot_time: h.audit.boot_time.clone(),
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
            HostGroup { hosts, summary }
        })
        .collect();
    host_groups.sort_by(|a, b| {
        b.hosts
            .len()
            .cmp(&a.hosts.len())
            .then(a.hosts.cmp(&b.hosts))
    });

    let knobs = knob_ids.iter().map(|id| fleet_knob(id, &hosts)).collect();

    Ok(FleetReport {
        hosts: lines,
        host_groups,
        knobs,
        summary,
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
    };
    for (name, h) in hosts {
        let Some((kin, st)) = h
            .audit
            .knobs
            .iter()
            .zip(&h.statuses)
            .find(|(k, _)| k.id == *id)
        else {
            continue;
        };
        if !k.desired.contains(&kin.desired) {
            k.desired.push(kin.desired.clone());
        }
        let current = describe(&kin.current);
        match k
            .groups
            .iter_mut()
            .find(|g| g.status == *st && g.current == current)
        {
            Some(g) => g.hosts.push(name.clone()),
            None => k.groups.push(KnobGroup {
                status: *st,
                current,
                hosts: vec![name.clone()],
            }),
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

fn counts(summary: &BTreeMap<Status, usize>) -> String {
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|s| summary.get(s).map(|n| format!("{n} {}", s.as_str())))
        .collect();
    if parts.is_empty() {
        "no knobs".into()
    } else {
        parts.join(", ")
    }
}

fn evidence_text(e: &HostEvidence) -> String {
    let mut t = e
        .verdict
        .clone()
        .unwrap_or_else(|| "recorded".into())
        .replace('-', " ");
    if let Some(r) = e.ratio {
        t.push_str(&format!(", ratio {r:.3}"));
    }
    format!(
        "{t} on {} ({})",
        e.host,
        e.timestamp.split('T').next().unwrap_or(&e.timestamp)
    )
}

/// The report's sections as (title, header, rows), shared by table and Markdown.
#[allow(clippy::type_complexity)]
fn sections(r: &FleetReport) -> Vec<(String, Vec<&'static str>, Vec<Vec<String>>)> {
    let mut knob_rows = Vec::new();
    for k in &r.knobs {
        for (i, g) in k.groups.iter().enumerate() {
            knob_rows.push(vec![
                if i == 0 { k.id.clone() } else { String::new() },
                g.status.as_str().to_string(),
                g.current.clone(),
                g.hosts.join(", "),
            ]);
        }
    }
    let group_rows = r
        .host_groups
        .iter()
        .map(|g| vec![g.hosts.join(", "), counts(&g.summary)])
        .collect();
    let reboot_rows = r
        .knobs
        .iter()
        .filter(|k| !k.lost_on_reboot.is_empty() || !k.unpersisted.is_empty())
        .map(|k| {
            vec![
                k.id.clone(),
                or_none(&k.lost_on_reboot),
                or_none(&k.unpersisted),
            ]
        })
        .collect();
    let evidence_rows = r
        .knobs
        .iter()
        .filter_map(|k| {
            let latest = k.evidence.first()?;
            Some(vec![
                k.id.clone(),
                evidence_text(latest),
                format!("{} of {}", k.evidence.len(), hosts_with(r, &k.id)),
            ])
        })
        .collect();
    vec![
        (
            "Knobs, hosts grouped where they agree".into(),
            vec!["knob", "status", "current", "hosts"],
            knob_rows,
        ),
        (
            "Hosts that agree on every knob".into(),
            vec!["hosts", "knobs"],
            group_rows,
        ),
        (
            "Lost on reboot or unpersisted".into(),
            vec!["knob", "lost on reboot", "unpersisted"],
            reboot_rows,
        ),
        (
            "Latest verify evidence".into(),
            vec!["knob", "latest", "hosts verified"],
            evidence_rows,
        ),
    ]
}

fn or_none(hosts: &[String]) -> String {
    if hosts.is_empty() {
        "-".into()
    } else {
        hosts.join(", ")
    }
}

fn hosts_with(r: &FleetReport, id: &str) -> usize {
    r.knobs
        .iter()
        .find(|k| k.id == id)
        .map(|k| k.groups.iter().map(|g| g.hosts.len()).sum())
        .unwrap_or(0)
}

fn headline(r: &FleetReport) -> String {
    let failing: Vec<&str> = r
        .hosts
        .iter()
        .filter(|h| h.fails)
        .map(|h| h.host.as_str())
        .collect();
    format!(
        "{} hosts, {} knobs: {}; {}",
        r.hosts.len(),
        r.knobs.len(),
        counts(&r.summary),
        if failing.is_empty() {
            "no host drifts".to_string()
        } else {
            format!("drifting: {}", failing.join(", "))
        }
    )
}

pub fn table(r: &FleetReport) -> String {
    let mut out = headline(r) + "\n\n";
    for (title, header, rows) in sections(r) {
        out.push_str(&crate::render::grid(&title, &header, rows));
    }
    out
}

pub fn markdown(r: &FleetReport) -> String {
    let mut out = format!("# Fleet report\n\n{}\n\n", headline(r));
    for (title, header, rows) in sections(r) {
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!("## {title}\n\n"));
        out.push_str(&crate::render::markdown::table(&header, &rows));
        out.push('\n');
    }
    out
}
