//! What a search leaves in its `--out` directory: one knob file per
//! shipped knob (its `set:`, `hosts:` this host, `verify.expect` from the
//! conservative end of the measured interval, a `verified` history entry
//! with the evidence, the search's caveats), the report, and every sample
//! (`tune-samples.json`), from which `tune --replay DIR` derives every
//! decision again.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use super::design::Dim;
use super::race::RoundRecord;
use super::search::{Accepted, Outcome};
use super::space::Entry;
use crate::root::Root;

pub const SAMPLES: &str = "tune-samples.json";
pub const REPORT_JSON: &str = "tune-report.json";
pub const REPORT_TEXT: &str = "tune-report.txt";
pub const SVG: &str = "tune-path.svg";

/// A knob of the space that is not searched, and why.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotSearched {
    pub knob: String,
    pub reason: String,
}

/// `hostknob tune`'s report (`--format json`, and `tune-report.json`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TuneReport {
    pub host: String,
    pub space: String,
    pub probe: String,
    /// The probe's settings (a command's argv, unit and direction), from its first run.
    pub settings: serde_json::Value,
    pub seed: u64,
    pub budget_s: Option<f64>,
    pub not_searched: Vec<NotSearched>,
    pub outcome: Outcome,
    /// Every knob's files read as before the search (null: a replay, the host untouched).
    pub restored: Option<bool>,
    /// The signal that stopped the search: the report is PARTIAL.
    pub interrupted: Option<String>,
    /// Derived from recorded samples by `--replay`, and whether the decisions match the recorded report's.
    pub replay: Option<ReplayCheck>,
    /// Knob files written, relative to the output directory.
    pub files: Vec<String>,
    pub caveats: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReplayCheck {
    pub same: bool,
    pub differences: Vec<String>,
}

/// `tune-samples.json`: what a replay needs.
#[derive(Debug, Serialize, Deserialize)]
pub struct Record {
    pub host: String,
    pub space: String,
    pub probe: String,
    pub dims: Vec<RecordedDim>,
    pub alpha: f64,
    pub min_effect: f64,
    pub seed: u64,
    /// The legs allowed before and after the pilot turned the time budget into legs.
    pub budget_legs: usize,
    pub budget_legs_after_pilot: usize,
    pub leg_seconds: Option<f64>,
    pub guards: Vec<String>,
    pub rounds: Vec<RoundRecord>,
    /// Why the run stopped early (a signal, the time budget), where it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RecordedDim {
    pub id: String,
    pub values: Vec<String>,
    pub as_found: Option<usize>,
}

impl RecordedDim {
    pub fn of(d: &Dim) -> RecordedDim {
        RecordedDim {
            id: d.id.clone(),
            values: d.values.clone(),
            as_found: d.as_found,
        }
    }

    pub fn dim(&self) -> Dim {
        Dim {
            id: self.id.clone(),
            values: self.values.clone(),
            as_found: self.as_found,
        }
    }
}

/// Refuses an output directory that is a link, a file, or holds files
/// that are not an earlier tune output; before anything runs.
pub fn check_dir(dir: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(dir);
    if meta.as_ref().is_ok_and(|m| m.file_type().is_symlink()) {
        bail!(
            "--out {}: is a symbolic link; tune writes into a directory, never through a link: name the directory itself",
            dir.display()
        );
    }
    if dir.exists() && !dir.is_dir() {
        bail!("--out {}: not a directory", dir.display());
    }
    if dir.is_dir() && std::fs::read_dir(dir)?.next().is_some() && !dir.join(SAMPLES).exists() {
        bail!(
            "--out {}: not empty and not an earlier tune output: name a new directory (its knob files are for review, and would mix with these)",
            dir.display()
        );
    }
    Ok(())
}

