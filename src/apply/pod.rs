//! `apply --pod --profile NAME`: what the chart's apply DaemonSet runs on a
//! node its label chose. Each runtime knob of the profile is applied on its
//! own (one refused write leaves the others standing); a knob that takes
//! effect only at the next boot or when a service restarts is reported
//! pending and never written (the pod does not write the boot loader or
//! systemd's configuration), one the pod's mounts and privileges cannot
//! write is named; a knob the journal holds that left the profile
//! is reverted, so the node converges on the profile at every round.

use std::collections::BTreeSet;

use super::boot::{KnobNote, each};
use super::{ApplyOptions, ApplyOutcome, Session, revert};
use crate::knob::KindName;
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

/// Why a knob waits for a reboot or a restart the pod does not make
/// (None: it takes effect when written).
fn pending(k: &Knob) -> Option<&'static str> {
    match (k.kind, k.persistence) {
        (KindName::KernelCmdline, _) => Some(
            "pending reboot: the kernel command line takes effect at the next boot; the pod \
             never writes the boot loader (apply it on the node, then reboot)",
        ),
        (KindName::SystemdCpuAffinity, _) => Some(
            "pending reboot: PID 1 takes CPUAffinity= at a daemon-reload or boot; the pod \
             never writes systemd's configuration (apply it on the node)",
        ),
        (KindName::Allocator, _) => Some(
            "pending restart: a systemd drop-in applies it when its service restarts; the pod \
             never writes systemd's configuration (apply it on the node)",
        ),
        (_, Persistence::Hold) => {
            Some("pending: a running `hostknob hold` keeps it (hostknob-hold@.service on the node)")
        }
        _ => None,
    }
}

/// Why the pod, with the chart's mounts and no capability, cannot write a
/// kind at all (None: it can).
fn out_of_reach(kind: KindName) -> Option<&'static str> {
    use KindName::*;
    match kind {
        C1e | PackageCstateLimit | C1Demotion | C1Undemotion | HwpMin | HwpMax | Prefetchers => {
            Some(
                "not in the pod's reach: MSR writes need /dev/cpu/N/msr and CAP_SYS_RAWIO, which \
             the chart does not grant (apply it on the node)",
            )
        }
        NicChannels | NicCoalesce | NicRing | NicFeature => Some(
            "not in the pod's reach: the ethtool ioctl needs the host's network namespace and \
             CAP_NET_ADMIN, which the chart does not grant (apply it on the node, or persist \
             it with a .link file)",
        ),
        ThreadAffinity => Some(
            "not in the pod's reach: moving the host's threads needs its processes (hostPID) \
             and CAP_SYS_NICE, which the chart does not grant (apply it on the node)",
        ),
        Irqbalance => Some(
            "not in the pod's reach: irqbalance's configuration is under /etc, which the pod \
             does not write (apply it on the node)",
        ),
        _ => None,
    }
}

/// Applies `knobs` (the profile's, for this host) as the pod does, then
/// reverts what the journal holds of any knob not among `profile` (the
/// profile's knob ids, pending ones included).
pub fn apply_pod(
    s: &Session,
    manifest: &Manifest,
    knobs: &[&Knob],
    profile: &BTreeSet<String>,
    opts: &ApplyOptions,
) -> ApplyOutcome {
    let mut out = each(s, knobs, opts, |k, o| {
        if let Some(why) = pending(k) {
            o.pending.push(KnobNote::new(k, why));
        } else if let Some(why) = out_of_reach(k.kind) {
            o.out_of_reach.push(KnobNote::new(k, why));
        } else {
            return false;
        }
        true
    });
    let journal = match s.journal().load() {
        Ok(j) => j,
        Err(e) => {
            out.failed.push(KnobNote {
                id: "(journal)".into(),
                why: format!("{e:#}: nothing that left the profile was reverted"),
            });
            return out;
        }
    };
    let gone: BTreeSet<String> = journal
        .entries
        .iter()
        .map(|e| e.knob.clone())
        .filter(|id| !profile.contains(id))
        .collect();
    if gone.is_empty() || opts.dry_run {
        return out;
    }
    let ids: Vec<String> = gone.into_iter().collect();
    match revert(s, Some(manifest), &ids, opts.wait, false) {
        Ok(r) => {
            for l in &r.left_alone {
                out.failed.push(KnobNote {
                    id: l.knob.clone(),
                    why: format!(
                        "left the profile, but {} no longer holds what hostknob wrote: not reverted",
                        l.path
                    ),
                });
            }
            out.reverted = ids
                .into_iter()
                .filter(|id| !r.left_alone.iter().any(|l| &l.knob == id))
                .collect();
        }
        Err(e) => {
            for id in ids {
                out.failed.push(KnobNote {
                    why: format!("left the profile; its revert failed: {e}"),
                    id,
                });
            }
        }
    }
    out
}
