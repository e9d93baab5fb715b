//! The hold unit: `persistence: hold` for a `pm-qos` knob is a service that
//! runs `hostknob hold KNOB` for as long as the host is up (the kernel keeps
//! a PM QoS request only while its file is open,
//! Documentation/power/pm_qos_interface.rst). This module writes the unit and
//! is what audit checks the knob's persistence with.

use super::Artifact;
use crate::knob::HostCtx;
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const UNIT_DIR: &str = "/etc/systemd/system";

/// `hostknob-hold@KNOB.service`: the template's instance for one knob.
pub fn unit_name(id: &str) -> String {
    format!("hostknob-hold@{id}.service")
}

/// The template every held knob shares.
pub fn template_path() -> String {
    format!("{UNIT_DIR}/hostknob-hold@.service")
}

pub(super) fn artifact(knob: &Knob) -> Artifact {
    let id = &knob.id;
    let content = "# hostknob persist: the PM QoS hold of a pm-qos knob (instance = knob id)\n\
         [Unit]\n\
         Description=hostknob: hold the PM QoS request of knob %i\n\
         After=systemd-modules-load.service\n\
         \n\
         [Service]\n\
         Type=exec\n\
         # Not absolute: systemd looks hostknob up in /usr/local/bin, /usr/bin, ...\n\
         ExecStart=hostknob hold %i\n\
         Restart=on-failure\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n"
        .to_string();
    Artifact {
        knob: id.clone(),
        mechanism: Persistence::Hold,
        path: Some(template_path()),
        content,
        commands: vec![
            "systemctl daemon-reload".into(),
            format!("systemctl enable --now {}", unit_name(id)),
        ],
        notes: vec![format!(
            "{} keeps /dev/cpu_dma_latency open with the knob's value from boot to shutdown",
            unit_name(id)
        )],
    }
}

/// `Ok(where)` when the template is installed and this knob's instance is enabled.
pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    check_unit(
        host,
        "hold",
        &knob.id,
        &template_path(),
        &unit_name(&knob.id),
    )
}

/// A template unit and its enabled instance, as audit checks both unit mechanisms.
pub(super) fn check_unit(
    host: &HostCtx,
    mechanism: &str,
    id: &str,
    template: &str,
    unit: &str,
) -> Result<String, String> {
    if host.text(template).is_none() {
        return Err(format!(
            "persistence: {mechanism}, but {template} is not installed (`hostknob persist {id} --install`)"
        ));
    }
    let link = format!("{UNIT_DIR}/multi-user.target.wants/{unit}");
    if host.root.read_link(&link).is_err() && !host.root.exists(&link) {
        return Err(format!(
            "persistence: {mechanism}, but {unit} is not enabled (`systemctl enable {unit}`)"
        ));
    }
    Ok(format!("{template} ({link})"))
}
