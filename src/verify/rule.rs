//! The decision over per-round log ratios d_r = ln(applied / as found), and
//! its sequential design. `decide` is the whole rule: verify calls it at each
//! look, and the simulations below call it on synthetic log ratios.
//!
//! - Looks: after the first `rounds`, then after each batch, up to
//!   `max_rounds` (at most [`MAX_ROUNDS`]).
//! - Alpha is split equally over the looks (Bonferroni): each look's interval
//!   is a Student t interval at `1 - ALPHA / looks`. Whatever the looks'
//!   correlation, the chance that any look errs is at most [`ALPHA`]. An equal
//!   split (not O'Brien-Fleming) because the first look must still find a
//!   large effect in 5 or 6 rounds, where O'Brien-Fleming's early bound is
//!   tens of standard errors wide.
//! - The per-round SD is floored at [`SD_FLOOR`]: five identical quantised
//!   ratios are not a zero-width interval.

use std::cell::RefCell;
use std::collections::HashMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Fewer rounds cannot show anything: with 4, a 99 % t interval is
/// ±5.8 standard errors, wider than most effects worth having.
pub const MIN_ROUNDS: usize = 5;
/// `--max-rounds` above this is refused: more looks split alpha thinner and a
/// run that has not decided in 60 rounds is measuring noise.
pub const MAX_ROUNDS: usize = 60;
/// The two-sided error rate of a whole run, over all its looks.
pub const ALPHA: f64 = 0.005;
/// The smallest per-round SD of the log ratio believed (2 %): rounds that agree
/// more closely agree through quantisation (µs clocks, histogram buckets).
pub const SD_FLOOR: f64 = 0.02;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Improved,
    Regressed,
    NoDetectableEffect,
    /// Neither an effect nor its absence was shown (the round cap, an
    /// interrupted run, or a run that could not exercise the knob).
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoDetectableEffect => "no detectable effect",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// Why the rounds stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The interval cleared 1 and the ratio the minimum effect.
    EffectCleared,
    /// The interval lies within the minimum effect on both sides.
    WithinMinimumEffect,
    /// Neither after `max_rounds`: the noise is too large for this effect.
    RoundCap,
    /// Not decided yet: run another batch.
    MoreRounds,
    /// The run could not exercise the knob (its CPU entered no idle state).
    NotExercised,
    /// A signal stopped the run before it decided.
    Interrupted,
    /// The rpc probe lost far more requests in one leg than in the other.
    UnequalLosses,
}

#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct Rule {
    /// The run's two-sided error rate, split equally over its looks.
    pub alpha: f64,
    /// Smallest relative change that counts (0.05 = 5 %).
    pub min_effect: f64,
    /// Rounds before the first look.
    pub rounds: usize,
    /// Rounds added between looks.
    pub batch: usize,
    /// The most rounds a run takes before it gives up on deciding.
    pub max_rounds: usize,
}

impl Rule {
    /// The default design for `rounds` first rounds: batches of half as many,
    /// up to four times as many rounds in all (at most `MAX_ROUNDS`).
    pub fn for_rounds(rounds: usize) -> Rule {
        let rounds = rounds.clamp(MIN_ROUNDS, MAX_ROUNDS);
        Rule {
            alpha: ALPHA,
            min_effect: 0.05,
            rounds,
            batch: rounds.div_ceil(2),
            max_rounds: (rounds * 4).min(MAX_ROUNDS),
        }
    }

    /// The round counts after which the evidence is looked at.
    pub fn looks(&self) -> Vec<usize> {
        let mut at = vec![self.rounds];
        while let Some(&last) = at.last() {
            if last >= self.max_rounds || self.batch == 0 {
                break;
            }
            at.push((last + self.batch).min(self.max_rounds));
        }
        at
    }

    /// Each look's share of `alpha`.
    pub fn look_alpha(&self) -> f64 {
        self.alpha / self.looks().len() as f64
    }

    /// The two-sided t quantile of a look's interval on `n` rounds (cached:
    /// the simulations ask for the same few thousands of times).
    pub fn quantile(&self, n: usize) -> f64 {
        thread_local! {
            static CACHE: RefCell<HashMap<(usize, u64), f64>> = RefCell::new(HashMap::new());
        }
        let df = n.max(2) - 1;
        let p = 1.0 - self.look_alpha() / 2.0;
        CACHE.with(|c| {
            *c.borrow_mut().entry((df, p.to_bits())).or_insert_with(|| {
                let t = StudentsT::new(0.0, 1.0, df as f64).expect("df >= 1");
                t.inverse_cdf(p)
            })
        })
    }
}

impl Default for Rule {
    fn default() -> Rule {
        Rule::for_rounds(6)
    }
}

