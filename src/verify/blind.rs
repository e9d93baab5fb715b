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

/// The kinds that change a NIC or its packet path: only packets that cross
/// the NIC show them.
fn is_nic(kind: KindName) -> bool {
    matches!(
        kind,
        KindName::NicChannels
            | KindName::NicCoalesce
            | KindName::NicRing
            | KindName::NicFeature
            | KindName::Rps
            | KindName::Xps
    )
}

/// Why `probe` cannot exercise the NIC a NIC knob changes: its samples
/// never cross a NIC. `rpc --connect` to a peer through that NIC does, and
/// the noise probe sees the interrupt and softirq time the NIC's traffic
/// takes from the CPUs.
fn nic_blind_spot(knob: &Knob, probe: &LatencyProbe) -> Option<String> {
    let what = match probe {
        LatencyProbe::Wakeup(_) => {
            "the wakeup probe cannot exercise the NIC (its sleeper is woken by another thread, no packet crosses a NIC)"
        }
        LatencyProbe::Timer(_) => {
            "the timer probe cannot exercise the NIC (its wakeups are the CPU's own timer, no packet crosses a NIC)"
        }
        LatencyProbe::Rpc(o) if o.connect.is_none() => {
            "the rpc probe without --connect cannot exercise the NIC (its built-in echo server is on this host: loopback packets never reach a NIC driver)"
        }
        LatencyProbe::Rpc(_) | LatencyProbe::Noise(_) => return None,
    };
    Some(format!(
        "{what}, so it cannot show what {} ({}) changes; verify it with `--probe rpc -- --connect HOST:PORT`, a peer service reached through that NIC (run `hostknob probe rpc --bind IP` on the peer for an echo server), or with `--probe noise` while the NIC carries traffic",
        knob.id, knob.kind
    ))
}

/// Why `probe` cannot show what `knob` does, when it cannot.
pub fn blind_spot(knob: &Knob, probe: &LatencyProbe) -> Option<String> {
    if is_nic(knob.kind) {
        return nic_blind_spot(knob, probe);
    }
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

/// The verdict in words, saying what it means when the probe was blind: a
/// NIC knob's probe that cannot exercise the NIC measured nothing of it.
pub fn words(analysis: &super::paired::Analysis, knob: &Knob, blind: bool) -> String {
    let w = analysis.verdict_words();
    if !blind || analysis.verdict != super::paired::Verdict::NoDetectableEffect {
        return w;
    }
    if is_nic(knob.kind) {
        format!(
            "not measured: the probe cannot exercise the NIC {} changes (see the warning for the probe to use)",
            knob.id
        )
    } else {
        format!("{w} (the probe cannot see this knob's interrupts: not a failure of the knob)")
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