/// The knob file of a shipped knob.
pub fn knob_file(
    e: &Entry,
    a: &Accepted,
    o: &Outcome,
    host: &str,
    date: &str,
    probe: &Value,
) -> Result<String> {
    let j = e
        .values
        .iter()
        .position(|v| *v == a.value)
        .context("a value of the space")?;
    let mut doc: Mapping = serde_yaml::from_str(&e.variants[j].source.text)?;
    let s = |t: &str| Value::String(t.to_string());
    // The conservative end of the evidence: the confirmation's share where
    // it showed the knob, else the accepted step's interval.
    let share = o.confirm.as_ref().and_then(|c| {
        c.shares
            .iter()
            .find(|s| s.label.ends_with(&format!("without {}", e.id)))
            .filter(|s| s.verdict == crate::verify::paired::Verdict::Improved)
    });
    let (hi, source) = match share {
        Some(s) => (s.interval[1], "the confirmation's share"),
        None => (a.interval[1], "the accepted step"),
    };
    let by = ((1.0 - hi) * 1000.0).floor() / 10.0;
    let mut verify = Mapping::new();
    verify.insert(s("probe"), probe.clone());
    if by >= 0.1 {
        let mut ex = Mapping::new();
        ex.insert(s("metric"), s("p50"));
        ex.insert(s("change"), s("lower"));
        ex.insert(s("by"), s(&format!("{by} %")));
        verify.insert(s("expect"), Value::Sequence(vec![Value::Mapping(ex)]));
    }
    let note = format!(
        "hostknob tune on {host}: {}={} ratio {:.3} ({:.3}-{:.3}) against the configuration before it, {} rounds; `lower by` is the conservative end of {source}'s interval",
        e.id, a.value, a.ratio, a.interval[0], a.interval[1], a.rounds
    );
    verify.insert(s("note"), s(&note));
    doc.insert(s("verify"), Value::Mapping(verify));
    doc.insert(s("hosts"), Value::Sequence(vec![s(host)]));
    let mut caveats: Vec<Value> = match doc.get("caveats") {
        Some(Value::Sequence(v)) => v.clone(),
        _ => Vec::new(),
    };
    caveats.extend(caveats_of(o, &e.id).into_iter().map(|c| s(&c)));
    doc.insert(s("caveats"), Value::Sequence(caveats));
    let mut history: Vec<Value> = match doc.get("history") {
        Some(Value::Sequence(v)) => v.clone(),
        _ => Vec::new(),
    };
    let mut h = Mapping::new();
    h.insert(s("date"), s(date));
    h.insert(s("action"), s("verified"));
    h.insert(s("hosts"), Value::Sequence(vec![s(host)]));
    h.insert(s("note"), s(&note));
    history.push(Value::Mapping(h));
    doc.insert(s("history"), Value::Sequence(history));
    Ok(format!(
        "# Written by `hostknob tune`: advice to review, not applied. The evidence: tune-report.txt.\n{}",
        serde_yaml::to_string(&doc)?
    ))
}

/// The search's caveats a shipped knob carries.
pub fn caveats_of(o: &Outcome, id: &str) -> Vec<String> {
    let mut out = vec![
        "found by a one-knob-at-a-time search: interactions between knobs that help only together are not searched".to_string(),
        "measured at runtime on one host with one probe: another workload or host may differ".to_string(),
    ];
    if let Some(c) = &o.confirm
        && c.not_reproduced
            .iter()
            .any(|n| n.starts_with(&format!("{id}:")))
    {
        out.push(
            "the confirmation run did not reproduce this step on its own (see the report)".into(),
        );
    }
    if !o.shams.claimed.is_empty() {
        out.push(o.shams.words.clone());
    }
    out
}

/// Writes the files into `dir` (made when missing), through the root seam confined to it.
pub fn write_dir(dir: &Path, files: &[(String, String)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let seam = Root::confined(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    for (name, text) in files {
        seam.replace_file(&format!("/{name}"), text.as_bytes())
            .with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    Ok(())
}

/// The decisions of a recorded outcome and a replayed one (both as JSON),
/// line by line: empty when every comparison and the shipped set agree.
pub fn differences(recorded: &serde_json::Value, replayed: &serde_json::Value) -> Vec<String> {
    let key = |o: &serde_json::Value| -> Vec<String> {
        let comps = o["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["comparisons"].as_array().into_iter().flatten())
            .chain(
                o["confirm"]["together"]
                    .as_object()
                    .map(|_| &o["confirm"]["together"]),
            )
            .chain(o["confirm"]["shares"].as_array().into_iter().flatten());
        comps
            .map(|c| {
                format!(
                    "{}: {} {} ratio {} interval {} after {} rounds",
                    c["label"], c["ended"], c["verdict"], c["ratio"], c["interval"], c["rounds"]
                )
            })
            .chain(
                o["shipped"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| format!("shipped {}={}", s["knob"], s["value"])),
            )
            .collect()
    };
    let (ka, kb) = (key(recorded), key(replayed));
    let mut out: Vec<String> = ka
        .iter()
        .filter(|k| !kb.contains(k))
        .map(|k| format!("recorded: {k}"))
        .collect();
    out.extend(
        kb.iter()
            .filter(|k| !ka.contains(k))
            .map(|k| format!("replayed: {k}")),
    );
    if out.is_empty() && recorded != replayed {
        out.push("the decisions agree but other figures of the outcome differ".into());
    }
    out
}
