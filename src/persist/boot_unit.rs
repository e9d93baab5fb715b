//! The boot unit: `persistence: boot` runs `hostknob apply KNOB` once at
//! boot, after the drivers have loaded. Unlike a tmpfiles.d `w` line, which
//! names one `stateN` index and is skipped when its path does not exist yet
//! (tmpfiles.d(5), `w`: "if the specified file does not exist, the line is
//! ignored"), apply re-resolves idle states by name or exit latency, CPUs by
//! list, cpufreq policies as they are at that boot, and IRQs by action name
//! or network device (`irq-affinity`: IRQ numbers change between boots). This module writes
//! the unit and is what audit checks the knob's persistence with.

use super::Artifact;
use super::template_unit::{self, Unit};
use crate::knob::{HostCtx, rules};
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

/// The `After=`/`Before=` lines that put the knob's unit in phase order
/// among the host's other boot knobs (the order apply plans kinds in:
/// the governor before EPP, which the performance governor pins). Either
/// side of a pair naming the other orders it, so a knob persisted later
/// orders itself against those installed before it.
fn phase_order(knob: &Knob, host: &HostCtx, manifest: &Manifest) -> String {
    let phase = rules::kind_phase(knob.kind);
    let (mut after, mut before) = (Vec::new(), Vec::new());
    for other in manifest.for_host(&host.name) {
        if other.id == knob.id || other.persistence != Persistence::Boot {
            continue;
        }
        let unit = template_unit::unit_name("boot", &other.id);
        match rules::kind_phase(other.kind).cmp(&phase) {
            std::cmp::Ordering::Less => after.push(unit),
            std::cmp::Ordering::Greater => before.push(unit),
            std::cmp::Ordering::Equal => {}
        }
    }
    let mut out = String::new();
    if !after.is_empty() || !before.is_empty() {
        out += &format!(
            "# Phase {phase} ({}): after the boot knobs of earlier phases, before later ones.\n",
            knob.kind
        );
    }
    for (key, units) in [("After", after), ("Before", before)] {
        if !units.is_empty() {
            out += &format!("{key}={}\n", units.join(" "));
        }
    }
    out
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
) -> Result<Artifact, String> {
    let unit = format!(
        "# After the modules (cpufreq and cpuidle drivers) have loaded.\n\
         Wants=systemd-modules-load.service\n\
         After=systemd-modules-load.service systemd-udev-settle.service\n{}",
        phase_order(knob, host, manifest)
    );
    template_unit::artifact(
        knob,
        host,
        manifest,
        Unit {
            name: "boot",
            mechanism: Persistence::Boot,
            description: format!("hostknob: apply knob {} at boot", knob.id),
            unit,
            service: "Type=oneshot\nRemainAfterExit=yes\n\
                      # --wait: boot units started together take apply's lock in turn.\n",
            command: "apply --wait",
            enable: "systemctl enable",
            does: "applies the knob at every boot, choosing states, CPUs and policies as that boot has them",
        },
    )
}

pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    template_unit::check(host, knob, "boot")
}
