//! In the DaemonSet's pod (`audit --pod`), what the chart does not mount is
//! not read (`root::POD_UNSEEN`). A verdict that an unseen path could change
//! (nothing persists it, nothing else sets it, configured for the next boot)
//! is `unknown` there, naming the path: its absence in the pod says nothing
//! about the host.

use crate::ethtool::Field;
use crate::knob::{KindName, Service, Target};
use crate::manifest::Knob;
use crate::root::{Concern, Unseen};
use crate::schema::Persistence;

use super::{KnobReport, Status};

/// The concerns of `root::Concern` a knob's verdict depends on.
pub(super) fn concerns(knob: &Knob, targets: &[Target]) -> Vec<Concern> {
    let services = knob.spec.services();
    let under = |p: &str| targets.iter().any(|t| t.path.starts_with(p));
    let mut out = Vec::new();
    if under("/proc/sys/") {
        out.push(Concern::Sysctl);
    }
    if !services.is_empty() || reads_processes(knob.kind) || knob.persistence == Persistence::Hold {
        out.push(Concern::Processes);
    }
    if knob.kind == KindName::KernelCmdline || knob.persistence == Persistence::Cmdline {
        out.push(Concern::BootLoader);
    }
    if !targets.is_empty() {
        out.push(Concern::Saptune);
    }
    // Only THP's boot default is read from the kernel's build configuration.
    if knob.kind == KindName::Thp {
        out.push(Concern::KernelConfig);
    }
    // Field::parse, not the path's spelling: it knows every form of the name.
    let ethtool = targets.iter().any(|t| Field::parse(&t.path).is_some());
    if ethtool {
        out.push(Concern::Ethtool);
    }
    if services.contains(&Service::Irqbalance) || knob.kind == KindName::Irqbalance {
        out.push(Concern::Irqbalance);
    }
    if under("/sys/class/net/") || ethtool {
        out.push(Concern::NetworkManager);
    }
    if under("/dev/") {
        out.push(Concern::Devices);
    }
    out
}

/// Kinds whose value or persistence is read from processes (a service's
/// environment, PID 1's and services' CPUs, a holder of a PM QoS request).
fn reads_processes(kind: KindName) -> bool {
    matches!(
        kind,
        KindName::Allocator | KindName::SystemdCpuAffinity | KindName::PmQos
    )
}

/// The statuses an unseen path of `concern` could make wrong for a knob of
/// `kind`. Where it only feeds the knob's `managers` (a service's process,
/// saptune's notes, irqbalance's ban), none: the path is named, the status kept.
fn falsifiable(concern: Concern, kind: KindName) -> &'static [Status] {
    const PERSISTENCE: &[Status] = &[Status::Ok, Status::Unpersisted];
    const NEXT_BOOT: &[Status] = &[
        Status::Ok,
        Status::Unpersisted,
        Status::Drift,
        Status::PendingReboot,
    ];
    const VALUE: &[Status] = &[
        Status::Ok,
        Status::Unpersisted,
        Status::Drift,
        Status::PendingReboot,
        Status::NotApplicable,
        Status::Unsupported,
        Status::LostOnReboot,
        Status::NotHonoured,
    ];
    match concern {
        Concern::Sysctl | Concern::NetworkManager | Concern::KernelConfig => PERSISTENCE,
        Concern::Ethtool => VALUE,
        Concern::BootLoader => NEXT_BOOT,
        Concern::Devices => VALUE,
        Concern::Processes if reads_processes(kind) => VALUE,
        Concern::Irqbalance if kind == KindName::Irqbalance => VALUE,
        Concern::Processes | Concern::Irqbalance | Concern::Saptune => &[],
    }
}

/// Marks `knob` (with its `concerns`) for the unseen entries the audit asked
/// for: each one it depends on is named, and a verdict one of them could
/// change becomes `unknown`.
pub(super) fn mark(knob: &mut KnobReport, concerns: &[Concern], asked: &[&Unseen]) {
    let relevant: Vec<&Unseen> = asked
        .iter()
        .copied()
        .filter(|u| concerns.contains(&u.concern))
        .collect();
    if relevant.is_empty() {
        return;
    }
    knob.unseen = relevant.iter().map(|u| reason(u)).collect();
    let kind = knob.kind;
    let changing = |s: Status| -> Vec<String> {
        relevant
            .iter()
            .filter(|u| falsifiable(u.concern, kind).contains(&s))
            .map(|u| reason(u))
            .collect()
    };
    let unknown = |s: Status| {
        let why = changing(s);
        (!why.is_empty()).then(|| {
            format!(
                "unknown: {} (read as absent, it would be {})",
                why.join("; "),
                s.as_str()
            )
        })
    };
    let Some(detail) = unknown(knob.status) else {
        return;
    };
    for g in knob.groups.iter_mut() {
        if let Some(d) = unknown(g.status) {
            g.status = Status::Unknown;
            g.detail = d;
        }
    }
    knob.status = Status::Unknown;
    knob.detail = detail;
}

/// What the report says of one unseen path.
pub(super) fn reason(u: &Unseen) -> String {
    // `/proc/[0-9]*` reads as what it is: every process's directory.
    format!(
        "not mounted in the pod: {}",
        u.path.replace("[0-9]*", "PID")
    )
}
