//! What a probe cannot see of a knob, said before its verdict is read: an
//! `irq-affinity` knob moves device interrupts, and only a probe whose
//! samples take such interrupts can show it. The wakeup and timer probes
//! wake by timer and IPI, never by a device; the rpc probe over loopback
//! raises no device interrupt either (loopback is a softirq on the sender's
//! CPU); only `rpc --connect` to a peer over a NIC whose IRQs the knob moves
//! sees them. There, `no detectable effect` is not a failure of the knob.

use crate::knob::KindName;
use crate::manifest::Knob;
use crate::probe::latency::LatencyProbe;

/// Why `probe` cannot show what `knob` does, when it cannot.
pub fn blind_spot(knob: &Knob, probe: &LatencyProbe) -> Option<String> {
    if knob.kind != KindName::IrqAffinity {
        return None;
    }
    let what = match probe {
        LatencyProbe::Wakeup(_) => {
            "the wakeup probe's samples take no device interrupt (its sleeper is woken by another thread through a futex, eventfd or pipe: an IPI at most)"
        }
        LatencyProbe::Timer(_) => {
            "the timer probe's samples take no device interrupt (its wakeups are the CPU's own timer)"
        }
        LatencyProbe::Rpc(o) if o.connect.is_none() => {
            "the rpc probe over loopback takes no device interrupt (loopback packets are handled in a softirq on the sending CPU); give --connect ADDR, a peer reached through a NIC whose IRQs this knob moves"
        }
        LatencyProbe::Rpc(_) | LatencyProbe::Noise(_) => return None,
    };
    Some(format!(
        "{what}: it cannot see where {}'s IRQs run, so `no detectable effect` here is not a failure of the knob",
        knob.id
    ))
}

/// A run that cannot see the knob decides nothing against it: an
/// expectation it could not meet is inconclusive, not unmet.
pub fn not_a_failure(why: &str, expectations: &mut [super::ExpectationCheck]) {
    use super::rule::Outcome;
    for e in expectations.iter_mut() {
        if e.check.outcome == Outcome::NotMet {
            e.check.outcome = Outcome::Inconclusive;
            e.check.why = Some(why.to_string());
        }
    }
}

/// The verdict in words, saying what it means when the probe was blind.
pub fn words(analysis: &super::paired::Analysis, blind: bool) -> String {
    let w = analysis.verdict_words();
    if blind && analysis.verdict == super::paired::Verdict::NoDetectableEffect {
        format!("{w} (the probe cannot see this knob's interrupts: not a failure of the knob)")
    } else {
        w
    }
}

/// Says what the probe cannot see (a warning) and keeps an expectation it
/// could not meet from counting against the knob; whether it was blind.
pub fn account(
    knob: &Knob,
    probe: &LatencyProbe,
    expectations: &mut [super::ExpectationCheck],
    warnings: &mut Vec<String>,
) -> bool {
    let Some(why) = blind_spot(knob, probe) else {
        return false;
    };
    not_a_failure(&why, expectations);
    warnings.push(why);
    true
}
