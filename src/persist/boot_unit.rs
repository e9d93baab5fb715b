//! The boot unit: `persistence: boot` runs `hostknob apply KNOB` once at
//! boot, after the drivers have loaded. Unlike a tmpfiles.d `w` line, which
//! names one `stateN` index and is skipped when its path does not exist yet
//! (tmpfiles.d(5), `w`: "if the specified file does not exist, the line is
//! ignored"), apply re-resolves idle states by name or exit latency, CPUs by
//! list and cpufreq policies as they are at that boot. This module writes
//! the unit and is what audit checks the knob's persistence with.

use super::Artifact;
use super::template_unit;
use crate::knob::HostCtx;
use crate::manifest::Knob;
use crate::schema::Persistence;

pub(super) fn artifact(knob: &Knob) -> Artifact {
    let content = "# hostknob persist: apply a knob at boot (instance = knob id)\n\
         [Unit]\n\
         Description=hostknob: apply knob %i at boot\n\
         # After the modules (cpufreq and cpuidle drivers) have loaded.\n\
         Wants=systemd-modules-load.service\n\
         After=systemd-modules-load.service systemd-udev-settle.service\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         RemainAfterExit=yes\n\
         # Not absolute: systemd looks hostknob up in /usr/local/bin, /usr/bin, ...\n\
         ExecStart=hostknob apply %i\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n";
    template_unit::artifact(
        knob,
        Persistence::Boot,
        "boot",
        content,
        "systemctl enable",
        "applies the knob at every boot, choosing states, CPUs and policies as that boot has them",
    )
}

pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    template_unit::check(host, knob, "boot")
}
