//! Identical changes over many CPUs shown and recorded once:
//! `/sys/devices/system/cpu/cpu0-319/cpuidle/state3/disable: 0 -> 1`.
//!
//! Files group when they differ only in the number of one `cpuN` or
//! `policyN` directory and change alike (same label, same before, same after).

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::manifest::ledger;

/// One file's change, as apply plans it or revert makes it.
#[derive(Clone, Debug)]
pub struct Change<'a> {
    pub path: &'a str,
    pub cpus: Option<&'a CpuList>,
    pub label: Option<&'a str>,
    /// `None`: the file does not exist (before) or is removed (after).
    pub before: Option<&'a str>,
    pub after: Option<&'a str>,
}

/// Files that change alike.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ChangeGroup {
    /// The one path, or the group's pattern (`.../cpu*/cpuidle/state3/disable`).
    pub path: String,
    /// As people read it: `.../cpu0-319/cpuidle/state3/disable`.
    pub display: String,
    pub files: usize,
    /// The CPUs the files act for, all together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl ChangeGroup {
    /// The ledger's form: the pattern and the CPUs it covers.
    pub fn to_ledger(&self) -> ledger::Change {
        ledger::Change {
            path: self.path.clone(),
            cpus: self.cpus.clone(),
            before: self.before.clone(),
            after: self.after.clone(),
        }
    }
}

/// `/sys/.../cpu12/cpuidle/...` -> (`/sys/.../cpu*/cpuidle/...`, 12): the
/// first `cpuN` or `policyN` component, indexed_component.
fn indexed_component(path: &str) -> Option<(String, u32)> {
    let mut start = 0;
    for comp in path.split('/') {
        for prefix in ["cpu", "policy"] {
            if let Some(digits) = comp.strip_prefix(prefix)
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && let Ok(n) = digits.parse()
            {
                let at = start + prefix.len();
                let pattern = format!("{}*{}", &path[..at], &path[at + digits.len()..]);
                return Some((pattern, n));
            }
        }
        start += comp.len() + 1;
    }
    None
}

struct Building {
    pattern: Option<String>,
    path: String,
    numbers: Vec<u32>,
    cpus: Vec<u32>,
    any_cpus: bool,
    label: Option<String>,
    before: Option<String>,
    after: Option<String>,
}

/// Groups changes, in the order of their first file.
pub fn group<'a>(changes: impl IntoIterator<Item = Change<'a>>) -> Vec<ChangeGroup> {
    let mut building: Vec<Building> = Vec::new();
    for c in changes {
        let indexed_component = indexed_component(c.path);
        let key_path = indexed_component
            .as_ref()
            .map(|(p, _)| p.as_str())
            .unwrap_or(c.path);
        let same = |b: &&mut Building| {
            b.pattern.as_deref().unwrap_or(&b.path) == key_path
                && b.label.as_deref() == c.label
                && b.before.as_deref() == c.before
                && b.after.as_deref() == c.after
        };
        let b = match building.iter_mut().find(same) {
            Some(b) => b,
            None => {
                building.push(Building {
                    pattern: indexed_component.as_ref().map(|(p, _)| p.clone()),
                    path: c.path.to_string(),
                    numbers: Vec::new(),
                    cpus: Vec::new(),
                    any_cpus: false,
                    label: c.label.map(str::to_string),
                    before: c.before.map(str::to_string),
                    after: c.after.map(str::to_string),
                });
                building.last_mut().expect("just pushed")
            }
        };
        if let Some((_, n)) = indexed_component {
            b.numbers.push(n);
        }
        if let Some(cpus) = c.cpus {
            b.any_cpus = true;
            b.cpus.extend_from_slice(cpus.as_slice());
        }
    }
    building
        .into_iter()
        .map(|b| {
            let files = b.numbers.len().max(1);
            let (path, display) = match &b.pattern {
                Some(p) if files > 1 => {
                    let list = CpuList::new(b.numbers.clone()).to_string();
                    (p.clone(), p.replacen('*', &list, 1))
                }
                _ => (b.path.clone(), b.path.clone()),
            };
            ChangeGroup {
                path,
                display,
                files,
                cpus: b.any_cpus.then(|| CpuList::new(b.cpus)),
                label: b.label,
                before: b.before,
                after: b.after,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cpus_and_policies_that_change_alike() {
        let paths: Vec<String> = (0..4)
            .map(|c| format!("/sys/devices/system/cpu/cpu{c}/cpuidle/state3/disable"))
            .collect();
        let cpus: Vec<CpuList> = (0..4).map(|c| CpuList::new(vec![c])).collect();
        let mut changes: Vec<Change> = paths
            .iter()
            .zip(&cpus)
            .map(|(p, c)| Change {
                path: p,
                cpus: Some(c),
                label: Some("C6"),
                before: Some("0"),
                after: Some("1"),
            })
            .collect();
        // CPU 3 was already different: its own group.
        changes[3].before = Some("1");
        let g = group(changes);
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0].display,
            "/sys/devices/system/cpu/cpu0-2/cpuidle/state3/disable"
        );
        assert_eq!(
            g[0].path,
            "/sys/devices/system/cpu/cpu*/cpuidle/state3/disable"
        );
        assert_eq!(g[0].files, 3);
        assert_eq!(g[0].cpus.as_ref().unwrap().to_string(), "0-2");
        assert_eq!(g[1].path, paths[3]);
        assert_eq!(g[1].files, 1);

        let p = "/sys/devices/system/cpu/cpufreq/policy8/scaling_governor";
        let c = CpuList::parse("8-9").unwrap();
        let g = group([Change {
            path: p,
            cpus: Some(&c),
            label: None,
            before: Some("powersave"),
            after: Some("performance"),
        }]);
        assert_eq!((g[0].path.as_str(), g[0].files), (p, 1));
        assert_eq!(
            indexed_component(p),
            Some((
                "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor".into(),
                8
            ))
        );
        assert_eq!(
            indexed_component("/sys/devices/system/cpu/cpufreq/boost"),
            None
        );
        assert_eq!(indexed_component("/proc/sys/vm/swappiness"), None);
    }
}
