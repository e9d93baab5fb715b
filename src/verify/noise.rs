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

/// Changed sources of one kind and name, their pids together.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChangedName {
    pub kind: String,
    pub name: String,
    /// How many pids (0: a source without one, an interrupt).
    pub pids: usize,
    /// Their time per second measured, as found and applied (µs/s).
    pub us_per_s: [f64; 2],
}

/// How many names the words show; the rest are counted (all in the JSON).
const CHANGED_SHOWN: usize = 5;

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
    /// that appear in one only), in words: every one, a pid each.
    pub changed: Vec<String>,
    /// The same sources by name (short-lived processes are one name with
    /// many pids), largest change first: what people read.
    pub changed_by_name: Vec<ChangedName>,
    /// The CPUs measured (any round, either leg): what the document's
    /// isolation section matches without the per-round detail.
    pub cpus: Vec<u32>,
    /// Each round's attribution, per leg (in the ledger: in the samples file).
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
        let mut cpus: Vec<u32> = rounds
            .iter()
            .flatten()
            .flat_map(|e| e.cpus.iter().map(|c| c.cpu))
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        Some(NoiseEvidence {
            cpus,
            attribution: rounds
                .iter()
                .flatten()
                .next()
                .map_or(String::new(), |e| e.attribution.clone()),
            lost_us_per_s: [lost(0), lost(1)],
            max_gap_us: [max_gap(0), max_gap(1)],
            changed: changed(&sources).into_iter().map(|c| c.words).collect(),
            changed_by_name: by_name(changed(&sources)),
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
    if !n.changed_by_name.is_empty() {
        w += &format!("; changed: {}", changed_words(&n.changed_by_name));
    }
    w
}

/// The largest changes by name, then how many more (every one is in the JSON).
pub fn changed_words(names: &[ChangedName]) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .take(CHANGED_SHOWN)
        .map(|c| {
            let who = match c.pids {
                0 | 1 => format!("{} {}", c.kind, c.name),
                n => format!("{} {} ({n} pids)", c.kind, c.name),
            };
            match c.us_per_s {
                [a, 0.0] => format!("{who}: {a:.1} µs/s as found, gone applied"),
                [0.0, b] => format!("{who}: absent as found, {b:.1} µs/s applied"),
                [a, b] => format!("{who}: {a:.1} -> {b:.1} µs/s"),
            }
        })
        .collect();
    if names.len() > CHANGED_SHOWN {
        parts.push(format!(
            "{} more (noise.changed in --format json)",
            names.len() - CHANGED_SHOWN
        ));
    }
    parts.join(", ")
}

/// Changes grouped by kind and name, largest absolute change first.
fn by_name(changes: Vec<Change>) -> Vec<ChangedName> {
    let mut acc: Vec<ChangedName> = Vec::new();
    for c in changes {
        let pids = usize::from(c.pid.is_some());
        match acc
            .iter_mut()
            .find(|g| g.kind == c.kind && g.name == c.name)
        {
            Some(g) => {
                g.pids += pids;
                g.us_per_s = [g.us_per_s[0] + c.us_per_s[0], g.us_per_s[1] + c.us_per_s[1]];
            }
            None => acc.push(ChangedName {
                kind: c.kind,
                name: c.name,
                pids,
                us_per_s: c.us_per_s,
            }),
        }
    }
    for g in &mut acc {
        g.us_per_s = g.us_per_s.map(round1);
    }
    acc.sort_by(|a, b| {
        let d = |g: &ChangedName| (g.us_per_s[0] - g.us_per_s[1]).abs();
        d(b).total_cmp(&d(a)).then_with(|| a.name.cmp(&b.name))
    });
    acc
}

/// One changed source: its words and its figures.
struct Change {
    kind: String,
    name: String,
    pid: Option<u32>,
    us_per_s: [f64; 2],
    words: String,
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
fn changed(legs: &[Vec<LegSource>; 2]) -> Vec<Change> {
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
            out.push(Change {
                kind: s.kind.clone(),
                name: s.name.clone(),
                pid: s.pid,
                us_per_s: [a, b],
                words: match (a, b) {
                    (_, 0.0) => format!("{l}: {a:.1} µs/s as found, gone applied"),
                    (0.0, _) => format!("{l}: absent as found, {b:.1} µs/s applied"),
                    _ => format!("{l}: {a:.1} -> {b:.1} µs/s"),
                },
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

    /// Issue 49 item 4: a hundred short-lived processes, one pid each, read
    /// as one name with its pid count; past five names the rest are counted.
    #[test]
    fn short_lived_processes_are_grouped_by_name_and_capped() {
        let mut p = Pool::default();
        let mut found: Vec<(String, Option<u32>, f64)> = (0..100)
            .map(|i| ("sh".to_string(), Some(1000 + i), 0.005))
            .collect();
        for n in 0..7 {
            found.push((format!("worker{n}"), Some(50 + n), 0.01));
        }
        let top: Vec<(&str, Option<u32>, f64)> =
            found.iter().map(|(n, p, s)| (n.as_str(), *p, *s)).collect();
        for _ in 0..2 {
            p.add(false, Some(serde_json::to_value(ev(1000.0, &top)).unwrap()));
            p.add(
                true,
                Some(serde_json::to_value(ev(60.0, &[("LOC", None, 0.8)])).unwrap()),
            );
        }
        let r = p.report().unwrap();
        assert_eq!(
            r.changed.len(),
            108,
            "every pid stays in the JSON (and LOC)"
        );
        assert_eq!(r.changed_by_name.len(), 9);
        assert_eq!(r.changed_by_name[0].name, "sh");
        assert_eq!(r.changed_by_name[0].pids, 100);
        assert_eq!(r.changed_by_name[0].us_per_s, [500.0, 0.0]);
        let w = words(&r);
        let cell = w.split("; changed: ").nth(1).unwrap();
        assert!(
            cell.starts_with("thread sh (100 pids): 500.0 µs/s as found, gone applied"),
            "{cell}"
        );
        assert!(
            cell.ends_with("4 more (noise.changed in --format json)"),
            "{cell}"
        );
        assert_eq!(cell.matches("pid").count(), 1, "{cell}");
        assert!(cell.len() < 400, "{} chars: {cell}", cell.len());
    }

    #[test]
    fn no_evidence_no_report() {
        assert!(Pool::default().report().is_none());
    }
}

#[cfg(test)]
#[path = "noise_sim.rs"]
mod sim;