/// What one look concludes from the log ratios.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Decided {
    /// exp(mean of the log ratios).
    pub ratio: f64,
    /// The interval this look used, at `confidence`.
    pub interval: [f64; 2],
    /// 1 - alpha / looks: the confidence of the interval the decision used.
    pub confidence: f64,
    /// Two-sided p of the one-sample t test of the log ratios against 0 (SD floored).
    pub p_value: f64,
    /// Mean and SD (as observed, not floored) of the log ratios.
    pub mean_log: f64,
    pub sd_log: f64,
    /// The SD was below `SD_FLOOR` and the floor was used.
    pub sd_floored: bool,
    pub verdict: Verdict,
    pub decision: Decision,
    /// When undecided: about how many more rounds at this noise would decide
    /// (`None`: no number would, or nothing is undecided).
    pub more_rounds_needed: Option<usize>,
}

pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, f64::NAN);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Rounds in all for a half-width `q · sd / √n` of at most `gap` (log units).
pub fn rounds_for(q: f64, sd: f64, gap: f64) -> Option<usize> {
    (gap > 0.0).then(|| ((q * sd / gap).powi(2)).ceil() as usize)
}

/// The rule at one look: `logs` are the usable rounds' log ratios,
/// `rounds_run` the rounds run (some may have no ratio).
pub fn decide(logs: &[f64], rounds_run: usize, rule: &Rule) -> Decided {
    let n = logs.len();
    let (mean, sd) = mean_sd(logs);
    let sd_used = if sd.is_finite() { sd.max(SD_FLOOR) } else { sd };
    let q = rule.quantile(n);
    let (interval, p_value) = if n >= 2 {
        let se = sd_used / (n as f64).sqrt();
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df >= 1");
        let p = 2.0 * (1.0 - t.cdf((mean / se).abs()));
        ([(mean - q * se).exp(), (mean + q * se).exp()], p)
    } else {
        ([0.0, f64::INFINITY], f64::NAN)
    };
    let ratio = if n > 0 { mean.exp() } else { f64::NAN };
    let (lo, hi) = (interval[0], interval[1]);
    let (down, up) = (1.0 - rule.min_effect, 1.0 + rule.min_effect);
    let (verdict, decision) = if n >= MIN_ROUNDS && hi < 1.0 && ratio <= down {
        (Verdict::Improved, Decision::EffectCleared)
    } else if n >= MIN_ROUNDS && lo > 1.0 && ratio >= up {
        (Verdict::Regressed, Decision::EffectCleared)
    } else if n >= MIN_ROUNDS && lo >= down && hi <= up {
        (Verdict::NoDetectableEffect, Decision::WithinMinimumEffect)
    } else if rounds_run >= rule.max_rounds {
        (Verdict::Inconclusive, Decision::RoundCap)
    } else {
        (Verdict::Inconclusive, Decision::MoreRounds)
    };
    let more_rounds_needed = (verdict == Verdict::Inconclusive && n >= 2)
        .then(|| {
            // Whichever comes first: the interval inside the minimum effect,
            // or clear of 1 with the ratio past it. The SD is pooled over
            // every round so far; the gap to the edge is at least the mean's
            // standard error, since a smaller gap is within the mean's own
            // noise (dividing by it made the count jump 180 -> 114,814 -> 2,143).
            let se = sd_used / (n as f64).sqrt();
            let edge = up.ln().min(-down.ln());
            let within = rounds_for(q, sd_used, (edge - mean.abs()).max(se));
            let clear = (mean.abs() >= up.ln().min(-down.ln()))
                .then(|| rounds_for(q, sd_used, mean.abs()))
                .flatten();
            within
                .into_iter()
                .chain(clear)
                .min()
                .map(|all| all.saturating_sub(n).max(1))
        })
        .flatten();
    Decided {
        ratio,
        interval,
        confidence: 1.0 - rule.look_alpha(),
        p_value,
        mean_log: mean,
        sd_log: sd,
        sd_floored: sd.is_finite() && sd < SD_FLOOR,
        verdict,
        decision,
        more_rounds_needed,
    }
}

/// An expectation's outcome: shown, contradicted, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Met,
    NotMet,
    Inconclusive,
}

/// Non-inferiority: is the ratio at most `limit` (`upper`: no-higher) or at
/// least `limit` (no-lower)? Met only when the whole interval is on the
/// allowed side, not met only when the whole interval is past it.
pub fn within(d: &Decided, limit: f64, upper: bool) -> Outcome {
    interval_within(d.interval, limit, upper)
}

/// [`within`] on an interval alone (an analysis's).
pub fn interval_within([lo, hi]: [f64; 2], limit: f64, upper: bool) -> Outcome {
    match upper {
        true if hi <= limit => Outcome::Met,
        true if lo > limit => Outcome::NotMet,
        false if lo >= limit => Outcome::Met,
        false if hi < limit => Outcome::NotMet,
        _ => Outcome::Inconclusive,
    }
}

/// A change of at least a margin: is the ratio past `limit` (below it for
/// `lower`, above it for `higher`)? Met only when the whole interval is past
/// it, not met only when the whole interval falls short of it (the interval
/// excludes `limit` on the near side), otherwise inconclusive: a knob that
/// delivers exactly its margin straddles it, and a point estimate would call
/// it contradicted half the time.
pub fn past(d: &Decided, limit: f64, lower: bool) -> Outcome {
    // `lower` by a margin is `no-higher` than the margin; `higher` is `no-lower`.
    within(d, limit, lower)
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
