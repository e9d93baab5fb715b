//! The A/B verdict: did applying a knob move the probe's latency?
//!
//! The rule (documented in the README, tested on synthetic sets):
//!
//! 1. Per round, each leg's p50; the round's ratio is applied / baseline.
//! 2. A two-sided Mann-Whitney U test over the pooled samples of each leg
//!    (normal approximation, tie-corrected) gives `p`.
//! 3. `improved` when `p < alpha` (0.01), the median of the per-round ratios
//!    is at most `1 - min_effect` (0.95), and at least five rounds in six
//!    point the same way; `regressed` is the mirror image; anything else is
//!    `no detectable effect` at this noise.
//!
//! Pooled samples within a round are not independent (a noisy minute moves
//! them together), so `p` alone is optimistic: the minimum effect and the
//! per-round agreement are what keep a noisy host from producing verdicts.

use serde::Serialize;

use crate::stats::{self, Summary};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Improved,
    Regressed,
    NoDetectableEffect,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoDetectableEffect => "no detectable effect",
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct Rule {
    /// Significance level of the Mann-Whitney test.
    pub alpha: f64,
    /// Smallest relative change of the median ratio that counts (0.05 = 5%).
    pub min_effect: f64,
    /// Fraction of rounds that must agree in direction.
    pub agreement: f64,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            alpha: 0.01,
            min_effect: 0.05,
            agreement: 5.0 / 6.0,
        }
    }
}

/// One leg's figures over the rounds: the median across rounds of each
/// round's p50, p95, p99 and max, and the CV of the per-round p50s.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LegFigures {
    pub rounds: usize,
    pub samples: usize,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Coefficient of variation of the per-round p50s.
    pub cv: f64,
    pub round_p50_ns: Vec<u64>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Analysis {
    pub baseline: LegFigures,
    pub applied: LegFigures,
    /// applied p50 / baseline p50, per round.
    pub ratios: Vec<f64>,
    pub median_ratio: f64,
    pub rounds_lower: usize,
    pub rounds_higher: usize,
    /// Two-sided Mann-Whitney p over the pooled samples.
    pub p_value: f64,
    pub verdict: Verdict,
    pub rule: Rule,
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    stats::percentile_sorted(&v, stats::P50)
}

