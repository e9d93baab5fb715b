//! The verdict from paired rounds.
//!
//! Each round runs both legs back to back, in ABBA blocks (see `order`), so a
//! drift that moves the whole round (a noisy minute, a neighbour's burst)
//! cancels in that round's ratio and a leg's position cancels over a block.
//! The round, not the sample, is the unit of evidence: samples of one leg
//! share that leg's few seconds of host state and are not independent, so a
//! test over pooled samples calls noise an effect.
//!
//! The rule, for a metric (p50 unless the expectation names another):
//!
//! 1. Per round r, d_r = ln(applied metric / as-found metric).
//! 2. The ratio is exp(mean d) (= the ratio of the legs' geometric means over
//!    the rounds); its interval exp(mean d ± t · sd/√R), a Student t interval
//!    whose alpha is the run's split equally over its looks (`rule`).
//! 3. After the first `rounds` and then after each batch of further rounds:
//!    - `improved`: the interval lies below 1 and the ratio is at most
//!      1 - min_effect (0.95); `regressed` is the mirror image (1.05);
//!    - `no detectable effect`: the interval lies within
//!      [1 - min_effect, 1 + min_effect]: any effect is smaller than that;
//!    - otherwise more rounds, up to `max_rounds`; then `inconclusive`.

use serde::Serialize;

pub use super::rule::{Decided, Decision, MIN_ROUNDS, Rule, Verdict};
pub use crate::schema::expect::Metric;
use crate::stats;

/// One round's samples of the as-found and the applied leg: ns for the
/// built-in probes (integers, exact in f64 below 2^53), a command's values
/// as read (`command::to_sample`), so a ratio metric of 0.0012 keeps every digit.
pub type Round = (Vec<f64>, Vec<f64>);

/// A leg's samples in one round, by the nearest-rank rule of `stats`.
#[derive(Clone, Debug)]
pub struct RoundFigures {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl RoundFigures {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<RoundFigures> {
        if samples.is_empty() {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let p = |q| stats::percentile_sorted(&v, q);
        Some(RoundFigures {
            p50: p(stats::P50),
            p95: p(stats::P95),
            p99: p(stats::P99),
            p999: p(stats::P999),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }

    /// The value of `m`.
    pub fn get(&self, m: Metric) -> f64 {
        match m {
            Metric::P50 => self.p50,
            Metric::P95 => self.p95,
            Metric::P99 => self.p99,
            Metric::P999 => self.p999,
            Metric::Max => self.max,
            Metric::Mean => self.mean,
        }
    }
}

/// One leg's figures over the rounds: the median across rounds of each round's
/// p50, p95, p99 and max, and the CV of the per-round p50s. In ns for the
/// built-in probes; for a command probe its value as read (in ns for a time
/// unit) when lower is better, the value's inverse when higher is better.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LegFigures {
    pub rounds: usize,
    pub samples: usize,
    pub p50_ns: f64,
    pub p95_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
    pub mean_ns: f64,
    /// Coefficient of variation of the per-round p50s.
    pub cv: f64,
    pub round_p50_ns: Vec<f64>,
}

impl LegFigures {
    fn from_rounds(rounds: &[RoundFigures], samples: usize) -> LegFigures {
        let means: Vec<f64> = rounds.iter().map(|s| s.mean).collect();
        let round_p50_ns: Vec<f64> = rounds.iter().map(|s| s.p50).collect();
        LegFigures {
            rounds: rounds.len(),
            samples,
            p50_ns: pick_rank(rounds, Metric::P50),
            p95_ns: pick_rank(rounds, Metric::P95),
            p99_ns: pick_rank(rounds, Metric::P99),
            p999_ns: pick_rank(rounds, Metric::P999),
            max_ns: pick_rank(rounds, Metric::Max),
            mean_ns: median(&means),
            cv: cv(&round_p50_ns),
            round_p50_ns,
        }
    }

