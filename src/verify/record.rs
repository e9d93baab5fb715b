//! The evidence verify leaves: the one-line summary and the ledger entry.

use anyhow::Result;

use super::Report;
use crate::apply::{self, Session};
use crate::manifest::{Knob, ledger};

/// The one-line summary the ledger and the host document show.
pub fn summary(r: &Report) -> String {
    let a = &r.analysis;
    // The legs' geometric means over the rounds: their ratio is the one the verdict tests.
    let mut s = match &r.command {
        Some(c) => format!(
            "command probe `{}`, seed {}: {} of {} ({} is better; geometric mean over rounds) {} -> {} {}: {}",
            c.argv.join(" "),
            r.seed,
            a.metric.as_str(),
            c.metric,
            c.better.as_str(),
            super::command::significant(c.geomean[0]),
            super::command::significant(c.geomean[1]),
            c.unit,
            r.verdict_words
        ),
        None => format!(
            "{} probe, seed {}: {} (geometric mean over rounds) {:.1} -> {:.1} µs: {}",
            r.probe,
            r.seed,
            a.metric.as_str(),
            a.baseline_geomean_ns / 1e3,
            a.applied_geomean_ns / 1e3,
            r.verdict_words
        ),
    };
    s += &format!("; {}", r.energy.words);
    if let Some(n) = &r.noise {
        s += &format!("; {}", super::noise::words(n));
    }
    if !r.restored {
        s = format!("NOT RESTORED: the knob's files did not read as found after the run; {s}");
    }
    if r.honoured.status == "not-honoured" {
        s += &format!(
            "; NOT HONOURED: {}",
            r.honoured
                .findings
                .first()
                .map(String::as_str)
                .unwrap_or("")
        );
    }
    for e in &r.expectations {
        s += &format!(
            "; expected \"{}\": {} ({})",
            e.text,
            match e.check.outcome {
                super::rule::Outcome::Met => "met",
                super::rule::Outcome::NotMet => "NOT met",
                super::rule::Outcome::Inconclusive => "inconclusive",
            },
            e.check.measured
        );
    }
    s
}

/// `verified` only when the host was left as found.
fn action(restored: bool) -> ledger::Action {
    if restored {
        ledger::Action::Verified
    } else {
        ledger::Action::VerifyNotRestored
    }
}

/// Appends the evidence to the host's ledger: `verified`, or
/// `verify-not-restored` when the host was not left as found.
pub fn record(session: &Session, knob: &Knob, r: &mut Report) -> Result<()> {
    let mut entry = apply::ledger_entry(
        &session.ctx.name,
        knob,
        action(r.restored),
        Vec::new(),
        &apply::who(),
    );
    entry.note = Some(summary(r));
    entry.evidence = Some(serde_json::json!({
        "probe": r.probe,
        "settings": r.settings,
        "rounds": r.rounds,
        "seed": r.seed,
        "settle_ms": r.settle_ms,
        "metric": r.analysis.metric,
        "baseline": r.analysis.baseline,
        "applied": r.analysis.applied,
        "ratios": r.analysis.ratios,
        "ratio": r.analysis.ratio,
        "interval": r.analysis.interval,
        "confidence": r.analysis.confidence,
        "p_value": r.analysis.p_value,
        "verdict": r.verdict,
        "decision": r.decision,
        "restored": r.restored,
        "losses": r.losses,
        "placement": r.placement,
        "honoured": r.honoured,
        "idle": r.idle,
        "expectations": r.expectations,
        "command": r.command,
        "energy": r.energy,
        "noise": r.noise,
    }));
    entry.facts = Some(crate::manifest::facts::Facts {
        probe: Some(r.probe.to_string()),
        probe_options: serde_json::to_value(&r.settings).ok(),
        ..crate::manifest::facts::Facts::of(session.root())
    });
    session.record(&entry).map_err(|e| anyhow::anyhow!("{e}"))?;
    r.ledger = Some(session.ledger().local_path().display().to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_that_did_not_restore_is_never_recorded_as_verified() {
        use crate::manifest::ledger::Action;
        assert_eq!(super::action(true), Action::Verified);
        assert_eq!(super::action(false), Action::VerifyNotRestored);
        assert_eq!(
            serde_json::to_value(Action::VerifyNotRestored).unwrap(),
            "verify-not-restored"
        );
    }
}
