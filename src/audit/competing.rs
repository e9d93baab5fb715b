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
        Service::Tuned => crate::peers::tuned::active_profile(host.root),
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

/// saptune, where its service is enabled or its notes applied now.
fn saptune(host: &HostCtx) -> Option<Competing> {
    let state = crate::peers::saptune::service(host.root)?;
    Some(Competing {
        name: "saptune".into(),
        profile: state.profile,
        evidence: state.evidence.join("; "),
    })
}
