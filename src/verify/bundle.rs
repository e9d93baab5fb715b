//! `verify K1 K2 K3`: legs as found, all together, and all but one for each
//! knob, in every round (shuffled, seeded). The bundle's effect is all
//! together / as found; a knob's share is all together / all but it (below
//! 1: the bundle is better with it). Knobs without a detectable share are
//! named as candidates to drop.
//!
//! The run's error rate is split equally over the 1 + n comparisons, so the
//! chance that any verdict errs is the two-leg verdict's own.

use anyhow::{Result, bail};
use serde::Serialize;

use super::multi::{self, MultiRun, Variant};
use super::paired::{Analysis, Decision, Verdict};
use super::{Options, placement};
use crate::apply::Session;
use crate::manifest::Knob;

/// The most knobs a bundle takes: each adds a leg to every round.
pub const MAX_KNOBS: usize = 8;

/// One knob's share of the bundle's effect.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Share {
    pub knob: String,
    /// All together / all but this knob, of the metric (below 1: it helps).
    pub ratio: f64,
    pub interval: [f64; 2],
    /// improved: the bundle is detectably better with it; no-detectable-effect:
    /// it adds nothing measurable; regressed: the bundle is better without it.
    pub verdict: Verdict,
    pub decision: Decision,
    /// ln(its ratio) / ln(the bundle's ratio): the part of the bundle's effect
    /// lost without it (point estimate; null when the bundle's ratio is 1).
    pub fraction: Option<f64>,
    pub words: String,
    pub analysis: Analysis,
}

/// A knob named as a candidate to drop, with why.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Drop {
    pub knob: String,
    pub reason: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BundleReport {
    pub host: String,
    pub knobs: Vec<String>,
    pub probe: String,
    pub settings: serde_json::Value,
    pub seed: u64,
    pub settle_ms: u64,
    pub rounds: usize,
    /// Legs per round and the estimated time, as said before the run.
    pub plan: multi::Plan,
    /// Each round's leg order: `as found`, `all`, `without KNOB`.
    pub order: Vec<Vec<String>>,
    /// All together against as found.
    pub together: Analysis,
    pub together_words: String,
    pub shares: Vec<Share>,
    pub drop_candidates: Vec<Drop>,
    /// The shares' fractions summed (null when any is undefined): near 1 the
    /// shares add up; far from it the knobs interact.
    pub fractions_sum: Option<f64>,
    /// Said when the fractions do not add up (see [`interaction`]).
    pub interaction: Option<String>,
    pub placement: placement::Placement,
    pub restored: bool,
    pub interrupted: Option<String>,
    pub warnings: Vec<String>,
    pub ledger: Option<String>,
}

/// The legs of a bundle of `knobs`: the seam `verify --profile NAME` calls
/// with a profile's knob list.
pub(super) fn legs<'k>(knobs: &[&'k Knob]) -> Result<Vec<Variant<'k>>> {
    if knobs.len() < 2 || knobs.len() > MAX_KNOBS {
        bail!(
            "verify takes one knob, or a bundle of 2 to {MAX_KNOBS} (got {}): each knob of a bundle adds a leg to every round",
            knobs.len()
        );
    }
    for (i, k) in knobs.iter().enumerate() {
        if knobs[..i].iter().any(|o| o.id == k.id) {
            bail!("{} is given twice", k.id);
        }
    }
    let mut v = vec![
        Variant {
            label: "as found".into(),
            knobs: Vec::new(),
        },
        Variant {
            label: "all".into(),
            knobs: knobs.to_vec(),
        },
    ];
    v.extend(knobs.iter().map(|k| Variant {
        label: format!("without {}", k.id),
        knobs: knobs.iter().copied().filter(|o| o.id != k.id).collect(),
    }));
    Ok(v)
}

