//! `systemd-cpu-affinity`: where systemd runs things. With no target, the
//! manager's `CPUAffinity=` (systemd-system.conf(5)) in a drop-in
//! `/etc/systemd/system.conf.d/hostknob-<id>.conf`: PID 1 takes it when it
//! re-executes (`systemctl daemon-reexec`, or a boot), and every process it
//! forks after that inherits it. With `units`, a drop-in
//! `/etc/systemd/system/<unit>.d/hostknob-<id>.conf` setting `CPUAffinity=`
//! (systemd.exec(5), the processes' affinity) or `AllowedCPUs=`
//! (systemd.resource-control(5), the unit cgroup's cpuset), taken when the
//! unit restarts after `systemctl daemon-reload`.
//!
//! Two things are read: the configuration (the main file, then drop-ins in
//! file-name order; an assignment adds CPUs to the earlier ones, an empty one
//! resets them: systemd.exec(5) and systemd-system.conf(5) say so for
//! `CPUAffinity=`, and `AllowedCPUs=` is parsed alike, by `parse_cpu_set_extend`
//! in src/core/load-fragment.c) and what runs now (PID 1's or the unit's
//! processes' `Cpus_allowed_list` in `/proc/PID/status`, or the unit cgroup's
//! `cpuset.cpus.effective`). Configured but not running is `pending-reboot`.
//! hostknob never runs `daemon-reexec`, `daemon-reload` or a restart.

use serde::Deserialize;

use super::{FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode};
use crate::cpulist::CpuList;
use crate::peers::systemd::{self, Configured, MANAGER_CONF, MANAGER_DIRS, apply_text};
use crate::schema::{Persistence, Scalar};

const OVERRIDE: &str = "the kernel command line (/proc/cmdline) sets systemd.cpu_affinity=";
const CGROUP: &str = "/sys/fs/cgroup";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    units: Option<Vec<String>>,
    #[serde(default)]
    property: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    CpuAffinity,
    AllowedCpus,
}

impl Property {
    fn as_str(self) -> &'static str {
        match self {
            Property::CpuAffinity => "CPUAffinity",
            Property::AllowedCpus => "AllowedCPUs",
        }
    }
}

#[derive(Debug)]
pub struct SystemdCpuAffinity {
    /// `None`: the manager (PID 1) and everything it starts.
    pub units: Option<Vec<String>>,
    pub property: Property,
    pub cpus: CpuList,
    pub id: String,
}

fn check_cpus(set: &Scalar) -> Result<CpuList, FieldError> {
    match systemd::parse_value(&set.0) {
        Some(l) if !l.is_empty() => Ok(l),
        Some(_) => Err(FieldError::new(
            "set",
            "empty CPU list: an empty assignment resets systemd's mask to all CPUs; give the \
             housekeeping CPUs, such as 0-3",
        )),
        None => Err(FieldError::new(
            "set",
            format!(
                "{:?} is not a CPU list; give CPUs and ranges such as 0-3,8",
                set.0
            ),
        )),
    }
}

impl Spec for SystemdCpuAffinity {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let cpus = check_cpus(&set)?;
        let (units, property) = match target {
            None => (None, None),
            Some(t) => (t.units, t.property),
        };
        if let Some(u) = &units {
            if u.is_empty() {
                return Err(FieldError::new(
                    "target.units",
                    "empty list: name services (NAME.service), or leave out target for the \
                     system-wide CPUAffinity=",
                ));
            }
            for name in u {
                super::check_service_name("target.units", name)?;
            }
        }
        let property = match (property.as_deref(), &units) {
            (None | Some("CPUAffinity"), _) => Property::CpuAffinity,
            (Some("AllowedCPUs"), Some(_)) => Property::AllowedCpus,
            (Some("AllowedCPUs"), None) => {
                return Err(FieldError::new(
                    "target.property",
                    "AllowedCPUs is a unit's cgroup setting: name target.units, or use \
                     CPUAffinity for the whole system",
                ));
            }
            (Some(other), _) => {
                return Err(FieldError::new(
                    "target.property",
                    format!("{other:?}: expected CPUAffinity or AllowedCPUs"),
                ));
            }
        };
        Ok(SystemdCpuAffinity {
            units,
            property,
            cpus,
            id: String::new(),
        })
    }

    fn named(mut self, id: &str) -> Self {
        self.id = id.to_string();
        self
    }
}

