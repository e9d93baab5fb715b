//! The noise probe in verify: the default probe of the isolation kinds, and
//! the attribution of each leg kept as evidence (which sources of lost time
//! changed between the legs).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::probe::noise_attrib::Evidence;

pub use crate::manifest::default_probe::default_probe;

/// One source's lost time over a leg's rounds.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LegSource {
    pub kind: String,
    pub name: String,
    pub pid: Option<u32>,
    /// Its time over all the leg's rounds and CPUs, per second measured (µs/s).
    pub us_per_s: f64,
}

/// The attribution per leg (as found, applied) and what changed.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct NoiseEvidence {
    /// How the time was attributed (`tracefs` or `counts`).
    pub attribution: String,
    /// Mean lost µs per second of each leg's rounds: as found, applied.
    pub lost_us_per_s: [f64; 2],
    /// The second figure: per leg, the median over its rounds of each
    /// round's longest gap (any measured CPU), µs.
    pub max_gap_us: [f64; 2],
    /// Per leg, sources by time, largest first (up to 12).
    pub sources: [Vec<LegSource>; 2],
    /// Sources whose time differs by at least half between the legs (or
    /// that appear in one only), in words.
    pub changed: Vec<String>,
    /// Each round's attribution, per leg.
    pub rounds: [Vec<Evidence>; 2],
}

/// The legs' evidence as the rounds come.
#[derive(Default)]
pub struct Pool {
    rounds: [Vec<Evidence>; 2],
}

impl Pool {
    pub fn add(&mut self, applied: bool, evidence: Option<serde_json::Value>) {
        if let Some(e) = evidence.and_then(|v| serde_json::from_value::<Evidence>(v).ok()) {
            self.rounds[applied as usize].push(e);
        }
    }

    pub fn report(&mut self) -> Option<NoiseEvidence> {
        if self.rounds.iter().all(Vec::is_empty) {
            return None;
        }
        let rounds = std::mem::take(&mut self.rounds);
        let lost = |k: usize| {
            let v: Vec<f64> = rounds[k]
                .iter()
                .flat_map(|e| e.cpus.iter().map(|c| c.lost_us_per_s))
                .collect();
            if v.is_empty() {
                0.0
            } else {
                round1(v.iter().sum::<f64>() / v.len() as f64)
            }
        };
        let max_gap = |k: usize| {
            let mut v: Vec<u64> = rounds[k]
                .iter()
                .map(|e| e.cpus.iter().map(|c| c.max_gap_ns).max().unwrap_or(0))
                .collect();
            v.sort_unstable();
            v.get(v.len().saturating_sub(1) / 2)
                .map_or(0.0, |&ns| round1(ns as f64 / 1e3))
        };
        let sources = [leg_sources(&rounds[0]), leg_sources(&rounds[1])];
        Some(NoiseEvidence {
            attribution: rounds
                .iter()
                .flatten()
                .next()
                .map_or(String::new(), |e| e.attribution.clone()),
            lost_us_per_s: [lost(0), lost(1)],
            max_gap_us: [max_gap(0), max_gap(1)],
            changed: changed(&sources),
            sources: sources.map(|s| s.into_iter().take(12).collect()),
            rounds,
        })
    }
}

