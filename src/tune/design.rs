//! The search's design, fixed before the first round: every comparison it
//! may make with its share of the whole search's alpha, the rounds the
//! budget allows each, and the minimum detectable effect at the host's noise.
//!
//! The error budget: the search accepts a step only when a step comparison's
//! verdict is `improved`, and each step comparison (one per candidate value
//! that writes something) is made at most once whatever path the search
//! takes. Its rule spends `alpha / steps`, split again over its looks
//! (`verify::rule`); by the union bound the chance that any step with no
//! true effect is accepted is at most `alpha`. Shams, the confirmation and
//! the pruning can only report or remove, never add a knob: they use the
//! same rule but spend none of the step budget.

use anyhow::{Result, bail};
use serde::Serialize;

use crate::verify::rule::{ALPHA, MAX_ROUNDS, Rule};

/// Rounds before a comparison's first look, and between looks (even: a
/// look ends a mirrored block of the leg order).
pub const FIRST_LOOK: usize = 6;
pub const BATCH: usize = 6;
/// As-found rounds (A/A, nothing written) that measure the noise before the plan.
pub const PILOT_ROUNDS: usize = 6;
/// How much futility (a candidate dropped once its 90 % bound cannot reach
/// the fixed-rounds MDE) widens the effect found 80 % of the time:
/// calibrated by `tune::sim` (planted at 1x the stated MDE: found 80 %).
pub const FUTILITY_WIDENING: f64 = 1.2;

/// One-sided confidence of the futility bound that drops a candidate.
pub const FUTILITY_CONFIDENCE: f64 = 0.9;
/// The most values per knob and knobs per space: each value is a leg.
pub const MAX_VALUES: usize = 12;
pub const MAX_KNOBS: usize = 16;
/// The normal quantile of 80 % power.
const Z_POWER: f64 = 0.8416;

/// What a comparison is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The current configuration against it with one knob moved: may be accepted.
    Step,
    /// The current configuration against itself (nothing written): a negative control.
    Sham,
    /// The pilot: as found against as found, for the noise.
    Pilot,
    /// The accepted set against the host as found, in a fresh run.
    Together,
    /// The accepted set against it without one knob.
    Share,
    /// The backward elimination's re-test of a candidate in the reduced set.
    Retest,
}

/// A limit a step must not break on another metric of the same samples
/// (`--guard p99:no-higher:5%`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Guard {
    pub metric: crate::verify::paired::Metric,
    /// `no-higher` (true) or `no-lower`.
    pub upper: bool,
    /// The ratio's limit: 1.05 for no-higher by 5 %.
    pub limit: f64,
    pub text: String,
}

/// One knob of the space as the core sees it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Dim {
    pub id: String,
    pub values: Vec<String>,
    /// The value the host has now, when it is one of `values` (its leg is a sham).
    pub as_found: Option<usize>,
}

impl Dim {
    /// The values that write something: the step candidates.
    pub fn steps(&self) -> usize {
        self.values.len() - self.as_found.is_some() as usize
    }

    /// Legs of its race: the current configuration, a sham, each step.
    fn legs(&self) -> usize {
        2 + self.steps()
    }
}

/// One planned comparison with its share of alpha.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Planned {
    /// Which race (knob) it belongs to, from 1.
    pub stage: usize,
    pub knob: String,
    pub value: String,
    pub role: Role,
    /// Its two-sided alpha, before the split over its looks.
    pub alpha: f64,
}

/// The settings a search is planned from.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The stated false-step rate of the whole search.
    pub alpha: f64,
    /// The smallest change that counts.
    pub min_effect: f64,
    /// The legs the budget allows in all (the pilot's included).
    pub budget_legs: usize,
    pub seed: u64,
    pub metric: crate::verify::paired::Metric,
    /// Limits a step must not break on other metrics.
    pub guards: Vec<Guard>,
}

