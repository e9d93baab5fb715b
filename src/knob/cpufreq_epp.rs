//! `cpufreq-epp`: the energy-performance preference of every policy driving
//! the selected CPUs. The value must be in
//! `energy_performance_available_preferences`; where the kernel refuses EPP
//! changes (intel_pstate or amd-pstate in active mode under the `performance`
//! governor, which pins EPP to performance) the plan says so up front,
//! judged against the governor the plan's earlier writes leave
//! ([`super::rules::epp_refused`]), by the number the kernel compares.
//! Preset names stand for different numbers per CPU model
//! ([`super::rules::EppPresets`]): names compare with names, numbers with
//! numbers, and a name with a number only by this CPU's table.

use super::cpufreq_governor::{TargetDoc, check_word, policy_targets};
use std::sync::Mutex;

use super::rules::{self, CpuId, EppPresets};
use super::{
    Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, PolicyInfo, ReadValue, Service, Spec,
    Survey, Target, WriteMode,
};
use crate::inventory::{CPU_DIR, par_map};
use crate::schema::Persistence;

#[derive(Debug)]
pub struct CpufreqEpp {
    pub cpus: CpuSel,
    pub epp: String,
    /// The preset table of the host last surveyed, for [`KnobKind::confirms`].
    presets: Mutex<Option<EppPresets>>,
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
        Ok(CpufreqEpp {
            cpus,
            epp: set.0,
            presets: Mutex::new(None),
        })
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
        &Service::POWER
    }

    /// By the table of the host last surveyed: a number the kernel has a
    /// preset for reads back as the preset's name.
    fn confirms(&self, expect: &str, read: &str) -> bool {
        let presets = self.presets.lock().ok().and_then(|p| p.clone());
        rules::epp_same(presets.as_ref(), expect, read)
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let policies = policy_targets(host, &self.cpus, &self.epp, &mut survey);
        let numeric = self.epp.parse::<u8>().is_ok();
        let cpu = host.text("/proc/cpuinfo").as_deref().and_then(CpuId::parse);
        if cpu.is_none() && !policies.is_empty() {
            survey.notes.push(
                "/proc/cpuinfo names no CPU family and model: EPP preset names are compared \
                 with names and numbers with numbers only (their numbers depend on the model)"
                    .into(),
            );
        }
        let pstate_active = host
            .text(&format!("{CPU_DIR}/intel_pstate/status"))
            .as_deref()
            == Some("active");
        let available_of = |p: &PolicyInfo| {
            host.text(&format!(
                "{}/energy_performance_available_preferences",
                p.dir
            ))
        };
        // intel_pstate lists the same presets for every policy (intel_pstate.c
        // `show_energy_performance_available_preferences` prints the static
        // `energy_perf_strings[]`, whatever the policy): read once. amd-pstate
        // lists per policy, by its governor (rules::AMD_EPP_AVAILABLE).
        let global = match policies.first() {
            Some((p, _)) if p.driver.as_deref() == Some("intel_pstate") => Some(available_of(p)),
            _ => None,
        };
        // Reads per policy, hundreds of policies on big hosts: in parallel.
        let reads = par_map(&policies, |(p, _)| {
            (
                host.value(&format!("{}/energy_performance_preference", p.dir)),
                match &global {
                    Some(available) => available.clone(),
                    None => available_of(p),
                },
            )
        });
        for ((p, partial), (value, available)) in policies.into_iter().zip(reads) {
            let path = format!("{}/energy_performance_preference", p.dir);
            let driver = p.driver.as_deref().unwrap_or("");
            let presets = EppPresets::of(driver, cpu.as_ref());
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
            let available: Option<Vec<String>> = available_after_plan(
                host,
                &p,
                available.map(|t| t.split_whitespace().map(str::to_string).collect()),
            );
            let governor = p.governor.as_deref().unwrap_or("");
            let refused =
                rules::epp_refused(driver, pstate_active, governor, &self.epp, presets.as_ref());
            let accepted = match &available {
                Some(av) => {
                    av.contains(&self.epp)
                        || (numeric && p.driver.as_deref() == Some("intel_pstate"))
                }
                None => false,
            };
            let blocker = partial.or_else(|| {
                if !accepted && refused.is_none() {
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
                if self.epp == "default"
                    && let Some(why) = rules::epp_default_refused(driver)
                {
                    return Some(Blocker::Unsupported(why));
                }
                refused.map(|why| {
                    let gov_path = format!("{}/scaling_governor", p.dir);
                    Blocker::Unsupported(if host.is_assumed(&gov_path) {
                        format!(
                            "this apply sets the governor to performance first, and {why}; \
                             apply EPP with governor powersave, or an EPP the kernel takes there"
                        )
                    } else {
                        why
                    })
                })
            });
            if presets.is_some()
                && let Ok(mut last) = self.presets.lock()
            {
                last.clone_from(&presets);
            }
            survey.targets.push(Target {
                in_effect: rules::epp_same(presets.as_ref(), &current, &self.epp),
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

/// The preferences the kernel will list once the plan's governor is in
/// place: amd-pstate-epp lists only `performance` under the performance
/// policy and every preset under any other ([`rules::AMD_EPP_AVAILABLE`]), so
/// a list read under today's governor does not hold for a planned one.
fn available_after_plan(
    host: &HostCtx,
    p: &PolicyInfo,
    read: Option<Vec<String>>,
) -> Option<Vec<String>> {
    let planned = host.is_assumed(&format!("{}/scaling_governor", p.dir));
    if p.driver.as_deref() != Some("amd-pstate-epp") || !planned {
        return read;
    }
    Some(match p.governor.as_deref() {
        Some("performance") => vec!["performance".to_string()],
        _ => rules::AMD_EPP_AVAILABLE.map(str::to_string).to_vec(),
    })
}
