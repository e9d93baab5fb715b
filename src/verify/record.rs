//! The evidence verify leaves: the one-line summary and the ledger entry.

use anyhow::Result;

use super::Report;
use crate::apply::{self, Session};
use crate::manifest::{Knob, ledger};

/// The one-line summary the ledger and the host document show.
pub fn summary(r: &Report) -> String {
    let a = &r.analysis;
    let mut s = format!(
        "{} probe, seed {}: {} {:.1} -> {:.1} µs, CV {:.1}% / {:.1}%: {}",
        r.probe,
        r.seed,
        a.metric.as_str(),
        a.baseline.get(a.metric) / 1e3,
        a.applied.get(a.metric) / 1e3,
        a.baseline.cv * 100.0,
        a.applied.cv * 100.0,
        r.verdict_words
    );
    if r.honoured.status != "honoured" {
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
            if e.check.met { "met" } else { "NOT met" },
            e.check.measured
        );
    }
    s
}

/// Appends the evidence to the host's ledger.
pub fn record(session: &Session, knob: &Knob, r: &mut Report) -> Result<()> {
    let mut entry = apply::ledger_entry(
        &session.ctx.name,
        knob,
        ledger::Action::Verified,
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
        "placement": r.placement,
        "honoured": r.honoured,
        "idle": r.idle,
        "expectations": r.expectations,
    }));
    session.record(&entry).map_err(|e| anyhow::anyhow!("{e}"))?;
    r.ledger = Some(
        ledger::path_for(&session.manifest_dir, &session.ctx.name)
            .display()
            .to_string(),
    );
    Ok(())
}
