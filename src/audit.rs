//! `audit` and `knobs`: each knob that targets this host, its current value
//! per CPU group or file, and one status per group and per knob.
//!
//! `lost-on-reboot` is the sleep-tax lesson: when the ledger or the knob's
//! history says the knob was applied here runtime-only at T, the host booted
//! after T, and the value is no longer the desired one, the report says so
//! instead of a bare `drift`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::cpulist::{self, CpuList};
use crate::knob::{Blocker, Current, HostCtx, KindName, Service, Target, per_cpu_value};
use crate::manifest::ledger::{self, Action};
use crate::manifest::schema::{HistoryAction, Persistence};
use crate::manifest::{Knob, Manifest, ManifestError, ManifestErrors};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Unpersisted,
    NotApplicable,
    Drift,
    Unsupported,
    LostOnReboot,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::Unpersisted,
        Status::NotApplicable,
        Status::Drift,
        Status::Unsupported,
        Status::LostOnReboot,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unpersisted => "unpersisted",
            Status::NotApplicable => "not-applicable",
            Status::Drift => "drift",
            Status::Unsupported => "unsupported",
            Status::LostOnReboot => "lost-on-reboot",
        }
    }

    /// Whether this status makes `audit` exit 2.
    pub fn fails(self) -> bool {
        matches!(
            self,
            Status::Drift | Status::Unsupported | Status::LostOnReboot
        )
    }

    /// Which of two statuses speaks for a knob: the one that needs attention most.
    fn rank(self) -> u8 {
        match self {
            Status::NotApplicable => 0,
            Status::Ok => 1,
            Status::Unpersisted => 2,
            Status::Unsupported => 3,
            Status::Drift => 4,
            Status::LostOnReboot => 5,
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub host: String,
    pub host_source: String,
    /// RFC 3339, UTC, from `btime` in `/proc/stat`; `None` when the tree lacks it.
    pub boot_time: Option<String>,
    pub manifest: String,
    pub knobs: Vec<KnobReport>,
    /// Knobs per status.
    pub summary: BTreeMap<Status, usize>,
    /// Knobs in the manifest that target other hosts.
    pub other_hosts: usize,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobReport {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    pub target: String,
    pub status: Status,
    pub desired: String,
    pub current: Vec<Current>,
    /// One status per CPU group or file group, where they differ.
    pub groups: Vec<StatusGroup>,
    pub persistence: Persistence,
    /// What keeps it across a reboot, when something does.
    pub persisted_by: Option<String>,
    pub caveats: Vec<String>,
    /// Other things on this host that may set the same files.
    pub managers: Vec<Manager>,
    pub detail: String,
    pub notes: Vec<String>,
    pub source: String,
    /// The latest `verify` of this knob on this host, from the ledger.
    pub evidence: Option<Evidence>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub timestamp: String,
    /// improved, regressed or no-detectable-effect.
    pub verdict: Option<String>,
    pub summary: Option<String>,
    /// The median per-round ratio applied / as found.
    pub median_ratio: Option<f64>,
}

/// The knob's latest `verified` event in the ledger.
fn latest_evidence(id: &str, ledger: &[ledger::Entry]) -> Option<Evidence> {
    let e = ledger
        .iter()
        .rev()
        .find(|e| e.knob == id && e.action == ledger::Action::Verified)?;
    Some(Evidence {
        timestamp: e.timestamp.clone(),
        verdict: e
            .evidence
            .as_ref()
            .and_then(|v| v["verdict"].as_str())
            .map(str::to_string),
        summary: e.note.clone(),
        median_ratio: e.evidence.as_ref().and_then(|v| v["median_ratio"].as_f64()),
    })
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StatusGroup {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    pub status: Status,
    pub current: Option<String>,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Manager {
    pub name: String,
    pub evidence: String,
}

/// Configuration files and services that can set knobs, read once per run.
#[derive(Default)]
pub struct HostConfig {
    tmpfiles: Vec<ConfLine>,
    sysctl: Vec<ConfLine>,
    udev: Vec<ConfLine>,
    services: Vec<(Service, String)>,
}

struct ConfLine {
    file: String,
    line: usize,
    /// tmpfiles: the path (may hold globs); sysctl.d: the /proc/sys path; udev: the ATTR name.
    key: String,
    /// tmpfiles: the argument; sysctl.d: the value; udev: the assigned value.
    value: String,
}

impl ConfLine {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

const TMPFILES_DIRS: [&str; 4] = [
    "/etc/tmpfiles.d",
    "/run/tmpfiles.d",
    "/usr/lib/tmpfiles.d",
    "/lib/tmpfiles.d",
];
const SYSCTL_DIRS: [&str; 5] = [
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
];
const UDEV_DIRS: [&str; 4] = [
    "/etc/udev/rules.d",
    "/run/udev/rules.d",
    "/usr/lib/udev/rules.d",
    "/lib/udev/rules.d",
];

/// Files of systemd-style config directories: a name in an earlier directory
/// hides the same name in later ones; read in name order.
fn config_files(host: &HostCtx, dirs: &[&str], suffix: &str) -> Vec<(String, String)> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    for dir in dirs {
        for name in host.list(dir) {
            if name.ends_with(suffix) {
                by_name
                    .entry(name.clone())
                    .or_insert_with(|| format!("{dir}/{name}"));
            }
        }
    }
    by_name
        .into_values()
        .filter_map(|path| Some((host.text(&path)?, path)))
        .map(|(text, path)| (path, text))
        .collect()
}

impl HostConfig {
    pub fn read(
        host: &HostCtx,
        kinds: &BTreeSet<KindName>,
        services: &BTreeSet<Service>,
    ) -> HostConfig {
        let mut c = HostConfig::default();
        let attributes = kinds
            .iter()
            .any(|k| *k != KindName::Allocator && *k != KindName::PmQos);
        if attributes {
            for (file, text) in config_files(host, &TMPFILES_DIRS, ".conf") {
                for (i, line) in text.lines().enumerate() {
                    let mut f = line.split_whitespace();
                    let (Some(ty), Some(path)) = (f.next(), f.next()) else {
                        continue;
                    };
                    if !ty.starts_with('w') {
                        continue;
                    }
                    // Type Path Mode User Group Age Argument: the argument is the rest.
                    let arg = line
                        .split_whitespace()
                        .skip(6)
                        .collect::<Vec<_>>()
                        .join(" ");
                    c.tmpfiles.push(ConfLine {
                        file: file.clone(),
                        line: i + 1,
                        key: path.to_string(),
                        value: arg,
                    });
                }
            }
            for (file, text) in config_files(host, &UDEV_DIRS, ".rules") {
                for (i, line) in text.lines().enumerate() {
                    if line.trim_start().starts_with('#') {
                        continue;
                    }
                    for (attr, value) in udev_assignments(line) {
                        c.udev.push(ConfLine {
                            file: file.clone(),
                            line: i + 1,
                            key: attr,
                            value,
                        });
                    }
                }
            }
        }
        if kinds.contains(&KindName::Sysctl) {
            let mut files = config_files(host, &SYSCTL_DIRS, ".conf");
            if let Some(t) = host.text("/etc/sysctl.conf") {
                files.push(("/etc/sysctl.conf".into(), t));
            }
            for (file, text) in files {
                for (i, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.starts_with(['#', ';']) {
                        continue;
                    }
                    let Some((k, v)) = line.split_once('=') else {
                        continue;
                    };
                    let k = k.trim().trim_start_matches('-');
                    let Ok(path) = crate::knob::sysctl::sysctl_path(k) else {
                        continue;
                    };
                    c.sysctl.push(ConfLine {
                        file: file.clone(),
                        line: i + 1,
                        key: path,
                        value: v.split_whitespace().collect::<Vec<_>>().join(" "),
                    });
                }
            }
        }
        if !services.is_empty() {
            c.services = detect_services(host, services);
        }
        c
    }
}

/// `ATTR{power/control}="on"` assignments in a udev rule line (not `==` matches).
fn udev_assignments(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("ATTR{") {
        let after = &rest[i + 5..];
        let Some(end) = after.find('}') else { break };
        let attr = &after[..end];
        let tail = after[end + 1..].trim_start();
        rest = &after[end + 1..];
        let tail = tail.strip_prefix(':').unwrap_or(tail);
        if let Some(v) = tail.strip_prefix('=')
            && !v.starts_with('=')
        {
            let v = v.trim_start();
            let value = v
                .strip_prefix('"')
                .and_then(|q| q.split('"').next())
                .unwrap_or(v.split([',', ' ']).next().unwrap_or(""));
            out.push((attr.to_string(), value.to_string()));
        }
    }
    out
}

/// Services found running or enabled, with what shows it.
fn detect_services(host: &HostCtx, wanted: &BTreeSet<Service>) -> Vec<(Service, String)> {
    let wants: Vec<String> = host
        .list("/etc/systemd/system")
        .into_iter()
        .filter(|n| n.ends_with(".wants"))
        .map(|n| format!("/etc/systemd/system/{n}"))
        .collect();
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
        for w in &wants {
            let link = format!("{w}/{}", s.unit());
            // The link is the fact; its target may be missing from a capture.
            if host.root.read_link(&link).is_ok() || host.root.exists(&link) {
                evidence.push(format!("enabled ({link})"));
            }
        }
        if s == Service::Tuned
            && !evidence.is_empty()
            && let Some(p) = host.text("/etc/tuned/active_profile")
        {
            evidence.push(format!("profile {p}"));
        }
        if !evidence.is_empty() {
            out.push((s, evidence.join("; ")));
        }
    }
    out
}

/// What applied this knob here last, if it was applied and not reverted since.
struct Applied {
    when: u64,
    label: String,
    persistence: Persistence,
    /// The files it changed, with their values before (ledger entries only).
    changes: Vec<ledger::Change>,
}

impl Applied {
    /// The value `target` had before the apply: from the change naming its
    /// path, or the group (`cpu*`) covering it and its CPUs.
    fn before(&self, target: &Target) -> Option<&str> {
        self.changes
            .iter()
            .find(|c| {
                c.path == target.path
                    || (glob::Pattern::new(&c.path).is_ok_and(|p| p.matches(&target.path))
                        && match (&c.cpus, &target.cpus) {
                            (Some(group), Some(own)) => {
                                own.as_slice().iter().all(|cpu| group.contains(*cpu))
                            }
                            _ => true,
                        })
            })
            .and_then(|c| c.before.as_deref())
    }
}

fn last_applied(knob: &Knob, host: &str, ledger: &[ledger::Entry]) -> Option<Applied> {
    let mut events: Vec<(u64, bool, Applied)> = Vec::new();
    for e in ledger
        .iter()
        .filter(|e| e.knob == knob.id && e.host == host)
    {
        let Some(when) = e.when() else { continue };
        let applied = match e.action {
            Action::Applied => true,
            Action::Reverted => false,
            _ => continue,
        };
        events.push((
            when,
            applied,
            Applied {
                when,
                label: format!("ledger {}", e.timestamp),
                persistence: e.persistence,
                changes: e.changes.clone(),
            },
        ));
    }
    for h in knob.history.iter().filter(|h| h.hosts.matches(host)) {
        let applied = match h.action {
            HistoryAction::Applied => true,
            HistoryAction::Reverted => false,
            _ => continue,
        };
        events.push((
            h.when,
            applied,
            Applied {
                when: h.when,
                label: format!("history {}", h.date),
                persistence: h.persistence,
                changes: Vec::new(),
            },
        ));
    }
    events.sort_by_key(|(when, _, _)| *when);
    match events.pop() {
        Some((_, true, a)) => Some(a),
        _ => None,
    }
}

/// What keeps the knob after a reboot on this host, or why nothing does.
fn persisted(
    knob: &Knob,
    targets: &[Target],
    host: &HostCtx,
    config: &HostConfig,
) -> Result<String, String> {
    let writable: Vec<&Target> = targets
        .iter()
        .filter(|t| t.blocker.is_none() && t.write.is_some())
        .collect();
    match knob.persistence {
        Persistence::Runtime => {
            Err("persistence: runtime; nothing makes it survive a reboot".into())
        }
        Persistence::Hold => Err(
            "persistence: hold; the request lasts only while `hostknob hold` keeps it open".into(),
        ),
        Persistence::SystemdDropin => {
            let dropins: Vec<&&Target> = writable
                .iter()
                .filter(|t| t.mode == crate::knob::WriteMode::File)
                .collect();
            if !dropins.is_empty() && dropins.iter().all(|t| t.in_effect) {
                Ok("the unit's drop-ins set it".into())
            } else {
                Err("no drop-in sets it".into())
            }
        }
        Persistence::Cmdline => {
            let args = knob.spec.cmdline_args().unwrap_or_default();
            let cmdline = host.cmdline().unwrap_or("");
            let words: Vec<&str> = cmdline.split_whitespace().collect();
            let missing: Vec<&String> = args
                .iter()
                .filter(|a| !words.contains(&a.as_str()))
                .collect();
            if missing.is_empty() {
                Ok(format!("/proc/cmdline has {}", args.join(" ")))
            } else {
                Err(format!(
                    "persistence: cmdline, but /proc/cmdline lacks {}",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
            }
        }
        Persistence::Tmpfiles => {
            let mut by = BTreeSet::new();
            for t in &writable {
                let Some(w) = &t.write else { continue };
                let hit = config.tmpfiles.iter().rev().find(|l| {
                    l.key == t.path || glob::Pattern::new(&l.key).is_ok_and(|p| p.matches(&t.path))
                });
                match hit {
                    Some(l) if l.value.trim() == w.trim() => {
                        by.insert(l.at());
                    }
                    Some(l) => {
                        return Err(format!(
                            "{} writes {:?} to {}, not {:?}",
                            l.at(),
                            l.value,
                            t.path,
                            w
                        ));
                    }
                    None => {
                        return Err(format!(
                            "persistence: tmpfiles, but no tmpfiles.d `w` line writes {}",
                            t.path
                        ));
                    }
                }
            }
            Ok(by_files(by))
        }
        Persistence::SysctlD => {
            let mut by = BTreeSet::new();
            for t in &writable {
                let hit = config.sysctl.iter().rev().find(|l| {
                    l.key == t.path || glob::Pattern::new(&l.key).is_ok_and(|p| p.matches(&t.path))
                });
                match hit {
                    Some(l) if Some(l.value.as_str()) == t.write.as_deref() => {
                        by.insert(l.at());
                    }
                    Some(l) => {
                        return Err(format!("{} sets {}, not {}", l.at(), l.value, t.desired));
                    }
                    None => {
                        return Err(format!(
                            "persistence: sysctl.d, but no sysctl.d file sets {}",
                            t.path
                        ));
                    }
                }
            }
            Ok(by_files(by))
        }
    }
}

/// `file:line` places, one per file: `a.conf:2`, or `b.conf (320 lines)`.
fn by_files(places: BTreeSet<String>) -> String {
    let mut files: Vec<(String, Vec<String>)> = Vec::new();
    for place in places {
        let (file, line) = place.rsplit_once(':').unwrap_or((&place, ""));
        match files.iter_mut().find(|(f, _)| f == file) {
            Some((_, lines)) => lines.push(line.to_string()),
            None => files.push((file.to_string(), vec![line.to_string()])),
        }
    }
    files
        .into_iter()
        .map(|(file, lines)| match lines.as_slice() {
            [one] => format!("{file}:{one}"),
            many => format!("{file} ({} lines)", many.len()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What keeps `knob` across a reboot on this host (`Ok`, naming it), or why
/// nothing does: the check behind `ok` and `unpersisted`, for one knob.
pub fn persistence_of(
    knob: &Knob,
    host: &HostCtx,
) -> Result<Result<String, String>, crate::knob::FieldError> {
    let survey = knob.spec.survey(host)?;
    let config = HostConfig::read(host, &BTreeSet::from([knob.kind]), &BTreeSet::new());
    Ok(persisted(knob, &survey.targets, host, &config))
}

/// Other things that set the same files: services, tmpfiles.d, sysctl.d, udev.
fn managers(knob: &Knob, targets: &[Target], config: &HostConfig) -> Vec<Manager> {
    let mut out: Vec<Manager> = Vec::new();
    for (s, evidence) in &config.services {
        if knob.spec.services().contains(s) {
            out.push(Manager {
                name: s.unit().trim_end_matches(".service").into(),
                evidence: evidence.clone(),
            });
        }
    }
    let mut seen = BTreeSet::new();
    let mut add = |name: &str, l: &ConfLine, what: String| {
        if seen.insert((name.to_string(), l.at())) {
            out.push(Manager {
                name: name.into(),
                evidence: format!("{} {what}", l.at()),
            });
        }
    };
    let paths: Vec<&str> = targets
        .iter()
        .filter(|t| t.mode == crate::knob::WriteMode::Attribute && t.blocker.is_none())
        .map(|t| t.path.as_str())
        .collect();
    if paths.is_empty() {
        return out;
    }
    for l in &config.tmpfiles {
        let pattern = glob::Pattern::new(&l.key).ok();
        if paths
            .iter()
            .any(|p| *p == l.key || pattern.as_ref().is_some_and(|pat| pat.matches(p)))
        {
            add(
                "tmpfiles.d",
                l,
                format!("writes {:?} to {}", l.value, l.key),
            );
        }
    }
    for l in &config.sysctl {
        let pattern = glob::Pattern::new(&l.key).ok();
        if paths
            .iter()
            .any(|p| *p == l.key || pattern.as_ref().is_some_and(|pat| pat.matches(p)))
        {
            add("sysctl.d", l, format!("sets {} = {}", l.key, l.value));
        }
    }
    for l in &config.udev {
        // A rule names the attribute relative to its device: match its tail.
        let suffix = format!("/{}", l.key);
        let leaf = format!("/{}", l.key.rsplit('/').next().unwrap_or(&l.key));
        if paths
            .iter()
            .any(|p| p.ends_with(&suffix) || p.ends_with(&leaf))
        {
            add("udev", l, format!("sets ATTR{{{}}}={:?}", l.key, l.value));
        }
    }
    out
}

struct Judged<'t> {
    target: &'t Target,
    status: Status,
    detail: String,
}

fn judge<'t>(target: &'t Target, persist: &Result<String, String>) -> Judged<'t> {
    let (status, detail) = match (&target.blocker, target.in_effect) {
        (Some(Blocker::NotApplicable(r) | Blocker::Unreadable(r)), _) => {
            (Status::NotApplicable, r.clone())
        }
        (Some(Blocker::Unsupported(r)), false) => (Status::Unsupported, r.clone()),
        (_, true) => match persist {
            Ok(_) => (Status::Ok, String::new()),
            Err(why) => (
                Status::Unpersisted,
                format!("in effect now, but gone at the next boot: {why}"),
            ),
        },
        (_, false) => (
            Status::Drift,
            format!(
                "is {}, should be {}",
                target.current.as_deref().unwrap_or("absent"),
                target.desired
            ),
        ),
    };
    Judged {
        target,
        status,
        detail,
    }
}

/// Turns drift into lost-on-reboot when the record says it was applied here,
/// runtime only, before the current boot.
fn tell_the_story(j: &mut Judged, applied: Option<&Applied>, boot: Option<u64>) {
    let Some(a) = applied else { return };
    if j.status != Status::Drift {
        return;
    }
    let now = j.target.current.as_deref().unwrap_or("absent");
    let back = match a.before(j.target) {
        Some(b) if j.target.restore.as_deref() == Some(b) => {
            format!(" (back to {b}, its value before the apply)")
        }
        _ => String::new(),
    };
    let when = crate::manifest::schema::rfc3339(a.when);
    match (a.persistence, boot) {
        (Persistence::Runtime, Some(b)) if b > a.when => {
            j.status = Status::LostOnReboot;
            j.detail = format!(
                "applied runtime-only ({}); the host booted at {} since, and the value is {now} again{back}: \
                 the reboot undid it",
                a.label,
                crate::manifest::schema::rfc3339(b)
            );
        }
        (Persistence::Runtime, Some(_)) => {
            j.detail = format!(
                "{}; applied in this boot ({}, {when}) and changed since by something else",
                j.detail, a.label
            );
        }
        (Persistence::Runtime, None) => {
            j.detail = format!(
                "{}; applied runtime-only ({}), but this tree has no boot time (/proc/stat btime), \
                 so whether a reboot undid it cannot be told",
                j.detail, a.label
            );
        }
        (p, _) => {
            j.detail = format!(
                "{}; applied with persistence {p} ({}) and not in effect",
                j.detail, a.label
            );
        }
    }
}

/// Groups judged targets: per CPU where they name CPUs, else per file.
fn groups(judged: &[Judged]) -> Vec<StatusGroup> {
    let mut out = Vec::new();
    let mut per_cpu: BTreeMap<u32, Vec<&Judged>> = BTreeMap::new();
    for j in judged {
        for &cpu in j.target.cpus.iter().flat_map(|c| c.as_slice()) {
            per_cpu.entry(cpu).or_default().push(j);
        }
    }
    // A CPU's status is its worst target's; its value names each target when it has several.
    let verdicts = per_cpu.into_iter().map(|(cpu, js)| {
        let worst = js
            .iter()
            .max_by_key(|j| j.status.rank())
            .expect("a CPU has targets");
        let targets: Vec<&Target> = js.iter().map(|j| j.target).collect();
        let value = if targets.iter().all(|t| t.current.is_none()) {
            None
        } else {
            Some(per_cpu_value(&targets, |t| t.current.clone()))
        };
        (cpu, (worst.status, worst.detail.clone(), value))
    });
    for g in cpulist::group(verdicts) {
        let (status, detail, current) = g.value;
        out.push(StatusGroup {
            cpus: Some(g.cpus),
            paths: Vec::new(),
            status,
            current,
            detail,
        });
    }
    for j in judged.iter().filter(|j| j.target.cpus.is_none()) {
        let key_current = j.target.current.clone();
        match out.iter_mut().find(|g| {
            g.cpus.is_none()
                && g.status == j.status
                && g.detail == j.detail
                && g.current == key_current
        }) {
            Some(g) => g.paths.push(j.target.path.clone()),
            None => out.push(StatusGroup {
                cpus: None,
                paths: vec![j.target.path.clone()],
                status: j.status,
                current: key_current,
                detail: j.detail.clone(),
            }),
        }
    }
    out
}

/// Evaluates every knob that targets this host (or only `only`, when given).
pub fn evaluate(
    manifest: &Manifest,
    host: &HostCtx,
    host_source: &str,
    only: &[String],
) -> Result<Report, ManifestErrors> {
    let mut errors: Vec<ManifestError> = Vec::new();
    for id in only {
        if manifest.get(id).is_none() {
            errors.push(ManifestError {
                file: manifest.dir.clone(),
                line: None,
                field: None,
                message: format!("no knob with id {id:?} in this manifest"),
            });
        }
    }
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    let chosen: Vec<&Knob> = manifest
        .for_host(&host.name)
        .filter(|k| only.is_empty() || only.contains(&k.id))
        .collect();
    let other_hosts = manifest.knobs.len() - manifest.for_host(&host.name).count();
    let ledger = ledger::read(&manifest.dir, &host.name).map_err(|e| ManifestErrors(vec![e]))?;
    let kinds: BTreeSet<KindName> = chosen.iter().map(|k| k.kind).collect();
    let services: BTreeSet<Service> = chosen
        .iter()
        .flat_map(|k| k.spec.services().iter().copied())
        .collect();
    let config = HostConfig::read(host, &kinds, &services);
    let boot = host.boot_time();
    let mut knobs = Vec::new();
    for knob in chosen {
        let survey = match knob.spec.survey(host) {
            Ok(s) => s,
            Err(e) => {
                errors.push(knob.source.field_error(e));
                continue;
            }
        };
        knobs.push(report_knob(knob, survey, host, &config, &ledger, boot));
    }
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    let mut summary: BTreeMap<Status, usize> = Status::ALL.iter().map(|s| (*s, 0)).collect();
    for k in &knobs {
        *summary.entry(k.status).or_default() += 1;
    }
    Ok(Report {
        host: host.name.clone(),
        host_source: host_source.to_string(),
        boot_time: boot.map(crate::manifest::schema::rfc3339),
        manifest: manifest.dir.display().to_string(),
        knobs,
        summary,
        other_hosts,
    })
}

fn report_knob(
    knob: &Knob,
    survey: crate::knob::Survey,
    host: &HostCtx,
    config: &HostConfig,
    ledger: &[ledger::Entry],
    boot: Option<u64>,
) -> KnobReport {
    let targets = survey.targets;
    let persist = persisted(knob, &targets, host, config);
    let applied = last_applied(knob, &host.name, ledger);
    let mut judged: Vec<Judged> = targets.iter().map(|t| judge(t, &persist)).collect();
    for j in &mut judged {
        tell_the_story(j, applied.as_ref(), boot);
    }
    let groups = groups(&judged);
    let status = groups
        .iter()
        .map(|g| g.status)
        .max_by_key(|s| s.rank())
        .unwrap_or(Status::NotApplicable);
    let worst: Vec<&StatusGroup> = groups.iter().filter(|g| g.status == status).collect();
    let detail = if groups.len() == 1 {
        worst[0].detail.clone()
    } else {
        worst
            .iter()
            .filter(|g| !g.detail.is_empty())
            .map(|g| match (&g.cpus, g.paths.as_slice()) {
                (Some(c), _) => format!("CPUs {c}: {}", g.detail),
                (None, [one]) => format!("{one}: {}", g.detail),
                (None, many) => format!("{} files: {}", many.len(), g.detail),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    KnobReport {
        id: knob.id.clone(),
        title: knob.title.clone(),
        kind: knob.kind,
        target: knob.spec.target_summary(),
        status,
        desired: knob.spec.desired(),
        current: crate::knob::group_current(&targets),
        groups,
        persistence: knob.persistence,
        persisted_by: persist.ok().filter(|s| !s.is_empty()),
        caveats: knob.caveats.clone(),
        managers: managers(knob, &targets, config),
        detail,
        notes: survey.notes,
        source: format!("{}:{}", knob.source.file.display(), knob.source.first_line),
        evidence: latest_evidence(&knob.id, ledger),
    }
}

impl Report {
    /// 0 when every knob is ok, unpersisted or not-applicable; 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.knobs.iter().any(|k| k.status.fails()) {
            2
        } else {
            0
        }
    }
}

/// Loads the manifest and evaluates it on the host: the shared first half of
/// `knobs` and `audit`.
pub fn run(
    manifest_dir: &Path,
    host: &HostCtx,
    host_source: &str,
    only: &[String],
) -> Result<Report, ManifestErrors> {
    let manifest = crate::manifest::load(manifest_dir)?;
    evaluate(&manifest, host, host_source, only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udev_assignments_only() {
        let l = r#"SUBSYSTEM=="cpu", ATTR{online}=="1", ATTR{power/pm_qos_resume_latency_us}="20", ATTR{cpufreq/scaling_governor}:="performance""#;
        assert_eq!(
            udev_assignments(l),
            vec![
                (
                    "power/pm_qos_resume_latency_us".to_string(),
                    "20".to_string()
                ),
                (
                    "cpufreq/scaling_governor".to_string(),
                    "performance".to_string()
                )
            ]
        );
    }
}
