//! `c1-demotion`: MSR_PKG_CST_CONFIG_CONTROL (0xE2) bit 26, one per core (pepc
//! `PCStateConfigCtl.py`). Allow the CPU to demote C6/C7 requests to C1 (`c1_demotion`).
//! Bit 15 locks only bits 15:0, so this bit stays writable on a locked register.

use super::msr_field::{CpuId, CpusTarget, Resolved, cpus_of, msr_kind, on_off};
use super::{Blocker, CpuSel, FieldError, KindName, Spec};
use crate::msr::model::MSR_PKG_CST_CONFIG_CONTROL;
use crate::msr::write::Field;
use crate::schema::Scalar;

#[derive(Debug)]
pub struct C1Demotion {
    pub cpus: CpuSel,
    pub on: bool,
}

impl Spec for C1Demotion {
    type Target = CpusTarget;
    type Set = Scalar;

    fn new(target: Option<CpusTarget>, set: Scalar) -> Result<Self, FieldError> {
        Ok(C1Demotion {
            cpus: cpus_of(target.and_then(|t| t.cpus))?,
            on: on_off(&set)?,
        })
    }
}

impl C1Demotion {
    fn desired_words(&self) -> String {
        if self.on { "on" } else { "off" }.into()
    }

    fn summary(&self) -> String {
        format!("C1 demotion on CPUs {}", self.cpus)
    }

    fn resolve(&self, id: &CpuId) -> Result<Resolved, Blocker> {
        id.require_model()?;
        Ok(Resolved {
            field: Field::bit(MSR_PKG_CST_CONFIG_CONTROL, 26),
            scope: id.c1_demotion_scope(),
            want: self.on as u64,
            words: vec![(0, "off".into()), (1, "on".into())],
            label: "C1 demotion".into(),
            guards: Vec::new(),
            checks: Vec::new(),
        })
    }
}

msr_kind!(C1Demotion, KindName::C1Demotion);
