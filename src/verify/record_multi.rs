//! The evidence sweeps and bundles leave in the ledger: one `verified`
//! entry per knob (`verify-not-restored` when the host was not left as found).

use anyhow::Result;

use super::bundle::BundleReport;
use super::sweep::SweepReport;
use crate::apply::{self, Session};
use crate::manifest::{Knob, ledger};

fn action(restored: bool) -> ledger::Action {
    if restored {
        ledger::Action::Verified
    } else {
        ledger::Action::VerifyNotRestored
    }
}

fn append(
    session: &Session,
    knob: &Knob,
    restored: bool,
    note: String,
    evidence: serde_json::Value,
) -> Result<String> {
    let mut entry = apply::ledger_entry(
        &session.ctx.name,
        knob,
        action(restored),
        Vec::new(),
        &apply::who(),
    );
    entry.note = Some(match restored {
        true => note,
        false => {
            format!("NOT RESTORED: the knob's files did not read as found after the run; {note}")
        }
    });
    entry.evidence = Some(evidence);
    session.record(&entry).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(ledger::path_for(&session.manifest_dir, &session.ctx.name)
        .display()
        .to_string())
}

/// The one-line summary of a sweep: each value's ratio and the knee.
pub fn sweep_summary(r: &SweepReport) -> String {
    let points: Vec<String> = r
        .points
        .iter()
        .map(|p| {
            format!(
                "{} {:.3} ({:.3}-{:.3}, {})",
                p.value,
                p.ratio,
                p.interval[0],
                p.interval[1],
                p.analysis.verdict_label()
            )
        })
        .collect();
    format!(
        "{} probe, seed {}, sweep over {} rounds, ratio to as found: {}; {}",
        r.probe,
        r.seed,
        r.rounds,
        points.join(", "),
        r.knee.words
    )
}

/// Appends the sweep's evidence. When the manifest's own value is among the
/// values, its comparison is the entry's verdict.
pub fn record_sweep(session: &Session, knob: &Knob, r: &mut SweepReport) -> Result<()> {
    let own = r.points.iter().find(|p| p.value == knob.spec.desired());
    let evidence = serde_json::json!({
        "probe": r.probe,
        "settings": r.settings,
        "rounds": r.rounds,
        "seed": r.seed,
        "settle_ms": r.settle_ms,
        "sweep": r.points.iter().map(|p| serde_json::json!({
            "value": p.value,
            "ratio": p.ratio,
            "interval": p.interval,
            "verdict": p.verdict,
            "decision": p.decision,
        })).collect::<Vec<_>>(),
        "knee": r.knee,
        "verdict": own.map(|p| p.verdict),
        "ratio": own.map(|p| p.ratio),
        "interval": own.map(|p| p.interval),
        "restored": r.restored,
        "placement": r.placement,
    });
    r.ledger = Some(append(
        session,
        knob,
        r.restored,
        sweep_summary(r),
        evidence,
    )?);
    Ok(())
}

/// Appends one entry per knob of the bundle, with its share.
pub fn record_bundle(session: &Session, knobs: &[&Knob], r: &mut BundleReport) -> Result<()> {
    for (k, s) in knobs.iter().zip(&r.shares) {
        let dropped = r.drop_candidates.iter().find(|d| d.knob == k.id);
        let note = format!(
            "{} probe, seed {}, bundle of {} over {} rounds: {}; {}{}",
            r.probe,
            r.seed,
            r.knobs.join(", "),
            r.rounds,
            r.together_words,
            s.words,
            dropped
                .map(|d| format!("; candidate to drop: {}", d.reason))
                .unwrap_or_default()
        );
        let evidence = serde_json::json!({
            "probe": r.probe,
            "settings": r.settings,
            "rounds": r.rounds,
            "seed": r.seed,
            "settle_ms": r.settle_ms,
            "bundle": r.knobs,
            "together": {
                "ratio": r.together.ratio,
                "interval": r.together.interval,
                "verdict": r.together.verdict,
            },
            "share": {
                "ratio": s.ratio,
                "interval": s.interval,
                "verdict": s.verdict,
                "fraction": s.fraction,
            },
            "drop_candidate": dropped.is_some(),
            "restored": r.restored,
            "placement": r.placement,
        });
        r.ledger = Some(append(session, k, r.restored, note, evidence)?);
    }
    Ok(())
}
