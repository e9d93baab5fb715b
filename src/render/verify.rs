//! verify's report as tables for a person.

use super::{facts, grid};
use crate::verify::placement::Placement;
use crate::verify::{Report, command};

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// A sample statistic in the probe's unit: µs, the noise probe's µs lost
/// per second, or the command's own.
fn unit(r: &Report, ns: f64) -> String {
    match &r.command {
        Some(c) => command::shown(c, ns),
        None if is_noise(r) => format!("{:.1} µs/s", ns / 1e3),
        None => format!("{:.1} µs", ns / 1e3),
    }
}

/// The noise probe's sample is each round's ns lost per CPU-second over the
/// watched CPUs (probe::noise::round_lost_per_s), not a latency.
fn is_noise(r: &Report) -> bool {
    r.probe == "noise"
}

/// The metric's name as a person knows it: the last step of a JSON path
/// (`.lat.p50_us` is `p50_us`), else the regex that captures it.
fn metric_name(c: &command::Placed) -> String {
    match c.metric.strip_prefix("json ") {
        Some(path) => {
            let path = path.split(" in ").next().unwrap_or(path);
            path.rsplit('.')
                .find(|s| !s.is_empty())
                .unwrap_or(path)
                .to_string()
        }
        None => format!("the value {}", c.metric),
    }
}

/// The leg table's title and columns. A command's runs each give one value
/// of its metric (a p50, say): their p95/p99/max are the spread across
/// runs, not the service's tail, and are labelled so.
fn leg_heads(r: &Report) -> (String, Vec<String>) {
    let Some(c) = &r.command else {
        let what = if is_noise(r) {
            "Each leg: time lost per second of each round on the watched CPUs (one figure a round: p50 = max), the median across rounds"
        } else {
            "Each leg: the median across rounds of each round's p50, p95, p99, max"
        };
        return (
            what.into(),
            [
                "leg",
                "samples",
                "p50",
                "p95",
                "p99",
                "max",
                "CV of round p50s",
            ]
            .map(String::from)
            .to_vec(),
        );
    };
    let better = match c.better {
        crate::schema::command::Better::Higher => "higher is better, so the worse side is low",
        crate::schema::command::Better::Lower => "lower is better",
    };
    (
        format!(
            "Each leg: {} of your command `{}` ({}; {better}), {} runs a leg: the median across rounds of each round's median run and of the spread of its runs (p95, p99, worst). One value per run: this is how much the runs differ, not your service's tail",
            metric_name(c),
            c.argv.join(" "),
            c.metric,
            c.samples
        ),
        [
            "leg",
            "runs",
            "median run",
            "runs' p95 (worse side)",
            "runs' p99 (worse side)",
            "worst run",
            "CV of round medians",
        ]
        .map(String::from)
        .to_vec(),
    )
}

/// Where the probe ran, in words: only the CPUs this probe uses, named as it
/// names them (a timer has no waker, rpc a server and a client, noise the
/// CPUs it measures), and the idle counters only for a knob about idling.
pub(super) fn placement_words(
    probe: &str,
    p: &Placement,
    command: Option<&command::Placed>,
    idle_knob: bool,
) -> String {
    let target = p
        .target_cpus
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_else(|| "none".into());
    if let (None, Some(m)) = (command, &p.measured) {
        return format!(
            "noise measured on CPUs {} ({}; target CPUs {target})",
            m.cpus, m.why
        );
    }
    if let Some(c) = command {
        let counters = match idle_knob {
            true => format!("; idle counters read on CPU {}", p.sleeper),
            false => String::new(),
        };
        return format!(
            "the command on CPUs {} ({}){counters} (target CPUs {target})",
            c.cpus, c.why
        );
    }
    let isolated = if p.sleeper_isolated {
        " (isolated)"
    } else {
        ""
    };
    let cpus = match probe {
        "timer" => format!("CPU {}{isolated}", p.sleeper),
        "rpc" => format!("server CPU {}{isolated}, client CPU {}", p.sleeper, p.waker),
        _ => format!("sleeper CPU {}{isolated}, waker CPU {}", p.sleeper, p.waker),
    };
    format!("{cpus} (target CPUs {target}; {})", p.why)
}

