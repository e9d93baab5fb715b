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
use crate::knob::rules::{CpuId, EppPresets};
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

impl Point {
    fn new(value: String, rank: usize, as_found: bool, a: Analysis) -> Point {
        Point {
            value,
            rank,
            as_found,
            ratio: a.ratio,
            interval: a.interval,
            verdict: a.verdict,
            decision: a.decision,
            verdict_words: a.verdict_words(),
            analysis: a,
        }
    }
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
    /// The other values whose intervals overlap the best's: the data cannot
    /// tell them from the best, so the choice among them is uncertain.
    pub overlap_best: Vec<String>,
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
fn aggressiveness(
    kind: KindName,
    value: &str,
    as_found: Option<&str>,
    presets: Option<&EppPresets>,
) -> Result<f64, String> {
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
        // A preset name ranks by its number on this CPU (the kernel's table:
        // balance_performance is 32 on Sapphire Rapids, 128 by default).
        KindName::CpufreqEpp => match value.trim() {
            name if presets.and_then(|p| p.value(name)).is_some() => {
                -f64::from(presets.and_then(|p| p.value(name)).unwrap_or(0))
            }
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
pub fn variants(
    knob: &Knob,
    values: &[String],
    as_found: Option<&str>,
    presets: Option<&EppPresets>,
) -> Result<Vec<Knob>> {
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
        let a = aggressiveness(knob.kind, v, as_found, presets).map_err(|m| bad(v, m))?;
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
            overlap_best: Vec::new(),
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
        overlap_best: Vec::new(),
        words,
    }
}

/// Adds to `k` the values whose intervals overlap the best's, and says so.
fn with_uncertainty(mut k: Knee, points: &[Point]) -> Knee {
    let Some(best) = points
        .iter()
        .find(|p| k.best.as_deref() == Some(p.value.as_str()))
    else {
        return k;
    };
    let [lo, hi] = best.interval;
    k.overlap_best = points
        .iter()
        .filter(|p| p.value != best.value && p.interval[0] <= hi && p.interval[1] >= lo)
        .map(|p| p.value.clone())
        .collect();
    k.words += &match k.overlap_best.as_slice() {
        [] => format!("; the best's interval {lo:.3}-{hi:.3} overlaps no other value's"),
        o => format!(
            "; the best's interval {lo:.3}-{hi:.3} overlaps {}'s: the data cannot tell them apart",
            o.join(", ")
        ),
    };
    k
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

/// The EPP preset numbers of an EPP knob's driver on this CPU, as apply uses them.
fn epp_presets(session: &Session, knob: &Knob) -> Option<EppPresets> {
    if knob.kind != KindName::CpufreqEpp {
        return None;
    }
    let root = session.root();
    let s = knob.spec.survey(&session.ctx).ok()?;
    let file = s.targets.into_iter().map(|t| t.path).next()?;
    let dir = file.rsplit_once('/')?.0;
    let driver = root
        .read_trimmed(&format!("{dir}/scaling_driver"))
        .ok()
        .flatten()?;
    let cpu = root.read_string("/proc/cpuinfo").ok();
    EppPresets::of(&driver, cpu.as_deref().and_then(CpuId::parse).as_ref())
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
    let presets = epp_presets(session, knob);
    let knobs = variants(knob, &sweep.values, here.as_deref(), presets.as_ref())?;
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
            Point::new(legs[v].label.clone(), v - 1, as_found, a)
        })
        .collect();
    let knee = knee(
        &points
            .iter()
            .map(|p| (p.value.clone(), p.ratio, p.verdict))
            .collect::<Vec<_>>(),
        sweep.tolerance,
    );
    let knee = with_uncertainty(knee, &points);
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
        let r = |k, v| aggressiveness(k, v, Some("60"), None).unwrap();
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
            aggressiveness(Thp, "never", None, None)
                .unwrap_err()
                .contains("no ordered values")
        );
        assert!(
            aggressiveness(CpufreqMin, "max", None, None)
                .unwrap_err()
                .contains("frequencies")
        );
        assert!(aggressiveness(CpufreqEpp, "256", None, None).is_err());
        assert!(aggressiveness(Sysctl, "5", Some("4096 8192"), None).is_err());
    }

    /// A point whose rounds have the given ratios to as found.
    fn point(value: &str, ratios: &[f64]) -> Point {
        let rounds: Vec<_> = (0..12)
            .map(|r| {
                let a = (100_000.0 * ratios[r % ratios.len()]).trunc();
                (vec![100_000.0; 9], vec![a; 9])
            })
            .collect();
        let a = crate::verify::paired::analyze(
            &rounds,
            crate::verify::paired::Metric::P50,
            crate::verify::paired::Rule::for_rounds(12),
        );
        Point::new(value.into(), 0, false, a)
    }

    #[test]
    fn the_knee_says_which_values_the_data_cannot_tell_from_the_best() {
        let pts = [
            point("20", &[0.80, 0.70]),
            point("5", &[0.60, 0.66]),
            point("n/a", &[0.58, 0.62]),
        ];
        let triples: Vec<_> = pts
            .iter()
            .map(|p| (p.value.clone(), p.ratio, p.verdict))
            .collect();
        let k = with_uncertainty(knee(&triples, 0.2), &pts);
        assert_eq!(k.best.as_deref(), Some("n/a"), "{}", k.words);
        assert_eq!(k.value.as_deref(), Some("5"), "{}", k.words);
        assert_eq!(k.overlap_best, ["5"], "{}", k.words);
        assert!(
            k.words
                .contains("overlaps 5's: the data cannot tell them apart"),
            "{}",
            k.words
        );
    }

    #[test]
    fn epp_names_rank_by_the_models_own_numbers() {
        let cpu = |model| CpuId {
            vendor: "GenuineIntel".into(),
            family: 6,
            model,
        };
        // Sapphire Rapids: balance_performance is 32, more aggressive than 64.
        let spr = EppPresets::of("intel_pstate", Some(&cpu(0x8F)));
        let r = |v| aggressiveness(KindName::CpufreqEpp, v, None, spr.as_ref()).unwrap();
        assert_eq!(r("balance_performance"), -32.0);
        assert!(r("64") < r("balance_performance") && r("balance_performance") < r("16"));
        // Where the CPU is unknown, the kernel's default table.
        let r = |v| aggressiveness(KindName::CpufreqEpp, v, None, None).unwrap();
        assert_eq!(r("balance_performance"), -128.0);
    }
}