    /// The leg's value of `metric` (median across rounds).
    pub fn get(&self, metric: Metric) -> f64 {
        match metric {
            Metric::P50 => self.p50_ns,
            Metric::P95 => self.p95_ns,
            Metric::P99 => self.p99_ns,
            Metric::P999 => self.p999_ns,
            Metric::Max => self.max_ns,
            Metric::Mean => self.mean_ns,
        }
    }
}

/// The nearest-rank median across rounds of `m` (a value a round had; 0 for none).
fn pick_rank(rounds: &[RoundFigures], m: Metric) -> f64 {
    let mut v: Vec<f64> = rounds.iter().map(|s| s.get(m)).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        stats::percentile_sorted(&v, stats::P50)
    }
}

/// The compared metric in one round that has a ratio.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RoundMetric {
    /// The round's number, from 1.
    pub round: usize,
    pub baseline_ns: f64,
    pub applied_ns: f64,
    pub ratio: f64,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Analysis {
    pub metric: Metric,
    pub baseline: LegFigures,
    pub applied: LegFigures,
    /// applied / as found, per round, of `metric`.
    pub ratios: Vec<f64>,
    /// `metric` per round of each leg, with the round's ratio.
    pub per_round: Vec<RoundMetric>,
    /// Geometric means of `metric` over the rounds with a ratio: their ratio
    /// is `ratio`, the quantity the verdict tests.
    pub baseline_geomean_ns: f64,
    pub applied_geomean_ns: f64,
    /// exp(mean of the per-round log ratios): the typical ratio.
    pub ratio: f64,
    /// The ratio's interval at `confidence`: the one the decision used.
    pub interval: [f64; 2],
    /// 1 - alpha / looks.
    pub confidence: f64,
    /// Two-sided p of the one-sample t test of the log ratios against 0.
    pub p_value: f64,
    /// SD of the per-round log ratios, as observed.
    pub sd_log: f64,
    /// The SD was below the floor (`rule::SD_FLOOR`), and the floor was used.
    pub sd_floored: bool,
    /// When inconclusive: about how many more rounds at this noise would decide.
    pub more_rounds_needed: Option<usize>,
    pub rounds_lower: usize,
    pub rounds_higher: usize,
    pub verdict: Verdict,
    pub decision: Decision,
    pub rule: Rule,
    /// The run stopped on a signal: the analysis is of the rounds completed.
    pub partial: bool,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn cv(v: &[f64]) -> f64 {
    let (mean, sd) = super::rule::mean_sd(v);
    if v.len() < 2 || mean <= 0.0 {
        0.0
    } else {
        sd / mean
    }
}

fn geomean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

/// `rounds[r]` holds round r's samples (ns) of the as-found and the applied leg.
/// `rounds.len()` is the number of rounds run so far; the decision says whether
/// the rule wants more (see `Rule::looks` for when to ask).
pub fn analyze(rounds: &[Round], metric: Metric, rule: Rule) -> Analysis {
    let paired: Vec<(usize, RoundFigures, RoundFigures)> = rounds
        .iter()
        .enumerate()
        .filter_map(|(i, (b, a))| Some((i, RoundFigures::of(b)?, RoundFigures::of(a)?)))
        .collect();
    let b_sum: Vec<RoundFigures> = paired.iter().map(|p| p.1.clone()).collect();
    let a_sum: Vec<RoundFigures> = paired.iter().map(|p| p.2.clone()).collect();
    let baseline = LegFigures::from_rounds(&b_sum, rounds.iter().map(|r| r.0.len()).sum());
    let applied = LegFigures::from_rounds(&a_sum, rounds.iter().map(|r| r.1.len()).sum());
    // A zero metric (a clock that did not move) has no ratio; such rounds drop out.
    let per_round: Vec<RoundMetric> = paired
        .iter()
        .map(|(i, b, a)| {
            let (b, a) = (b.get(metric), a.get(metric));
            RoundMetric {
                round: i + 1,
                baseline_ns: b,
                applied_ns: a,
                ratio: a / b,
            }
        })
        .filter(|r| r.ratio.is_finite() && r.ratio > 0.0)
        .collect();
    let ratios: Vec<f64> = per_round.iter().map(|r| r.ratio).collect();
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let d = super::rule::decide(&logs, rounds.len(), &rule);
    Analysis {
        metric,
        baseline,
        applied,
        rounds_lower: ratios.iter().filter(|&&r| r < 1.0).count(),
        rounds_higher: ratios.iter().filter(|&&r| r > 1.0).count(),
        baseline_geomean_ns: geomean(per_round.iter().map(|r| r.baseline_ns)),
        applied_geomean_ns: geomean(per_round.iter().map(|r| r.applied_ns)),
        per_round,
        ratios,
        ratio: d.ratio,
        interval: d.interval,
        confidence: d.confidence,
        p_value: d.p_value,
        sd_log: d.sd_log,
        sd_floored: d.sd_floored,
        more_rounds_needed: d.more_rounds_needed,
        verdict: d.verdict,
        decision: d.decision,
        rule,
        partial: false,
    }
}

impl Analysis {
    /// Sets aside the rule's verdict for `decision` (an interrupted run, a
    /// knob not honoured or not exercised): inconclusive, partial when cut short.
    pub fn overrule(&mut self, decision: Decision, partial: bool) {
        self.verdict = Verdict::Inconclusive;
        self.decision = decision;
        self.partial = partial;
    }

    /// The interval and ratio in words.
    pub fn interval_words(&self) -> String {
        format!(
            "ratio {:.3}, {:.2} % interval {:.3}-{:.3}",
            self.ratio,
            self.confidence * 100.0,
            self.interval[0],
            self.interval[1]
        )
    }

    /// The verdict's name, but for an interval that excludes 1 while staying
    /// within the minimum effect: that is a small effect shown, not no effect.
    pub fn verdict_label(&self) -> String {
        let [lo, hi] = self.interval;
        if self.decision == Decision::WithinMinimumEffect && (hi < 1.0 || lo > 1.0) {
            format!(
                "smaller than the minimum effect ({:.0} %)",
                self.rule.min_effect * 100.0
            )
        } else {
            self.verdict.as_str().into()
        }
    }

    /// The verdict in words, with the reason it stopped.
    pub fn verdict_words(&self) -> String {
        let n = self.ratios.len();
        let iv = self.interval_words();
        let more = match self.more_rounds_needed {
            Some(m) => format!(
                "; {}",
                super::beyond::more_rounds(m, n, &self.rule, self.sd_log, "decide")
            ),
            None => String::new(),
        };
        let min = self.rule.min_effect * 100.0;
        match self.decision {
            Decision::EffectCleared => format!("{} ({iv}, {n} rounds)", self.verdict.as_str()),
            Decision::WithinMinimumEffect if self.interval[1] < 1.0 || self.interval[0] > 1.0 => {
                format!(
                    "{}: the interval excludes 1 but the change is under {min:.0} % ({iv}, {n} rounds)",
                    self.verdict_label()
                )
            }
            Decision::WithinMinimumEffect => {
                format!("no detectable effect: any change is under {min:.0} % ({iv}, {n} rounds)")
            }
            Decision::RoundCap | Decision::MoreRounds => format!(
                "inconclusive after {n} rounds: the interval neither clears 1 by {min:.0} % nor lies within {min:.0} % of it ({iv}){more}"
            ),
            Decision::NotExercised => format!(
                "inconclusive: the run could not exercise the knob (its CPU entered no idle state in any as-found leg), so these {n} rounds cannot show its effect ({iv})"
            ),
            Decision::Interrupted => {
                format!("inconclusive: interrupted after {n} complete rounds ({iv})")
            }
            Decision::UnequalLosses => format!(
                "inconclusive: one leg lost far more rpc requests than the other, so its slowest replies are missing from it ({iv}, {n} rounds)"
            ),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use statrs::distribution::{ContinuousCDF, StudentsT};

    fn normal(rng: &mut ChaCha8Rng) -> f64 {
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Log-normal latencies around `median_ns` with spread `sigma` (of the log).
    fn draw(rng: &mut ChaCha8Rng, n: usize, median_ns: f64, sigma: f64) -> Vec<f64> {
        (0..n)
            .map(|_| ((median_ns * (sigma * normal(rng)).exp()) as u64 + 1) as f64)
            .collect()
    }

    /// A host whose state drifts: each round shares a factor (CV `round_cv`)
    /// and each leg adds its own (CV `leg_cv`), as legs seconds apart do.
    pub(crate) struct Host {
        pub base: f64,
        pub effect: f64,
        pub sigma: f64,
        pub round_cv: f64,
        pub leg_cv: f64,
        pub samples: usize,
    }

    impl Host {
        pub fn rounds(&self, rng: &mut ChaCha8Rng, n: usize) -> Vec<Round> {
            (0..n)
                .map(|_| {
                    let round = (self.round_cv * normal(rng)).exp();
                    let b = round * (self.leg_cv * normal(rng)).exp();
                    let a = round * (self.leg_cv * normal(rng)).exp();
                    (
                        draw(rng, self.samples, self.base * b, self.sigma),
                        draw(rng, self.samples, self.base * self.effect * a, self.sigma),
                    )
                })
                .collect()
        }

        /// Runs the sequential design as verify does.
        pub fn verify(&self, seed: u64, rule: Rule) -> Analysis {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut rounds = Vec::new();
            for at in rule.looks() {
                let more = at - rounds.len();
                rounds.extend(self.rounds(&mut rng, more));
                let a = analyze(&rounds, Metric::P50, rule);
                if a.decision != Decision::MoreRounds {
                    return a;
                }
            }
            unreachable!("the last look is at max_rounds")
        }
    }

    fn count(host: &Host, trials: u64, verdict: Verdict) -> usize {
        (0..trials)
            .filter(|&s| host.verify(s, Rule::default()).verdict == verdict)
            .count()
    }

    /// Runs that claimed no effect either way.
    fn quiet(host: &Host, trials: u64) -> usize {
        (0..trials)
            .filter(|&s| {
                !matches!(
                    host.verify(s, Rule::default()).verdict,
                    Verdict::Improved | Verdict::Regressed
                )
            })
            .count()
    }

    /// The rule this replaced: pooled Mann-Whitney p < 0.01, median round
    /// ratio 5 % away from 1, 5 of 6 rounds agreeing.
    fn old_rule_claims_effect(rounds: &[Round]) -> bool {
        let p50 = |v: &[f64]| RoundFigures::of(v).unwrap().p50;
        let ratios: Vec<f64> = rounds.iter().map(|(b, a)| p50(a) / p50(b)).collect();
        let m = median(&ratios);
        let lower = ratios.iter().filter(|&&r| r < 1.0).count();
        let higher = ratios.len() - lower;
        let pooled_b: Vec<f64> = rounds.iter().flat_map(|r| r.0.clone()).collect();
        let pooled_a: Vec<f64> = rounds.iter().flat_map(|r| r.1.clone()).collect();
        let p = mann_whitney_p(&pooled_b, &pooled_a);
        p < 0.01 && ((m <= 0.95 && lower >= 5) || (m >= 1.05 && higher >= 5))
    }

    fn mann_whitney_p(x: &[f64], y: &[f64]) -> f64 {
        let (n1, n2) = (x.len() as f64, y.len() as f64);
        let mut all: Vec<(f64, bool)> = x
            .iter()
            .map(|&v| (v, true))
            .chain(y.iter().map(|&v| (v, false)))
            .collect();
        all.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
        let mut rank_x = 0.0;
        for (i, p) in all.iter().enumerate() {
            if p.1 {
                rank_x += i as f64 + 1.0;
            }
        }
        let u = rank_x - n1 * (n1 + 1.0) / 2.0;
        let z = (u - n1 * n2 / 2.0).abs() / (n1 * n2 * (n1 + n2 + 1.0) / 12.0).sqrt();
        let t = StudentsT::new(0.0, 1.0, 1e9).unwrap();
        2.0 * (1.0 - t.cdf(z))
    }

    const DRIFTY: Host = Host {
        base: 80_000.0,
        effect: 1.0,
        sigma: 0.4,
        round_cv: 0.25,
        leg_cv: 0.12,
        samples: 100,
    };

    #[test]
    fn aa_with_round_and_leg_drift_says_no_effect_where_the_pooled_rule_did_not() {
        let trials = 200;
        let quiet = quiet(&DRIFTY, trials);
        assert!(
            quiet * 100 >= 95 * trials as usize,
            "only {quiet}/{trials} quiet"
        );
        // The old rule over the same kind of data: far more than 5 % false effects.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let false_effects = (0..trials)
            .filter(|_| old_rule_claims_effect(&DRIFTY.rounds(&mut rng, 6)))
            .count();
        assert!(
            false_effects * 100 > 10 * trials as usize,
            "old rule: {false_effects}/{trials}"
        );
    }

    #[test]
    fn aa_with_heavy_leg_drift_stops_at_the_cap_and_says_so() {
        let host = Host {
            leg_cv: 0.3,
            ..DRIFTY
        };
        let a = host.verify(3, Rule::default());
        assert_eq!(a.verdict, Verdict::Inconclusive);
        assert_eq!(a.decision, Decision::RoundCap, "{a:?}");
        assert_eq!(a.ratios.len(), 24);
        // At this drift a decision is past what verify runs: what would help.
        let w = a.verdict_words();
        let said = [
            "inconclusive after 24 rounds",
            "no run verify makes would decide",
        ];
        assert!(said.iter().all(|s| w.contains(s)), "{w}");
        let quiet = quiet(&host, 200);
        assert!(quiet >= 190, "{quiet}/200");
    }

    #[test]
    fn a_real_effect_is_found_through_the_drift() {
        // Resume latency n/a on this VM: p50 ~87 -> ~14 µs.
        let host = Host {
            effect: 0.16,
            ..DRIFTY
        };
        assert_eq!(count(&host, 100, Verdict::Improved), 100);
        let a = host.verify(1, Rule::default());
        assert_eq!((a.decision, a.ratios.len()), (Decision::EffectCleared, 6));
        assert!(a.interval[1] < 0.3 && a.interval[0] > 0.08, "{a:?}");
        let host = Host {
            effect: 1.6,
            ..DRIFTY
        };
        assert_eq!(count(&host, 100, Verdict::Regressed), 100);
    }

    #[test]
    fn a_moderate_effect_takes_more_rounds() {
        let host = Host {
            effect: 0.8,
            ..DRIFTY
        };
        let found = (0..100)
            .map(|s| host.verify(s, Rule::default()))
            .filter(|a| a.verdict == Verdict::Improved)
            .collect::<Vec<_>>();
        assert!(found.len() >= 90, "{}/100", found.len());
        assert!(
            found.iter().any(|a| a.ratios.len() > 6),
            "some needed a second look"
        );
    }

    #[test]
    fn a_quiet_host_decides_no_effect_within_the_minimum() {
        let host = Host {
            sigma: 0.1,
            round_cv: 0.05,
            leg_cv: 0.005,
            samples: 400,
            ..DRIFTY
        };
        let a = host.verify(11, Rule::default());
        assert_eq!(a.decision, Decision::WithinMinimumEffect, "{a:?}");
        assert!(a.interval[0] >= 0.95 && a.interval[1] <= 1.05);
        assert!(a.verdict_words().contains("under 5 %"));
    }

    #[test]
    fn a_consistent_small_effect_is_smaller_than_the_minimum_not_no_effect() {
        // Every round 3 % faster, within 1 %: the interval excludes 1 and
        // lies within 5 % of it. This was called "no detectable effect".
        let rounds: Vec<_> = (0..20)
            .map(|r| {
                let a = (97_000.0 * (1.0 + (r % 3) as f64 * 0.005)).trunc();
                (vec![100_000.0; 9], vec![a; 9])
            })
            .collect();
        let a = analyze(&rounds, Metric::P50, Rule::for_rounds(20));
        assert_eq!(a.decision, Decision::WithinMinimumEffect, "{a:?}");
        assert!(a.interval[1] < 1.0, "{:?}", a.interval);
        assert_eq!(a.verdict_label(), "smaller than the minimum effect (5 %)");
        let w = a.verdict_words();
        assert!(
            w.starts_with("smaller than the minimum effect (5 %)") && !w.contains("no detectable"),
            "{w}"
        );
        // Straddling 1 it is still no detectable effect.
        let flat: Vec<_> = (0..20)
            .map(|r| {
                (
                    vec![100_000.0; 9],
                    vec![if r % 2 == 0 { 99_000.0 } else { 101_000.0 }; 9],
                )
            })
            .collect();
        let a = analyze(&flat, Metric::P50, Rule::for_rounds(20));
        assert_eq!(a.verdict_label(), "no detectable effect");
    }

    #[test]
    fn a_small_shift_under_heavy_noise_is_not_a_verdict() {
        let host = Host {
            effect: 0.98,
            sigma: 1.2,
            ..DRIFTY
        };
        let quiet = quiet(&host, 100);
        assert!(quiet >= 95, "{quiet}/100");
    }

    #[test]
    fn looks_and_minimum_rounds() {
        assert_eq!(Rule::for_rounds(6).looks(), vec![6, 9, 12, 15, 18, 21, 24]);
        assert_eq!(Rule::for_rounds(2).rounds, MIN_ROUNDS);
        assert_eq!(Rule::for_rounds(5).looks(), vec![5, 8, 11, 14, 17, 20]);
    }

    #[test]
    fn figures_ratios_and_interval_by_hand() {
        // Ratios 0.5, 0.5, 0.5, 0.5, 0.5: no spread, the interval is the point.
        let r: Vec<_> = (0..5)
            .map(|_| (vec![100.0, 200.0, 300.0], vec![50.0, 100.0, 150.0]))
            .collect();
        let a = analyze(&r, Metric::P50, Rule::default());
        assert_eq!(a.ratios, vec![0.5; 5]);
        // No spread: the floored SD still gives the interval a width.
        assert!((a.ratio - 0.5).abs() < 1e-12 && a.sd_floored);
        assert!(a.interval[0] < 0.5 && a.interval[1] > 0.5 && a.interval[1] < 0.6);
        assert_eq!((a.verdict, a.rounds_lower), (Verdict::Improved, 5));
        assert_eq!(a.baseline.p50_ns, 200.0);
        assert_eq!(a.applied.round_p50_ns, vec![100.0; 5]);
        // Log ratios ln 0.5 and ln 1: mean -0.3466, sd 0.4901, se 0.3466;
        // t(1) quantile at 1 - 0.005/7/2 is 891.27: interval exp(-0.3466 ± 308.9).
        let r = vec![(vec![200.0], vec![100.0]), (vec![200.0], vec![200.0])];
        let a = analyze(&r, Metric::P50, Rule::default());
        assert!((a.ratio - 0.5f64.sqrt()).abs() < 1e-9);
        assert!(
            (a.interval[1].ln() - (-0.34657 + 891.27 * 0.34657)).abs() < 1e-1,
            "{a:?}"
        );
        assert!(
            (a.p_value - 0.5).abs() < 1e-6,
            "t = 1 on 1 df: p = 0.5, got {}",
            a.p_value
        );
        assert_eq!(a.decision, Decision::MoreRounds);
    }

    #[test]
    fn metric_selects_the_statistic() {
        // Twelve rounds: six identical ratios cannot close within 5 % of 1 (the SD floor).
        let r: Vec<_> = (0..12)
            .map(|_| {
                (
                    (1..=100).map(f64::from).collect::<Vec<_>>(),
                    (1..=100)
                        .map(|v| f64::from(if v > 95 { v * 3 } else { v }))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            analyze(&r, Metric::P50, Rule::for_rounds(12)).verdict,
            Verdict::NoDetectableEffect
        );
        assert_eq!(
            analyze(&r, Metric::P99, Rule::for_rounds(12)).verdict,
            Verdict::Regressed
        );
        assert!((analyze(&r, Metric::Max, Rule::for_rounds(12)).ratio - 3.0).abs() < 1e-12);
    }

    /// Rounds whose log ratios average `mean` with spread `spread`.
    fn alternating_rounds(mean: f64, spread: f64, n: usize) -> Vec<Round> {
        (0..n)
            .map(|k| {
                let d = mean + if k % 2 == 0 { spread } else { -spread };
                (vec![1000.0; 20], vec![1000.0 * d.exp(); 20])
            })
            .collect()
    }

    #[test]
    fn a_count_beyond_any_practical_run_says_what_would_help_instead() {
        let rule = Rule::for_rounds(6);
        // Noisy rounds whose mean sits at the minimum effect: the interval
        // could only settle after about a million rounds.
        let a = analyze(
            &alternating_rounds(1.05f64.ln() - 0.0003, 0.3, 6),
            Metric::P50,
            rule,
        );
        let need = a.more_rounds_needed.expect("undecided");
        assert!(need + 6 > super::super::rule::MAX_ROUNDS, "{need}");
        let words = a.verdict_words();
        assert!(!words.contains(&format!("about {need} more")), "{words}");
        assert!(
            words.contains("no run verify makes would decide")
                && words.contains("more samples per round")
                && words.contains("quieter host"),
            "{words}"
        );
    }
}