fn placement(r: &Report) -> (String, String) {
    (
        "placement".into(),
        placement_words(&r.probe, &r.placement, r.command.as_ref(), r.idle_knob),
    )
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
            placement(r),
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
    if r.rounds == 0 {
        return out + &facts("Verdict", &no_round_rows(r)) + &warnings(r);
    }
    let row = |name: &str, l: &crate::verify::paired::LegFigures| {
        vec![
            name.to_string(),
            l.samples.to_string(),
            unit(r, l.p50_ns),
            unit(r, l.p95_ns),
            unit(r, l.p99_ns),
            unit(r, l.max_ns),
            format!("{:.1}%", l.cv * 100.0),
        ]
    };
    let (mut title, mut heads) = leg_heads(r);
    let mut rows = vec![row("as found", &a.baseline), row("applied", &a.applied)];
    // A command's runs are few: their p95 is the worst run below 20 runs a
    // leg, their p99 below 100. Only what the runs can tell apart is shown.
    if let Some(c) = &r.command {
        let dropped: Vec<usize> = [(4, 100, "p99"), (3, 20, "p95")]
            .into_iter()
            .filter(|(_, need, _)| c.samples < *need)
            .map(|(col, _, _)| col)
            .collect();
        for &col in &dropped {
            heads.remove(col);
            for row in &mut rows {
                row.remove(col);
            }
        }
        if !dropped.is_empty() {
            let kept = if dropped.len() == 2 {
                "(worst)"
            } else {
                "(p95, worst)"
            };
            title = title.replace("(p95, p99, worst)", kept);
            title += &format!(
                ". With {} runs a leg the runs' {} would be the worst run: not shown (a p95 needs 20 runs a leg, a p99 100)",
                c.samples,
                if dropped.len() == 2 {
                    "p95 and p99"
                } else {
                    "p99"
                }
            );
        }
    }
    out += &grid(
        &title,
        &heads.iter().map(String::as_str).collect::<Vec<_>>(),
        rows,
    );
    let m = a.metric.as_str();
    let usf = |ns: f64| unit(r, ns);
    out += &grid(
        &format!("{m} per round (the ratio is applied / as found)"),
        &[
            "round",
            &format!("as found {m}"),
            &format!("applied {m}"),
            "ratio",
        ],
        a.per_round
            .iter()
            .map(|r| {
                vec![
                    r.round.to_string(),
                    usf(r.baseline_ns),
                    usf(r.applied_ns),
                    format!("{:.3}", r.ratio),
                ]
            })
            .chain(std::iter::once(vec![
                "geometric mean".into(),
                usf(a.baseline_geomean_ns),
                usf(a.applied_geomean_ns),
                format!("{:.3}", a.ratio),
            ]))
            .collect(),
    );
    out += &idle_table(r);
    out += &hardware_table(r);
    out += &split_table(r);
    out += &facts("Verdict", &verdict_rows(r));
    out += &warnings(r);
    out.trim_end().to_string() + "\n"
}

fn warnings(r: &Report) -> String {
    r.warnings
        .iter()
        .map(|w| format!("warning: {w}\n"))
        .collect()
}

/// An interrupt before the first round ended: no figures to show, only
/// that, what the kernel was seen to do and whether the host is as found.
fn no_round_rows(r: &Report) -> Vec<(String, String)> {
    vec![
        (
            "verdict".into(),
            format!(
                "no complete round: interrupted by {} before the first round's two legs ended; nothing to compare, nothing recorded",
                r.interrupted.as_deref().unwrap_or("a signal")
            ),
        ),
        ("honoured".into(), honoured_words(r)),
        restored_row(r),
    ]
}

fn restored_row(r: &Report) -> (String, String) {
    (
        "host restored".into(),
        if r.restored {
            "yes: the knob's files read as before".into()
        } else {
            crate::advice::runnable("NO: check `hostknob audit`")
        },
    )
}

fn honoured_words(r: &Report) -> String {
    match r.honoured.findings.as_slice() {
        [] if r.honoured.status == "not-checked" && r.interrupted.is_some() => {
            "not checked: no applied leg ran to its end".into()
        }
        [] if r.honoured.status == "not-checked" => {
            "not checked: the CPU entered no idle state, so there was nothing to check".into()
        }
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
    }
}

/// The wakeup probe's wake and wait for the CPU, per leg.
fn split_table(r: &Report) -> String {
    let Some(s) = &r.wake_split else {
        return String::new();
    };
    let rows = [("as found", &s.legs[0]), ("applied", &s.legs[1])]
        .into_iter()
        .filter_map(|(name, p)| {
            let p = p.as_ref()?;
            Some(vec![
                name.to_string(),
                us(p.wake.p50_ns),
                us(p.wake.p99_ns),
                us(p.run_delay.p50_ns),
                us(p.run_delay.p99_ns),
            ])
        })
        .collect();
    let limit = s
        .not_applicable
        .as_ref()
        .map(|w| format!("The split does not apply: {w}.\n"))
        .unwrap_or_default();
    limit
        + &grid(
            "Wake vs wait for the CPU (pooled over the rounds; run delay from schedstat)",
            &[
                "leg",
                "wake p50",
                "wake p99",
                "run delay p50",
                "run delay p99",
            ],
            rows,
        )
}