/// What runs now for one scope: (path read, label, CPUs in words).
struct Running {
    path: String,
    label: String,
    value: Option<String>,
}

impl SystemdCpuAffinity {
    fn dropin_path(&self, unit: Option<&str>) -> String {
        match unit {
            None => format!("{}/hostknob-{}.conf", MANAGER_DIRS[0], self.id),
            Some(u) => format!("/etc/systemd/system/{u}.d/hostknob-{}.conf", self.id),
        }
    }

    fn content(&self, unit: Option<&str>) -> String {
        let (section, what) = match unit {
            None => (
                "[Manager]",
                "where PID 1 and every process it starts run".to_string(),
            ),
            Some(u) => ("[Service]", format!("where {u} runs")),
        };
        let key = self.property.as_str();
        format!(
            "# Written by hostknob (knob {id}): {what}.\n\
             # The empty assignment resets CPUs set before this file; the next line sets ours.\n\
             {section}\n{key}=\n{key}={cpus}\n",
            id = self.id,
            cpus = self.cpus
        )
    }

    /// The configured value: the main file (or unit file), then drop-ins.
    fn configured(&self, host: &HostCtx, unit: Option<&str>) -> (bool, Configured) {
        let mut conf = Configured::default();
        let key = self.property.as_str();
        let Some(unit) = unit else {
            if let Ok(text) = host.root.read_string(MANAGER_CONF) {
                apply_text(&text, MANAGER_CONF, "[Manager]", key, &mut conf);
            }
            for path in systemd::manager_dropins(host.root) {
                if let Ok(text) = host.root.read_string(&path) {
                    apply_text(&text, &path, "[Manager]", key, &mut conf);
                }
            }
            return (true, conf);
        };
        let mut found = false;
        if let Some(path) = systemd::unit_file(host.root, unit) {
            found = true;
            if let Ok(text) = host.root.read_string(&path) {
                apply_text(&text, &path, "[Service]", key, &mut conf);
            }
        }
        for path in systemd::dropins(host.root, unit) {
            found = true;
            if let Ok(text) = host.root.read_string(&path) {
                apply_text(&text, &path, "[Service]", key, &mut conf);
            }
        }
        (found, conf)
    }

