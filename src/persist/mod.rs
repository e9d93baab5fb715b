//! `persist`: what makes a knob survive a reboot, by the mechanism its
//! manifest entry names.
//!
//! - `tmpfiles`: `/etc/tmpfiles.d/hostknob-<phase>-<id>.conf`, one `w` line
//!   per file the knob controls here (systemd-tmpfiles writes them at every
//!   boot, files in name order: the phase puts a governor before EPP);
//! - `sysctl.d`: `/etc/sysctl.d/90-hostknob-<id>.conf`, `name = value`;
//! - `systemd-dropin`: the service's drop-in with `Environment=` (the same
//!   file apply writes);
//! - `hold`: `hostknob-hold@<id>.service` runs `hostknob hold <id>` with the
//!   knob's manifest (a PM QoS request lives while its file is open);
//! - `boot`: `hostknob-boot@<id>.service`, a oneshot running `hostknob apply
//!   --wait <id>` with the knob's manifest after drivers load, ordered by
//!   phase against the host's other boot knobs (recommended for cpuidle and
//!   cpufreq knobs: no state index or policy path is pinned);
//! - `link-file`: the NIC's systemd.link file, which udev applies whenever
//!   the device appears (a driver reload or a re-created interface too);
//! - `udev-reapply`: a udev rule applying the knob again whenever its NIC
//!   appears (RPS, and what a .link file cannot set);
//! - `udev-rule`: a udev rule writing a block knob's queue settings whenever
//!   one of its disks appears or changes;
//! - `modprobe.d`: `/etc/modprobe.d/hostknob-<id>.conf`, `options M P=V`
//!   (module-param; at the module's next load);
//! - `modules-load.d`: `/etc/modules-load.d/hostknob-<id>.conf` (module);
//! - `cmdline`: kernel command-line arguments, printed with the commands that
//!   add them; a `kernel-cmdline` knob's own apply writes the boot loader's
//!   files, and persist names them.
//!
//! The artifact is computed from this host (its CPUs, states, policies), so
//! it is exact here; it carries no time, so regenerating it is stable.

pub mod boot_unit;
pub mod cmdline;
pub mod dropin;
pub mod hold_unit;
pub mod link_file;
mod mechanism;
pub mod modprobe_d;
pub mod modules_load_d;
mod nic_match;
mod nm_view;
pub mod sysctl_d;
mod template_unit;
pub mod tmpfiles;
pub mod udev_reapply;
pub mod udev_rule;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::knob::{Blocked, HostCtx, KindName, Target};
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

/// What makes one knob survive a reboot on this host.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Artifact {
    pub knob: String,
    pub mechanism: Persistence,
    /// Where `--install` writes it (under `--root`); `None` for kernel
    /// command-line arguments, which are only printed.
    pub path: Option<String>,
    /// The file's content, or the arguments on one line.
    pub content: String,
    /// Commands for the operator (never run by hostknob).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Files an older hostknob installed for this knob under another name:
    /// `--install` and `--remove` delete them (when their header is this knob's).
    #[serde(skip)]
    pub replaces: Vec<String>,
}

pub(crate) fn header(knob: &Knob, host: &str) -> String {
    let file = knob
        .source
        .file
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "# hostknob persist: {id} ({kind}) for host {host}\n# {title}\n\
         # From the manifest's {file}; `hostknob persist {id}` regenerates this file, \
         `hostknob persist {id} --remove` deletes it.\n",
        id = knob.id,
        kind = knob.kind,
        title = knob.title.trim(),
    )
}

/// The files `persist --install` writes for knob `id`, under every name it
/// has had: hostknob's own, so audit does not count them as another manager
/// of the knob.
pub fn own_files(id: &str) -> Vec<String> {
    let mut out: Vec<String> = (0..=9).map(|p| tmpfiles::path_for(p, id)).collect();
    out.push(tmpfiles::legacy_path(id));
    out.push(format!("{}/90-hostknob-{id}.conf", sysctl_d::SYSCTL_DIR));
    out.push(udev_rule::path_for(id));
    out
}

/// Whether `text` is the file `persist` wrote for knob `id` (its header).
pub(crate) fn is_own(text: &str, id: &str) -> bool {
    text.starts_with(&format!("# hostknob persist: {id} ("))
}

/// Where the knob's `persistence:` is written (`file:line`), and the
/// mechanisms its kind allows other than `runtime`: what to tell someone
/// who wants a runtime knob permanent.
pub fn how_to_persist(knob: &Knob) -> (String, Vec<&'static str>) {
    let at = knob.source.error("persistence", "");
    let durable = knob
        .spec
        .persistence_allowed()
        .iter()
        .filter(|p| **p != Persistence::Runtime)
        .map(|p| p.as_str())
        .collect();
    (
        format!("{}:{}", at.file.display(), at.line.unwrap_or(1)),
        durable,
    )
}

