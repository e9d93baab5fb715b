//! `apply --boot`: what the boot unit runs. Only knobs that persist, each
//! applied on its own, so one knob's bad file or refused write leaves the
//! others applied (and is named) instead of rolling back every knob.

use super::{ApplyError, ApplyOptions, ApplyOutcome, KnobNote, Session, apply};
use crate::manifest::Knob;
use crate::schema::Persistence;

/// Why `--boot` leaves a knob of this persistence alone (None: it applies it).
fn not_at_boot(p: Persistence) -> Option<&'static str> {
    match p {
        Persistence::Runtime => {
            Some("persistence: runtime (a change until reboot, not applied at boot)")
        }
        Persistence::Cmdline => {
            Some("persistence: cmdline (the kernel takes it from the boot loader)")
        }
        Persistence::SystemdDropin => {
            Some("persistence: systemd-dropin (the drop-in applies it when its service starts)")
        }
        Persistence::Hold => Some("persistence: hold (a running `hostknob hold` keeps it)"),
        Persistence::LinkFile => {
            Some("persistence: link-file (udev applies its .link file when the device appears)")
        }
        Persistence::ModprobeD => {
            Some("persistence: modprobe.d (modprobe passes the options when the module loads)")
        }
        Persistence::ModulesLoadD => {
            Some("persistence: modules-load.d (systemd-modules-load.service loads the module)")
        }
        // Its udev rule applies it at coldplug too; applying it here as well is harmless.
        Persistence::Tmpfiles
        | Persistence::SysctlD
        | Persistence::Boot
        | Persistence::UdevReapply
        | Persistence::UdevRule => None,
    }
}

/// Applies each persistent knob of `knobs` on its own: the outcome holds
/// what was applied, the knobs left out and the knobs that failed.
pub fn apply_each(s: &Session, knobs: &[&Knob], opts: &ApplyOptions) -> ApplyOutcome {
    each(s, knobs, opts, |k, o| match not_at_boot(k.persistence) {
        Some(why) => {
            o.not_at_boot.push(KnobNote::new(k, why));
            true
        }
        None => false,
    })
}

/// Applies each knob of `knobs` on its own but those `leave` notes in the
/// outcome and leaves out (it returns true).
pub(super) fn each(
    s: &Session,
    knobs: &[&Knob],
    opts: &ApplyOptions,
    leave: impl Fn(&Knob, &mut ApplyOutcome) -> bool,
) -> ApplyOutcome {
    let mut all = ApplyOutcome::nothing_yet(s, opts);
    for k in knobs {
        if leave(k, &mut all) {
            continue;
        }
        match apply(s, &[k], opts) {
            Ok(o) => {
                all.knobs.extend(o.knobs);
                all.written += o.written;
                all.warnings.extend(o.warnings);
                all.forced.extend(o.forced);
                all.journal = o.journal.or(all.journal.take());
                all.ledger = o.ledger.or(all.ledger.take());
            }
            Err(e) => all.failed.push(KnobNote {
                id: k.id.clone(),
                why: failure(&e, k),
            }),
        }
    }
    all
}

fn failure(e: &ApplyError, k: &Knob) -> String {
    let text = e.to_string();
    // Most refusals already start with the knob's id.
    text.strip_prefix(&format!("{}: ", k.id))
        .map(str::to_string)
        .unwrap_or(text)
}
