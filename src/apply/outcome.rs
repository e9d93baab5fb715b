//! What apply reports for each knob ([`KnobApply`]) and for the whole run
//! ([`ApplyOutcome`]), built from a plan; shared by apply and `requeue`.

use serde::Serialize;

use super::group::{self, Change, ChangeGroup};
use super::plan;
use super::{ApplyOptions, Session};
use crate::knob::{Blocked, HostCtx, KindName, Write};
use crate::schema::Persistence;

/// A target left alone because this host lacks it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<crate::cpulist::CpuList>,
    pub reason: String,
}

/// What apply did (or would do) for one knob.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct KnobApply {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    pub persistence: Persistence,
    /// The writes, grouped where files change alike.
    pub changes: Vec<ChangeGroup>,
    pub skipped: Vec<Skipped>,
    /// Targets whose write the kernel refused and the kind left out, the
    /// apply going on (a managed IRQ before Linux 6.12, a SCHED_DEADLINE
    /// thread): nothing was written there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Skipped>,
    pub notes: Vec<String>,
    /// The manifest's caveats, then what persists the knob (or does not).
    pub caveats: Vec<String>,
    /// Why nothing is planned: the knob's `when:` fails on this host
    /// (`when: idle_driver == intel_idle; this host: haltpoll`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// Why the kernel will ignore the value once written (the haltpoll
    /// governor and per-state disable): known before the write, so said then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_honoured: Option<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ApplyOutcome {
    pub host: String,
    pub dry_run: bool,
    pub knobs: Vec<KnobApply>,
    /// Files written and read back.
    pub written: usize,
    /// Why apply would refuse (dry runs only: apply itself fails instead).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Settings of tuned's active profile this apply overrides with `--force`
    /// (tuned undoes them on its next reapply).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forced: Vec<String>,
    pub journal: Option<String>,
    pub ledger: Option<String>,
    /// `apply --boot`: knobs for this host it leaves alone (their
    /// persistence is not a write at boot), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_at_boot: Vec<super::KnobNote>,
    /// `apply --pod`: knobs of the profile the pod never writes (a reboot
    /// or a service restart makes them take effect), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<super::KnobNote>,
    /// `apply --pod`: knobs of the profile of a kind the pod's mounts and
    /// privileges cannot write, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub out_of_reach: Vec<super::KnobNote>,
    /// `apply --pod`: knobs the journal held that are no longer in the
    /// profile, reverted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<String>,
    /// `apply --boot` and `--pod`: knobs whose own apply failed (each was refused or
    /// rolled back alone; the others stand). Exit 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<super::KnobNote>,
}

impl ApplyOutcome {
    /// An outcome with no knob planned and nothing written yet.
    pub(super) fn nothing_yet(s: &Session, opts: &ApplyOptions) -> ApplyOutcome {
        ApplyOutcome {
            host: s.ctx.name.clone(),
            dry_run: opts.dry_run,
            knobs: Vec::new(),
            written: 0,
            warnings: Vec::new(),
            forced: Vec::new(),
            journal: None,
            ledger: None,
            not_at_boot: Vec::new(),
            pending: Vec::new(),
            out_of_reach: Vec::new(),
            reverted: Vec::new(),
            failed: Vec::new(),
        }
    }
}

pub(super) fn apply_groups(writes: &[Write]) -> Vec<ChangeGroup> {
    group::group(writes.iter().map(|w| Change {
        path: &w.path,
        cpus: w.cpus.as_ref(),
        label: w.label.as_deref(),
        before: w.before.as_deref(),
        after: Some(&w.after),
    }))
}

pub(super) fn knob_apply(p: &plan::KnobPlan, host: &HostCtx) -> KnobApply {
    let k = p.knob;
    // Judged before the first write, on the host as the plan found it.
    let not_honoured = p.not_applicable.is_none().then(|| {
        let cpu = p
            .writes
            .iter()
            .find_map(|w| w.cpus.as_ref()?.first())
            .unwrap_or(0);
        crate::knob::ignored::why(host.root, k.kind, &k.spec.desired(), cpu)
    });
    KnobApply {
        id: k.id.clone(),
        title: k.title.clone(),
        kind: k.kind,
        persistence: k.persistence,
        changes: apply_groups(&p.writes),
        skipped: p.skipped.iter().map(skipped).collect(),
        refused: Vec::new(),
        notes: p.notes.clone(),
        caveats: Vec::new(),
        not_applicable: p.not_applicable.clone(),
        not_honoured: not_honoured.flatten(),
    }
}

pub(super) fn skipped(b: &Blocked) -> Skipped {
    Skipped {
        path: b.path.clone(),
        cpus: b.cpus.clone(),
        reason: b.blocker.reason().to_string(),
    }
}
