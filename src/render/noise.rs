//! `probe noise`'s table: per CPU the lost time, its gaps and who took it.

use super::probe::{cut_short, histogram, host_rows, pm_qos};
use super::{facts, grid};
use crate::probe::noise::{CpuNoise, NoiseResult};

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

pub fn table(r: &NoiseResult) -> String {
    let s = &r.settings;
    let mut rows = vec![
        ("CPUs".to_string(), s.cpus.to_string()),
        (
            "duration / threshold".into(),
            format!(
                "{:.3} s / {} ns",
                s.duration_ms as f64 / 1e3,
                s.threshold_ns
            ),
        ),
        (
            "threads".into(),
            s.priority
                .map_or("SCHED_OTHER".into(), |p| format!("SCHED_FIFO {p}")),
        ),
        ("clock".into(), s.clock.clone()),
        (
            "attribution".into(),
            format!(
                "{}{}{}",
                r.attribution,
                if r.attribution == "counts" {
                    " (an estimate: counts say how often, and a thread free to run elsewhere gets a share of its run time)"
                } else {
                    ""
                },
                r.attribution_note
                    .as_ref()
                    .map(|n| format!("; {n}"))
                    .unwrap_or_default()
            ),
        ),
        pm_qos(&s.pm_qos, &s.host),
    ];
    rows.extend(host_rows(&s.host));
    let measured = r.cpus.iter().map(|c| c.measured_ns).max().unwrap_or(0);
    let mut out = cut_short(
        r.interrupted.as_deref(),
        &format!("{:.1} s", measured as f64 / 1e9),
        &format!("{:.1} s", s.duration_ms as f64 / 1e3),
    );
    out += &facts("Noise probe", &rows);
    let summary = r
        .cpus
        .iter()
        .map(|c| {
            let g = c.gap.as_ref();
            let p = |f: fn(&crate::stats::Summary) -> u64| g.map_or("-".into(), |g| us(f(g)));
            vec![
                c.cpu.to_string(),
                format!("{:.3}", c.measured_ns as f64 / 1e9),
                format!("{:.1}", c.lost_us_per_s),
                format!("{:.1}", c.ppm),
                c.gaps.to_string(),
                p(|s| s.p50_ns),
                p(|s| s.p99_ns),
                p(|s| s.p999_ns),
                us(c.max_gap_ns),
            ]
        })
        .collect();
    out += &grid(
        "Lost time per CPU (gaps in µs)",
        &[
            "CPU",
            "measured s",
            "lost µs/s",
            "ppm",
            "gaps",
            "p50",
            "p99",
            "p99.9",
            "max",
        ],
        summary,
    );
    for c in &r.cpus {
        out += &sources(c);
        if !c.histogram.is_empty() {
            out += &format!("CPU {}: ", c.cpu);
            out += &histogram(&c.histogram);
        }
    }
    out
}

/// Top sources first, then what none explains.
fn sources(c: &CpuNoise) -> String {
    const SHOWN: usize = 15;
    let mut rows: Vec<Vec<String>> = c
        .sources
        .iter()
        .take(SHOWN)
        .map(|s| {
            vec![
                s.kind.clone(),
                match s.pid {
                    Some(p) => format!("{} (pid {p})", s.name),
                    None => s.name.clone(),
                },
                s.count.to_string(),
                format!(
                    "{}{}",
                    us(s.time_ns),
                    if s.estimated { " (est.)" } else { "" }
                ),
                pct(s.share),
            ]
        })
        .collect();
    if c.sources.len() > SHOWN {
        let rest = &c.sources[SHOWN..];
        rows.push(vec![
            "-".into(),
            format!("{} more (in the JSON)", rest.len()),
            rest.iter().map(|s| s.count).sum::<u64>().to_string(),
            us(rest.iter().map(|s| s.time_ns).sum()),
            pct(rest.iter().map(|s| s.share).sum()),
        ]);
    }
    if c.lost_ns > 0 {
        rows.push(vec![
            "-".into(),
            "unexplained".into(),
            "-".into(),
            us(c.unexplained_ns),
            pct(c.unexplained_share),
        ]);
    }
    grid(
        &format!("CPU {}: who took the time", c.cpu),
        &["kind", "source", "count", "time µs", "share"],
        rows,
    )
}
