//! Sweeps and bundles as tables, and a sweep's curve as SVG.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::{facts, grid};
use crate::verify::Plan;
use crate::verify::bundle::BundleReport;
use crate::verify::paired::Analysis;
use crate::verify::placement::Placement;
use crate::verify::sweep::SweepReport;

fn placement(probe: &str, p: &Placement) -> String {
    super::verify::placement_words(probe, p, None, true)
}

/// The probe row a sweep and a bundle share.
fn probe_fact(
    probe: &str,
    rounds: usize,
    seed: u64,
    settle_ms: u64,
    plan: &Plan,
) -> (String, String) {
    (
        "probe".into(),
        format!(
            "{probe} ({rounds} rounds, seed {seed}, settle {settle_ms} ms; {})",
            plan.words()
        ),
    )
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

fn tail(out: &mut String, warnings: &[String], restored: bool, interrupted: &Option<String>) {
    if !restored {
        *out += &crate::advice::runnable(
            "NOT RESTORED: the knobs' files do not read as found; run `hostknob audit`\n",
        );
    }
    if let Some(sig) = interrupted {
        *out += &format!("interrupted by {sig}: PARTIAL, nothing recorded\n");
    }
    for w in warnings {
        *out += &format!("warning: {w}\n");
    }
}

pub fn sweep_table(r: &SweepReport) -> String {
    let mut out = facts(
        &format!("Sweep of {} on {}", r.knob, r.host),
        &[
            probe_fact(&r.probe, r.rounds, r.seed, r.settle_ms, &r.plan),
            ("placement".into(), placement(&r.probe, &r.placement)),
            ("ranking".into(), r.ranking.clone()),
        ],
    );
    let m = r
        .points
        .first()
        .map_or("p50", |p| p.analysis.metric.as_str());
    out += &grid(
        &format!(
            "Each value against as found ({m}; least aggressive first; each interval at its share of the run's error rate)"
        ),
        &[
            "value",
            &format!("as found {m}"),
            &format!("value {m}"),
            "ratio",
            "interval",
            "verdict",
        ],
        r.points
            .iter()
            .map(|p| {
                vec![
                    format!("{}{}", p.value, if p.as_found { " (as found)" } else { "" }),
                    us(p.analysis.baseline_geomean_ns),
                    us(p.analysis.applied_geomean_ns),
                    format!("{:.3}", p.ratio),
                    format!("{:.3}-{:.3}", p.interval[0], p.interval[1]),
                    p.analysis.verdict_label(),
                ]
            })
            .collect(),
    );
    out += &format!("Knee: {}\n", r.knee.words);
    tail(&mut out, &r.warnings, r.restored, &r.interrupted);
    out
}

fn row(name: &str, a: &Analysis) -> Vec<String> {
    vec![
        name.into(),
        format!("{:.3}", a.ratio),
        format!("{:.3}-{:.3}", a.interval[0], a.interval[1]),
        a.verdict_label(),
    ]
}

pub fn bundle_table(r: &BundleReport) -> String {
    let mut out = facts(
        &format!("Bundle of {} on {}", r.knobs.join(", "), r.host),
        &[
            probe_fact(&r.probe, r.rounds, r.seed, r.settle_ms, &r.plan),
            ("placement".into(), placement(&r.probe, &r.placement)),
        ],
    );
    let mut rows = vec![row("all / as found", &r.together)];
    rows.extend(r.shares.iter().map(|s| {
        let mut v = row(&format!("all / without {}", s.knob), &s.analysis);
        v.push(
            s.fraction
                .map_or("-".into(), |f| format!("{:.0} %", f * 100.0)),
        );
        v
    }));
    rows[0].push("100 %".into());
    out += &grid(
        &format!(
            "The bundle's effect and each knob's share ({}; below 1: better with it)",
            r.together.metric.as_str()
        ),
        &["comparison", "ratio", "interval", "verdict", "share"],
        rows,
    );
    match r.drop_candidates.is_empty() {
        true => out += "Candidates to drop: none\n",
        false => {
            for d in &r.drop_candidates {
                out += &format!("Candidate to drop: {}: {}\n", d.knob, d.reason);
            }
        }
    }
    for d in &r.not_jointly_droppable {
        out += &format!(
            "Keep with the candidates dropped: {}: {}\n",
            d.knob, d.reason
        );
    }
    if let Some(w) = &r.interaction {
        out += &format!("Shares: {w}\n");
    }
    tail(&mut out, &r.warnings, r.restored, &r.interrupted);
    out
}

/// Each value's ratio to as found with its interval, least aggressive at the
/// left; a line at 1 (as found); the knee marked.
pub fn curve(r: &SweepReport) -> Result<String> {
    let n = r.points.len();
    if n == 0 {
        return Err(anyhow!("nothing to plot: no values"));
    }
    let finite = |x: f64| x.is_finite().then_some(x);
    let lo = r
        .points
        .iter()
        .filter_map(|p| finite(p.interval[0]))
        .fold(1.0f64, f64::min);
    let hi = r
        .points
        .iter()
        .filter_map(|p| finite(p.interval[1]))
        .fold(1.0f64, f64::max);
    let pad = (hi - lo).max(0.05) * 0.1;
    let title = format!("{}: {}: ratio to as found by value", r.host, r.knob);
    let err = |e: &dyn std::fmt::Display| anyhow!("plot: {e}");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let labels: Vec<String> = r.points.iter().map(|p| p.value.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(&title, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo - pad)..(hi + pad))
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(format!("{} (least aggressive at the left)", r.knob))
            .y_desc("ratio to as found (below 1: lower latency)")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
                BLACK.mix(0.4).stroke_width(1),
            ))
            .map_err(|e| err(&e))?
            .label("as found (1.0)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
        let blue = RGBColor(31, 119, 180);
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| (i as f64, p.ratio))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), blue.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label("ratio with its interval")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2))
            });
        chart
            .draw_series(r.points.iter().enumerate().flat_map(|(i, p)| {
                let x = i as f64;
                let (a, b) = (p.interval[0], p.interval[1]);
                [
                    PathElement::new(vec![(x, a), (x, b)], blue.stroke_width(2)),
                    PathElement::new(vec![(x - 0.08, a), (x + 0.08, a)], blue.stroke_width(2)),
                    PathElement::new(vec![(x - 0.08, b), (x + 0.08, b)], blue.stroke_width(2)),
                ]
            }))
            .map_err(|e| err(&e))?;
        if let Some(k) = r
            .points
            .iter()
            .position(|p| Some(&p.value) == r.knee.value.as_ref())
        {
            let red = RGBColor(214, 39, 40);
            chart
                .draw_series(std::iter::once(Circle::new(
                    (k as f64, r.points[k].ratio),
                    7,
                    red.stroke_width(2),
                )))
                .map_err(|e| err(&e))?
                .label(format!("knee: {}", r.points[k].value))
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, red.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
