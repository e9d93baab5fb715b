//! `verify KNOB --sweep V1,V2,...`: the as-found leg and one leg per value in
//! every round (shuffled, seeded), each value's ratio to as found with its
//! interval, and the knee: the least aggressive value within the tolerance
//! of the best.
//!
//! Each value is its own test against as found; the run's error rate is
//! split equally over them, so the chance that any value's verdict errs is
//! the two-leg verdict's own (`rule::ALPHA`).

use anyhow::{Result, bail};
use serde::Serialize;

use super::multi::{self, MultiRun, Variant};
use super::paired::{Analysis, Decision, Verdict};
use super::{Options, placement};
use crate::apply::Session;
use crate::knob::KindName;
use crate::manifest::{Knob, variant};

/// The most values a sweep takes: every one is a leg in every round.
pub const MAX_VALUES: usize = 12;
/// The knee's tolerance unless `--knee-tolerance` says otherwise: the
/// verdict's own minimum effect.
pub const DEFAULT_TOLERANCE: f64 = 0.05;

/// One value's comparison with as found.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Point {
    /// The value as given.
    pub value: String,
    /// Its place from least (0) to most aggressive.
    pub rank: usize,
    /// The value is the host's own (its leg writes nothing): an as-found control.
    pub as_found: bool,
    /// This value / as found, of the metric: exp(mean per-round log ratio).
    pub ratio: f64,
    pub interval: [f64; 2],
    pub verdict: Verdict,
    pub decision: Decision,
    pub verdict_words: String,
    pub analysis: Analysis,
}

/// The knee, or why there is none.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Knee {
    /// The least aggressive improved value within the tolerance of the best (null: none).
    pub value: Option<String>,
    /// The improved value with the lowest ratio.
    pub best: Option<String>,
    /// Relative: a value's ratio may be at most best × (1 + tolerance).
    pub tolerance: f64,
    pub words: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SweepReport {
    pub host: String,
    pub knob: String,
    pub kind: KindName,
    pub probe: String,
    pub settings: serde_json::Value,
    pub seed: u64,
    pub settle_ms: u64,
    pub rounds: usize,
    /// Legs per round and the estimated time, as said before the run.
    pub plan: multi::Plan,
    /// Each round's leg order: `as found` or a value.
    pub order: Vec<Vec<String>>,
    /// How values are ranked from least to most aggressive for this kind.
    pub ranking: String,
    /// The values from least to most aggressive.
    pub points: Vec<Point>,
    pub knee: Knee,
    pub placement: placement::Placement,
    pub restored: bool,
    pub interrupted: Option<String>,
    pub warnings: Vec<String>,
    pub ledger: Option<String>,
}

/// How aggressive `value` is for this kind (higher: more), or why it cannot be swept.
fn aggressiveness(kind: KindName, value: &str, as_found: Option<&str>) -> Result<f64, String> {
    let int = |v: &str| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| format!("{v:?} is not a whole number"))
    };
    Ok(match kind {
        // 0 is no constraint (least), n/a no latency allowed (most); in between, fewer µs is more.
        KindName::PmQosResumeLatency => match value.trim() {
            "n/a" => f64::INFINITY,
            v => match int(v)? {
                0 => f64::NEG_INFINITY,
                n => -(n as f64),
            },
        },
        KindName::PmQos => -(int(value)? as f64),
        KindName::CpufreqMin => {
            match crate::knob::cpufreq_limit::parse_freq("--sweep", value, &[]) {
                Ok(crate::knob::cpufreq_limit::Freq::Khz(k)) => k as f64,
                _ => {
                    return Err(format!(
                        "{value:?}: give frequencies (`2.1 GHz`, `1800 MHz`, kHz): words such as min/max/base have no order before the host is read"
                    ));
                }
            }
        }
        KindName::CpufreqEpp => match value.trim() {
            "performance" => 0.0,
            "balance_performance" => -128.0,
            "balance_power" => -192.0,
            "power" => -255.0,
            v => match int(v)? {
                n @ 0..=255 => -(n as f64),
                n => return Err(format!("{n}: an EPP number is 0-255")),
            },
        },
        KindName::Sysctl => {
            let here = as_found.and_then(|a| a.trim().parse::<i64>().ok()).ok_or_else(|| {
                format!(
                    "the as-found value {:?} is not one number, so values have no distance from it",
                    as_found.unwrap_or("(unreadable)")
                )
            })?;
            (int(value)? - here).abs() as f64
        }
        k => return Err(unordered(k)),
    })
}

