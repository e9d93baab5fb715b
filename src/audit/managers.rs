//! Other managers of a knob's files: services (tuned, power-profiles-daemon,
//! TLP, cpupower) and tmpfiles.d, sysctl.d or udev entries.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::knob::{HostCtx, KindName, Service, Target};
use crate::manifest::Knob;
use crate::peers::irqbalance::{self, Ban};
use crate::persist::{BootConfig, ConfLine};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Manager {
    pub name: String,
    pub evidence: String,
}

/// Configuration files and services that can set knobs, read once per run.
#[derive(Default)]
pub struct HostConfig {
    boot: BootConfig,
    services: Vec<(Service, String)>,
    /// irqbalance's banned CPUs as configured (file:line), and the online CPUs.
    irqbalance: Option<Ban>,
}

impl HostConfig {
    pub fn read(
        host: &HostCtx,
        kinds: &BTreeSet<KindName>,
        services: &BTreeSet<Service>,
    ) -> HostConfig {
        let mut c = HostConfig {
            boot: BootConfig::read(host, kinds),
            services: Vec::new(),
            irqbalance: None,
        };
        if !services.is_empty() {
            c.services = detect_services(host, services);
        }
        if c.services.iter().any(|(s, _)| *s == Service::Irqbalance) {
            c.irqbalance = Some(irqbalance::ban(host.root, host.online()));
        }
        c
    }

    pub fn boot(&self) -> &BootConfig {
        &self.boot
    }
}

/// Services found running or enabled, with what shows it.
pub(super) fn detect_services(
    host: &HostCtx,
    wanted: &BTreeSet<Service>,
) -> Vec<(Service, String)> {
    let wants = crate::peers::systemd::Wants::read(host.root);
    let mut out = Vec::new();
    for &s in wanted {
        let mut evidence = Vec::new();
        if let Some(comm) = s.comm() {
            let pids: Vec<String> = host
                .processes()
                .iter()
                .filter(|p| p.comm == comm)
                .map(|p| p.pid.to_string())
                .collect();
            if !pids.is_empty() {
                evidence.push(format!("running (PID {})", pids.join(", ")));
            }
        }
        for link in wants.links(host.root, s.unit()) {
            evidence.push(format!("enabled ({link})"));
        }
        if s == Service::Tuned
            && !evidence.is_empty()
            && let Some(p) = crate::peers::tuned::active_profile(host.root)
        {
            evidence.push(format!("profile {p}"));
        }
        if !evidence.is_empty() {
            out.push((s, evidence.join("; ")));
        }
    }
    out
}

/// Whether irqbalance's banned list keeps it off the CPUs an irq-affinity
/// knob keeps IRQs off (every online CPU outside its `set`): otherwise it
/// moves them back within 10 s (its default `--interval`).
fn irqbalance_coverage(knob: &Knob, ban: &Ban) -> String {
    let Ok(set) = CpuList::parse(&knob.spec.desired()) else {
        return String::new();
    };
    let kept_off: Vec<u32> = ban
        .online
        .as_slice()
        .iter()
        .copied()
        .filter(|c| !set.contains(*c))
        .collect();
    let open: Vec<u32> = kept_off
        .iter()
        .copied()
        .filter(|c| !ban.banned.contains(*c))
        .collect();
    if open.is_empty() {
        format!(
            "; its banned list covers the CPUs this knob keeps IRQs off ({}; {})",
            CpuList::new(kept_off),
            ban.source
        )
    } else {
        format!(
            "; its banned list does not cover CPUs {} ({}): it rebalances IRQs onto them every 10 s, undoing this knob (ban them with an `irqbalance` knob and restart it, or stop irqbalance)",
            CpuList::new(open),
            ban.source
        )
    }
}

/// Other things that set the same files: services, tmpfiles.d, sysctl.d, udev.
pub(super) fn managers(knob: &Knob, targets: &[Target], config: &HostConfig) -> Vec<Manager> {
    let mut out: Vec<Manager> = Vec::new();
    for (s, evidence) in &config.services {
        if knob.spec.services().contains(s) {
            let mut evidence = evidence.clone();
            if *s == Service::Irqbalance
                && knob.kind == KindName::IrqAffinity
                && let Some(ban) = &config.irqbalance
            {
                evidence += &irqbalance_coverage(knob, ban);
            }
            out.push(Manager {
                name: s.unit().trim_end_matches(".service").into(),
                evidence,
            });
        }
    }
    let paths: Vec<&str> = targets
        .iter()
        .filter(|t| t.mode == crate::knob::WriteMode::Attribute && t.blocker.is_none())
        .map(|t| t.path.as_str())
        .collect();
    if paths.is_empty() {
        return out;
    }
    // hostknob's own persistence of this knob is not another manager
    // (audit checks it as the knob's persistence instead).
    let own = crate::persist::own_files(&knob.id);
    let theirs = |l: &&ConfLine| !own.contains(&l.file);
    let matching = |l: &ConfLine| {
        let pattern = glob::Pattern::new(&l.key).ok();
        paths
            .iter()
            .filter(|p| **p == l.key || pattern.as_ref().is_some_and(|pat| pat.matches(p)))
            .count()
    };
    let mut found: Vec<Finding> = Vec::new();
    for l in config.boot.tmpfiles.iter().filter(theirs) {
        note(&mut found, "tmpfiles.d", l, matching(l));
    }
    for l in config.boot.sysctl.iter().filter(theirs) {
        note(&mut found, "sysctl.d", l, matching(l));
    }
    for l in &config.boot.udev {
        // A rule names the attribute relative to its device: match its tail.
        let suffix = format!("/{}", l.key);
        let leaf = format!("/{}", l.key.rsplit('/').next().unwrap_or(&l.key));
        let hits = paths
            .iter()
            .filter(|p| p.ends_with(&suffix) || p.ends_with(&leaf))
            .count();
        note(&mut found, "udev", l, hits);
    }
    out.extend(found.into_iter().map(Finding::manager));
    out
}

/// Lines of one file that set this knob's files to one value: one finding,
/// however many CPUs they cover.
struct Finding {
    name: &'static str,
    file: String,
    value: String,
    lines: Vec<usize>,
    /// The first line's key, as an example.
    key: String,
    files: usize,
}

fn note(found: &mut Vec<Finding>, name: &'static str, l: &ConfLine, hits: usize) {
    if hits == 0 {
        return;
    }
    match found
        .iter_mut()
        .find(|f| f.name == name && f.file == l.file && f.value == l.value)
    {
        Some(f) => {
            if !f.lines.contains(&l.line) {
                f.lines.push(l.line);
                f.files += hits;
            }
        }
        None => found.push(Finding {
            name,
            file: l.file.clone(),
            value: l.value.clone(),
            lines: vec![l.line],
            key: l.key.clone(),
            files: hits,
        }),
    }
}

impl Finding {
    fn manager(self) -> Manager {
        let what = match self.name {
            "sysctl.d" => format!("sets {} = {}", self.key, self.value),
            "udev" => format!("sets ATTR{{{}}}={:?}", self.key, self.value),
            _ => format!("writes {:?} to {}", self.value, self.key),
        };
        let evidence = match self.lines.as_slice() {
            [one] => format!("{}:{one} {what}", self.file),
            many => format!(
                "{}:{}-{} ({} lines) {what} and to {} more of this knob's files",
                self.file,
                many.iter().min().unwrap_or(&0),
                many.iter().max().unwrap_or(&0),
                many.len(),
                self.files.saturating_sub(1)
            ),
        };
        Manager {
            name: self.name.into(),
            evidence,
        }
    }
}
