//! systemd-tmpfiles.d: the `w` lines `persist` writes for attribute knobs,
//! and the parser audit reads every tmpfiles.d `w` line with.

use std::collections::BTreeSet;

use super::{Artifact, ConfLine, by_files, config_files, header};
use crate::knob::{HostCtx, KindName, Target, rules};
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const TMPFILES_DIR: &str = "/etc/tmpfiles.d";

const DIRS: [&str; 4] = [
    "/etc/tmpfiles.d",
    "/run/tmpfiles.d",
    "/usr/lib/tmpfiles.d",
    "/lib/tmpfiles.d",
];

/// The file of knob `id` whose first write is of `phase` (the kernel's write
/// order, `rules::phase`): systemd-tmpfiles reads files in name order, so
/// `hostknob-10-gov.conf` (a governor) comes before `hostknob-30-epp.conf`
/// (EPP, which the performance governor refuses), whatever the ids.
pub fn path_for(phase: u8, id: &str) -> String {
    format!("{TMPFILES_DIR}/hostknob-{phase}0-{id}.conf")
}

/// The name older versions gave every knob's file: in id order, not phase order.
pub fn legacy_path(id: &str) -> String {
    format!("{TMPFILES_DIR}/hostknob-{id}.conf")
}

/// A value as a tmpfiles.d argument: specifiers (`%`) and C escapes (`\`) are literal.
pub(super) fn tmpfiles_arg(value: &str) -> String {
    value.replace('\\', "\\\\").replace('%', "%%")
}

/// A tmpfiles.d argument as systemd-tmpfiles writes it: the reverse of
/// [`tmpfiles_arg`] (tmpfiles.d(5): `%%` is `%`; C-style escapes).
pub(super) fn tmpfiles_unarg(arg: &str) -> String {
    let mut out = String::new();
    let mut chars = arg.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('%', Some('%')) | ('\\', Some('\\')) => {
                out.push(c);
                chars.next();
            }
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            ('\\', Some('t')) => {
                out.push('\t');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    targets: &[&Target],
) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = Persistence::Tmpfiles;
    let write = |t: &&Target| t.write.clone().unwrap_or_default();
    // Lines run in file order: a file whose writes span phases keeps the kernel's order.
    let mut targets = targets.to_vec();
    targets.sort_by_key(|t| rules::phase(&t.path));
    let phase = targets
        .first()
        .map_or(rules::DEPENDENT_FREE, |t| rules::phase(&t.path));
    let mut content = header(knob, &host.name);
    content.push_str("# Type Path Mode User Group Age Argument\n");
    for t in &targets {
        if t.path
            .contains(|c: char| c.is_whitespace() || c == '"' || c == '\\')
        {
            return Err(format!(
                "{id}: {} cannot be named in a tmpfiles.d line",
                t.path
            ));
        }
        content.push_str(&format!(
            "w {} - - - - {}\n",
            t.path,
            tmpfiles_arg(write(t).trim())
        ));
    }
    let path = path_for(phase, id);
    let mut notes = vec![format!(
        "systemd-tmpfiles writes {} at every boot (systemd-tmpfiles-setup.service)",
        match targets.len() {
            1 => "this file".to_string(),
            n => format!("these {n} files"),
        }
    )];
    notes.extend(pinning(knob, &targets));
    let mut replaces = Vec::new();
    for old in (0..=9).map(|p| path_for(p, id)).chain([legacy_path(id)]) {
        if old != path && host.text(&old).is_some_and(|t| super::is_own(&t, id)) {
            notes.push(format!(
                "--install replaces {old}, which an older hostknob (or another phase) named: \
                 systemd-tmpfiles reads files in name order, and {path} is in phase order"
            ));
            replaces.push(old);
        }
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism,
        path: Some(path),
        content,
        commands: Vec::new(),
        notes,
        replaces,
    })
}

/// What a `w` line fixes that the knob itself does not: tmpfiles.d(5) `w`
/// names one path, and a path that does not exist when the line runs is
/// skipped. Said so, with `persistence: boot` as the fix.
fn pinning(knob: &Knob, targets: &[&Target]) -> Vec<String> {
    let id = &knob.id;
    let boot = "`persistence: boot` (a unit running `hostknob apply` after drivers load) does not";
    let mut out = Vec::new();
    if knob.kind == KindName::CpuidleState {
        let indexes: BTreeSet<&str> = targets
            .iter()
            .filter_map(|t| t.path.split('/').find(|c| c.starts_with("state")))
            .collect();
        let states: BTreeSet<&str> = targets.iter().filter_map(|t| t.label.as_deref()).collect();
        out.push(format!(
            "{id}: these lines pin idle-state indexes ({}) for {}: a kernel, BIOS or driver change \
             renumbers states and the lines then write another state; {boot}",
            indexes.into_iter().collect::<Vec<_>>().join(", "),
            states.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if targets.iter().any(|t| t.path.contains("/cpufreq/")) {
        out.push(format!(
            "{id}: cpufreq policy files exist only once the cpufreq driver has loaded (a module, \
             or CPUs onlined later): a `w` line for a path missing at boot is skipped; {boot}"
        ));
    }
    out
}

/// Every `w` line of the tmpfiles.d directories, in the order systemd reads them.
pub fn read(host: &HostCtx) -> Vec<ConfLine> {
    let mut out = Vec::new();
    for (file, text) in config_files(host, &DIRS, ".conf") {
        for (i, line) in text.lines().enumerate() {
            let mut f = line.split_whitespace();
            let (Some(ty), Some(path)) = (f.next(), f.next()) else {
                continue;
            };
            if !ty.starts_with('w') {
                continue;
            }
            // Type Path Mode User Group Age Argument: the argument is the
            // rest, as systemd-tmpfiles writes it (unescaped).
            let arg = tmpfiles_unarg(
                &line
                    .split_whitespace()
                    .skip(6)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            out.push(ConfLine {
                file: file.clone(),
                line: i + 1,
                key: path.to_string(),
                value: arg,
            });
        }
    }
    out
}

/// `Ok(where)` when a `w` line writes each target's value.
pub(super) fn check(writable: &[&Target], lines: &[ConfLine]) -> Result<String, String> {
    let config_tmpfiles = lines;
    let mut by = BTreeSet::new();
    for t in writable {
        let Some(w) = &t.write else { continue };
        let hit = config_tmpfiles.iter().rev().find(|l| {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        for v in ["50%", "a\\b", "%%n", "plain"] {
            assert_eq!(tmpfiles_unarg(&tmpfiles_arg(v)), v);
        }
    }
}
