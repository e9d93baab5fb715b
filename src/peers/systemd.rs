//! systemd as it reads its own configuration: the manager's
//! `system.conf` and its drop-ins, a unit's file and drop-ins (which file
//! wins where two share a name), CPU-set assignments as systemd parses
//! them, and which units are enabled.

use std::collections::BTreeMap;

use crate::cpulist::CpuList;
use crate::root::Root;

pub const MANAGER_CONF: &str = "/etc/systemd/system.conf";
/// systemd-system.conf(5): drop-in directories, in priority order.
pub const MANAGER_DIRS: [&str; 5] = [
    "/etc/systemd/system.conf.d",
    "/run/systemd/system.conf.d",
    "/usr/local/lib/systemd/system.conf.d",
    "/usr/lib/systemd/system.conf.d",
    "/lib/systemd/system.conf.d",
];
/// systemd.unit(5): unit directories, in priority order.
pub const UNIT_DIRS: [&str; 4] = [
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// The manager's drop-ins in the order systemd reads them: by file name, a
/// name in an earlier directory hiding the same name in later ones.
pub fn manager_dropins(root: &Root) -> Vec<String> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for dir in MANAGER_DIRS {
        for name in list(root, dir).into_iter().filter(|n| n.ends_with(".conf")) {
            files.entry(name.clone()).or_insert(format!("{dir}/{name}"));
        }
    }
    files.into_values().collect()
}

/// The unit's file: the first unit directory that has it.
pub fn unit_file(root: &Root, unit: &str) -> Option<String> {
    UNIT_DIRS
        .iter()
        .find(|d| root.exists(&format!("{d}/{unit}")))
        .map(|d| format!("{d}/{unit}"))
}

/// systemd.unit(5): a unit's drop-ins come from `service.d/` (every
/// service), then each dash prefix of its name (`rpc-.service.d/` for
/// `rpc-node.service`), then its own `rpc-node.service.d/`: least specific first.
pub fn dropin_dirs(service: &str) -> Vec<String> {
    let stem = service.strip_suffix(".service").unwrap_or(service);
    let mut dirs = vec!["service.d".to_string()];
    for (i, _) in stem.match_indices('-') {
        dirs.push(format!("{}-.service.d", &stem[..i]));
    }
    dirs.push(format!("{service}.d"));
    dirs
}

/// The unit's drop-ins in the order systemd reads them (by file name).
/// Most specific first, so that of two files with one name the unit's own
/// directory, then the longer prefix, then /etc over /run and /usr wins.
pub fn dropins(root: &Root, unit: &str) -> Vec<String> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for d in dropin_dirs(unit).iter().rev() {
        for dir in UNIT_DIRS {
            let d = format!("{dir}/{d}");
            for name in list(root, &d) {
                if name.ends_with(".conf") {
                    files.entry(name.clone()).or_insert(format!("{d}/{name}"));
                }
            }
        }
    }
    files.into_values().collect()
}

/// The `.wants` directories under /etc/systemd/system, listed once for
/// the units asked about.
pub struct Wants(Vec<String>);

impl Wants {
    pub fn read(root: &Root) -> Wants {
        Wants(
            list(root, "/etc/systemd/system")
                .into_iter()
                .filter(|n| n.ends_with(".wants"))
                .map(|n| format!("/etc/systemd/system/{n}"))
                .collect(),
        )
    }

    /// The links that enable `unit`.
    pub fn links(&self, root: &Root, unit: &str) -> Vec<String> {
        self.0
            .iter()
            .map(|w| format!("{w}/{unit}"))
            // The link is the fact; its target may be missing from a capture.
            .filter(|link| root.read_link(link).is_ok() || root.exists(link))
            .collect()
    }
}

fn list(root: &Root, dir: &str) -> Vec<String> {
    root.read_dir(dir).unwrap_or_default()
}

/// A configured value: the CPUs, and the last assignment's `file:line`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Configured {
    /// `None`: unset (or reset by an empty assignment).
    pub cpus: Option<CpuList>,
    /// A value that is no CPU list (kept as written).
    pub unparsed: Option<String>,
    pub at: Option<String>,
}

impl Configured {
    pub fn words(&self) -> String {
        match (&self.unparsed, &self.cpus) {
            (Some(u), _) => u.clone(),
            (None, Some(c)) => c.to_string(),
            (None, None) => "(unset)".into(),
        }
    }
}

/// `0-3 8,9`: white space or commas between CPUs and ranges.
pub fn parse_value(text: &str) -> Option<CpuList> {
    let joined: Vec<&str> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    CpuList::parse(&joined.join(",")).ok()
}

/// Applies one file's assignments of `key` in `section` to `conf`.
pub fn apply_text(text: &str, file: &str, section: &str, key: &str, conf: &mut Configured) {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == section;
            continue;
        }
        if !inside || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim() != key {
            continue;
        }
        let v = v.trim();
        conf.at = Some(format!("{file}:{}", i + 1));
        if v.is_empty() {
            conf.cpus = None;
            conf.unparsed = None;
            continue;
        }
        match parse_value(v) {
            Some(l) if conf.unparsed.is_none() => {
                let mut all = conf.cpus.take().unwrap_or_default().as_slice().to_vec();
                all.extend_from_slice(l.as_slice());
                conf.cpus = Some(CpuList::new(all));
            }
            _ => conf.unparsed = Some(v.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropin_directories_run_from_every_service_to_the_unit() {
        assert_eq!(
            dropin_dirs("rpc-node-a.service"),
            [
                "service.d",
                "rpc-.service.d",
                "rpc-node-.service.d",
                "rpc-node-a.service.d"
            ]
        );
        assert_eq!(dropin_dirs("sshd.service"), ["service.d", "sshd.service.d"]);
    }
}
