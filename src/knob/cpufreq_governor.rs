//! `cpufreq-governor`: the scaling governor of every cpufreq policy that
//! drives the selected CPUs; the value must be one the policy offers.

use serde::Deserialize;

use super::{
    Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, PolicyInfo,
    ReadValue, Service, Spec, Survey, Target, WriteMode, offline_target,
};
use crate::cpulist::CpuList;
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    pub cpus: Option<crate::schema::Scalar>,
}

#[derive(Debug)]
pub struct CpufreqGovernor {
    pub cpus: CpuSel,
    pub governor: String,
}

/// A value the kernel takes as one word.
pub fn check_word(field: &str, text: &str, what: &str) -> Result<(), FieldError> {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(FieldError::new(
            field,
            format!("{text:?}: expected one word (the {what})"),
        ));
    }
    Ok(())
}

impl Spec for CpufreqGovernor {
    type Target = TargetDoc;
    type Set = String;

    fn new(target: Option<TargetDoc>, set: String) -> Result<Self, FieldError> {
        check_word("set", &set, "governor name")?;
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        Ok(CpufreqGovernor {
            cpus,
            governor: set,
        })
    }
}

/// The policies that drive the selected CPUs, or a target saying why there are none.
/// A policy that also drives CPUs outside the selection cannot be set for part of them.
pub fn policy_targets(
    host: &HostCtx,
    cpus: &CpuSel,
    desired: &str,
    survey: &mut Survey,
) -> Vec<(PolicyInfo, Option<Blocker>)> {
    let (here, missing) = cpus.split(host.online());
    survey.targets.extend(offline_target(&missing, desired));
    let policies = host.policies();
    if policies.is_empty() {
        survey.targets.push(Target::absent(
            format!("{}/policy*", super::ctx::CPUFREQ_DIR),
            Some(here),
            desired,
            "no cpufreq on this host (no cpufreq policies; a VM or a disabled driver)".into(),
        ));
        return Vec::new();
    }
    let mut covered = Vec::new();
    let mut out = Vec::new();
    for p in policies {
        let inside = p
            .cpus
            .as_slice()
            .iter()
            .filter(|c| here.contains(**c))
            .count();
        if inside == 0 {
            continue;
        }
        covered.extend(p.cpus.as_slice().iter().copied());
        let blocker = (inside < p.cpus.len()).then(|| {
            Blocker::Unsupported(format!(
                "{} drives CPUs {}, partly outside target.cpus: it can only be set for all of them",
                p.dir, p.cpus
            ))
        });
        out.push((p, blocker));
    }
    let uncovered: CpuList = here
        .as_slice()
        .iter()
        .copied()
        .filter(|c| !covered.contains(c))
        .collect();
    if !uncovered.is_empty() {
        survey.targets.push(Target::absent(
            format!("/sys/devices/system/cpu/cpu{{{uncovered}}}/cpufreq"),
            Some(uncovered),
            desired,
            "no cpufreq policy drives these CPUs".into(),
        ));
    }
    out
}

impl KnobKind for CpufreqGovernor {
    fn kind(&self) -> KindName {
        KindName::CpufreqGovernor
    }

    fn desired(&self) -> String {
        self.governor.clone()
    }

    fn target_summary(&self) -> String {
        format!("scaling governor on CPUs {}", self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        super::CPU_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &Service::POWER
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        for (p, partial) in policy_targets(host, &self.cpus, &self.governor, &mut survey) {
            let path = format!("{}/scaling_governor", p.dir);
            let current = p.governor.clone();
            // The policy listing reads the governor as an Option: a file
            // that exists but cannot be read (EACCES, a FIFO) is not absent.
            let unreadable = match current {
                None => match host.value(&path) {
                    ReadValue::Unreadable(e) => {
                        Some(Blocker::Unreadable(format!("cannot read {path}: {e}")))
                    }
                    _ => None,
                },
                Some(_) => None,
            };
            let blocker = unreadable.or(partial).or_else(|| match &p.available_governors {
                Some(av) if !av.contains(&self.governor) => Some(Blocker::Unsupported(format!(
                    "governor {} is not available here (available: {})",
                    self.governor,
                    av.join(" ")
                ))),
                Some(_) => None,
                None => match host.value(&format!("{}/scaling_available_governors", p.dir)) {
                    ReadValue::Unreadable(e) => Some(Blocker::Unreadable(format!(
                        "cannot read {}/scaling_available_governors: {e}",
                        p.dir
                    ))),
                    _ => Some(Blocker::Unsupported(format!(
                        "{} has no scaling_available_governors to check {} against",
                        p.dir, self.governor
                    ))),
                },
            });
            survey.targets.push(Target {
                in_effect: current.as_deref() == Some(self.governor.as_str()),
                path,
                cpus: Some(p.cpus.clone()),
                label: None,
                restore: current.clone(),
                current,
                desired: self.governor.clone(),
                write: Some(self.governor.clone()),
                mode: WriteMode::Attribute,
                blocker,
            });
        }
        Ok(survey)
    }
}
