//! tuned as tuned itself reads a profile: where profiles are found and
//! how includes merge (`load`, `ini`), variables and functions (`vars`),
//! the host facts a profile's conditions and functions read (`facts`), and
//! what the merged profile writes, on this project's kinds (`translate`,
//! with `cpu` and `sections`; `out` holds what they produce). Plus tuned's
//! own state on a host: the active profile, `reapply_sysctl`, where it
//! writes `CPUAffinity=`. `import tuned` writes a manifest from it; audit
//! compares an active profile with the manifest's knobs.

mod cpu;
mod devices;
mod disk;
pub mod facts;
mod hardware;
pub mod ini;
pub mod load;
mod modules;
pub mod out;
mod scheduler;
mod sections;
pub mod translate;
pub mod vars;

use std::path::Path;

use anyhow::{Context as _, Result};

use crate::root::Root;
pub use load::Source;

pub fn source<'r>(root: &'r Root, from: Option<&Path>) -> Result<Source<'r>> {
    let from = match from {
        Some(d) => {
            let seam = Root::confined(d)
                .with_context(|| format!("--from {}: cannot open", d.display()))?;
            Some((seam, d.display().to_string()))
        }
        None => None,
    };
    Ok(Source { root, from })
}

/// (name, directory, summary) of every profile found.
pub fn list(root: &Root, from: Option<&Path>) -> Result<Vec<(String, String, String)>> {
    let src = source(root, from)?;
    let mut out = Vec::new();
    for (name, dir) in src.list() {
        let summary = src
            .locate(&name, &[])
            .and_then(|(seam, logical, _)| seam.read_string(&logical).ok())
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix("summary")
                        .and_then(|r| r.trim_start().strip_prefix('='))
                        .map(|s| s.trim().to_string())
                })
            })
            .unwrap_or_default();
        out.push((name, dir, summary));
    }
    Ok(out)
}

/// The profiles `/etc/tuned/active_profile` names (tuned merges several
/// in order), when it names any.
pub fn active_profile(root: &Root) -> Option<String> {
    root.read_string("/etc/tuned/active_profile")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|p| !p.is_empty())
}

/// Whether tuned is on the host, and how: `Some((true, what))` where it runs
/// or is enabled (it reapplies its profile at every start), `Some((false,
/// what))` where it is only installed, `None` where it is not there.
pub fn presence(root: &Root) -> Option<(bool, String)> {
    let running: Vec<String> = root
        .read_dir("/proc")
        .unwrap_or_default()
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter(|n| {
            root.read_trimmed(&format!("/proc/{n}/comm"))
                .ok()
                .flatten()
                .is_some_and(|c| c == "tuned")
        })
        .map(|n| format!("running (PID {n})"))
        .collect();
    let enabled = super::systemd::Wants::read(root).links(root, "tuned.service");
    let mut active: Vec<String> = running;
    active.extend(enabled.iter().map(|l| format!("enabled ({l})")));
    if !active.is_empty() {
        return Some((true, active.join(", ")));
    }
    ["/usr/sbin/tuned", "/usr/bin/tuned"]
        .into_iter()
        .find(|p| root.exists(p))
        .map(String::from)
        .or_else(|| super::systemd::unit_file(root, "tuned.service"))
        .map(|p| {
            (
                false,
                format!("installed ({p}), neither running nor enabled"),
            )
        })
}

/// tuned-main.conf `reapply_sysctl` (default 1, tuned/consts.py), read with
/// tuned's get_bool: after the profile's sysctls, tuned writes /run/sysctl.d,
/// /etc/sysctl.d and /etc/sysctl.conf again (plugin_sysctl.py
/// `_apply_system_sysctl`).
pub fn reapply_sysctl(root: &Root) -> bool {
    let text = root
        .read_string("/etc/tuned/tuned-main.conf")
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .rfind(|(k, _)| k.trim() == "reapply_sysctl")
        .is_none_or(|(_, v)| {
            !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "no" | "n" | "off"
            )
        })
}

const SYSTEMD_DROPIN: &str = "/etc/systemd/system.conf.d/00-tuned.conf";

/// Where tuned writes `CPUAffinity=`: tuned >= 2.28 a drop-in
/// (system.conf.d/00-tuned.conf, commit a8a9d38), before it system.conf.
pub fn systemd_file(root: &Root) -> String {
    match root.exists(SYSTEMD_DROPIN) {
        true => SYSTEMD_DROPIN.into(),
        false => "/etc/systemd/system.conf".into(),
    }
}

/// What each named profile writes, in order: (profile, setting), the
/// profiles' settings translated onto this project's kinds.
pub fn writes(root: &Root, names: &str) -> Result<Vec<(String, out::KnobOut)>> {
    let src = source(root, None)?;
    let facts = facts::read(root);
    let mut all = Vec::new();
    for name in names.split_whitespace() {
        let p = load::load(&src, name)?;
        let out = translate::translate(root, &p, &facts)?;
        all.extend(out.knobs.into_iter().map(|k| (name.to_string(), k)));
    }
    Ok(all)
}
