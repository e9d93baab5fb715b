//! The hold unit: `persistence: hold` for a `pm-qos` knob is a service that
//! runs `hostknob hold KNOB` for as long as the host is up (the kernel keeps
//! a PM QoS request only while its file is open,
//! Documentation/power/pm_qos_interface.rst). This module writes the unit and
//! is what audit checks the knob's persistence with.

use super::Artifact;
use super::template_unit::{self, Unit};
use crate::knob::HostCtx;
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

/// `hostknob-hold@KNOB.service`: the unit of one knob.
pub fn unit_name(id: &str) -> String {
    template_unit::unit_name("hold", id)
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
) -> Result<Artifact, String> {
    template_unit::artifact(
        knob,
        host,
        manifest,
        Unit {
            name: "hold",
            mechanism: Persistence::Hold,
            description: format!("hostknob: hold the PM QoS request of knob {}", knob.id),
            unit: "After=systemd-modules-load.service\n".into(),
            service: "Type=exec\nRestart=on-failure\n",
            command: "hold",
            enable: "systemctl enable --now",
            does: "keeps /dev/cpu_dma_latency open with the knob's value from boot to shutdown",
        },
    )
}

pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    template_unit::check(host, knob, "hold")
}
