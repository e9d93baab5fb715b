//! Evidence that expires: whether a knob's latest `verified` entry still
//! describes this host (its recorded facts against the host's now), and
//! whether a knob in effect here was ever verified on this hardware class.
//! This is a field beside the status, never a status: evidence ageing does
//! not change audit's exit code.

use serde::Serialize;

use super::status::Status;
use crate::manifest::facts::Facts;
use crate::manifest::ledger::{Action, Entry};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceStatus {
    /// The evidence's recorded facts are the host's now.
    Current,
    /// A fact the result depends on changed since (the detail names it).
    EvidenceStale,
    /// Verified before hostknob recorded facts: cannot be dated.
    FactsNotRecorded,
    /// In effect here, with no verified entry for this hardware class
    /// (vendor, CPU model, idle driver) anywhere in the ledger.
    UnverifiedHere,
}

/// What audit says about a knob's evidence: `None` when it has neither a
/// verified entry here nor a value in effect.
pub(super) struct Judgement {
    pub status: EvidenceStatus,
    pub detail: String,
}

/// The latest `verified` entry of `id` among `entries`.
fn latest<'a>(id: &str, entries: impl DoubleEndedIterator<Item = &'a Entry>) -> Option<&'a Entry> {
    entries
        .rev()
        .find(|e| e.knob == id && e.action == Action::Verified)
}

fn dated(e: &Entry, now: &Facts, elsewhere: Option<&str>) -> Judgement {
    let from = elsewhere
        .map(|h| format!(" (evidence from {h}, same hardware class)"))
        .unwrap_or_default();
    match &e.facts {
        None => Judgement {
            status: EvidenceStatus::FactsNotRecorded,
            detail: format!(
                "facts not recorded: verified {} by a hostknob that did not record the kernel, \
                 microcode and drivers it depends on{from}; verify again to date it",
                e.timestamp
            ),
        },
        Some(then) => match then.changes(now).as_slice() {
            [] => Judgement {
                status: EvidenceStatus::Current,
                detail: format!(
                    "verified {} on this kernel, microcode, CPU and drivers{from}",
                    e.timestamp
                ),
            },
            changed => Judgement {
                status: EvidenceStatus::EvidenceStale,
                detail: format!("evidence-stale: {}{from}", changed.join("; ")),
            },
        },
    }
}

/// How to measure a knob in effect here, as commands that run as printed:
/// verify compares against the value as found, so a knob hostknob applied
/// (`reverted_by_us`) is reverted first and applied again after; one the
/// host had before hostknob has no leg without it here. A knob that names
/// no probe (nor has a default one) gets `--probe wakeup`, and a manifest
/// hostknob would not find by itself is named with `--manifest`.
pub(super) fn verify_advice(
    knob: &crate::manifest::Knob,
    manifest_dir: &std::path::Path,
    reverted_by_us: bool,
) -> String {
    let id = &knob.id;
    let probe = match (
        &knob.verify,
        crate::manifest::default_probe::default_probe(knob),
    ) {
        (None, None) => " --probe wakeup",
        _ => "",
    };
    let dir = std::path::absolute(manifest_dir).unwrap_or_else(|_| manifest_dir.to_path_buf());
    let manifest = match dir == std::path::Path::new("/etc/hostknob/manifest") {
        true => String::new(),
        false => format!(
            " --manifest {}",
            crate::name::shell_word(&dir.to_string_lossy())
        ),
    };
    if reverted_by_us {
        crate::advice::runnable(format!(
            "`hostknob{manifest} revert {id} && hostknob{manifest} verify {id}{probe} && \
             hostknob{manifest} apply {id}` measures it (verify compares with the value as \
             found, so it is reverted first and applied again after)"
        ))
    } else {
        "the host had this value before hostknob applied anything, so verify has no leg \
         without it here: verify it on a host of this class where audit says `drift`"
            .to_string()
    }
}

/// Judges one knob's evidence. `ours`: this machine's entries (merged);
/// `everywhere`: every entry the host can see, read only when needed;
/// `advice`: [`verify_advice`].
pub(super) fn judge(
    id: &str,
    status: Status,
    advice: &str,
    ours: &[Entry],
    now: &Facts,
    everywhere: &mut dyn FnMut() -> Vec<Entry>,
) -> Option<Judgement> {
    if let Some(e) = latest(id, ours.iter()) {
        return Some(dated(e, now, None));
    }
    if !matches!(
        status,
        Status::Ok | Status::Unpersisted | Status::NotHonoured
    ) {
        return None;
    }
    let all = everywhere();
    let class = now.class();
    let same = latest(
        id,
        all.iter()
            .filter(|e| class.is_some() && e.facts.as_ref().and_then(Facts::class) == class),
    );
    Some(match same {
        Some(e) => dated(e, now, Some(&e.host)),
        None => Judgement {
            status: EvidenceStatus::UnverifiedHere,
            detail: format!(
                "unverified-here: in effect on {} with no verified entry for this hardware class \
                 in the ledger; {advice}",
                now.describe_class()
            ),
        },
    })
}