fn median_f64(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn cv(values: &[u64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0);
    if mean > 0.0 { var.sqrt() / mean } else { 0.0 }
}

fn figures(rounds: &[Vec<u64>]) -> LegFigures {
    let summaries: Vec<Summary> = rounds.iter().filter_map(|r| Summary::from_ns(r)).collect();
    let pick = |f: fn(&Summary) -> u64| median_u64(summaries.iter().map(f).collect());
    let round_p50_ns: Vec<u64> = summaries.iter().map(|s| s.p50_ns).collect();
    LegFigures {
        rounds: rounds.len(),
        samples: rounds.iter().map(Vec::len).sum(),
        p50_ns: pick(|s| s.p50_ns),
        p95_ns: pick(|s| s.p95_ns),
        p99_ns: pick(|s| s.p99_ns),
        max_ns: pick(|s| s.max_ns),
        cv: cv(&round_p50_ns),
        round_p50_ns,
    }
}

/// `baseline[r]` and `applied[r]` are round r's samples of each leg (ns).
pub fn analyze(baseline: &[Vec<u64>], applied: &[Vec<u64>], rule: Rule) -> Analysis {
    let b = figures(baseline);
    let a = figures(applied);
    let ratios: Vec<f64> = b
        .round_p50_ns
        .iter()
        .zip(&a.round_p50_ns)
        .map(|(&b, &a)| if b > 0 { a as f64 / b as f64 } else { f64::NAN })
        .collect();
    let median_ratio = median_f64(&ratios);
    let rounds_lower = ratios.iter().filter(|&&r| r < 1.0).count();
    let rounds_higher = ratios.iter().filter(|&&r| r > 1.0).count();
    let pooled_b: Vec<u64> = baseline.iter().flatten().copied().collect();
    let pooled_a: Vec<u64> = applied.iter().flatten().copied().collect();
    let p_value = mann_whitney_p(&pooled_b, &pooled_a);
    let needed = (rule.agreement * ratios.len() as f64).ceil() as usize;
    let verdict = if ratios.is_empty() || !p_value.is_finite() || p_value >= rule.alpha {
        Verdict::NoDetectableEffect
    } else if median_ratio <= 1.0 - rule.min_effect && rounds_lower >= needed {
        Verdict::Improved
    } else if median_ratio >= 1.0 + rule.min_effect && rounds_higher >= needed {
        Verdict::Regressed
    } else {
        Verdict::NoDetectableEffect
    };
    Analysis {
        baseline: b,
        applied: a,
        ratios,
        median_ratio,
        rounds_lower,
        rounds_higher,
        p_value,
        verdict,
        rule,
    }
}

/// Two-sided p of the Mann-Whitney U test, normal approximation with the tie
/// correction and a continuity correction. NaN when either side is empty.
pub fn mann_whitney_p(x: &[u64], y: &[u64]) -> f64 {
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    if x.is_empty() || y.is_empty() {
        return f64::NAN;
    }
    let mut all: Vec<(u64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    all.sort_unstable_by_key(|p| p.0);
    let n = all.len();
    let (mut rank_sum_x, mut tie_term) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_x += all[i..=j].iter().filter(|p| p.1).count() as f64 * avg_rank;
        i = j + 1;
    }
    let u = rank_sum_x - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let nn = n1 + n2;
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// Complementary error function (Numerical Recipes' erfcc, |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// A manifest's `verify.expect` such as "p50 lower by at least 300 µs",
/// understood well enough to check; `None` when it is prose only.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Expectation {
    pub metric: String,
    pub lower: bool,
    /// Nanoseconds, or a fraction when `relative`.
    pub amount: f64,
    pub relative: bool,
}

impl Expectation {
    pub fn parse(text: &str) -> Option<Expectation> {
        let t = text.to_lowercase();
        let words: Vec<&str> = t.split_whitespace().collect();
        let metric = words
            .iter()
            .find(|w| matches!(**w, "p50" | "p95" | "p99" | "max" | "median"))?;
        let metric = if *metric == "median" { "p50" } else { metric }.to_string();
        let lower = if t.contains("lower") || t.contains("less") || t.contains("drop") {
            true
        } else if t.contains("higher") || t.contains("more") || t.contains("rise") {
            false
        } else {
            return None;
        };
        let pos = words
            .iter()
            .position(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
        let num = words[pos];
        let (digits, attached) = num.split_at(
            num.find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(num.len()),
        );
        let value: f64 = digits.parse().ok()?;
        let unit = if attached.is_empty() {
            words.get(pos + 1).copied().unwrap_or("")
        } else {
            attached
        };
        let (amount, relative) = match unit {
            "ns" => (value, false),
            "µs" | "us" | "μs" => (value * 1e3, false),
            "ms" => (value * 1e6, false),
            "s" => (value * 1e9, false),
            "%" | "percent" => (value / 100.0, true),
            _ => return None,
        };
        Some(Expectation {
            metric,
            lower,
            amount,
            relative,
        })
    }

    /// Whether the measured legs meet it, with the change in words.
    pub fn check(&self, a: &Analysis) -> (bool, String) {
        let pick = |l: &LegFigures| match self.metric.as_str() {
            "p95" => l.p95_ns,
            "p99" => l.p99_ns,
            "max" => l.max_ns,
            _ => l.p50_ns,
        } as f64;
        let (base, applied) = (pick(&a.baseline), pick(&a.applied));
        let change = if self.lower {
            base - applied
        } else {
            applied - base
        };
        let met = if self.relative {
            base > 0.0 && change / base >= self.amount
        } else {
            change >= self.amount
        };
        let words = format!(
            "{} {} by {:.1} µs ({:+.1}%)",
            self.metric,
            if change >= 0.0 {
                if self.lower { "lower" } else { "higher" }
            } else if self.lower {
                "higher"
            } else {
                "lower"
            },
            change.abs() / 1e3,
            if base > 0.0 {
                (applied - base) / base * 100.0
            } else {
                0.0
            }
        );
        (met, words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Log-normal latencies around `median_ns` with spread `sigma` (of the log).
    fn draw(rng: &mut StdRng, n: usize, median_ns: f64, sigma: f64) -> Vec<u64> {
        (0..n)
            .map(|_| {
                // Box-Muller.
                let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                (median_ns * (sigma * z).exp()) as u64 + 1
            })
            .collect()
    }

    fn legs(
        seed: u64,
        base: f64,
        applied: f64,
        sigma: f64,
        rounds: usize,
        n: usize,
    ) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut b = Vec::new();
        let mut a = Vec::new();
        for _ in 0..rounds {
            // Each round shares a drift (a noisy minute affects both legs of it).
            let drift = (0.1 * (rng.random::<f64>() - 0.5)).exp();
            b.push(draw(&mut rng, n, base * drift, sigma));
            a.push(draw(&mut rng, n, applied * drift, sigma));
        }
        (b, a)
    }

    #[test]
    fn a_clear_improvement_and_a_clear_regression() {
        let (b, a) = legs(1, 100_000.0, 50_000.0, 0.3, 6, 200);
        let r = analyze(&b, &a, Rule::default());
        assert_eq!(r.verdict, Verdict::Improved, "{r:?}");
        assert!(r.median_ratio < 0.6 && r.rounds_lower == 6 && r.p_value < 1e-6);
        let r = analyze(&a, &b, Rule::default());
        assert_eq!(r.verdict, Verdict::Regressed);
        assert!(r.median_ratio > 1.6);
    }

    #[test]
    fn one_distribution_gives_no_detectable_effect_in_at_least_95_percent_of_trials() {
        let trials = 200;
        let quiet = (0..trials)
            .filter(|&seed| {
                let (b, a) = legs(1000 + seed, 80_000.0, 80_000.0, 0.5, 6, 200);
                analyze(&b, &a, Rule::default()).verdict == Verdict::NoDetectableEffect
            })
            .count();
        assert!(
            quiet * 100 >= trials as usize * 95,
            "only {quiet}/{trials} said no detectable effect"
        );
    }

    #[test]
    fn heavy_noise_with_a_small_true_shift_is_not_a_verdict() {
        let trials = 50;
        let verdicts = (0..trials)
            .filter(|&seed| {
                let (b, a) = legs(5000 + seed, 100_000.0, 98_000.0, 1.2, 6, 200);
                analyze(&b, &a, Rule::default()).verdict != Verdict::NoDetectableEffect
            })
            .count();
        assert!(
            verdicts <= 2,
            "{verdicts}/{trials} trials claimed an effect from a 2% shift under heavy noise"
        );
    }

    #[test]
    fn mann_whitney_matches_hand_computed_values() {
        // Complete separation, 3 vs 3: U = 0; exact two-sided p is 0.1, the
        // normal approximation with continuity correction gives 0.0809.
        let p = mann_whitney_p(&[1, 2, 3], &[4, 5, 6]);
        assert!((p - 0.0809).abs() < 0.001, "{p}");
        // Identical samples: no evidence at all.
        assert!((mann_whitney_p(&[5, 5, 5], &[5, 5, 5]) - 1.0).abs() < 1e-9);
        assert!(mann_whitney_p(&[], &[1]).is_nan());
        // erfc at known points.
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157299207).abs() < 1e-6);
    }

    #[test]
    fn per_round_figures_and_ratios() {
        let b = vec![vec![100, 200, 300], vec![100, 200, 300]];
        let a = vec![vec![50, 100, 150], vec![100, 200, 300]];
        let r = analyze(&b, &a, Rule::default());
        assert_eq!(r.baseline.round_p50_ns, vec![200, 200]);
        assert_eq!(r.applied.round_p50_ns, vec![100, 200]);
        assert_eq!(r.ratios, vec![0.5, 1.0]);
        assert_eq!(r.median_ratio, 0.75);
        assert_eq!(r.baseline.cv, 0.0);
        assert!((r.applied.cv - 0.4714).abs() < 1e-3);
    }

    #[test]
    fn expectations_from_manifest_prose() {
        let e = Expectation::parse("p50 lower by at least 300 µs").unwrap();
        assert_eq!(
            e,
            Expectation {
                metric: "p50".into(),
                lower: true,
                amount: 300_000.0,
                relative: false
            }
        );
        let e = Expectation::parse("p50 of light calls lower by at least 300 µs").unwrap();
        assert_eq!(e.amount, 300_000.0);
        let e = Expectation::parse("p99 lower by 10%").unwrap();
        assert!(e.relative && (e.amount - 0.10).abs() < 1e-12);
        assert!(Expectation::parse("fewer complaints from operators").is_none());
        let (b, a) = (vec![vec![1_000_000u64; 5]], vec![vec![600_000u64; 5]]);
        let r = analyze(&b, &a, Rule::default());
        let (met, words) = Expectation::parse("p50 lower by at least 300 µs")
            .unwrap()
            .check(&r);
        assert!(met, "{words}");
        assert!(words.contains("lower by 400.0 µs"), "{words}");
        let (met, _) = Expectation::parse("p50 lower by at least 500us")
            .unwrap()
            .check(&r);
        assert!(!met);
    }
}