/// Checks the bundle (before anything is written) and runs it.
pub fn run(
    session: &Session,
    knobs: &[&Knob],
    opts: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<BundleReport> {
    let rule = super::rule_for(opts)?;
    let legs = legs(knobs)?;
    // A knob already in effect has no share to measure: refused as `verify KNOB` refuses it.
    for k in knobs {
        super::check_verifiable(session, k)?;
    }
    // The knob the probe is placed by: the first with CPUs in its target.
    let place_on = knobs
        .iter()
        .copied()
        .find(|k| {
            k.spec
                .survey(&session.ctx)
                .is_ok_and(|s| s.targets.iter().any(|t| t.cpus.is_some()))
        })
        .unwrap_or(knobs[0]);
    let split = multi::split_rule(rule, knobs.len() + 1);
    let metric = super::primary_metric(place_on);
    let plan = multi::plan(legs.len(), rule, opts);
    progress(&format!(
        "bundle of {}: {}; seed {}",
        knobs
            .iter()
            .map(|k| k.id.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        plan.words(),
        opts.seed
    ));
    let n = legs.len();
    let decided = move |r: &multi::Rounds| {
        let done = |b, v| {
            super::paired::analyze(&r.against(b, v), metric, split).decision != Decision::MoreRounds
        };
        done(0, 1) && (2..n).all(|v| done(v, 1))
    };
    let run = multi::run(session, &legs, place_on, opts, rule, &decided, progress)?;
    Ok(report(
        session, knobs, opts, &legs, run, split, plan, metric,
    ))
}

#[allow(clippy::too_many_arguments)]
fn report(
    session: &Session,
    knobs: &[&Knob],
    opts: &Options,
    legs: &[Variant],
    run: MultiRun,
    split: super::paired::Rule,
    plan: multi::Plan,
    metric: super::paired::Metric,
) -> BundleReport {
    let together = multi::compare(&run, 0, 1, metric, split);
    let shares: Vec<Share> = knobs
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let a = multi::compare(&run, 2 + i, 1, metric, split);
            let fraction = (together.ratio.ln().abs() > 1e-9)
                .then(|| a.ratio.ln() / together.ratio.ln())
                .filter(|f| f.is_finite());
            Share {
                knob: k.id.clone(),
                ratio: a.ratio,
                interval: a.interval,
                verdict: a.verdict,
                decision: a.decision,
                fraction,
                words: format!("all / without {}: {}", k.id, a.verdict_words()),
                analysis: a,
            }
        })
        .collect();
    BundleReport {
        host: session.ctx.name.clone(),
        knobs: knobs.iter().map(|k| k.id.clone()).collect(),
        probe: opts.probe_name.clone(),
        settings: run.rounds.settings.clone(),
        seed: opts.seed,
        settle_ms: opts.settle.as_millis() as u64,
        rounds: run.rounds.samples.len(),
        plan,
        order: run.order_labels(legs),
        together_words: format!("all / as found: {}", together.verdict_words()),
        together,
        drop_candidates: drop_candidates(&shares),
        fractions_sum: fractions_sum(&shares),
        interaction: interaction(&shares),
        shares,
        placement: run.placement,
        restored: run.restored,
        interrupted: run.interrupted,
        warnings: run.warnings,
        ledger: None,
    }
}

/// The sum of the shares' fractions, when every one is defined.
fn fractions_sum(shares: &[Share]) -> Option<f64> {
    shares.iter().map(|s| s.fraction).sum()
}

/// How far the fractions may sum from 1 before the shares are said not to
/// add up (point estimates: a loose bound).
const INTERACTION: f64 = 0.25;

/// Words when the fractions do not add up: below 1 the knobs overlap (each
/// is partly redundant given the others), above 1 they reinforce.
pub fn interaction(shares: &[Share]) -> Option<String> {
    let sum = fractions_sum(shares)?;
    if (sum - 1.0).abs() <= INTERACTION {
        return None;
    }
    let how = if sum < 1.0 {
        "they overlap: part of the effect needs any one of several knobs, so no single one's absence loses it"
    } else {
        "they reinforce: a knob's absence loses more than its own part, as the others work through it"
    };
    Some(format!(
        "the shares' fractions add up to {:.0} %, not 100 %: the knobs interact ({how}); each share is its part given all the others, not its effect alone",
        sum * 100.0
    ))
}

