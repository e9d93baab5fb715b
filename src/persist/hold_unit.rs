//! The hold unit: `persistence: hold` for a `pm-qos` knob is a service that
//! runs `hostknob hold KNOB` for as long as the host is up (the kernel keeps
//! a PM QoS request only while its file is open,
//! Documentation/power/pm_qos_interface.rst). This module writes the unit and
//! is what audit checks the knob's persistence with.

use super::Artifact;
use super::template_unit;
use crate::knob::HostCtx;
use crate::manifest::Knob;
use crate::schema::Persistence;

/// `hostknob-hold@KNOB.service`: the template's instance for one knob.
pub fn unit_name(id: &str) -> String {
    template_unit::unit_name("hold", id)
}

pub(super) fn artifact(knob: &Knob) -> Artifact {
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
         WantedBy=multi-user.target\n";
    template_unit::artifact(
        knob,
        Persistence::Hold,
        "hold",
        content,
        "systemctl enable --now",
        "keeps /dev/cpu_dma_latency open with the knob's value from boot to shutdown",
    )
}

pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    template_unit::check(host, knob, "hold")
}
