//! verify's report as tables for a person.

use super::{facts, grid};
use crate::verify::Report;

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

pub fn table(r: &Report) -> String {
    let a = &r.analysis;
    let mut out = facts(
        &format!("Verify {} on {}", r.knob, r.host),
        &[
            (
                "probe".into(),
                format!(
                    "{} ({} rounds run, first look after {}, cap {}, seed {}, settle {} ms)",
                    r.probe,
                    r.rounds,
                    r.analysis.rule.rounds,
                    r.analysis.rule.max_rounds,
                    r.seed,
                    r.settle_ms
                ),
            ),
            (
                "placement".into(),
                format!(
                    "sleeper CPU {}, waker CPU {} (target CPUs {}; {})",
                    r.placement.sleeper,
                    r.placement.waker,
                    r.placement
                        .target_cpus
                        .as_ref()
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "none".into()),
                    r.placement.why
                ),
            ),
            (
                "leg order".into(),
                r.order
                    .iter()
                    .map(|o| format!("{}/{}", o[0].as_str(), o[1].as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ],
    );
    let row = |name: &str, l: &crate::verify::paired::LegFigures| {
        vec![
            name.to_string(),
            l.samples.to_string(),
            us(l.p50_ns),
            us(l.p95_ns),
            us(l.p99_ns),
            us(l.max_ns),
            format!("{:.1}%", l.cv * 100.0),
        ]
    };
    out += &grid(
        "Medians across rounds",
        &["leg", "samples", "p50", "p95", "p99", "max", "CV of p50"],
        vec![row("as found", &a.baseline), row("applied", &a.applied)],
    );
    out += &grid(
        &format!("Per round (applied / as found, {})", a.metric.as_str()),
        &["round", "as found p50", "applied p50", "ratio"],
        a.ratios
            .iter()
            .enumerate()
            .map(|(i, ratio)| {
                vec![
                    (i + 1).to_string(),
                    us(a.baseline.round_p50_ns[i]),
                    us(a.applied.round_p50_ns[i]),
                    format!("{ratio:.3}"),
                ]
            })
            .collect(),
    );
    out += &idle_table(r);
    let mut rows = vec![
        (
            format!("ratio ({})", a.metric.as_str()),
            format!(
                "{:.3}, {:.1}% interval {:.3}-{:.3} ({} rounds lower, {} higher; t-test p {:.2e})",
                a.ratio,
                a.confidence * 100.0,
                a.interval[0],
                a.interval[1],
                a.rounds_lower,
                a.rounds_higher,
                a.p_value
            ),
        ),
        ("verdict".into(), r.verdict_words.clone()),
        (
            "honoured".into(),
            match r.honoured.findings.as_slice() {
                [] => "yes: the kernel did what the knob asked in every applied leg".into(),
                f => format!(
                    "NOT HONOURED: {}{}{}",
                    f[0],
                    if f.len() > 1 {
                        format!(" (and {} more)", f.len() - 1)
                    } else {
                        String::new()
                    },
                    r.honoured
                        .cause
                        .as_ref()
                        .map(|c| format!("; likely cause: {c}"))
                        .unwrap_or_default()
                ),
            },
        ),
    ];
    if let Some(n) = &r.note {
        rows.push(("note".into(), n.clone()));
    }
    for e in &r.expectations {
        rows.push((
            "expected".into(),
            format!(
                "{}: {} ({})",
                e.text,
                if e.check.met { "met" } else { "NOT MET" },
                e.check.measured
            ),
        ));
    }
    rows.push((
        "host restored".into(),
        if r.restored {
            "yes: the knob's files read as before".into()
        } else {
            "NO: check `hostknob audit`".into()
        },
    ));
    if let Some(l) = &r.ledger {
        rows.push(("recorded in".into(), l.clone()));
    }
    out += &facts("Verdict", &rows);
    for w in &r.warnings {
        out += &format!("warning: {w}\n");
    }
    out.trim_end().to_string() + "\n"
}

/// Each leg's idle-state entries and residency on the watched CPUs.
fn idle_table(r: &Report) -> String {
    let mut out = String::new();
    if !r.idle[1].is_empty() {
        out += &grid(
            "Idle states entered on the watched CPUs (summed over the rounds)",
            &[
                "CPU",
                "state",
                "as found: entries",
                "residency",
                "applied: entries",
                "residency",
            ],
            r.idle[1]
                .iter()
                .map(|a| {
                    let b = r.idle[0]
                        .iter()
                        .find(|b| b.cpu == a.cpu && b.state == a.state);
                    vec![
                        a.cpu.to_string(),
                        format!("{}{}", a.state, if a.disabled { " (disabled)" } else { "" }),
                        b.map_or("-".into(), |b| b.entries.to_string()),
                        b.map_or("-".into(), |b| format!("{} µs", b.residency_us)),
                        a.entries.to_string(),
                        format!("{} µs", a.residency_us),
                    ]
                })
                .collect(),
        );
    }
    out
}
