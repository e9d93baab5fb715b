//! `cpufreq-epp`: the energy-performance preference of every policy driving
//! the selected CPUs. The value must be in
//! `energy_performance_available_preferences`; where the kernel refuses EPP
//! changes (intel_pstate or amd-pstate in active mode under the `performance`
//! governor, which pins EPP to performance) the plan says so up front,
//! judged against the governor the plan's earlier writes leave
//! ([`super::rules::epp_refused`]). Values compare as the kernel reads them
//! back: a preset name is its number ([`super::rules::epp_same`]).

use super::cpufreq_governor::{TargetDoc, check_word, policy_targets};
use super::{
    Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue,
    Service, Spec, Survey, Target, WriteMode,
};
use super::rules;
use crate::inventory::{CPU_DIR, par_map};
use crate::schema::Persistence;

#[derive(Debug)]
pub struct CpufreqEpp {
    pub cpus: CpuSel,
    pub epp: String,
}

impl Spec for CpufreqEpp {
    type Target = TargetDoc;
    type Set = crate::schema::Scalar;

    fn new(target: Option<TargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        check_word("set", &set.0, "energy-performance preference")?;
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        Ok(CpufreqEpp { cpus, epp: set.0 })
    }
}

impl KnobKind for CpufreqEpp {
    fn kind(&self) -> KindName {
        KindName::CpufreqEpp
    }

    fn desired(&self) -> String {
        self.epp.clone()
    }

    fn target_summary(&self) -> String {
        format!("energy-performance preference on CPUs {}", self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        super::CPU_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &Service::ALL
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        rules::epp_same(expect, read)
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let policies = policy_targets(host, &self.cpus, &self.epp, &mut survey);
        let numeric = self.epp.parse::<u8>().is_ok();
        let pstate_active = host
            .text(&format!("{CPU_DIR}/intel_pstate/status"))
            .as_deref()
            == Some("active");
        // Two reads per policy, hundreds of policies on big hosts: in parallel.
        let reads = par_map(&policies, |(p, _)| {
            (
                host.value(&format!("{}/energy_performance_preference", p.dir)),
                host.text(&format!(
                    "{}/energy_performance_available_preferences",
                    p.dir
                )),
            )
        });
        for ((p, partial), (value, available)) in policies.into_iter().zip(reads) {
            let path = format!("{}/energy_performance_preference", p.dir);
            let current = match value {
                ReadValue::Value(v) => v,
                ReadValue::Absent => {
                    survey.targets.push(Target::absent(
                        path,
                        Some(p.cpus.clone()),
                        &self.epp,
                        format!(
                            "no energy-performance preference here (scaling driver: {})",
                            p.driver.as_deref().unwrap_or("unknown")
                        ),
                    ));
                    continue;
                }
                ReadValue::Unreadable(e) => {
                    survey.targets.push(Target::unreadable(
                        path,
                        Some(p.cpus.clone()),
                        &self.epp,
                        &e,
                    ));
                    continue;
                }
            };
            let available: Option<Vec<String>> =
                available.map(|t| t.split_whitespace().map(str::to_string).collect());
            let accepted = match &available {
                Some(av) => {
                    av.contains(&self.epp)
                        || (numeric && p.driver.as_deref() == Some("intel_pstate"))
                }
                None => false,
            };
            let blocker = partial.or_else(|| {
                if !accepted {
                    return Some(Blocker::Unsupported(match &available {
                        Some(av) => format!(
                            "EPP {} is not accepted here (available: {})",
                            self.epp,
                            av.join(" ")
                        ),
                        None => format!(
                            "{}/energy_performance_available_preferences is absent",
                            p.dir
                        ),
                    }));
                }
                let driver = p.driver.as_deref().unwrap_or("");
                if self.epp == "default"
                    && let Some(why) = rules::epp_default_refused(driver)
                {
                    return Some(Blocker::Unsupported(why));
                }
                let governor = p.governor.as_deref().unwrap_or("");
                rules::epp_refused(driver, pstate_active, governor, &self.epp).map(|why| {
                    let gov_path = format!("{}/scaling_governor", p.dir);
                    Blocker::Unsupported(if host.is_assumed(&gov_path) {
                        format!(
                            "this apply sets the governor to performance first, and {why}; \
                             apply EPP with governor powersave, or EPP performance"
                        )
                    } else {
                        why
                    })
                })
            });
            survey.targets.push(Target {
                in_effect: rules::epp_same(&current, &self.epp),
                path,
                cpus: Some(p.cpus.clone()),
                label: None,
                restore: Some(current.clone()),
                current: Some(current),
                desired: self.epp.clone(),
                write: Some(self.epp.clone()),
                mode: WriteMode::Attribute,
                blocker,
            });
        }
        Ok(survey)
    }
}
