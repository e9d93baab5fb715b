//! `persistence: udev-rule`: a udev rule that writes a block knob's queue
//! settings (`ATTR{queue/...}="..."`) whenever one of its disks appears or
//! changes, as distributions set the I/O scheduler (SUSE's
//! 60-io-scheduler.rules; the udev rules of the Arch wiki's "Improving
//! performance" page). The rule's name sorts after the `60-` rules that set
//! schedulers and after systemd's 60-block.rules, so it runs after them;
//! `change` covers device-mapper disks, whose table (and queue) comes with a
//! `change` event after `add` (SUSE's rule says so for 10-dm.rules).

use super::{Artifact, mechanism};
use crate::knob::{HostCtx, Target};
use crate::manifest::Knob;
use crate::peers::udev_rules;
use crate::schema::Persistence;

/// The rule file of knob `id`.
pub fn path_for(id: &str) -> String {
    format!("{}/61-hostknob-{id}.rules", super::udev_reapply::RULES_DIR)
}

fn rule_lines(knob: &Knob) -> Result<Vec<String>, String> {
    knob.spec.udev_rule().map(|r| r.text()).ok_or_else(|| {
        format!(
            "{}: a {} knob has no udev rule (its settings are not ATTR assignments)",
            knob.id, knob.kind
        )
    })
}

pub(super) fn artifact(knob: &Knob, host: &HostCtx) -> Result<Artifact, String> {
    let id = &knob.id;
    let runs = mechanism::udev(host, false).map_err(|e| {
        format!(
            "{id}: a udev rule would never run here: {e}; {}",
            mechanism::instead(host, id)
        )
    })?;
    let lines = rule_lines(knob)?;
    Ok(Artifact {
        knob: id.clone(),
        mechanism: Persistence::UdevRule,
        path: Some(path_for(id)),
        content: format!("{}{}\n", super::header(knob, &host.name), lines.join("\n")),
        commands: vec!["udevadm control --reload".into()],
        notes: vec![format!(
            "{id}: udev writes the settings whenever a chosen disk appears or changes (at boot \
             too; {runs}); `udevadm control --reload` reads the rule, and `hostknob apply {id}` \
             sets them now"
        )],
        replaces: Vec::new(),
    })
}

/// `Ok(where)` when the knob's rule is installed as persist writes it, udev
/// runs here, and no later rule writes one of its files on one of its disks.
pub(super) fn check(knob: &Knob, writable: &[&Target], host: &HostCtx) -> Result<String, String> {
    let id = &knob.id;
    let path = path_for(id);
    let again = format!("`hostknob persist {id} --install` writes it");
    let runs = mechanism::udev(host, false);
    let Some(text) = host.text(&path) else {
        return Err(match runs {
            Ok(_) => format!("{path} does not exist: {again}"),
            Err(e) => format!(
                "{path} does not exist, and a udev rule would never run here ({e}), \
                 so `persist --install` refuses it"
            ),
        });
    };
    let runs = runs.map_err(|e| format!("{path} is never applied: {e}"))?;
    let want = rule_lines(knob)?;
    let have: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    if have != want {
        return Err(format!(
            "{path} is not the rule of the knob as the manifest has it now: {again}"
        ));
    }
    let rules = udev_rules::rules(host.root);
    for t in writable {
        let Some((dev, file)) = t
            .path
            .strip_prefix("/sys/block/")
            .and_then(|r| r.split_once("/queue/"))
        else {
            continue;
        };
        let attr = format!("queue/{file}");
        let last = rules
            .iter()
            .filter(|r| r.holds_for_disk(host.root, dev))
            .filter_map(|r| Some((r, r.assigns(&attr)?)))
            .next_back();
        match last {
            Some((r, _)) if r.file == path => {}
            Some((r, v)) => {
                return Err(format!(
                    "shadowed: {}:{} sets {attr} of {dev} to {v:?} after {path} (udev runs the \
                     rules files in name order and the last write stays); its match keys hold \
                     for {dev} as far as the tree shows",
                    r.file, r.line
                ));
            }
            None => {
                return Err(format!(
                    "{path} does not write {attr} of {dev}: its match keys do not hold for {dev} \
                     here: {again}"
                ));
            }
        }
    }
    Ok(format!(
        "{path} (udev writes the settings whenever a chosen disk appears or changes; {runs})"
    ))
}
