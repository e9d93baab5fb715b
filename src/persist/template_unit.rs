//! What the two template-unit mechanisms share (`persistence: boot` and
//! `hold`): the unit directory, the artifact of an instance per knob, and
//! audit's check that the template is installed and the instance enabled.

use super::Artifact;
use crate::knob::HostCtx;
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const UNIT_DIR: &str = "/etc/systemd/system";

/// `hostknob-NAME@KNOB.service`: the template's instance for one knob.
pub fn unit_name(name: &str, id: &str) -> String {
    format!("hostknob-{name}@{id}.service")
}

/// The template every knob of the mechanism shares.
pub fn template_path(name: &str) -> String {
    format!("{UNIT_DIR}/hostknob-{name}@.service")
}

/// The template's text, the command that enables the knob's instance, and
/// what the instance does.
pub(super) fn artifact(
    knob: &Knob,
    mechanism: Persistence,
    name: &str,
    content: &str,
    enable: &str,
    does: &str,
) -> Artifact {
    let unit = unit_name(name, &knob.id);
    Artifact {
        knob: knob.id.clone(),
        mechanism,
        path: Some(template_path(name)),
        content: content.to_string(),
        commands: vec!["systemctl daemon-reload".into(), format!("{enable} {unit}")],
        notes: vec![format!("{unit} {does}")],
    }
}

/// `Ok(where)` when the template is installed and this knob's instance is enabled.
pub(super) fn check(host: &HostCtx, knob: &Knob, name: &str) -> Result<String, String> {
    let (id, template, unit) = (&knob.id, template_path(name), unit_name(name, &knob.id));
    if host.text(&template).is_none() {
        return Err(format!(
            "persistence: {name}, but {template} is not installed (`hostknob persist {id} --install`)"
        ));
    }
    let link = format!("{UNIT_DIR}/multi-user.target.wants/{unit}");
    if host.root.read_link(&link).is_err() && !host.root.exists(&link) {
        return Err(format!(
            "persistence: {name}, but {unit} is not enabled (`systemctl enable {unit}`)"
        ));
    }
    Ok(format!("{template} ({link})"))
}