/// The kinds whose values have an order.
const SWEEPABLE: [KindName; 5] = [
    KindName::PmQosResumeLatency,
    KindName::PmQos,
    KindName::CpufreqMin,
    KindName::CpufreqEpp,
    KindName::Sysctl,
];

fn unordered(k: KindName) -> String {
    format!(
        "a {k} knob has no ordered values to sweep (sweeps take pm-qos-resume-latency, pm-qos, cpufreq-min, cpufreq-epp and numeric sysctl knobs)"
    )
}

fn ranking(kind: KindName) -> &'static str {
    match kind {
        KindName::PmQosResumeLatency => {
            "0 (no constraint) least aggressive, then fewer µs more aggressive, n/a (no latency allowed) most"
        }
        KindName::PmQos => "fewer µs more aggressive",
        KindName::CpufreqMin => "a higher floor more aggressive",
        KindName::CpufreqEpp => "a lower EPP number (performance = 0) more aggressive",
        _ => "farther from the as-found value more aggressive",
    }
}

/// The knob once per value, ranked least to most aggressive; every value
/// checked before anything is written.
pub fn variants(knob: &Knob, values: &[String], as_found: Option<&str>) -> Result<Vec<Knob>> {
    let bad = |v: &str, m: String| anyhow::anyhow!("--sweep {v}: {m}");
    if !SWEEPABLE.contains(&knob.kind) {
        bail!("verify {} --sweep: {}", knob.id, unordered(knob.kind));
    }
    if values.len() < 2 || values.len() > MAX_VALUES {
        bail!(
            "--sweep: give 2 to {MAX_VALUES} values, comma-separated (got {}); one value is `verify KNOB`",
            values.len()
        );
    }
    let mut out: Vec<(f64, Knob)> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if v.trim().is_empty() {
            bail!("--sweep: value {} is empty", i + 1);
        }
        if values[..i].iter().any(|w| w.trim() == v.trim()) {
            bail!("--sweep {v}: given twice");
        }
        let a = aggressiveness(knob.kind, v, as_found).map_err(|m| bad(v, m))?;
        let k = variant::with_set(knob, v.trim()).map_err(|m| bad(v, m))?;
        if let Some((_, same)) = out.iter().find(|(b, _)| *b == a) {
            let why = match knob.kind {
                KindName::Sysctl => format!(
                    "a sysctl's values rank by their distance from the as-found {}: sweep one side of it",
                    as_found.unwrap_or("value")
                ),
                _ => "give values that differ".into(),
            };
            bail!(
                "--sweep {v}: ranks the same as {}; {why}",
                same.spec.desired()
            );
        }
        out.push((a, k));
    }
    out.sort_by(|x, y| x.0.total_cmp(&y.0));
    Ok(out.into_iter().map(|(_, k)| k).collect())
}

