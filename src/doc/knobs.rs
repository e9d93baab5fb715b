//! The document's manifest sections: the knobs for this host with their
//! status, since when, persistence and caveats, and the latest evidence.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

use super::KnobSections;
use crate::audit::{self, Status};
use crate::knob::HostCtx;
use crate::manifest::ledger::{self, Action};
use crate::manifest::ledger_home;
use crate::render::markdown::{code, table};
use crate::schema::{HistoryAction, Persistence};

/// Reads the manifest with the profiles and overrides for this host.
pub type Load<'a> =
    Box<dyn FnOnce() -> Result<crate::manifest::Manifest, crate::manifest::ManifestErrors> + 'a>;

/// `state_dir` (logical, under the host's root) holds the host's own ledger.
/// `shown` is how the document names `dir` ([`super::paths::shown`]).
pub fn sections(
    dir: &Path,
    shown: &Path,
    load: Load,
    host: &HostCtx,
    src: &str,
    state_dir: &str,
) -> Result<KnobSections> {
    let (manifest_dir, host_source) = (dir, src);
    if !manifest_dir.is_dir() {
        let text = format!(
            "No knob manifest at {}: knobs in effect are listed when one is given (`--manifest DIR`).\n",
            code(&shown.display().to_string())
        );
        return Ok(KnobSections {
            knobs: text,
            evidence: "No ledger: no evidence is recorded.\n".into(),
        });
    }
    let manifest = load()?;
    let report = audit::evaluate(&manifest, host, host_source, &[], state_dir)?;
    let home = ledger_home::Home::new(host.root, &host.name, manifest_dir, state_dir);
    let (events, _) = home.read_for(&ledger::Identity::of(host.root))?;

    let mut knobs = String::new();
    if report.knobs.is_empty() {
        let _ = writeln!(
            knobs,
            "No knob in the manifest targets {} ({} target other hosts).",
            code(&host.name),
            report.other_hosts
        );
    } else {
        let mut rows = Vec::new();
        let mut reports: Vec<_> = report.knobs.iter().collect();
        reports.sort_by(|a, b| a.id.cmp(&b.id));
        for k in &reports {
            let knob = manifest.get(&k.id);
            let since = events
                .iter()
                .rev()
                .find(|e| e.knob == k.id && e.action == Action::Applied)
                .map(|e| e.timestamp.clone())
                .or_else(|| {
                    knob?
                        .history
                        .iter()
                        .rev()
                        .find(|h| h.action == HistoryAction::Applied && h.hosts.matches(&host.name))
                        .map(|h| h.date.clone())
                })
                .unwrap_or_else(|| "-".into());
            let persistence = match (&k.persisted_by, k.persistence) {
                (Some(by), _) => format!("persisted by {by}"),
                (None, Persistence::Runtime) => "runtime: **not persistent**".into(),
                (None, p) if k.status == Status::Unpersisted => {
                    format!("{p}: **not persistent yet**")
                }
                (None, p) => p.to_string(),
            };
            let current = k
                .current
                .iter()
                .map(|c| {
                    let v = c.value.clone().unwrap_or_else(|| "not exposed".into());
                    match &c.cpus {
                        Some(cpus) if k.current.len() > 1 => format!("{cpus}: {v}"),
                        _ => v,
                    }
                })
                .collect::<Vec<_>>()
                .join("; ");
            rows.push(vec![
                code(&k.id),
                k.target.clone(),
                k.desired.clone(),
                if current.is_empty() {
                    "-".into()
                } else {
                    current
                },
                k.status.as_str().to_string(),
                since,
                persistence,
            ]);
        }
        knobs += &table(
            &[
                "knob",
                "target",
                "desired",
                "current",
                "status",
                "since",
                "persistence",
            ],
            &rows,
        );
        knobs += "\n";
        for k in &reports {
            if k.caveats.is_empty() && k.status != Status::NotApplicable {
                continue;
            }
            let _ = writeln!(knobs, "{} ({}):\n", code(&k.id), k.title);
            if k.status == Status::NotApplicable {
                let _ = writeln!(knobs, "- not applicable here: {}", k.detail);
            }
            for c in &k.caveats {
                let _ = writeln!(
                    knobs,
                    "- caveat: {}",
                    c.split_whitespace().collect::<Vec<_>>().join(" ")
                );
            }
            knobs.push('\n');
        }
        let _ = writeln!(
            knobs,
            "Check with `hostknob audit`; the manifest is {}.",
            code(&shown.display().to_string())
        );
    }

    let collected = ledger::path_for(shown, &host.name);
    let mut evidence = evidence_section(&report, &home, &collected, &host.name);
    evidence += &super::noise::section(host.root, &events, &home);
    Ok(KnobSections { knobs, evidence })
}

/// Evidence that no longer describes this host, or none for its hardware.
fn to_renew(report: &audit::Report) -> String {
    let mut evidence = String::new();
    let mut aged: Vec<_> = report
        .knobs
        .iter()
        .filter(|k| k.evidence_status != Some(audit::EvidenceStatus::Current))
        .filter_map(|k| Some((k, k.evidence_detail.as_deref()?)))
        .collect();
    aged.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    if !aged.is_empty() {
        evidence += "\nEvidence to renew:\n\n";
        for (k, detail) in aged {
            let _ = writeln!(evidence, "- {}: {detail}", code(&k.id));
        }
    }
    evidence
}

/// The evidence section: the latest verify per knob, then what to renew.
fn evidence_section(
    report: &audit::Report,
    home: &ledger_home::Home,
    collected: &Path,
    host: &str,
) -> String {
    let mut evidence = String::new();
    let mut verified: Vec<_> = report
        .knobs
        .iter()
        .filter_map(|k| Some((k, k.evidence.as_ref()?)))
        .collect();
    verified.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    if verified.is_empty() {
        let _ = writeln!(
            evidence,
            "No verify evidence is recorded for {} in {} or {}.",
            code(host),
            code(&home.local_logical()),
            code(&collected.display().to_string())
        );
    } else {
        evidence += &table(
            &["knob", "when", "evidence"],
            &verified
                .iter()
                .map(|(k, e)| {
                    vec![
                        code(&k.id),
                        e.timestamp.clone(),
                        e.summary.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect::<Vec<_>>(),
        );
    }
    // Per-round samples the ledger names but that are not beside it: the
    // summaries above stand.
    for (k, e) in &verified {
        if let Some(w) = e.samples.as_ref().and_then(|s| s.words.as_deref()) {
            let _ = writeln!(evidence, "\n{}: {w}", code(&k.id));
        }
    }
    evidence += &to_renew(report);
    evidence
}