/// The evidence in one phrase, for the ledger's summary and the document.
pub fn words(n: &NoiseEvidence) -> String {
    let top = |k: usize| {
        n.sources[k]
            .first()
            .map_or("nothing attributed".to_string(), |s| {
                format!("top {} {:.1} µs/s", label(s), s.us_per_s)
            })
    };
    let mut w = format!(
        "noise lost {:.1} -> {:.1} µs/s, longest gap {:.1} -> {:.1} µs ({} attribution; as found {}, applied {})",
        n.lost_us_per_s[0],
        n.lost_us_per_s[1],
        n.max_gap_us[0],
        n.max_gap_us[1],
        n.attribution,
        top(0),
        top(1)
    );
    if !n.changed.is_empty() {
        w += &format!("; changed: {}", n.changed.join(", "));
    }
    w
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A leg's sources, their time per CPU-second measured over its rounds.
fn leg_sources(rounds: &[Evidence]) -> Vec<LegSource> {
    let cpus: usize = rounds.iter().map(|e| e.cpus.len()).sum();
    let mut acc: BTreeMap<(String, String, Option<u32>), f64> = BTreeMap::new();
    for e in rounds {
        for c in &e.cpus {
            // lost µs/s times the source's share: its µs/s in that run.
            for s in &c.top {
                *acc.entry((s.kind.clone(), s.name.clone(), s.pid))
                    .or_default() += c.lost_us_per_s * s.share;
            }
        }
    }
    let mut v: Vec<LegSource> = acc
        .into_iter()
        .map(|((kind, name, pid), sum)| LegSource {
            kind,
            name,
            pid,
            us_per_s: round1(sum / cpus.max(1) as f64),
        })
        .collect();
    v.sort_by(|a, b| b.us_per_s.total_cmp(&a.us_per_s));
    v
}

fn label(s: &LegSource) -> String {
    match s.pid {
        Some(p) => format!("{} {} (pid {p})", s.kind, s.name),
        None => format!("{} {}", s.kind, s.name),
    }
}

/// Sources that moved by at least half (and 1 µs/s) between the legs.
fn changed(legs: &[Vec<LegSource>; 2]) -> Vec<String> {
    let find = |k: usize, s: &LegSource| {
        legs[k]
            .iter()
            .find(|o| o.kind == s.kind && o.name == s.name && o.pid == s.pid)
            .map_or(0.0, |o| o.us_per_s)
    };
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for s in legs[0].iter().chain(&legs[1]) {
        let l = label(s);
        if seen.contains(&l) {
            continue;
        }
        seen.push(l.clone());
        let (a, b) = (find(0, s), find(1, s));
        let (hi, lo) = (a.max(b), a.min(b));
        if hi >= 1.0 && lo <= hi / 2.0 {
            out.push(match (a, b) {
                (_, 0.0) => format!("{l}: {a:.1} µs/s as found, gone applied"),
                (0.0, _) => format!("{l}: absent as found, {b:.1} µs/s applied"),
                _ => format!("{l}: {a:.1} -> {b:.1} µs/s"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::noise_attrib::{CpuEvidence, Source};

    fn ev(lost: f64, top: &[(&str, Option<u32>, f64)]) -> Evidence {
        Evidence {
            attribution: "tracefs".into(),
            cpus: vec![CpuEvidence {
                cpu: 1,
                lost_us_per_s: lost,
                gaps: 10,
                max_gap_ns: 100,
                top: top
                    .iter()
                    .map(|&(name, pid, share)| Source {
                        kind: if pid.is_some() { "thread" } else { "irq" }.into(),
                        name: name.into(),
                        pid,
                        count: 1,
                        time_ns: 1,
                        share,
                        estimated: false,
                    })
                    .collect(),
                unexplained_share: 0.0,
            }],
        }
    }

    #[test]
    fn a_neighbour_gone_in_the_applied_legs_is_named_as_changed() {
        let mut p = Pool::default();
        for _ in 0..2 {
            let found = ev(1000.0, &[("noisy", Some(77), 0.9), ("LOC", None, 0.05)]);
            p.add(false, Some(serde_json::to_value(found).unwrap()));
            let applied = ev(60.0, &[("LOC", None, 0.8)]);
            p.add(true, Some(serde_json::to_value(applied).unwrap()));
        }
        let r = p.report().unwrap();
        assert_eq!(r.lost_us_per_s, [1000.0, 60.0]);
        assert_eq!(r.max_gap_us, [0.1, 0.1]);
        assert_eq!(r.sources[0][0].name, "noisy");
        assert_eq!(r.sources[0][0].us_per_s, 900.0);
        assert!(r.sources[1].iter().all(|s| s.name != "noisy"));
        assert_eq!(
            r.changed,
            vec!["thread noisy (pid 77): 900.0 µs/s as found, gone applied".to_string()],
            "LOC: 50 -> 48 µs/s is no change"
        );
        assert_eq!(r.rounds[1].len(), 2);
    }

    #[test]
    fn no_evidence_no_report() {
        assert!(Pool::default().report().is_none());
    }
}

#[cfg(test)]
#[path = "noise_sim.rs"]
mod sim;
