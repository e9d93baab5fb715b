//! `sysctl`: a dotted name (`vm.swappiness`) mapped to `/proc/sys`. A name
//! that does not exist on a host that has `/proc/sys` is bad input: it is
//! far more often a typo than a kernel difference. A knob for every host
//! says `optional: true` for a sysctl some kernels are built without
//! (`kernel.numa_balancing`, `net.core.busy_poll`): absent, it is then
//! not-applicable there.

use serde::Deserialize;

use super::bound::{BOUND_PERSISTENCE, SetDoc, Setting, Verdict};
use super::{
    Blocker, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec, Survey, Target,
    WriteMode,
};
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    name: String,
    #[serde(default)]
    optional: bool,
}

#[derive(Debug)]
pub struct Sysctl {
    pub name: String,
    pub path: String,
    /// The value (white space squashed), or a bound.
    pub value: Setting,
    /// Absent on the host is not-applicable, not an error.
    pub optional: bool,
}

/// `net.ipv4.tcp_rmem` -> `/proc/sys/net/ipv4/tcp_rmem`, read as sysctl.d(5)
/// says: when the first separator is `.`, `.` and `/` swap
/// (`net.ipv4.conf.eth0/100.rp_filter` is `.../eth0.100/rp_filter`); when it
/// is `/`, the name is a path.
pub fn sysctl_path(name: &str) -> Result<String, String> {
    let path = super::rules::sysctl_key_path(name);
    let parts: Vec<&str> = path.split('/').collect();
    let ok = |p: &&str| {
        !p.is_empty()
            && *p != ".."
            && *p != "."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    };
    if parts.is_empty() || !parts.iter().all(ok) {
        return Err(format!(
            "{name:?} is not a sysctl name (like vm.swappiness or net/ipv4/conf/eth0.100/rp_filter)"
        ));
    }
    Ok(format!("/proc/sys/{}", parts.join("/")))
}

/// A numeric file's current value against a setting: (in effect, what to
/// write, why it cannot take it). A bound writes only where the value is past
/// it; shared by `sysctl`, `sysfs` and `block`.
pub(super) fn judge(
    setting: &Setting,
    path: &str,
    current: Option<&str>,
) -> (bool, Option<String>, Option<Blocker>) {
    match (setting, current) {
        (Setting::Value(v), c) => (c == Some(v.as_str()), Some(v.clone()), None),
        (Setting::Bound(b), None) => (
            false,
            None,
            Some(Blocker::Unreadable(format!(
                "{path}: no value to compare with `{b}`"
            ))),
        ),
        (Setting::Bound(b), Some(c)) => match b.judge(c) {
            Verdict::Satisfied => (true, None, None),
            Verdict::Write(w) => (false, Some(w), None),
            Verdict::NotANumber => (
                false,
                None,
                Some(Blocker::Unsupported(b.not_a_number(path, c))),
            ),
        },
    }
}

/// Values compare with runs of white space as one space (`4096\t16384`).
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Spec for Sysctl {
    type Target = TargetDoc;
    type Set = SetDoc;

    fn new(target: Option<TargetDoc>, set: SetDoc) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new("target", "missing: give target.name (e.g. vm.swappiness)")
        })?;
        let name = t.name.trim().trim_start_matches("/proc/sys/").to_string();
        let path = sysctl_path(&name).map_err(|m| FieldError::new("target.name", m))?;
        let value = match Setting::parse("set", set)? {
            Setting::Value(v) if v.trim().is_empty() => {
                return Err(FieldError::new("set", "empty value"));
            }
            Setting::Value(v) => Setting::Value(squash(&v)),
            b => b,
        };
        Ok(Sysctl {
            name,
            path,
            value,
            optional: t.optional,
        })
    }
}

impl KnobKind for Sysctl {
    fn kind(&self) -> KindName {
        KindName::Sysctl
    }

    fn desired(&self) -> String {
        self.value.to_string()
    }

    fn target_summary(&self) -> String {
        self.name.clone()
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        if self.value.bound().is_some() {
            return BOUND_PERSISTENCE;
        }
        &[
            Persistence::Runtime,
            Persistence::SysctlD,
            Persistence::Tmpfiles,
            Persistence::Cmdline,
        ]
    }

    fn cmdline_args(&self) -> Option<Vec<String>> {
        let Setting::Value(v) = &self.value else {
            return None;
        };
        (!v.contains(' ')).then(|| vec![format!("sysctl.{}={v}", self.name)])
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        squash(raw)
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        match &self.value {
            Setting::Bound(b) => b.holds(read),
            Setting::Value(_) => expect == read,
        }
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let desired = self.desired();
        if !host.root.is_dir("/proc/sys") {
            survey.targets.push(Target::absent(
                self.path.clone(),
                None,
                &desired,
                "this tree has no /proc/sys (a capture without sysctls)".into(),
            ));
            return Ok(survey);
        }
        if host.root.is_dir(&self.path) {
            return Err(FieldError::new(
                "target.name",
                format!(
                    "{} is a directory of sysctls ({}), not one sysctl",
                    self.name, self.path
                ),
            ));
        }
        let current = match host.value(&self.path) {
            ReadValue::Value(v) => Some(self.normalize(&v)),
            ReadValue::Absent if self.optional => {
                survey.targets.push(Target::absent(
                    self.path.clone(),
                    None,
                        &desired,
                    format!(
                        "no sysctl {} on this host (the kernel is built without it, or the \
                         capture did not copy it; the knob is optional)",
                        self.name
                    ),
                ));
                return Ok(survey);
            }
            ReadValue::Absent => {
                return Err(FieldError::new(
                    "target.name",
                    format!(
                        "no sysctl {} on this host ({} does not exist; a sysctl some \
                         kernels lack takes `optional: true` in target)",
                        self.name, self.path
                    ),
                ));
            }
            ReadValue::Unreadable(e) => {
                survey
                    .targets
                    .push(Target::unreadable(self.path.clone(), None, &desired, &e));
                return Ok(survey);
            }
        };
        let (in_effect, write, blocker) = judge(&self.value, &self.path, current.as_deref());
        survey.targets.push(Target {
            in_effect,
            path: self.path.clone(),
            cpus: None,
            label: None,
            restore: current.clone(),
            current,
            desired,
            write,
            mode: WriteMode::Attribute,
            blocker,
        });
        Ok(survey)
    }
}
