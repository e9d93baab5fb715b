//! sysctl.d: the file `persist` writes for sysctl knobs, and the parser audit
//! reads sysctl.d files and /etc/sysctl.conf with.

use std::collections::BTreeSet;

use super::{Artifact, ConfLine, by_files, config_files, header};
use crate::knob::{HostCtx, Target};
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const SYSCTL_DIR: &str = "/etc/sysctl.d";

/// `/proc/sys/vm/swappiness` -> `vm.swappiness`; the slash form when a
/// component holds a dot (`net/ipv4/conf/eth0.100/rp_filter`).
pub fn sysctl_name(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/proc/sys/")?;
    Some(if rest.split('/').any(|c| c.contains('.')) {
        rest.to_string()
    } else {
        rest.replace('/', ".")
    })
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    targets: &[&Target],
) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = Persistence::SysctlD;
    let write = |t: &&Target| t.write.clone().unwrap_or_default();
    let mut content = header(knob, &host.name);
    for t in targets {
        let name =
            sysctl_name(&t.path).ok_or_else(|| format!("{id}: {} is not a sysctl", t.path))?;
        content.push_str(&format!("{name} = {}\n", write(t).trim()));
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism,
        path: Some(format!("{SYSCTL_DIR}/90-hostknob-{id}.conf")),
        content,
        commands: Vec::new(),
        notes: vec!["systemd-sysctl applies it at every boot".into()],
        replaces: Vec::new(),
    })
}

/// Every `name = value` line of sysctl.d and /etc/sysctl.conf, as /proc/sys paths.
pub fn read(host: &HostCtx) -> Vec<ConfLine> {
    let mut out = Vec::new();
    let mut files = config_files(
        host,
        &super::dot_d_dirs("sysctl.d").each_ref().map(String::as_str),
        ".conf",
    );
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
            out.push(ConfLine {
                file: file.clone(),
                line: i + 1,
                key: path,
                value: v.split_whitespace().collect::<Vec<_>>().join(" "),
            });
        }
    }
    out
}

/// `Ok(where)` when a sysctl.d line sets each target's value.
pub(super) fn check(writable: &[&Target], lines: &[ConfLine]) -> Result<String, String> {
    let config_sysctl = lines;
    let mut by = BTreeSet::new();
    for t in writable {
        let hit = config_sysctl.iter().rev().find(|l| {
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
