//! `persistence: udev-reapply`: a udev rule that applies the knob again
//! whenever one of its interfaces appears (udev's coldplug at boot, a driver
//! reload, a re-created interface), for what a systemd.link file cannot set:
//! RPS masks and flow tables (`queues/rx-N` files exist only once the device
//! does, so a tmpfiles.d line at boot misses a later one) and ethtool fields
//! .link lacks. The rule matches each interface by its MAC address (the
//! kernel name of an `add` event is the name before udev renames it) and
//! hands the apply to systemd (`systemd-run --no-block`): udev kills long
//! RUN programs, and apply may wait for the lock (udev(7), RUN).

use super::Artifact;
use super::template_unit::{self, manifest_for_unit};
use crate::knob::{HostCtx, Target};
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

pub const RULES_DIR: &str = "/etc/udev/rules.d";

/// The rule file of knob `id`.
pub fn path_for(id: &str) -> String {
    format!("{RULES_DIR}/90-hostknob-{id}.rules")
}

/// The interfaces a knob's files (`/sys/class/net/IF/...`) and ethtool
/// values (`ethtool:IF/...`) are on, in order.
fn interfaces(targets: &[Target]) -> Vec<String> {
    let mut out: Vec<String> = targets
        .iter()
        .filter(|t| t.blocker.is_none())
        .filter_map(|t| {
            if let Some(f) = crate::ethtool::Field::parse(&t.path) {
                return Some(f.ifname);
            }
            let rest = t.path.strip_prefix("/sys/class/net/")?;
            let end = rest.find('/')?;
            Some(rest[..end].to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn command(dir: &str, id: &str) -> String {
    format!(
        "/usr/bin/systemd-run --no-block --collect --quiet hostknob apply --wait --manifest {dir} {id}"
    )
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
    targets: &[&Target],
) -> Result<Artifact, String> {
    let id = &knob.id;
    let (dir, outside) = manifest_for_unit(manifest, host).map_err(|e| format!("{id}: {e}"))?;
    let owned: Vec<Target> = targets.iter().map(|t| (*t).clone()).collect();
    let mut rules = String::new();
    for ifname in interfaces(&owned) {
        let mac = host
            .text(&format!("/sys/class/net/{ifname}/address"))
            .filter(|m| !m.is_empty() && m != "00:00:00:00:00:00")
            .ok_or_else(|| format!("{id}: {ifname} has no MAC address to match"))?;
        rules += &format!(
            "# {ifname}\nACTION==\"add\", SUBSYSTEM==\"net\", ATTR{{address}}==\"{mac}\", \
             RUN+=\"{}\"\n",
            command(&dir, id)
        );
    }
    let mut notes = vec![format!(
        "{id}: udev applies the knob again whenever its interface appears (at boot too); \
         `udevadm control --reload` reads the rule now"
    )];
    if outside {
        notes.push(template_unit::outside_note("rule", &dir, host));
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism: Persistence::UdevReapply,
        path: Some(path_for(id)),
        content: format!("{}{rules}", super::header(knob, &host.name)),
        commands: vec!["udevadm control --reload".into()],
        notes,
        replaces: Vec::new(),
    })
}

/// `Ok(where)` when the knob's rule is installed and applies it, from the
/// manifest it was loaded from, for each of its interfaces here.
pub(super) fn check(knob: &Knob, writable: &[&Target], host: &HostCtx) -> Result<String, String> {
    let id = &knob.id;
    let path = path_for(id);
    let again = format!("`hostknob persist {id} --install` writes it");
    let Some(text) = host.text(&path) else {
        return Err(format!("{path} does not exist: {again}"));
    };
    let owned: Vec<Target> = writable.iter().map(|t| (*t).clone()).collect();
    let manifest_dir = knob
        .source
        .file
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    for ifname in interfaces(&owned) {
        let mac = host
            .text(&format!("/sys/class/net/{ifname}/address"))
            .unwrap_or_default();
        let line = text.lines().find(|l| {
            !l.trim_start().starts_with('#') && l.contains(&format!("ATTR{{address}}==\"{mac}\""))
        });
        let Some(line) = line else {
            return Err(format!("{path} has no rule for {ifname} ({mac}): {again}"));
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let runs_knob = words.windows(3).any(|w| {
            w[0] == "--manifest"
                && w[2].trim_end_matches('"') == id
                && same_dir(host, w[1], &manifest_dir)
        });
        if !runs_knob {
            return Err(format!(
                "{path}: its rule for {ifname} does not apply {id} from the manifest it was \
                 loaded from ({}): {again}",
                knob.source.file.display()
            ));
        }
    }
    Ok(format!(
        "{path} (udev applies the knob whenever its interface appears)"
    ))
}

/// Whether a rule's `--manifest DIR` (a path on the booted host) is `dir`.
fn same_dir(host: &HostCtx, named: &str, dir: &str) -> bool {
    let canon = |p: std::path::PathBuf| p.canonicalize().ok();
    let want = canon(std::path::absolute(dir).unwrap_or_default());
    want.is_some()
        && [host.root.host_path(named), std::path::PathBuf::from(named)]
            .into_iter()
            .filter_map(canon)
            .any(|d| Some(d) == want)
}
