//! `nic-coalesce`: interrupt coalescing (`ethtool -C`), any field of
//! `struct ethtool_coalesce` by ethtool's name (`rx-usecs`, `tx-frames`,
//! `adaptive-rx: off`, ...). Adaptive modes are written first within a knob;
//! a fixed value its adaptive mode would override is refused at plan time.

use std::collections::BTreeMap;

use super::nic::{self, EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind, numbers};
use super::rules::{self, coalesce::UnderAdaptive, coalesce::value_refusal};
use super::{Blocker, FieldError, HostCtx, Spec, Target};
use crate::ethtool::{COALESCE_FIELDS, Field, Section, State};

#[derive(Debug)]
pub struct NicCoalesce(EthtoolKnob);

impl Spec for NicCoalesce {
    type Target = NicTargetDoc;
    type Set = BTreeMap<String, serde_yaml::Value>;

    fn new(target: Option<NicTargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        Ok(NicCoalesce(EthtoolKnob {
            section: Section::Coalesce,
            sel: NicSel::new(target)?,
            values: numbers(Section::Coalesce, &COALESCE_FIELDS, set)?,
        }))
    }
}

ethtool_kind!(NicCoalesce, NicCoalesce, |k: &EthtoolKnob, host| {
    k.survey_with(host, |ifname, state| {
        let mut targets = k.targets_on(ifname, state);
        if let Ok(Some(s)) = state {
            check(host, k, s, &mut targets);
        }
        targets
    })
});

/// Refuses, at plan time, what the driver would refuse or ignore: a fixed
/// value while its adaptive mode is (or stays) on, and values off the
/// driver's step or above its maximum ([`rules::coalesce`]). `targets` are
/// this knob's on one interface.
pub fn check(host: &HostCtx, knob: &EthtoolKnob, state: &State, targets: &mut [Target]) {
    let ifname = state_ifname(targets);
    let rules = rules::coalesce::of(state.driver.as_deref());
    let driver = nic::driver_of(state, &ifname);
    for t in targets.iter_mut().filter(|t| t.blocker.is_none()) {
        let Some(field) = Field::parse(&t.path) else {
            continue;
        };
        let n = field.name.as_str();
        let refusal = rules
            .and_then(|r| value_refusal(r, n, t.desired.parse().ok()?))
            .map(|why| format!("{ifname} {why}"))
            .or_else(|| {
                let on: Vec<&str> = rules::coalesce::governing(rules, n)
                    .into_iter()
                    .filter(|a| adaptive_after(host, knob, &ifname, state, a))
                    .collect();
                let first = on.first()?;
                let what = match rules.map(|r| (r.under_adaptive, r.source)) {
                    Some((UnderAdaptive::Refuses, src)) => {
                        format!("{driver} refuses the write (EINVAL: {src})")
                    }
                    Some((UnderAdaptive::Overrides, src)) => format!(
                        "{driver} takes it and reads it back, but adaptive moderation sets the \
                         hardware ({src})"
                    ),
                    None => "adaptive moderation overrides it (include/uapi/linux/ethtool.h, \
                             struct ethtool_coalesce)"
                        .to_string(),
                };
                Some(format!(
                    "{ifname} {n} {} is a fixed value while {} stays on: {what}; add `{first}: \
                     off` to the knob ({})",
                    t.desired,
                    on.join(" and "),
                    field.check_command()
                ))
            });
        if let Some(why) = refusal {
            t.blocker = Some(Blocker::Unsupported(why));
        }
    }
}

/// Whether adaptive mode `a` is on after this knob: its own value, else what
/// an earlier knob of the plan writes, else the driver's now.
fn adaptive_after(host: &HostCtx, knob: &EthtoolKnob, ifname: &str, state: &State, a: &str) -> bool {
    if let Some(v) = knob.values.get(a) {
        return v == "on";
    }
    let field = Field::new(ifname, Section::Coalesce, a);
    let path = field.path();
    let now = match host.is_assumed(&path) {
        true => host.text(&path),
        false => field.value(state),
    };
    now.as_deref() == Some("on")
}

fn state_ifname(targets: &[Target]) -> String {
    targets
        .iter()
        .find_map(|t| Field::parse(&t.path))
        .map(|f| f.ifname)
        .unwrap_or_default()
}
