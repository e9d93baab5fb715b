//! `epb`: the energy-performance bias of each selected CPU
//! (`cpuN/power/energy_perf_bias`), 0 (performance) to 15 (power saving),
//! or one of the names the kernel takes for 0, 4, 6, 8 and 15
//! (Documentation/admin-guide/pm/intel_epb.rst). The file always reads a
//! number, so values are compared as numbers.

use serde::Deserialize;

use super::{
    ATTRIBUTE_PERSISTENCE, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service,
    Spec, Survey, Target, WriteMode, offline_target,
};
use crate::cpulist::CpuList;
use crate::inventory::CPU_DIR;
use crate::schema::{Persistence, Scalar};

/// intel_epb.rst (and arch/x86/kernel/cpu/intel_epb.c `energy_perf_strings[]`
/// with `energ_perf_values[]`): the names the file takes and their numbers.
pub const EPB_NAMES: [(&str, u8); 5] = [
    ("performance", 0),
    ("balance-performance", 4),
    ("normal", 6),
    ("balance-power", 8),
    ("power", 15),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    pub cpus: Option<Scalar>,
}

#[derive(Debug)]
pub struct Epb {
    pub cpus: CpuSel,
    pub value: u8,
    text: String,
}

/// A name or a number 0-15.
pub fn parse_epb(text: &str) -> Result<u8, String> {
    let t = text.trim();
    if let Some((_, n)) = EPB_NAMES.iter().find(|(name, _)| *name == t) {
        return Ok(*n);
    }
    let names = EPB_NAMES
        .iter()
        .map(|(n, v)| format!("{n} ({v})"))
        .collect::<Vec<_>>()
        .join(", ");
    match t.parse::<u8>() {
        Ok(n) if n <= 15 => Ok(n),
        _ => Err(format!(
            "{t:?}: EPB is a number from 0 (performance) to 15 (power saving) or one of {names} \
             (intel_epb.rst)"
        )),
    }
}

impl Spec for Epb {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let value = parse_epb(&set.0).map_err(|m| FieldError::new("set", m))?;
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        Ok(Epb {
            cpus,
            value,
            text: set.0.trim().to_string(),
        })
    }
}

impl KnobKind for Epb {
    fn kind(&self) -> KindName {
        KindName::Epb
    }

    fn desired(&self) -> String {
        match self.text.parse::<u8>() {
            Ok(_) => self.text.clone(),
            Err(_) => format!("{} ({})", self.text, self.value),
        }
    }

    fn target_summary(&self) -> String {
        format!("energy_perf_bias on CPUs {}", self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        ATTRIBUTE_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned, Service::Tlp, Service::Cpupower]
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        matches!((expect.parse::<u8>(), read.parse::<u8>()), (Ok(a), Ok(b)) if a == b)
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.value.to_string();
        let mut survey = Survey::default();
        let (here, missing) = self.cpus.split(host.online());
        survey.targets.extend(offline_target(&missing, &desired));
        let mut without = Vec::new();
        for &cpu in here.as_slice() {
            let path = format!("{CPU_DIR}/cpu{cpu}/power/energy_perf_bias");
            let cpus = Some(CpuList::new(vec![cpu]));
            match host.value(&path) {
                ReadValue::Value(raw) => {
                    let current = raw.trim().parse::<u8>().map(|n| n.to_string()).unwrap_or(raw.clone());
                    survey.targets.push(Target {
                        in_effect: self.confirms(&desired, &current),
                        path,
                        cpus,
                        label: None,
                        current: Some(current),
                        desired: desired.clone(),
                        write: Some(desired.clone()),
                        restore: Some(raw),
                        mode: WriteMode::Attribute,
                        blocker: None,
                    });
                }
                ReadValue::Absent => without.push(cpu),
                ReadValue::Unreadable(e) => {
                    survey.targets.push(Target::unreadable(path, cpus, &desired, &e))
                }
            }
        }
        if !without.is_empty() {
            let cpus = CpuList::new(without);
            survey.targets.push(Target::absent(
                format!("{CPU_DIR}/cpu{{{cpus}}}/power/energy_perf_bias"),
                Some(cpus),
                &desired,
                "no energy_perf_bias here (the kernel shows it on Intel CPUs with EPB, \
                 X86_FEATURE_EPB; not on AMD, nor in most VMs)"
                    .into(),
            ));
        }
        if self.value == 0 {
            survey.notes.push(
                "the kernel sets a CPU found at 0 (performance) to 6 (normal) when it first \
                 brings it up (arch/x86/kernel/cpu/intel_epb.c `intel_epb_restore`, firmware left it \
                 uninitialized): a value written later (this apply, persistence) stays"
                    .into(),
            );
        }
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(parse_epb("balance-power"), Ok(8));
        assert_eq!(parse_epb("normal"), Ok(6));
        assert_eq!(parse_epb("15"), Ok(15));
        assert!(parse_epb("16").is_err());
        assert!(parse_epb("balance_power").is_err());
        assert!(parse_epb("-1").is_err());
    }
}