    /// What runs now: PID 1, or the unit's processes (or its cgroup's cpuset).
    fn running(&self, host: &HostCtx, unit: Option<&str>) -> Vec<Running> {
        let status = |pid: u32| {
            let path = format!("/proc/{pid}/status");
            let value = host.text(&path).and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .and_then(|v| CpuList::parse(v).ok())
                    .map(|l| l.to_string())
            });
            Running {
                path,
                label: if pid == 1 {
                    "PID 1 now".into()
                } else {
                    format!("pid {pid} now")
                },
                value,
            }
        };
        let Some(unit) = unit else {
            return vec![status(1)];
        };
        let suffix = format!("/{unit}");
        let mut cgroup = None;
        let mut pids = Vec::new();
        for p in host.processes() {
            let Some(text) = host.text(&format!("/proc/{}/cgroup", p.pid)) else {
                continue;
            };
            if let Some(path) = text
                .lines()
                .filter_map(|l| l.strip_prefix("0::"))
                .find(|c| c.trim_end().ends_with(&suffix))
            {
                cgroup.get_or_insert_with(|| path.trim().to_string());
                pids.push(p.pid);
            }
        }
        match self.property {
            Property::CpuAffinity => pids.into_iter().map(status).collect(),
            Property::AllowedCpus => cgroup
                .map(|cg| {
                    let path = format!("{CGROUP}{cg}/cpuset.cpus.effective");
                    let value = host
                        .text(&path)
                        .and_then(|t| CpuList::parse(&t).ok())
                        .map(|l| l.to_string())
                        .or_else(|| Some("(no cpuset controller on the unit's cgroup)".into()));
                    Running {
                        path,
                        label: "cgroup now".into(),
                        value,
                    }
                })
                .into_iter()
                .collect(),
        }
    }

    /// `systemd.cpu_affinity=` on the running kernel command line, the last
    /// word counting: systemd parses the kernel command line after
    /// system.conf and its drop-ins, so it overrides them for the manager
    /// (src/core/main.c, `parse_configuration` then `parse_proc_cmdline_item`;
    /// kernel-command-line(7)).
    fn cmdline_override(&self, host: &HostCtx) -> Option<String> {
        if self.units.is_some() {
            return None;
        }
        host.cmdline()?
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("systemd.cpu_affinity="))
            .next_back()
            .map(|v| {
                CpuList::parse(v)
                    .map(|l| l.to_string())
                    .unwrap_or_else(|_| v.to_string())
            })
    }

    fn scopes(&self) -> Vec<Option<&str>> {
        match &self.units {
            None => vec![None],
            Some(u) => u.iter().map(|u| Some(u.as_str())).collect(),
        }
    }

    fn how_to_take_effect(unit: Option<&str>) -> String {
        match unit {
            None => "takes effect when PID 1 reloads its configuration (`systemctl \
                     daemon-reload` re-applies the manager's CPUAffinity=, as `systemctl \
                     daemon-reexec` does) or at the next boot; services running now keep their \
                     CPUs until they restart"
                .into(),
            Some(u) => format!(
                "takes effect when {u} restarts (`systemctl daemon-reload && systemctl restart {u}`)"
            ),
        }
    }
}

impl KnobKind for SystemdCpuAffinity {
    fn kind(&self) -> KindName {
        KindName::SystemdCpuAffinity
    }

    fn desired(&self) -> String {
        self.cpus.to_string()
    }

