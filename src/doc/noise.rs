//! The host document's OS-noise evidence: for the isolated and nohz_full
//! CPUs, the latest `verify --probe noise` in the ledger, per leg.

use std::fmt::Write;

use crate::cpulist::CpuList;
use serde_json::Value;

use crate::manifest::ledger::{Action, Entry};
use crate::manifest::ledger_home::Home;
use crate::manifest::ledger_samples::Samples;
use crate::root::Root;

/// The CPUs isolation is about: `isolated` and `nohz_full` in sysfs.
fn isolated(root: &Root) -> CpuList {
    let r = crate::inventory::Reader::new(root);
    let dir = crate::inventory::CPU_DIR;
    let mut all: Vec<u32> = Vec::new();
    for f in ["isolated", "nohz_full"] {
        if let Some(l) = r.cpulist(&format!("{dir}/{f}")) {
            all.extend(l.as_slice());
        }
    }
    all.into_iter().collect()
}

/// The CPUs a noise verify measured: the summary's `cpus`, or in an entry
/// written before it, those of the first applied round.
fn measured(noise: &Value) -> Vec<u64> {
    let listed = noise["cpus"]
        .as_array()
        .map(|c| c.iter().filter_map(Value::as_u64).collect());
    listed.unwrap_or_else(|| {
        noise["rounds"][1][0]["cpus"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["cpu"].as_u64())
            .collect()
    })
}

/// Each leg's rounds in one line: the lost µs/s over the measured CPUs,
/// least, median and most.
fn per_round(noise: &Value) -> Option<String> {
    let legs: Vec<String> = ["as found", "applied"]
        .iter()
        .enumerate()
        .map(|(k, leg)| {
            let mut v: Vec<f64> = noise["rounds"][k]
                .as_array()?
                .iter()
                .map(|r| {
                    let c = r["cpus"].as_array().map_or(&[][..], Vec::as_slice);
                    let lost: f64 = c.iter().filter_map(|c| c["lost_us_per_s"].as_f64()).sum();
                    lost / c.len().max(1) as f64
                })
                .collect();
            v.sort_by(f64::total_cmp);
            let (first, last) = (v.first()?, v.last()?);
            Some(format!(
                "{leg} {first:.1}-{last:.1} (median {:.1}) over {} rounds",
                v[(v.len() - 1) / 2],
                v.len()
            ))
        })
        .collect::<Option<_>>()?;
    Some(legs.join(", "))
}

/// The section's text; empty when the host isolates no CPU.
pub fn section(root: &Root, events: &[Entry], home: &Home) -> String {
    let cpus = isolated(root);
    if cpus.is_empty() {
        return String::new();
    }
    let mut o = format!("\nOS noise on the isolated CPUs ({cpus}):\n\n");
    let latest = events.iter().rev().find(|e| {
        e.action == Action::Verified
            && e.evidence.as_ref().is_some_and(|v| {
                measured(&v["noise"])
                    .iter()
                    .any(|&n| cpus.contains(n as u32))
            })
    });
    let Some(e) = latest else {
        let _ = writeln!(
            o,
            "No noise evidence is recorded: `hostknob verify KNOB --probe noise -- --cpus {cpus}` measures it (`hostknob probe noise --cpus {cpus}` without a knob)."
        );
        return o;
    };
    let samples = home.samples(e);
    let whole = samples
        .evidence(e.evidence.as_ref())
        .expect("found with evidence");
    let n = &whole["noise"];
    let _ = writeln!(
        o,
        "- {} by `verify {}` ({} attribution): lost {} -> {} µs/s (as found -> applied)",
        e.timestamp,
        e.knob,
        n["attribution"].as_str().unwrap_or("?"),
        n["lost_us_per_s"][0],
        n["lost_us_per_s"][1]
    );
    for (k, leg) in ["as found", "applied"].iter().enumerate() {
        let top: Vec<String> = n["sources"][k]
            .as_array()
            .into_iter()
            .flatten()
            .take(3)
            .map(|s| {
                format!(
                    "{} {} {} µs/s",
                    s["kind"].as_str().unwrap_or(""),
                    s["name"].as_str().unwrap_or(""),
                    s["us_per_s"]
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "- {leg}: {}",
            if top.is_empty() {
                "nothing attributed".into()
            } else {
                top.join(", ")
            }
        );
    }
    match (&samples, per_round(n)) {
        (Samples::Missing { words, .. }, _) => {
            let _ = writeln!(o, "- per round: {words}");
        }
        (_, Some(line)) => {
            let _ = writeln!(o, "- per round, lost µs/s: {line}");
        }
        (_, None) => {}
    }
    let grouped: Option<Vec<crate::verify::noise::ChangedName>> =
        serde_json::from_value(n["changed_by_name"].clone()).ok();
    if let Some(g) = grouped.filter(|g| !g.is_empty()) {
        let _ = writeln!(o, "- changed: {}", crate::verify::noise::changed_words(&g));
    } else if let Some(c) = n["changed"].as_array().filter(|c| !c.is_empty()) {
        let c: Vec<&str> = c.iter().filter_map(|x| x.as_str()).collect();
        let _ = writeln!(o, "- changed: {}", c.join("; "));
    }
    o
}
