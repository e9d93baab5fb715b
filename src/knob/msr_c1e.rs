//! `c1e`: C1E auto-promotion, MSR_POWER_CTL (0x1FC) bit 1, one per package,
//! per die on CLX-AP (pepc `PowerCtl.py`, `c1e_autopromote`). `on`: the CPU turns every C1
//! request into C1E; `off` keeps C1 shallow.

use super::msr_field::{CpusTarget, Resolved, cpus_of, msr_kind, on_off};
use super::{Blocker, CpuSel, FieldError, KindName, Spec};
use crate::msr::model::MSR_IA32_POWER_CTL;
use crate::msr::write::Field;
use crate::schema::Scalar;

#[derive(Debug)]
pub struct C1e {
    pub cpus: CpuSel,
    pub on: bool,
}

impl Spec for C1e {
    type Target = CpusTarget;
    type Set = Scalar;

    fn new(target: Option<CpusTarget>, set: Scalar) -> Result<Self, FieldError> {
        Ok(C1e {
            cpus: cpus_of(target.and_then(|t| t.cpus))?,
            on: on_off(&set)?,
        })
    }
}

impl C1e {
    fn desired_words(&self) -> String {
        if self.on { "on" } else { "off" }.into()
    }

    fn summary(&self) -> String {
        format!("C1E auto-promotion on CPUs {}", self.cpus)
    }

    /// No model table row needed: pepc's `c1e_autopromote` has no `vfms`
    /// restriction (PowerCtl.py), the bit is the same on every Intel model.
    fn resolve(&self, id: &super::msr_field::CpuId) -> Result<Resolved, Blocker> {
        Ok(Resolved {
            field: Field::bit(MSR_IA32_POWER_CTL, 1),
            scope: id.package_scope(),
            want: self.on as u64,
            words: vec![(0, "off".into()), (1, "on".into())],
            label: "C1E auto-promotion".into(),
            guards: Vec::new(),
            checks: Vec::new(),
        })
    }
}

msr_kind!(C1e, KindName::C1e);
