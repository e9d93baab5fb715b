//! Tuning managers found on the host, whatever the manifest's knobs: a fleet
//! view of which hosts run tuned (and its profile), saptune, power-profiles-
//! daemon, TLP or cpupower beside hostknob. Per knob, `managers` says which
//! of them touch that knob's files.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::knob::{HostCtx, Service};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Competing {
    /// `tuned`, `saptune`, `power-profiles-daemon`, `tlp` or `cpupower`.
    pub name: String,
    /// tuned's active profile, power-profiles-daemon's profile, saptune's solutions or notes.
    pub profile: Option<String>,
    /// What shows it: a running process, an enabled unit, applied state.
    pub evidence: String,
}

pub fn detect(host: &HostCtx) -> Vec<Competing> {
    let all: BTreeSet<Service> = Service::ALL.into_iter().collect();
    let mut out: Vec<Competing> = super::managers::detect_services(host, &all)
        .into_iter()
        .map(|(s, evidence)| Competing {
            name: s.unit().trim_end_matches(".service").into(),
            profile: profile(host, s),
            evidence,
        })
        .collect();
    if let Some(s) = saptune(host) {
        out.push(s);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn profile(host: &HostCtx, s: Service) -> Option<String> {
    let p = match s {
        Service::Tuned => host.text("/etc/tuned/active_profile"),
        // `[State]` `Profile=performance`, written when the profile changes.
        Service::PowerProfilesDaemon => host
            .text("/var/lib/power-profiles-daemon/state.ini")?
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Profile=")
                    .map(|v| v.trim().to_string())
            }),
        Service::Tlp | Service::Cpupower | Service::Irqbalance => None,
    }?;
    (!p.is_empty()).then_some(p)
}

/// saptune has no daemon: `saptune.service` applies its notes at boot and
/// keeps what it changed in `/run/saptune/saved_state/`.
fn saptune(host: &HostCtx) -> Option<Competing> {
    let mut evidence = Vec::new();
    for w in host
        .list("/etc/systemd/system")
        .into_iter()
        .filter(|n| n.ends_with(".wants"))
    {
        let link = format!("/etc/systemd/system/{w}/saptune.service");
        if host.root.read_link(&link).is_ok() || host.root.exists(&link) {
            evidence.push(format!("enabled ({link})"));
        }
    }
    // Where /run/saptune is not seen (the pod), only a host with saptune's
    // package asks for it: elsewhere it is absent, not unknown.
    let installed = || host.root.is_dir("/usr/share/saptune/notes");
    let mut applied = if host.root.shows("/run/saptune") || installed() {
        host.list("/run/saptune/saved_state")
    } else {
        Vec::new()
    };
    applied.sort();
    if !applied.is_empty() {
        evidence.push(format!(
            "applied now (/run/saptune/saved_state: {})",
            applied.join(", ")
        ));
    }
    if evidence.is_empty() {
        return None;
    }
    let config = host.text("/etc/sysconfig/saptune").unwrap_or_default();
    let setting = |key: &str| {
        config.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
            let v = v.trim().trim_matches('"').trim();
            (!v.is_empty()).then(|| v.to_string())
        })
    };
    let profile = match (setting("TUNE_FOR_SOLUTIONS"), setting("TUNE_FOR_NOTES")) {
        (Some(s), Some(n)) => Some(format!("solutions {s}; notes {n}")),
        (Some(s), None) => Some(format!("solutions {s}")),
        (None, Some(n)) => Some(format!("notes {n}")),
        (None, None) => setting("NOTE_APPLY_ORDER").map(|n| format!("notes {n}")),
    };
    Some(Competing {
        name: "saptune".into(),
        profile,
        evidence: evidence.join("; "),
    })
}
