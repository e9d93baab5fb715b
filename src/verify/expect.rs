//! Checks a knob's structured `verify.expect` (`schema::expect`) against a run.

use serde::Serialize;

use super::paired::{Analysis, Decision};
use super::rule::{self, Outcome};
use crate::schema::expect::{Amount, Change, Expect};

/// A checked expectation: whether the run met it and what was measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Check {
    pub expect: Expect,
    /// `outcome` is `met`.
    pub met: bool,
    /// met, not-met, or inconclusive (the interval straddles the bound).
    pub outcome: Outcome,
    pub measured: String,
    /// Why it is inconclusive: which bound failed and what would decide it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The tolerance of `no-higher`/`no-lower` when none is declared: the rule's
/// minimum effect.
fn tolerance(e: &Expect, a: &Analysis) -> (f64, String) {
    match e.by {
        Some(Amount::Fraction(x)) => (x, format!("{} %", x * 100.0)),
        Some(Amount::Ns(ns)) => (ns / a.baseline_geomean_ns, format!("{}", Amount::Ns(ns))),
        None => (
            a.rule.min_effect,
            format!("{} % (the default)", a.rule.min_effect * 100.0),
        ),
    }
}

/// The rule's view of the analysis, for `rule::within` and `rule::past`.
fn decided(a: &Analysis) -> rule::Decided {
    rule::Decided {
        ratio: a.ratio,
        interval: a.interval,
        confidence: a.confidence,
        p_value: a.p_value,
        mean_log: a.ratio.ln(),
        sd_log: a.sd_log,
        sd_floored: a.sd_floored,
        verdict: a.verdict,
        decision: a.decision,
        more_rounds_needed: a.more_rounds_needed,
    }
}

/// Why an interval check is inconclusive: `upper` says which bound must be at
/// most `limit`; `words` names the limit ("tolerance 5 %", "lower by 10 %").
fn straddles(a: &Analysis, limit: f64, upper: bool, words: &str) -> String {
    let (bound, name) = if upper {
        (a.interval[1], "upper")
    } else {
        (a.interval[0], "lower")
    };
    let n = a.ratios.len();
    let sd = a.sd_log.max(rule::SD_FLOOR);
    let gap = (limit.ln() - a.ratio.ln()) * if upper { 1.0 } else { -1.0 };
    let more = match rule::rounds_for(a.rule.quantile(n), sd, gap) {
        Some(all) => super::beyond::more_rounds(
            all.saturating_sub(n).max(1),
            n,
            &a.rule,
            a.sd_log,
            "show it",
        ),
        None => format!(
            "no number of rounds would show it: the ratio itself is on the wrong side of {limit:.3}"
        ),
    };
    format!(
        "the interval's {name} bound {bound:.3} is on the wrong side of {limit:.3} ({words}) while its other bound is not; {more}"
    )
}

/// Non-inferiority: met only when the interval's bound is inside the tolerance.
fn non_inferior(e: &Expect, a: &Analysis) -> (Outcome, Option<String>) {
    let upper = e.change == Change::NoHigher;
    let (tol, words) = tolerance(e, a);
    let limit = if upper {
        1.0 + tol
    } else {
        (1.0 - tol).max(0.0)
    };
    match rule::within(&decided(a), limit, upper) {
        Outcome::Inconclusive => (
            Outcome::Inconclusive,
            Some(straddles(a, limit, upper, &format!("tolerance {words}"))),
        ),
        o => (o, None),
    }
}

/// `lower`/`higher` by `by`: met only when the whole interval is past the
/// ratio `by` asks for, not met only when the whole interval falls short of it.
fn by_margin(e: &Expect, a: &Analysis) -> (Outcome, Option<String>) {
    let lower = e.change == Change::Lower;
    let margin = match e.by {
        Some(Amount::Fraction(x)) => x,
        Some(Amount::Ns(ns)) => ns / a.baseline_geomean_ns,
        None => 0.0,
    };
    let limit = if lower { 1.0 - margin } else { 1.0 + margin };
    if lower && limit <= 0.0 {
        let why = "a drop of at least the whole as-found value cannot be shown";
        return (Outcome::NotMet, Some(why.into()));
    }
    let words = format!(
        "{} by {}",
        if lower { "lower" } else { "higher" },
        e.by.map_or_else(String::new, |b| b.to_string())
    );
    match rule::past(&decided(a), limit, lower) {
        Outcome::Inconclusive => (
            Outcome::Inconclusive,
            Some(straddles(a, limit, lower, &words)),
        ),
        o => (o, None),
    }
}

