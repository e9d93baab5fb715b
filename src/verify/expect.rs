//! Checks a knob's structured `verify.expect` (`schema::expect`) against a run.

use serde::Serialize;

use super::paired::{Analysis, Verdict};
use crate::schema::expect::{Amount, Change, Expect};

/// A checked expectation: whether the run met it and what was measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Check {
    pub expect: Expect,
    pub met: bool,
    pub measured: String,
}

/// Checks `e` against an analysis made on `e.metric`.
pub fn check(e: &Expect, a: &Analysis) -> Check {
    debug_assert_eq!(a.metric, e.metric);
    let (base, applied) = (a.baseline.get(e.metric), a.applied.get(e.metric));
    let m = e.metric.as_str();
    let measured = format!(
        "{m} {:.1} -> {:.1} µs (ratio {:.3}, verdict {})",
        base / 1e3,
        applied / 1e3,
        a.ratio,
        a.verdict.as_str()
    );
    let enough = |drop: f64, ratio_ok: bool| match e.by {
        Some(Amount::Ns(ns)) => drop >= ns,
        Some(Amount::Fraction(_)) => ratio_ok,
        None => false,
    };
    let frac = match e.by {
        Some(Amount::Fraction(x)) => x,
        _ => 0.0,
    };
    let met = match e.change {
        Change::Lower => {
            a.verdict == Verdict::Improved && enough(base - applied, a.ratio <= 1.0 - frac)
        }
        Change::Higher => {
            a.verdict == Verdict::Regressed && enough(applied - base, a.ratio >= 1.0 + frac)
        }
        Change::NoHigher => a.verdict != Verdict::Regressed,
        Change::NoLower => a.verdict != Verdict::Improved,
        Change::Ceiling => matches!(e.below, Some(Amount::Ns(ns)) if applied <= ns),
        Change::Floor => matches!(e.above, Some(Amount::Ns(ns)) if applied >= ns),
    };
    Check {
        expect: e.clone(),
        met,
        measured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::expect::{Expectations, Metric};
    use crate::verify::paired::{Rule, analyze};

    fn parse(yaml: &str) -> Result<Expectations, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    /// Six rounds whose legs have the given medians (every sample the same
    /// but for a 1 % spread per round, so the verdict follows the medians).
    fn legs(base_us: f64, applied_us: f64, metric: Metric) -> Analysis {
        let rounds: Vec<_> = (0..6)
            .map(|r| {
                let wiggle = 1.0 + (r as f64 - 2.5) * 0.002;
                let leg = |us: f64| vec![(us * 1e3 * wiggle) as u64; 9];
                (leg(base_us), leg(applied_us))
            })
            .collect();
        analyze(&rounds, metric, Rule::default())
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
}
