//! `hwp-max`: the max performance HWP may pick, MSR_HWP_REQUEST (0x774)
//! bits 15:8, one per CPU (pepc `HWPRequest.py`, `max_perf`). Written only
//! where HWP is on: the `hwp` CPU flag and MSR_PM_ENABLE (0x770) bit 0.
//! Not applicable under intel_pstate or intel_cpufreq, which own the register
//! (`cpufreq-max` is the knob there); refused outside IA32_HWP_CAPABILITIES,
//! across the other bound, or under HWP package control.

use super::msr_field::{
    CpuId, CpusTarget, Resolved, cpus_of, hwp_max_checks, hwp_resolve, hwp_value, msr_kind,
};
use super::{Blocker, CpuSel, FieldError, KindName, Spec};
use crate::msr::write::Field;
use crate::schema::Scalar;

#[derive(Debug)]
pub struct HwpMax {
    pub cpus: CpuSel,
    pub perf: u64,
}

impl Spec for HwpMax {
    type Target = CpusTarget;
    type Set = Scalar;

    fn new(target: Option<CpusTarget>, set: Scalar) -> Result<Self, FieldError> {
        Ok(HwpMax {
            cpus: cpus_of(target.and_then(|t| t.cpus))?,
            perf: hwp_value(&set)?,
        })
    }
}

impl HwpMax {
    fn desired_words(&self) -> String {
        self.perf.to_string()
    }

    fn summary(&self) -> String {
        format!("HWP max performance on CPUs {}", self.cpus)
    }

    fn resolve(&self, id: &CpuId) -> Result<Resolved, Blocker> {
        hwp_resolve(
            id,
            Field::new(0x774, 15, 8),
            self.perf,
            "HWP max performance",
            hwp_max_checks(),
        )
    }
}

msr_kind!(HwpMax, KindName::HwpMax);