/// What was measured, the legs' geometric means shown by `show` (a
/// command's values in its unit; µs for the built-in probes).
pub fn measured(a: &Analysis, show: &dyn Fn(f64) -> String) -> String {
    format!(
        "{} geometric mean over rounds {} -> {} ({}, verdict {})",
        a.metric.as_str(),
        show(a.baseline_geomean_ns),
        show(a.applied_geomean_ns),
        a.interval_words(),
        a.verdict_label()
    )
}

/// Checks `e` against an analysis made on `e.metric`.
pub fn check(e: &Expect, a: &Analysis) -> Check {
    debug_assert_eq!(a.metric, e.metric);
    let applied = a.applied.get(e.metric);
    let measured = measured(a, &|ns| format!("{:.1} µs", ns / 1e3));
    let decided = |ok: bool| if ok { Outcome::Met } else { Outcome::NotMet };
    let (outcome, why) = match e.change {
        _ if matches!(
            a.decision,
            Decision::NotExercised | Decision::Interrupted | Decision::UnequalLosses
        ) =>
        {
            let why = match a.decision {
                Decision::NotExercised => "the run could not exercise the knob",
                Decision::Interrupted => "the run was interrupted",
                _ => "one leg lost far more rpc requests than the other",
            };
            (Outcome::Inconclusive, Some(why.to_string()))
        }
        Change::Lower | Change::Higher => by_margin(e, a),
        Change::NoHigher | Change::NoLower => non_inferior(e, a),
        Change::Ceiling => (
            decided(matches!(e.below, Some(Amount::Ns(ns)) if applied <= ns)),
            None,
        ),
        Change::Floor => (
            decided(matches!(e.above, Some(Amount::Ns(ns)) if applied >= ns)),
            None,
        ),
    };
    Check {
        expect: e.clone(),
        met: outcome == Outcome::Met,
        outcome,
        measured,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::expect::{Expectations, Metric};
    use crate::verify::paired::{Rule, Verdict, analyze};

    fn parse(yaml: &str) -> Result<Expectations, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    /// Twelve rounds whose legs have the given medians (every sample the same
    /// but for a 1 % spread per round, so the verdict follows the medians;
    /// twelve, as the SD floor keeps six from closing within 5 % of 1).
    fn legs(base_us: f64, applied_us: f64, metric: Metric) -> Analysis {
        let rounds: Vec<_> = (0..12)
            .map(|r| {
                let wiggle = 1.0 + (r as f64 - 5.5) * 0.001;
                let leg = |us: f64| vec![(us * 1e3 * wiggle).trunc(); 9];
                (leg(base_us), leg(applied_us))
            })
            .collect();
        analyze(&rounds, metric, Rule::for_rounds(12))
    }

    fn met(yaml: &str, base_us: f64, applied_us: f64) -> bool {
        let e = parse(yaml).unwrap().0.remove(0);
        check(&e, &legs(base_us, applied_us, e.metric)).met
    }

    #[test]
    fn lower_by_an_amount_needs_the_improvement_and_the_amount() {
        let y = "{metric: p50, change: lower, by: 300 µs}";
        assert!(met(y, 650.0, 300.0));
        assert!(!met(y, 650.0, 400.0), "improved, but only by 250 µs");
        assert!(!met(y, 300.0, 650.0), "a regression never meets `lower`");
        assert!(met("{change: lower, by: 10 %}", 100.0, 85.0));
        assert!(!met("{change: lower, by: 10 %}", 100.0, 93.0));
        assert!(met("{change: higher, by: 5us}", 100.0, 120.0));
    }

    /// Rounds whose applied leg is as found times each ratio in turn.
    fn ratios(rs: &[f64]) -> Analysis {
        let rounds: Vec<_> = (0..12)
            .map(|r| {
                let a = (100_000.0 * rs[r % rs.len()]).trunc();
                (vec![100_000.0; 9], vec![a; 9])
            })
            .collect();
        analyze(&rounds, Metric::P50, Rule::for_rounds(12))
    }

    #[test]
    fn lower_by_a_margin_the_knob_just_delivers_is_inconclusive() {
        // Ratios 0.87 and 0.935: improved, ratio 0.902, interval across 0.9.
        // The point estimate called this contradicted (exit 2).
        let a = ratios(&[0.87, 0.935]);
        assert_eq!(a.verdict, Verdict::Improved);
        assert!(
            a.interval[0] < 0.9 && a.interval[1] > 0.9,
            "{:?}",
            a.interval
        );
        let e = parse("{change: lower, by: 10 %}").unwrap().0.remove(0);
        let c = check(&e, &a);
        assert_eq!(c.outcome, rule::Outcome::Inconclusive, "{c:?}");
        let why = c.why.unwrap();
        assert!(
            why.contains("upper bound") && why.contains("0.900"),
            "{why}"
        );
        // By 5 %: the whole interval is past 0.95, met; by 20 %: wholly short, not met.
        let by = |p: &str| check(&parse(p).unwrap().0.remove(0), &a).outcome;
        assert_eq!(by("{change: lower, by: 5 %}"), rule::Outcome::Met);
        assert_eq!(by("{change: lower, by: 20 %}"), rule::Outcome::NotMet);
        // An amount in time is taken relative to the as-found geometric mean.
        assert_eq!(
            by("{change: lower, by: 10 µs}"),
            rule::Outcome::Inconclusive
        );
        assert_eq!(by("{change: lower, by: 200 µs}"), rule::Outcome::NotMet);
    }

    #[test]
    fn the_prose_that_was_misread() {
        // "p50 no higher than 120 µs": a ceiling. Applied 130 µs worse must not be met.
        let ceiling = "{metric: p50, change: ceiling, below: 120 µs}";
        assert!(!met(ceiling, 80.0, 210.0));
        assert!(met(ceiling, 80.0, 110.0));
        // "p50 less than 100 µs" is a ceiling too, not a change.
        assert!(met("{change: ceiling, below: 100 µs}", 100.0, 99.0));
        // "p50 no higher, p99 lower by 10 us": each checks its own metric.
        let both =
            parse("[{metric: p50, change: no-higher}, {metric: p99, change: lower, by: 10 us}]")
                .unwrap()
                .0;
        assert_eq!(both[0].metric, Metric::P50);
        assert_eq!(both[1].metric, Metric::P99);
        assert!(check(&both[0], &legs(100.0, 100.0, Metric::P50)).met);
        assert!(!check(&both[0], &legs(100.0, 130.0, Metric::P50)).met);
        assert!(check(&both[1], &legs(100.0, 85.0, Metric::P99)).met);
        assert!(!check(&both[1], &legs(100.0, 95.0, Metric::P99)).met);
    }

    #[test]
    fn floor_and_no_lower() {
        assert!(met("{change: floor, above: 50 µs}", 80.0, 60.0));
        assert!(!met("{change: floor, above: 50 µs}", 80.0, 40.0));
        assert!(met("{change: no-lower}", 80.0, 80.5));
        assert!(!met("{change: no-lower}", 80.0, 40.0));
    }

    #[test]
    fn no_higher_with_a_wide_interval_is_inconclusive_and_says_why() {
        // Ratios alternating 0.8 and 1.3: not regressed, yet the interval
        // spans the 5 % tolerance (this was "met").
        let rounds: Vec<_> = (0..6)
            .map(|r| {
                let a = if r % 2 == 0 { 80_000.0 } else { 130_000.0 };
                (vec![100_000.0; 9], vec![a; 9])
            })
            .collect();
        let a = analyze(&rounds, Metric::P50, Rule::default());
        let e = parse("{change: no-higher}").unwrap().0.remove(0);
        let c = check(&e, &a);
        assert_eq!((c.outcome, c.met), (rule::Outcome::Inconclusive, false));
        let why = c.why.unwrap();
        assert!(
            why.contains("upper bound")
                && why.contains("1.050")
                // Hundreds of rounds at this noise: what would help instead.
                && why.contains("no run verify makes would show it"),
            "{why}"
        );
        // A declared tolerance wide enough is met by the same run.
        let e = parse("{change: no-higher, by: 900 %}").unwrap().0.remove(0);
        assert_eq!(check(&e, &a).outcome, rule::Outcome::Met);
    }
}