    fn target_summary(&self) -> String {
        match &self.units {
            None => "CPUAffinity= of the system manager (PID 1)".into(),
            Some(u) => format!("{}= of {}", self.property.as_str(), u.join(", ")),
        }
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::SystemdDropin]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let mut survey = Survey::default();
        for unit in self.scopes() {
            let (found, conf) = self.configured(host, unit);
            let running = self.running(host, unit);
            if !found && running.is_empty() {
                let u = unit.unwrap_or_default();
                survey.targets.push(Target::absent(
                    format!("/etc/systemd/system/{u}"),
                    None,
                    &desired,
                    format!("no unit {u} and no such process on this host"),
                ));
                continue;
            }
            let path = self.dropin_path(unit);
            let restore = match host.root.read_string(&path) {
                Ok(t) => Some(t),
                Err(e) if crate::root::is_absent(&e) => None,
                Err(e) => {
                    survey.targets.push(Target::unreadable(
                        path,
                        None,
                        &desired,
                        &super::ctx::describe_io(&e),
                    ));
                    continue;
                }
            };
            let mut in_effect = conf.unparsed.is_none() && conf.cpus.as_ref() == Some(&self.cpus);
            let mut current = conf.words();
            if let Some(v) = self.cmdline_override(host).filter(|_| unit.is_none()) {
                if v != desired {
                    in_effect = false;
                    current = format!("{v} (systemd.cpu_affinity= on the kernel command line overrides the files' {current})");
                }
                survey.notes.push(format!(
                    "{OVERRIDE}{v}, which overrides system.conf and its drop-ins for PID 1 at every boot and reload"
                ));
            }
            survey.targets.push(Target {
                in_effect,
                path,
                cpus: None,
                label: Some("configured".into()),
                current: Some(current),
                desired: desired.clone(),
                write: Some(self.content(unit)),
                restore,
                mode: WriteMode::File,
                blocker: None,
            });
            if let (Some(u), true) = (unit, running.is_empty()) {
                survey.notes.push(format!(
                    "{u} is not running here: the setting takes effect when it starts"
                ));
            }
            if running
                .iter()
                .any(|r| r.value.is_some() && r.value.as_deref() != Some(desired.as_str()))
            {
                survey.notes.push(format!(
                    "the drop-in {}; hostknob does not run it",
                    Self::how_to_take_effect(unit)
                ));
            }
            for r in running {
                if r.value.is_none() {
                    // A capture without the process: what runs now is unknown.
                    let why = format!("cannot read {}: what runs now is unknown here", r.path);
                    survey
                        .targets
                        .push(Target::absent(r.path, None, &desired, why));
                    continue;
                }
                survey.targets.push(Target {
                    in_effect: r.value.as_deref() == Some(desired.as_str()),
                    path: r.path,
                    cpus: None,
                    label: Some(r.label),
                    current: r.value,
                    desired: desired.clone(),
                    write: None,
                    restore: None,
                    mode: WriteMode::File,
                    blocker: None,
                });
            }
        }
        Ok(survey)
    }

    /// The drop-in reads back only when the configuration as systemd reads
    /// it (every file in order) comes to the desired CPUs.
    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        let own = host.root.read_trimmed(path)?;
        let Some(unit) = self
            .scopes()
            .into_iter()
            .find(|u| self.dropin_path(*u) == path)
        else {
            return Ok(own);
        };
        if own.is_none() {
            return Ok(own);
        }
        let (_, conf) = self.configured(host, unit);
        Ok(
            if conf.unparsed.is_none() && conf.cpus.as_ref() == Some(&self.cpus) {
                own
            } else {
                Some(format!(
                    "the configuration comes to {}={} ({} overrides {path})",
                    self.property.as_str(),
                    conf.words(),
                    conf.at.as_deref().unwrap_or("another file")
                ))
            },
        )
    }

    fn pending_reboot(&self, host: &HostCtx) -> Option<String> {
        let desired = self.desired();
        let mut out = Vec::new();
        for unit in self.scopes() {
            let (_, conf) = self.configured(host, unit);
            if conf.unparsed.is_some() || conf.cpus.as_ref() != Some(&self.cpus) {
                continue;
            }
            // No reboot brings it while the kernel command line overrides it.
            if unit.is_none() && self.cmdline_override(host).is_some_and(|v| v != desired) {
                continue;
            }
            let stale: Vec<String> = self
                .running(host, unit)
                .into_iter()
                .filter(|r| r.value.is_some() && r.value.as_deref() != Some(desired.as_str()))
                .map(|r| format!("{} reads {}", r.path, r.value.as_deref().unwrap_or("?")))
                .collect();
            if stale.is_empty() {
                continue;
            }
            out.push(format!(
                "configured at {} ({}={}), but {}: {}",
                conf.at.as_deref().unwrap_or("?"),
                self.property.as_str(),
                self.cpus,
                stale.join(", "),
                Self::how_to_take_effect(unit)
            ));
        }
        (!out.is_empty()).then(|| out.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_merge_and_an_empty_one_resets() {
        let mut c = Configured::default();
        apply_text(
            "[Manager]\nCPUAffinity=0 1\nCPUAffinity=4-5,7\n[Other]\nCPUAffinity=9\n",
            "a.conf",
            "[Manager]",
            "CPUAffinity",
            &mut c,
        );
        assert_eq!(c.words(), "0-1,4-5,7");
        assert_eq!(c.at.as_deref(), Some("a.conf:3"));
        apply_text(
            "[Manager]\nCPUAffinity=\nCPUAffinity=2\n",
            "b.conf",
            "[Manager]",
            "CPUAffinity",
            &mut c,
        );
        assert_eq!(c.words(), "2");
        apply_text(
            "[Manager]\nCPUAffinity=\n",
            "c.conf",
            "[Manager]",
            "CPUAffinity",
            &mut c,
        );
        assert_eq!(c.words(), "(unset)");
        apply_text(
            "[Manager]\n#CPUAffinity=3\nCPUAffinity=numa\n",
            "d.conf",
            "[Manager]",
            "CPUAffinity",
            &mut c,
        );
        assert_eq!(c.words(), "numa");
    }
}