/// The knee over points ranked least to most aggressive: the best is the
/// improved point with the lowest ratio; the knee the least aggressive
/// improved point whose ratio is at most best × (1 + tolerance).
pub fn knee(points: &[(String, f64, Verdict)], tolerance: f64) -> Knee {
    let improved = || points.iter().filter(|p| p.2 == Verdict::Improved);
    let Some(best) = improved().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        return Knee {
            value: None,
            best: None,
            tolerance,
            words: "no knee: no value improved on as found".into(),
        };
    };
    let limit = best.1 * (1.0 + tolerance);
    let k = improved()
        .find(|p| p.1 <= limit)
        .expect("the best is within its own tolerance");
    let words = if k.0 == best.0 {
        format!(
            "knee at {}: the best (ratio {:.3}), and no less aggressive value comes within {:.0} % of it",
            k.0,
            best.1,
            tolerance * 100.0
        )
    } else {
        format!(
            "knee at {} (ratio {:.3}): within {:.0} % of the best, {} (ratio {:.3}), and less aggressive",
            k.0,
            k.1,
            tolerance * 100.0,
            best.0,
            best.1
        )
    };
    Knee {
        value: Some(k.0.clone()),
        best: Some(best.0.clone()),
        tolerance,
        words,
    }
}

pub struct SweepOptions {
    pub values: Vec<String>,
    pub tolerance: f64,
}

/// The as-found value of the knob's first target (what a sysctl's distances are from).
fn as_found_value(session: &Session, knob: &Knob) -> Option<String> {
    let s = knob.spec.survey(&session.ctx).ok()?;
    s.targets.into_iter().find_map(|t| t.current)
}

