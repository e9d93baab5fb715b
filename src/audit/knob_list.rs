//! What `knobs --format json|yaml` lists: each knob's desired and current
//! value and status, without audit's per-file detail.

use serde::Serialize;

use super::{Evidence, EvidenceStatus, Report, Status};
use crate::knob::{Current, KindName};
use crate::manifest::when::ConditionResult;
use crate::schema::Persistence;

/// One knob as `knobs --format json|yaml` lists it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobLine<'r> {
    pub id: &'r str,
    pub title: &'r str,
    pub kind: KindName,
    pub target: &'r str,
    pub desired: &'r str,
    pub current: &'r [Current],
    pub status: Status,
    /// Why the knob cannot be set here (audit's detail), when `not-applicable`
    /// or `unsupported`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'r str>,
    pub persistence: Persistence,
    /// The latest verify of the knob here, if any.
    pub evidence: Option<&'r Evidence>,
    /// The knob's `when:` conditions on this host (empty without `when:`).
    pub conditions: &'r [ConditionResult],
    /// As audit's: current, evidence-stale, facts-not-recorded, unverified-here.
    pub evidence_status: Option<EvidenceStatus>,
    pub evidence_detail: Option<&'r str>,
    /// Where `set`/`target` came from when overridden (as in `audit`).
    pub overrides: &'r [crate::manifest::overrides::Overridden],
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobList<'r> {
    pub host: &'r str,
    pub knobs: Vec<KnobLine<'r>>,
    /// Knobs for other hosts: those named, or all with `--all-hosts`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub for_other_hosts: &'r [super::OtherHostKnob],
}

pub fn knob_list(r: &Report) -> KnobList<'_> {
    KnobList {
        host: &r.host,
        for_other_hosts: &r.for_other_hosts,
        knobs: r
            .knobs
            .iter()
            .map(|k| KnobLine {
                id: &k.id,
                title: &k.title,
                kind: k.kind,
                target: &k.target,
                desired: &k.desired,
                current: &k.current,
                status: k.status,
                reason: matches!(k.status, Status::NotApplicable | Status::Unsupported)
                    .then_some(k.detail.as_str()),
                persistence: k.persistence,
                evidence: k.evidence.as_ref(),
                conditions: &k.conditions,
                evidence_status: k.evidence_status,
                evidence_detail: k.evidence_detail.as_deref(),
                overrides: &k.overrides,
            })
            .collect(),
    }
}
