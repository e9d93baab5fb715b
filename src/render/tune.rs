//! `hostknob tune`'s report as text, and its search path as SVG: each
//! comparison's ratio with its interval, in the order the search made them.

use std::fmt::Write as _;

use crate::tune::design::Role;
use crate::tune::output::TuneReport;
use crate::tune::race::{Compared, Ended};

fn mark(c: &Compared, accepted: Option<&str>) -> &'static str {
    match (c.role, c.ended) {
        (Role::Step, _) if accepted == Some(c.label.as_str()) => "ACCEPTED",
        (Role::Sham, _) if c.verdict.as_str().ends_with("ed") => "SHAM CALLED AN EFFECT",
        (_, Ended::Futile) => "dropped",
        _ => "",
    }
}

fn one(out: &mut String, c: &Compared, accepted: Option<&str>) {
    let _ = writeln!(
        out,
        "  {:<40} {:<7} {:>6.3} ({:.3}-{:.3}) {:>3} rounds  {}",
        c.label,
        match c.role {
            Role::Sham => "sham",
            Role::Step => "step",
            _ => "",
        },
        c.ratio,
        c.interval[0],
        c.interval[1],
        c.rounds,
        mark(c, accepted)
    );
    let _ = writeln!(out, "      {}", c.words);
    for g in &c.guards {
        let _ = writeln!(
            out,
            "      guard {}: {:?} (ratio {:.3})",
            g.guard, g.outcome, g.ratio
        );
    }
}

pub fn table(r: &TuneReport) -> String {
    let o = &r.outcome;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tune on {} with the {} probe, space {}, seed {}{}",
        r.host,
        r.probe,
        r.space,
        r.seed,
        if o.partial {
            " (PARTIAL: stopped before the end)"
        } else {
            ""
        }
    );
    for l in o.plan.words() {
        let _ = writeln!(out, "  {l}");
    }
    for n in &r.not_searched {
        let _ = writeln!(out, "not searched: {}: {}", n.knob, n.reason);
    }
    if let Some(p) = &o.pilot {
        let _ = writeln!(out, "pilot (as found twice, nothing written): {}", p.words);
    }
    for (i, s) in o.stages.iter().enumerate() {
        let from = match s.from.as_slice() {
            [] => "as found".to_string(),
            f => f.join(", "),
        };
        let _ = writeln!(
            out,
            "knob {} of {}: {} (from {from})",
            i + 1,
            o.plan.shams,
            s.knob
        );
        for c in &s.comparisons {
            one(
                &mut out,
                c,
                s.accepted
                    .as_ref()
                    .map(|v| format!("{}={v}", s.knob))
                    .as_deref(),
            );
        }
    }
    let _ = writeln!(out, "shams: {}", o.shams.words);
    if let Some(c) = &o.confirm {
        let _ = writeln!(out, "confirmation against the host as found (a fresh run):");
        one(&mut out, &c.together, None);
        if c.shares.len() > 1 {
            for s in &c.shares {
                one(&mut out, s, None);
            }
        }
        for d in &c.drops {
            let _ = writeln!(out, "  pruned {}: {}", d.knob, d.reason);
        }
        for n in &c.not_reproduced {
            let _ = writeln!(out, "  not reproduced: {n}");
        }
    }
    match o.shipped.as_slice() {
        [] => {
            let _ = writeln!(out, "advice: nothing: no step was shown to help");
        }
        s => {
            let _ = writeln!(
                out,
                "advice: {} (review the knob files: {})",
                s.iter()
                    .map(|a| format!("{}={}", a.knob, a.value))
                    .collect::<Vec<_>>()
                    .join(", "),
                r.files.join(", ")
            );
        }
    }
    if let Some(restored) = r.restored {
        let _ = writeln!(
            out,
            "host: {}",
            crate::advice::runnable(if restored {
                "every knob reads as found"
            } else {
                "NOT as found: check `hostknob audit`; `hostknob revert --all` restores what the journal holds"
            })
        );
    }
    if let Some(rp) = &r.replay {
        let _ = writeln!(
            out,
            "replay: {}",
            if rp.same {
                "every decision derived again from the recorded samples is the same".to_string()
            } else {
                format!("DIFFERENT: {}", rp.differences.join("; "))
            }
        );
    }
    for w in r.caveats.iter().chain(&r.warnings) {
        let _ = writeln!(out, "note: {w}");
    }
    out
}

/// The search path: every step, sham and confirmation comparison, its ratio
/// and interval on a log axis, accepted steps in green, shams in grey.
pub fn path(r: &TuneReport) -> String {
    let o = &r.outcome;
    let mut rows: Vec<(&Compared, &str)> = Vec::new();
    for s in &o.stages {
        let acc = s.accepted.as_ref().map(|v| format!("{}={v}", s.knob));
        for c in &s.comparisons {
            let colour = match c.role {
                Role::Sham => "#888888",
                _ if acc.as_deref() == Some(c.label.as_str()) => "#2ca02c",
                _ if c.verdict.as_str() == "regressed" => "#d62728",
                _ => "#1f77b4",
            };
            rows.push((c, colour));
        }
    }
    if let Some(c) = &o.confirm {
        rows.push((&c.together, "#9467bd"));
    }
    let finite = |x: f64| x.is_finite() && x > 0.0;
    let (mut lo, mut hi) = (0.8f64, 1.25f64);
    for (c, _) in &rows {
        for x in [c.interval[0], c.interval[1], c.ratio] {
            if finite(x) {
                lo = lo.min(x);
                hi = hi.max(x);
            }
        }
    }
    let (w, row_h, left, right) = (900.0, 22.0, 330.0, 40.0);
    let h = 60.0 + row_h * rows.len() as f64;
    let x = |v: f64| left + (v.ln() - lo.ln()) / (hi.ln() - lo.ln()) * (w - left - right);
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-size=\"15\">{}: the search path (ratio to the configuration before each step, log axis; below 1 is better)</text>\n",
        esc(&r.host)
    );
    let one_x = x(1.0);
    let _ = writeln!(
        svg,
        "<line x1=\"{one_x:.1}\" y1=\"35\" x2=\"{one_x:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-opacity=\"0.4\"/><text x=\"{one_x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">1.0</text>",
        h - 20.0,
        h - 6.0
    );
    for (i, (c, colour)) in rows.iter().enumerate() {
        let y = 45.0 + row_h * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"{:.1}\">{}</text>",
            y + 4.0,
            esc(&c.label)
        );
        if finite(c.interval[0]) && finite(c.interval[1]) {
            let _ = writeln!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                x(c.interval[0]),
                x(c.interval[1])
            );
        }
        if finite(c.ratio) {
            let _ = writeln!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{colour}\"><title>{} {:.3} ({:.3}-{:.3})</title></circle>",
                x(c.ratio),
                esc(&c.words),
                c.ratio,
                c.interval[0],
                c.interval[1]
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}