/// Each leg's hardware residency, or why the host exposes none.
fn hardware_table(r: &Report) -> String {
    let hw = &r.hardware;
    let note = hw
        .note
        .as_ref()
        .map(|n| format!("note: {n}\n"))
        .unwrap_or_default();
    let Some(source) = hw.source else {
        // Residency says something only about a knob that changes idling.
        if !r.idle_knob {
            return String::new();
        }
        return format!(
            "{}\n{note}\n",
            hw.reason
                .as_deref()
                .unwrap_or("hardware residency not exposed")
        );
    };
    let pct = |c: Option<&crate::verify::residency::LegCount>| {
        c.map_or("-".into(), |c| format!("{:.2}%", c.percent))
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut seen = Vec::new();
    for a in hw.legs[0].iter().chain(&hw.legs[1]) {
        let key = (a.count.scope, a.count.cpu, &a.count.state);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let find = |k: usize| {
            hw.legs[k]
                .iter()
                .find(|c| (c.count.scope, c.count.cpu, &c.count.state) == key)
        };
        rows.push(vec![
            a.count.scope.as_str().into(),
            a.count.cpu.to_string(),
            a.count.state.clone(),
            pct(find(0)),
            pct(find(1)),
            a.count.counter.clone(),
        ]);
    }
    grid(
        &format!("Hardware residency ({source}; % of the TSC, summed over the rounds)"),
        &["scope", "CPU", "state", "as found", "applied", "counter"],
        rows,
    ) + &note
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

/// The verdict's facts: ratio, verdict, honoured, expectations, losses, restored.
fn verdict_rows(r: &Report) -> Vec<(String, String)> {
    let a = &r.analysis;
    let m = a.metric.as_str();
    let mut rows = vec![
        (
            format!("ratio ({m})"),
            format!(
                "{} ({} rounds lower, {} higher; t-test p {:.2e}{})",
                a.interval_words(),
                a.rounds_lower,
                a.rounds_higher,
                a.p_value,
                if a.sd_floored {
                    "; the rounds agreed more closely than the 2 % floor, which was used"
                } else {
                    ""
                }
            ),
        ),
        ("verdict".into(), r.verdict_words.clone()),
        ("honoured".into(), honoured_words(r)),
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
                match e.check.outcome {
                    crate::verify::rule::Outcome::Met => "met",
                    crate::verify::rule::Outcome::NotMet => "NOT MET",
                    crate::verify::rule::Outcome::Inconclusive => "INCONCLUSIVE",
                },
                match &e.check.why {
                    Some(w) => format!("{}; {w}", e.check.measured),
                    None => e.check.measured.clone(),
                }
            ),
        ));
    }
    if let Some(l) = &r.losses {
        rows.push((
            "rpc losses".into(),
            format!(
                "as found {} of {}, applied {} of {}{}",
                l.lost[0],
                l.sent[0],
                l.lost[1],
                l.sent[1],
                if l.unequal {
                    ": far apart, see the verdict"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(sig) = &r.interrupted {
        rows.push((
            "interrupted".into(),
            format!(
                "by {sig}: PARTIAL, the figures cover the {} complete rounds; nothing recorded",
                r.rounds
            ),
        ));
    }
    rows.push(("energy".into(), r.energy.words.clone()));
    if let Some(n) = &r.noise {
        rows.push(("noise".into(), crate::verify::noise::words(n)));
    }
    rows.push(restored_row(r));
    if let Some(l) = &r.ledger {
        rows.push(("recorded in".into(), l.clone()));
    }
    rows
}

/// `verify --plot`: both legs' values as CDFs on the probe's own axis:
/// latency in µs, the noise probe's lost time per second, or the command's
/// metric in its unit (a `better: higher` metric back from its inverse).
pub fn plot(r: &Report) -> anyhow::Result<String> {
    let title = format!("{}: {}: {}", r.host, r.knob, r.verdict.as_str());
    let (x_desc, legs) = match &r.command {
        Some(c) => (
            format!("{} of your command ({}, log scale)", metric_name(c), c.unit),
            r.samples
                .each_ref()
                .map(|s| s.iter().map(|&v| command::value_of(c, v)).collect()),
        ),
        None => (
            if is_noise(r) {
                "time lost per second of each round (µs/s, log scale)".to_string()
            } else {
                super::svg::LATENCY_US.to_string()
            },
            r.samples
                .each_ref()
                .map(|s| s.iter().map(|&ns| ns / 1e3).collect::<Vec<f64>>()),
        ),
    };
    super::svg::cdf(
        &title,
        &x_desc,
        &[
            super::svg::Series {
                name: crate::verify::Leg::Baseline.as_str(),
                values: &legs[0],
            },
            super::svg::Series {
                name: crate::verify::Leg::Applied.as_str(),
                values: &legs[1],
            },
        ],
    )
}