impl Settings {
    pub fn new(budget_legs: usize, seed: u64) -> Settings {
        Settings {
            alpha: ALPHA,
            min_effect: 0.05,
            budget_legs,
            seed,
            metric: Default::default(),
            guards: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Plan {
    /// The stated false-step rate: the chance that the search accepts any step with no true effect.
    pub alpha: f64,
    /// Each step comparison's share of it.
    pub step_alpha: f64,
    pub min_effect: f64,
    pub comparisons: Vec<Planned>,
    pub steps: usize,
    pub shams: usize,
    pub first_look: usize,
    pub batch: usize,
    /// The round cap of every comparison (the looks the alpha is split over).
    pub max_rounds: usize,
    /// Rounds per comparison the budget allows every race at worst; rounds
    /// saved by comparisons that decide early go to later undecided ones.
    pub planned_rounds: usize,
    pub budget_legs: usize,
    /// Legs if every race ran `planned_rounds` (pilot and confirmation included).
    pub worst_legs: usize,
    /// SD of the pilot's per-round log ratios (floored at 2 %).
    pub pilot_sd: Option<f64>,
    /// The relative improvement a step finds 80 % of the time in `planned_rounds`.
    pub mde: Option<f64>,
    /// A candidate is dropped once the one-sided 90 % bound shows less improvement than this.
    pub futility_effect: f64,
    /// Seconds per leg measured in the pilot (null: not measured).
    pub leg_seconds: Option<f64>,
    /// What would resolve the minimum effect, when the budget cannot.
    pub advice: Vec<String>,
}

/// Legs of the whole search at `rounds` per comparison.
fn worst_legs(dims: &[Dim], rounds: usize) -> usize {
    let races: usize = dims.iter().map(Dim::legs).sum();
    2 * PILOT_ROUNDS + (races + dims.len() + 2) * rounds
}

impl Plan {
    /// The rule of a step or sham comparison.
    pub fn step_rule(&self) -> Rule {
        Rule {
            alpha: self.step_alpha,
            min_effect: self.min_effect,
            rounds: self.first_look,
            batch: self.batch,
            max_rounds: self.max_rounds,
        }
    }

    /// The rule of the confirmation's `comparisons` (as verify's bundle splits it).
    pub fn confirm_rule(&self, comparisons: usize) -> Rule {
        Rule {
            alpha: self.alpha / comparisons.max(1) as f64,
            ..self.step_rule()
        }
    }

    /// The relative effect found 80 % of the time at SD `sd` in `rounds`
    /// by the search as it runs: the fixed-rounds figure widened by
    /// [`FUTILITY_WIDENING`], since futility drops a candidate early.
    pub fn mde_at(&self, sd: f64, rounds: usize) -> f64 {
        1.0 - (-FUTILITY_WIDENING * self.fixed_mde_log(sd, rounds)).exp()
    }

    /// The effect a candidate must be able to show to stay in its race:
    /// the fixed-rounds MDE (where more rounds would not find it 80 % of the time).
    pub fn futility_at(&self, sd: f64, rounds: usize) -> f64 {
        1.0 - (-self.fixed_mde_log(sd, rounds)).exp()
    }

    /// ln(1 / (1 - MDE)) of a test of `rounds` fixed rounds (no futility).
    fn fixed_mde_log(&self, sd: f64, rounds: usize) -> f64 {
        let rule = self.step_rule();
        let se = sd.max(crate::verify::rule::SD_FLOOR) / (rounds as f64).sqrt();
        let need = (rule.quantile(rounds) + Z_POWER) * se;
        let me = -(1.0 - self.min_effect).ln() + Z_POWER * se;
        need.max(me)
    }

    /// Does the noise, not the minimum effect, bound what `rounds` find?
    pub fn noise_bound(&self, sd: f64, rounds: usize) -> bool {
        let se = sd.max(crate::verify::rule::SD_FLOOR) / (rounds as f64).sqrt();
        self.step_rule().quantile(rounds) * se > -(1.0 - self.min_effect).ln()
    }

    pub fn worst_legs_at(&self, dims: &[Dim], rounds: usize) -> usize {
        worst_legs(dims, rounds)
    }
}

/// The plan for `dims` within the budget, from the pilot's SD when measured.
pub fn plan(dims: &[Dim], s: &Settings, pilot_sd: Option<f64>) -> Result<Plan> {
    if dims.is_empty() {
        bail!("the space has no knob to search");
    }
    let steps: usize = dims.iter().map(Dim::steps).sum();
    if steps == 0 {
        bail!("every value in the space is the host's own: nothing to search");
    }
    let mut comparisons = Vec::new();
    for (i, d) in dims.iter().enumerate() {
        comparisons.push(Planned {
            stage: i + 1,
            knob: d.id.clone(),
            value: "(current)".into(),
            role: Role::Sham,
            alpha: s.alpha / steps as f64,
        });
        for (j, v) in d.values.iter().enumerate() {
            if d.as_found == Some(j) {
                continue;
            }
            comparisons.push(Planned {
                stage: i + 1,
                knob: d.id.clone(),
                value: v.clone(),
                role: Role::Step,
                alpha: s.alpha / steps as f64,
            });
        }
    }
    let fits = |r: usize| worst_legs(dims, r) <= s.budget_legs;
    let planned = (1..=MAX_ROUNDS / BATCH)
        .map(|k| k * BATCH)
        .filter(|&r| r >= FIRST_LOOK)
        .rfind(|&r| fits(r));
    let Some(planned_rounds) = planned else {
        bail!(
            "the budget allows {} legs; the smallest search of this space ({} rounds per comparison) needs {}: give a longer --budget or fewer values",
            s.budget_legs,
            FIRST_LOOK,
            worst_legs(dims, FIRST_LOOK)
        );
    };
    let mut p = Plan {
        alpha: s.alpha,
        step_alpha: s.alpha / steps as f64,
        min_effect: s.min_effect,
        shams: dims.len(),
        steps,
        comparisons,
        first_look: FIRST_LOOK,
        batch: BATCH,
        max_rounds: MAX_ROUNDS,
        planned_rounds,
        budget_legs: s.budget_legs,
        worst_legs: worst_legs(dims, planned_rounds),
        pilot_sd,
        mde: None,
        futility_effect: s.min_effect,
        leg_seconds: None,
        advice: Vec::new(),
    };
    if let Some(sd) = pilot_sd {
        let mde = p.mde_at(sd, planned_rounds);
        p.mde = Some(mde);
        p.futility_effect = s.min_effect.max(p.futility_at(sd, planned_rounds));
        p.advice = advice(&p, dims, sd);
    }
    Ok(p)
}

/// What would let the search find the minimum effect, when the plan cannot.
fn advice(p: &Plan, dims: &[Dim], sd: f64) -> Vec<String> {
    if !p.noise_bound(sd, p.planned_rounds) {
        return Vec::new();
    }
    let mut out = Vec::new();
    match (FIRST_LOOK..=MAX_ROUNDS)
        .step_by(BATCH)
        .find(|&r| !p.noise_bound(sd, r))
    {
        Some(r) => out.push(format!(
            "a budget of {} legs ({r} rounds per comparison) would bring the effect found 80 % of the time down to {:.1} %, near the {:.0} % minimum",
            worst_legs(dims, r),
            p.mde_at(sd, r) * 100.0,
            p.min_effect * 100.0
        )),
        None => {
            // The SD that MAX_ROUNDS resolves: k samples per round cut the SD by about √k.
            let mut need = sd;
            while p.noise_bound(need, MAX_ROUNDS) && need > 1e-4 {
                need *= 0.95;
            }
            out.push(format!(
                "no budget resolves {:.0} % at this noise (per-round SD {:.1} %): even {MAX_ROUNDS} rounds need a per-round SD of {:.1} %, about {:.0}x the samples per round",
                p.min_effect * 100.0,
                sd * 100.0,
                need * 100.0,
                (sd / need).powi(2).ceil()
            ));
        }
    }
    if p.steps > 1 {
        out.push(format!(
            "fewer candidate values raise each step's share of the error rate (now {:.2e} for each of {} steps) and shorten every race",
            p.step_alpha, p.steps
        ));
    }
    out
}

impl Plan {
    /// The plan in words, for the first lines of a run and `--plan`.
    pub fn words(&self) -> Vec<String> {
        let t = |legs: usize| match self.leg_seconds {
            Some(s) => format!(" (about {})", minutes(legs as f64 * s)),
            None => String::new(),
        };
        let mut out = vec![format!(
            "{} steps and {} shams, each race up to {} rounds ({} guaranteed by the budget); false-step rate of the whole search at most {:.2} % ({:.2e} per step, split over its looks)",
            self.steps,
            self.shams,
            self.max_rounds,
            self.planned_rounds,
            self.alpha * 100.0,
            self.step_alpha
        )];
        out.push(format!(
            "at most {} legs of the budget's {}{}",
            self.worst_legs,
            self.budget_legs,
            t(self.worst_legs)
        ));
        if let (Some(mde), Some(sd)) = (self.mde, self.pilot_sd) {
            out.push(format!(
                "at this host's noise (per-round SD {:.1} % in the pilot), an effect of {:.1} % or more is found 80 % of the time",
                sd * 100.0,
                mde * 100.0
            ));
        }
        out.extend(self.advice.iter().cloned());
        out
    }
}

/// Seconds as people read a duration.
pub fn minutes(s: f64) -> String {
    if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(n: usize, values: usize) -> Vec<Dim> {
        (0..n)
            .map(|i| Dim {
                id: format!("k{i}"),
                values: (0..values).map(|v| v.to_string()).collect(),
                as_found: (i == 0).then_some(0),
            })
            .collect()
    }

    #[test]
    fn the_step_shares_add_up_to_the_stated_rate() {
        let d = dims(3, 3);
        let p = plan(&d, &Settings::new(10_000, 1), Some(0.05)).unwrap();
        assert_eq!(p.steps, 8, "the as-found value of k0 is a sham, not a step");
        let spent: f64 = p
            .comparisons
            .iter()
            .filter(|c| c.role == Role::Step)
            .map(|c| c.alpha)
            .sum();
        assert!((spent - ALPHA).abs() < 1e-15, "{spent}");
        assert_eq!(p.planned_rounds, 60);
        assert!(p.worst_legs <= 10_000);
    }

    #[test]
    fn a_smaller_budget_plans_fewer_rounds_and_a_larger_mde() {
        let d = dims(3, 3);
        let big = plan(&d, &Settings::new(10_000, 1), Some(0.05)).unwrap();
        assert!(big.advice.is_empty(), "{:?}", big.advice);
        let small = plan(&d, &Settings::new(worst_legs(&d, 12), 1), Some(0.05)).unwrap();
        assert_eq!(small.planned_rounds, 12);
        assert!(small.mde.unwrap() > big.mde.unwrap());
        assert!(!small.advice.is_empty() && small.advice[0].contains("budget of"));
        let e = plan(&d, &Settings::new(50, 1), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs") && e.contains("--budget"), "{e}");
        // Heavy noise: no budget does it; more samples per round would.
        let noisy = plan(&d, &Settings::new(10_000, 1), Some(0.5)).unwrap();
        assert!(
            noisy.advice[0].contains("samples per round"),
            "{:?}",
            noisy.advice
        );
    }
}