/// The artifact for `knob` (of `manifest`) on this host, or why there is none.
pub fn artifact(knob: &Knob, host: &HostCtx, manifest: &Manifest) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = knob.persistence;
    let (at, durable) = how_to_persist(knob);
    let refuse_by_design = |what: &str| format!("{at}: persistence: {id} is `{mechanism}`: {what}");
    match mechanism {
        Persistence::Runtime => {
            return Err(refuse_by_design(&format!(
                "nothing persists it, by the manifest's decision; to make it permanent, change \
                 it to {} in the manifest (reviewed like code), then run `hostknob persist {id}`",
                durable.join(" or ")
            )));
        }
        Persistence::Hold => return hold_unit::artifact(knob, host, manifest),
        Persistence::Boot => return boot_unit::artifact(knob, host, manifest),
        Persistence::LinkFile => return link_file::artifact(knob, host, manifest),
        Persistence::Cmdline => return cmdline::artifact(knob, host, refuse_by_design),
        // A module's load files hold whether it is loaded now or not.
        Persistence::ModprobeD => return modprobe_d::artifact(knob, host, refuse_by_design),
        Persistence::ModulesLoadD => {
            return modules_load_d::artifact(knob, host, refuse_by_design);
        }
        _ => {}
    }
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    let blocked = blocked(&survey.targets);
    crate::knob::refusal(id, &blocked)?;
    let targets: Vec<_> = survey
        .targets
        .iter()
        .filter(|t| t.blocker.is_none() && t.write.is_some())
        .collect();
    if targets.is_empty() {
        let why: Vec<String> = blocked
            .iter()
            .map(|b| format!("{}: {}", b.path, b.blocker.reason()))
            .collect();
        return Err(format!(
            "{id}: nothing to persist on host {}: no file here takes it ({})",
            host.name,
            why.join("; ")
        ));
    }
    match mechanism {
        Persistence::Tmpfiles => tmpfiles::artifact(knob, host, &targets).map(|mut a| {
            a.notes.extend(before_boot_units(knob, host, manifest));
            a
        }),
        Persistence::SysctlD => sysctl_d::artifact(knob, host, &targets),
        Persistence::SystemdDropin => dropin::artifact(knob, survey.notes.clone(), &targets),
        Persistence::UdevReapply => udev_reapply::artifact(knob, host, manifest, &targets),
        Persistence::UdevRule => udev_rule::artifact(knob, host),
        Persistence::Runtime
        | Persistence::Hold
        | Persistence::Boot
        | Persistence::Cmdline
        | Persistence::LinkFile
        | Persistence::ModprobeD
        | Persistence::ModulesLoadD => {
            unreachable!("handled above")
        }
    }
}

/// The targets that cannot take the knob here, and why.
pub(crate) fn blocked(targets: &[Target]) -> Vec<Blocked> {
    targets
        .iter()
        .filter_map(|t| {
            Some(Blocked {
                path: t.path.clone(),
                cpus: t.cpus.clone(),
                blocker: t.blocker.clone()?,
            })
        })
        .collect()
}

/// tmpfiles.d lines run early in boot (systemd-tmpfiles-setup.service),
/// before any boot unit: said when a knob of an earlier phase (the governor
/// an EPP line needs) is applied only by a boot unit.
fn before_boot_units(knob: &Knob, host: &HostCtx, manifest: &Manifest) -> Vec<String> {
    let phase = crate::knob::rules::kind_phase(knob.kind);
    manifest
        .for_host(&host.name)
        .filter(|o| {
            o.persistence == Persistence::Boot && crate::knob::rules::kind_phase(o.kind) < phase
        })
        .map(|o| {
            format!(
                "{id}: these lines run early in boot, before the unit of {o} (`persistence: \
                 boot`) sets the {kind} they must follow; persist {id} by `boot` too, and the \
                 units run in order",
                id = knob.id,
                o = o.id,
                kind = o.kind
            )
        })
        .collect()
}

/// A line of a configuration file read at boot.
pub struct ConfLine {
    pub file: String,
    pub line: usize,
    /// tmpfiles: the path (may hold globs); sysctl.d: the /proc/sys path; udev: the ATTR name.
    pub key: String,
    /// tmpfiles: the argument; sysctl.d: the value; udev: the assigned value.
    pub value: String,
}

