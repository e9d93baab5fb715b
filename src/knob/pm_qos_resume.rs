//! `pm-qos-resume-latency`: the per-CPU resume latency limit,
//! `cpuN/power/pm_qos_resume_latency_us`. The cpuidle governor skips states
//! whose exit latency exceeds it. In the kernel's words: `0` means no
//! constraint (any latency is fine: the default), `n/a` means no latency is
//! acceptable at all (the CPU only polls), any other number is the limit in µs.

use serde::Deserialize;

use super::{
    ATTRIBUTE_PERSISTENCE, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service,
    Spec, Survey, Target, WriteMode, offline_target,
};
use crate::cpulist::CpuList;
use crate::inventory::{CPU_DIR, resume_latency_path};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    cpus: Option<Scalar>,
}

#[derive(Debug)]
pub struct PmQosResumeLatency {
    pub cpus: CpuSel,
    /// A number of µs (`0`: no constraint) or `n/a` (no latency allowed).
    pub value: String,
}

/// The kernel stores an s32 and refuses negatives and S32_MAX (its "no constraint").
const MAX_US: i64 = i32::MAX as i64 - 1;

impl Spec for PmQosResumeLatency {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        let value = match set.0.trim() {
            "n/a" => "n/a".to_string(),
            text => match text.parse::<i64>() {
                Ok(n) if n < 0 => {
                    return Err(FieldError::new(
                        "set",
                        format!("{n} is negative: give µs ≥ 0 (0 = no constraint) or \"n/a\""),
                    ));
                }
                Ok(n) if n > MAX_US => {
                    return Err(FieldError::new(
                        "set",
                        format!("{n} is above the kernel's limit of {MAX_US} µs"),
                    ));
                }
                Ok(n) => n.to_string(),
                Err(_) => {
                    return Err(FieldError::new(
                        "set",
                        format!(
                            "{text:?} is not a resume latency: give µs ≥ 0 (0 = no constraint) or \"n/a\""
                        ),
                    ));
                }
            },
        };
        Ok(PmQosResumeLatency { cpus, value })
    }
}

impl KnobKind for PmQosResumeLatency {
    fn kind(&self) -> KindName {
        KindName::PmQosResumeLatency
    }

    fn desired(&self) -> String {
        self.value.clone()
    }

    fn target_summary(&self) -> String {
        format!("PM QoS resume latency (µs) on CPUs {}", self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        ATTRIBUTE_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let (here, missing) = self.cpus.split(host.online());
        let mut survey = Survey::default();
        let mut absent = Vec::new();
        for &cpu in here.as_slice() {
            let path = resume_latency_path(cpu);
            match host.value(&path) {
                ReadValue::Value(v) => survey.targets.push(Target {
                    in_effect: v == self.value,
                    path,
                    cpus: Some(CpuList::new(vec![cpu])),
                    label: None,
                    restore: Some(v.clone()),
                    current: Some(v),
                    desired: self.value.clone(),
                    write: Some(self.value.clone()),
                    mode: WriteMode::Attribute,
                    blocker: None,
                }),
                ReadValue::Absent => absent.push(cpu),
                ReadValue::Unreadable(e) => survey.targets.push(Target::unreadable(
                    path,
                    Some(CpuList::new(vec![cpu])),
                    &self.value,
                    &e,
                )),
            }
        }
        if !absent.is_empty() {
            let cpus = CpuList::new(absent);
            survey.targets.push(Target::absent(
                format!("{CPU_DIR}/cpu{{{cpus}}}/power/pm_qos_resume_latency_us"),
                Some(cpus),
                &self.value,
                "no per-CPU PM QoS resume latency here".into(),
            ));
        }
        survey.targets.extend(offline_target(&missing, &self.value));
        Ok(survey)
    }
}
