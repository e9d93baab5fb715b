//! `sysfs`: any attribute under `/sys` (glob patterns allowed) set to a value.
//! Paths are checked twice: textually when the manifest loads (absolute,
//! under `/sys`, no `.` or `..`), and on the host, where every match must
//! resolve inside `/sys` (a symlink leading out is refused).

use serde::Deserialize;

use super::bound::{BOUND_PERSISTENCE, SetDoc, Setting};
use super::{
    ATTRIBUTE_PERSISTENCE, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec,
    Survey, Target, WriteMode,
};
use crate::cpulist::CpuList;
use crate::inventory::bracketed;
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    path: String,
}

#[derive(Debug)]
pub struct Sysfs {
    pub path: String,
    components: Vec<String>,
    pub value: Setting,
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Checks a sysfs path pattern as text; returns its components below `/`.
pub fn check_path(path: &str) -> Result<Vec<String>, String> {
    let Some(rest) = path.strip_prefix("/sys/") else {
        return Err(format!(
            "{path:?} is not under /sys: sysfs knobs write only /sys attributes"
        ));
    };
    let mut components = vec!["sys".to_string()];
    for c in rest.split('/') {
        match c {
            "" => {
                return Err(format!(
                    "{path:?} has an empty component (`//` or a trailing `/`)"
                ));
            }
            ".." => {
                return Err(format!(
                    "{path:?} contains `..`: paths must stay inside /sys"
                ));
            }
            "." => return Err(format!("{path:?} contains `.`: write the path plainly")),
            _ => {}
        }
        if is_glob(c) {
            glob::Pattern::new(c).map_err(|e| format!("{path:?}: bad glob {c:?}: {e}"))?;
        }
        components.push(c.to_string());
    }
    Ok(components)
}

/// The CPU a per-CPU sysfs path belongs to (`/sys/devices/system/cpu/cpu12/...`).
fn cpu_of(path: &str) -> Option<u32> {
    let rest = path.strip_prefix("/sys/devices/system/cpu/cpu")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with('/') {
        return None;
    }
    digits.parse().ok()
}

impl Spec for Sysfs {
    type Target = TargetDoc;
    type Set = SetDoc;

    fn new(target: Option<TargetDoc>, set: SetDoc) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new("target", "missing: give target.path (a file under /sys)")
        })?;
        let components = check_path(&t.path).map_err(|m| FieldError::new("target.path", m))?;
        let value = match Setting::parse("set", set)? {
            Setting::Value(v) if v.contains('\n') => {
                return Err(FieldError::new("set", "a sysfs value is one line"));
            }
            Setting::Value(v) => Setting::Value(v.trim().to_string()),
            b => b,
        };
        Ok(Sysfs {
            path: t.path,
            components,
            value,
        })
    }
}

impl Sysfs {
    /// Expands the pattern one component at a time through the root, so a
    /// glob never looks at anything outside it.
    fn expand(&self, host: &HostCtx) -> Vec<String> {
        let mut paths = vec![String::new()];
        for c in &self.components {
            let mut next = Vec::new();
            for p in &paths {
                if is_glob(c) {
                    let pattern = glob::Pattern::new(c).expect("checked at load");
                    let dir = if p.is_empty() { "/" } else { p.as_str() };
                    for name in host.list(dir) {
                        if pattern.matches(&name) {
                            next.push(format!("{p}/{name}"));
                        }
                    }
                } else {
                    next.push(format!("{p}/{c}"));
                }
            }
            paths = next;
        }
        paths.sort_by_key(|p| (cpu_of(p), p.clone()));
        paths
    }
}

impl KnobKind for Sysfs {
    fn kind(&self) -> KindName {
        KindName::Sysfs
    }

    fn desired(&self) -> String {
        self.value.to_string()
    }

    fn target_summary(&self) -> String {
        self.path.clone()
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        match self.value {
            Setting::Bound(_) => BOUND_PERSISTENCE,
            Setting::Value(_) => ATTRIBUTE_PERSISTENCE,
        }
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        bracketed(raw).unwrap_or_else(|| raw.trim().to_string())
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
        for path in self.expand(host) {
            let resolved = match host.root.resolve(&path) {
                Ok(r) => r,
                Err(e) if crate::root::is_absent(&e) => continue,
                // A link loop or a refused open is this file's verdict, not absence.
                Err(e) => {
                    let why = format!("cannot be resolved inside the root: {e}");
                    survey
                        .targets
                        .push(Target::unreadable(path, None, &desired, &why));
                    continue;
                }
            };
            if !resolved.starts_with("/sys/") {
                return Err(FieldError::new(
                    "target.path",
                    format!("{path} resolves to {resolved}, outside /sys: refused"),
                ));
            }
            if host.root.is_dir(&path) {
                return Err(FieldError::new(
                    "target.path",
                    format!("{path} is a directory, not an attribute"),
                ));
            }
            let cpus = cpu_of(&path).map(|c| CpuList::new(vec![c]));
            match host.value(&path) {
                ReadValue::Value(v) => {
                    let current = self.normalize(&v);
                    let (in_effect, write, blocker) =
                        super::sysctl::judge(&self.value, &path, Some(&current));
                    survey.targets.push(Target {
                        in_effect,
                        path,
                        cpus,
                        label: None,
                        restore: Some(current.clone()),
                        current: Some(current),
                        desired: desired.clone(),
                        write,
                        mode: WriteMode::Attribute,
                        blocker,
                    });
                }
                ReadValue::Absent => {}
                ReadValue::Unreadable(e) => survey
                    .targets
                    .push(Target::unreadable(path, cpus, &desired, &e)),
            }
        }
        if survey.targets.is_empty() {
            survey.targets.push(Target::absent(
                self.path.clone(),
                None,
                &desired,
                format!("nothing matches {} on this host", self.path),
            ));
        }
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textual_checks() {
        assert!(check_path("/sys/kernel/mm/ksm/run").is_ok());
        assert!(check_path("/sys/devices/system/cpu/cpu*/power/x").is_ok());
        for bad in [
            "/proc/sys/vm/swappiness",
            "sys/kernel",
            "/sys/../etc/passwd",
            "/sys/kernel/./mm",
            "/sys//kernel",
            "/sys/kernel/",
            "/sys/kernel/[",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        assert_eq!(cpu_of("/sys/devices/system/cpu/cpu12/power/x"), Some(12));
        assert_eq!(cpu_of("/sys/devices/system/cpu/cpufreq/policy0/x"), None);
    }
}