impl ConfLine {
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Files of systemd-style config directories: a name in an earlier directory
/// hides the same name in later ones; read in name order.
/// The directories of a `*.d` configuration name that systemd's tools and
/// kmod read, first wins by file name: /etc, /run, /usr/local/lib, /usr/lib,
/// /lib (sysctl.d(5), modprobe.d(5), modules-load.d(5)).
pub(crate) fn dot_d_dirs(name: &str) -> [String; 5] {
    ["/etc", "/run", "/usr/local/lib", "/usr/lib", "/lib"].map(|d| format!("{d}/{name}"))
}

pub(crate) fn config_files(host: &HostCtx, dirs: &[&str], suffix: &str) -> Vec<(String, String)> {
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

/// Configuration files read at boot that can set knobs, read once per run.
#[derive(Default)]
pub struct BootConfig {
    pub tmpfiles: Vec<ConfLine>,
    pub sysctl: Vec<ConfLine>,
    pub udev: Vec<ConfLine>,
}

impl BootConfig {
    /// Reads only what the knob kinds at hand can be set by.
    pub fn read(host: &HostCtx, kinds: &BTreeSet<KindName>) -> BootConfig {
        let mut c = BootConfig::default();
        let attributes = kinds
            .iter()
            .any(|k| *k != KindName::Allocator && *k != KindName::PmQos);
        if attributes {
            c.tmpfiles = tmpfiles::read(host);
            c.udev = crate::peers::udev::attr_assignments(host.root)
                .into_iter()
                .map(|a| ConfLine {
                    file: a.file,
                    line: a.line,
                    key: a.attr,
                    value: a.value,
                })
                .collect();
        }
        if kinds.contains(&KindName::Sysctl) {
            c.sysctl = sysctl_d::read(host);
        }
        c
    }
}

/// What keeps the knob after a reboot on this host, or why nothing does.
pub fn check(
    knob: &Knob,
    targets: &[Target],
    host: &HostCtx,
    config: &BootConfig,
) -> Result<String, String> {
    let writable: Vec<&Target> = targets
        .iter()
        .filter(|t| t.blocker.is_none() && t.write.is_some())
        .collect();
    match knob.persistence {
        Persistence::Runtime => {
            Err("persistence: runtime; nothing makes it survive a reboot".into())
        }
        Persistence::Hold => hold_unit::check(knob, host),
        Persistence::Boot => boot_unit::check(knob, host),
        Persistence::SystemdDropin => dropin::check(&writable),
        Persistence::Cmdline => cmdline::check(knob, host),
        Persistence::LinkFile => link_file::check(knob, &writable, host),
        Persistence::UdevReapply => udev_reapply::check(knob, &writable, host),
        Persistence::UdevRule => udev_rule::check(knob, &writable, host),
        Persistence::Tmpfiles => tmpfiles::check(&writable, &config.tmpfiles).map(|by| {
            let legacy = tmpfiles::legacy_path(&knob.id);
            let named = |f: &str| {
                f.strip_prefix(legacy.as_str())
                    .is_some_and(|r| r.starts_with([':', ' ']))
            };
            if by.split(", ").any(named) {
                format!(
                    "{by}; {legacy} is an older hostknob's name, read in id order rather than \
                     the kernel's write order: `hostknob persist {} --install` renames it",
                    knob.id
                )
            } else {
                by
            }
        }),
        Persistence::SysctlD => sysctl_d::check(&writable, &config.sysctl),
        Persistence::ModprobeD => modprobe_d::check(knob, host),
        Persistence::ModulesLoadD => modules_load_d::check(knob, host),
    }
}

/// `file:line` places, one per file: `a.conf:2`, or `b.conf (320 lines)`.
pub(crate) fn by_files(places: BTreeSet<String>) -> String {
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
    let config = BootConfig::read(host, &BTreeSet::from([knob.kind]));
    Ok(check(knob, &survey.targets, host, &config))
}

#[cfg(test)]
mod tests {
    use super::sysctl_d::sysctl_name;
    use super::tmpfiles::tmpfiles_arg;

    #[test]
    fn names_and_arguments() {
        assert_eq!(
            sysctl_name("/proc/sys/vm/swappiness").as_deref(),
            Some("vm.swappiness")
        );
        assert_eq!(
            sysctl_name("/proc/sys/net/ipv4/conf/eth0.100/rp_filter").as_deref(),
            Some("net/ipv4/conf/eth0.100/rp_filter")
        );
        assert_eq!(sysctl_name("/sys/kernel/mm/x"), None);
        assert_eq!(tmpfiles_arg("50%\\n"), "50%%\\\\n");
    }
}