/// Checks the values (before anything is written) and runs the sweep.
pub fn run(
    session: &Session,
    knob: &Knob,
    opts: &Options,
    sweep: &SweepOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<SweepReport> {
    let rule = super::rule_for(opts)?;
    if !(0.0..1.0).contains(&sweep.tolerance) {
        bail!(
            "--knee-tolerance {}: give a percentage from 0 to 100",
            sweep.tolerance * 100.0
        );
    }
    let here = as_found_value(session, knob);
    let knobs = variants(knob, &sweep.values, here.as_deref())?;
    let mut legs = vec![Variant {
        label: "as found".into(),
        knobs: Vec::new(),
    }];
    legs.extend(knobs.iter().map(|k| Variant {
        label: k.spec.desired(),
        knobs: vec![k],
    }));
    let split = multi::split_rule(rule, knobs.len());
    let metric = super::primary_metric(knob);
    let plan = multi::plan(legs.len(), rule, opts);
    progress(&format!(
        "sweeping {} over {}: {}; seed {}",
        knob.id,
        knobs
            .iter()
            .map(|k| k.spec.desired())
            .collect::<Vec<_>>()
            .join(", "),
        plan.words(),
        opts.seed
    ));
    let n = legs.len();
    let decided = move |r: &multi::Rounds| {
        (1..n).all(|v| {
            super::paired::analyze(&r.against(0, v), metric, split).decision != Decision::MoreRounds
        })
    };
    let run = multi::run(session, &legs, knob, opts, rule, &decided, progress)?;
    Ok(report(session, knob, opts, sweep, &legs, run, split, plan))
}

#[allow(clippy::too_many_arguments)]
fn report(
    session: &Session,
    knob: &Knob,
    opts: &Options,
    sweep: &SweepOptions,
    legs: &[Variant],
    run: MultiRun,
    split: super::paired::Rule,
    plan: multi::Plan,
) -> SweepReport {
    let metric = super::primary_metric(knob);
    let points: Vec<Point> = (1..legs.len())
        .map(|v| {
            let a = multi::compare(&run, 0, v, metric, split);
            let k = legs[v].knobs[0];
            let as_found = crate::apply::plan::plan(&session.ctx, &[k])
                .map(|p| p.steps.is_empty())
                .unwrap_or(false)
                && super::held_request(k).is_none();
            Point {
                value: legs[v].label.clone(),
                rank: v - 1,
                as_found,
                ratio: a.ratio,
                interval: a.interval,
                verdict: a.verdict,
                decision: a.decision,
                verdict_words: a.verdict_words(),
                analysis: a,
            }
        })
        .collect();
    let knee = knee(
        &points
            .iter()
            .map(|p| (p.value.clone(), p.ratio, p.verdict))
            .collect::<Vec<_>>(),
        sweep.tolerance,
    );
    SweepReport {
        host: session.ctx.name.clone(),
        knob: knob.id.clone(),
        kind: knob.kind,
        probe: opts.probe_name.clone(),
        settings: run.rounds.settings.clone(),
        seed: opts.seed,
        settle_ms: opts.settle.as_millis() as u64,
        rounds: run.rounds.samples.len(),
        plan,
        order: run.order_labels(legs),
        ranking: ranking(knob.kind).into(),
        points,
        knee,
        placement: run.placement,
        restored: run.restored,
        interrupted: run.interrupted,
        warnings: run.warnings,
        ledger: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &str, r: f64, verdict: Verdict) -> (String, f64, Verdict) {
        (v.into(), r, verdict)
    }
    use Verdict::{Improved as I, Inconclusive as U, NoDetectableEffect as N};

    #[test]
    fn the_knee_is_the_least_aggressive_improved_value_near_the_best() {
        // Least to most aggressive: 100, 20, 5, n/a.
        let pts = [
            p("100", 0.97, N),
            p("20", 0.61, I),
            p("5", 0.60, I),
            p("n/a", 0.59, I),
        ];
        let k = knee(&pts, 0.05);
        assert_eq!(k.best.as_deref(), Some("n/a"));
        assert_eq!(k.value.as_deref(), Some("20"), "{}", k.words);
        // A tighter tolerance moves it towards the best: 0.60 ≤ 0.59 × 1.02.
        assert_eq!(knee(&pts, 0.02).value.as_deref(), Some("5"));
        assert_eq!(knee(&pts, 0.0).value.as_deref(), Some("n/a"));
    }

    #[test]
    fn a_value_near_the_best_that_is_not_improved_is_never_the_knee() {
        let pts = [p("100", 0.60, U), p("20", 0.70, I), p("5", 0.61, I)];
        let k = knee(&pts, 0.05);
        assert_eq!(k.value.as_deref(), Some("5"), "{}", k.words);
        assert!(k.words.contains("the best"), "{}", k.words);
    }

    #[test]
    fn no_improved_value_means_no_knee() {
        let pts = [p("100", 0.99, N), p("n/a", 0.5, U)];
        let k = knee(&pts, 0.05);
        assert_eq!((k.value, k.best), (None, None));
        assert!(k.words.contains("no value improved"));
    }

    #[test]
    fn kinds_rank_their_values_and_others_are_refused() {
        let r = |k, v| aggressiveness(k, v, Some("60")).unwrap();
        use KindName::*;
        assert!(r(PmQosResumeLatency, "0") < r(PmQosResumeLatency, "100"));
        assert!(r(PmQosResumeLatency, "100") < r(PmQosResumeLatency, "5"));
        assert!(r(PmQosResumeLatency, "5") < r(PmQosResumeLatency, "n/a"));
        assert!(r(PmQos, "100") < r(PmQos, "0"));
        assert!(r(CpufreqMin, "1.2 GHz") < r(CpufreqMin, "2100 MHz"));
        assert!(r(CpufreqEpp, "power") < r(CpufreqEpp, "128"));
        assert!(r(CpufreqEpp, "128") < r(CpufreqEpp, "performance"));
        assert!(r(Sysctl, "50") < r(Sysctl, "10"), "closer to 60 is less");
        assert!(
            aggressiveness(Thp, "never", None)
                .unwrap_err()
                .contains("no ordered values")
        );
        assert!(
            aggressiveness(CpufreqMin, "max", None)
                .unwrap_err()
                .contains("frequencies")
        );
        assert!(aggressiveness(CpufreqEpp, "256", None).is_err());
        assert!(aggressiveness(Sysctl, "5", Some("4096 8192")).is_err());
    }
}