/// Knobs the bundle shows no need of: no detectable share, or better without
/// them. Each is tested with every other knob present: two that do the same
/// thing each look droppable while the other stays, so with more than one
/// candidate the reasons say they are not shown to be jointly droppable.
pub fn drop_candidates(shares: &[Share]) -> Vec<Drop> {
    let mut out = single_drops(shares);
    if out.len() > 1 {
        let names: Vec<String> = out.iter().map(|d| d.knob.clone()).collect();
        for d in &mut out {
            let others: Vec<&str> = names
                .iter()
                .filter(|n| **n != d.knob)
                .map(String::as_str)
                .collect();
            d.reason += &format!(
                "; not shown droppable together with {}: each was tested with the others present, so drop one and verify the reduced bundle before dropping another",
                others.join(", ")
            );
        }
    }
    out
}

fn single_drops(shares: &[Share]) -> Vec<Drop> {
    shares
        .iter()
        .filter_map(|s| {
            let reason = match s.verdict {
                Verdict::NoDetectableEffect => format!(
                    "no detectable share: without it the bundle is within {:.0} % of all together ({})",
                    s.analysis.rule.min_effect * 100.0,
                    s.analysis.interval_words()
                ),
                Verdict::Regressed => format!(
                    "the bundle is better without it ({})",
                    s.analysis.interval_words()
                ),
                _ => return None,
            };
            Some(Drop {
                knob: s.knob.clone(),
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::paired::{Metric, Rule, analyze};

    /// A share whose rounds have `ratio` (all / without it) and whose
    /// fraction of the bundle's effect is `fraction`.
    fn share(knob: &str, ratio: f64, fraction: Option<f64>) -> Share {
        let rounds: Vec<_> = (0..12)
            .map(|r| {
                let a = (100_000.0 * ratio * (1.0 + (r % 2) as f64 * 0.002)) as u64;
                (vec![100_000u64; 9], vec![a; 9])
            })
            .collect();
        let a = analyze(&rounds, Metric::P50, Rule::for_rounds(12));
        Share {
            knob: knob.into(),
            ratio: a.ratio,
            interval: a.interval,
            verdict: a.verdict,
            decision: a.decision,
            fraction,
            words: String::new(),
            analysis: a,
        }
    }

    #[test]
    fn jointly_redundant_knobs_are_not_each_advised_droppable() {
        // Two knobs that do the same thing: without either the bundle keeps
        // its effect, so each has no share; dropping both loses it all.
        let shares = [
            share("a", 1.0, Some(0.0)),
            share("b", 1.0, Some(0.0)),
            share("c", 0.7, Some(0.5)),
        ];
        let d = drop_candidates(&shares);
        assert_eq!(d.len(), 2);
        assert!(
            d[0].reason.contains("not shown droppable together with b"),
            "{}",
            d[0].reason
        );
        assert!(d[1].reason.contains("together with a"), "{}", d[1].reason);
        // Their fractions (0 + 0 + 50 %) do not add up to the bundle's effect.
        let w = interaction(&shares).unwrap();
        assert!(w.contains("add up to 50 %") && w.contains("overlap"), "{w}");
        // One candidate alone: its reason as before, no joint caveat.
        let one = [share("a", 1.0, Some(0.0)), share("c", 0.7, Some(1.0))];
        let d = drop_candidates(&one);
        assert_eq!(d.len(), 1);
        assert!(
            !d[0].reason.contains("not shown droppable"),
            "{}",
            d[0].reason
        );
        assert_eq!(interaction(&one), None);
        let over = [share("a", 0.7, Some(0.8)), share("c", 0.7, Some(0.8))];
        assert!(interaction(&over).unwrap().contains("160 %"));
    }
}
