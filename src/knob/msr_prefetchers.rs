//! `prefetchers`: one hardware prefetcher, MSR_MISC_FEATURE_CONTROL (0x1A4),
//! one per core; `l2-hw` one per module (L2) on Xeon Phi, Goldmont and
//! Tremont (pepc `pepclibs/msr/MiscFeatureControl.py` at aea860c3, the last
//! commit that has it: it was removed in 53688904). A set bit disables its
//! prefetcher. Bits per model: `l2-hw` 0, `l2-adjacent` 1, `dcu-hw` 2,
//! `dcu-ip` 3 on big cores; `dcu-hw` 0 and `l2-hw` 1 on Xeon Phi (pepc;
//! Intel's "Disclosure of Hardware Prefetcher Control"); models whose bits
//! the sources do not name (`src/msr/model.rs`) are refused.

use serde::Deserialize;

use super::msr_field::{CpuId, Resolved, Scope, cpus_of, msr_kind, on_off};
use super::{Blocker, CpuSel, FieldError, KindName, Spec};
use crate::msr::model::{self, CORE_PREFETCHERS, MSR_MISC_FEATURE_CONTROL, PHI_PREFETCHERS};
use crate::msr::write::Field;
use crate::schema::Scalar;

/// The names a manifest uses, as pepc calls them (`l2_hw_prefetcher`...).
pub const NAMES: [&str; 4] = ["l2-hw", "l2-adjacent", "dcu-hw", "dcu-ip"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    prefetcher: String,
    #[serde(default)]
    cpus: Option<Scalar>,
}

#[derive(Debug)]
pub struct Prefetchers {
    pub cpus: CpuSel,
    pub prefetcher: &'static str,
    pub on: bool,
}

impl Spec for Prefetchers {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let Some(t) = target else {
            return Err(FieldError::new(
                "target",
                format!(
                    "name the prefetcher: `target: {{prefetcher: NAME}}` with NAME one of {}",
                    NAMES.join(", ")
                ),
            ));
        };
        let Some(prefetcher) = NAMES.into_iter().find(|n| *n == t.prefetcher.trim()) else {
            return Err(FieldError::new(
                "target.prefetcher",
                format!(
                    "{:?} is not a prefetcher; give one of {}",
                    t.prefetcher,
                    NAMES.join(", ")
                ),
            ));
        };
        Ok(Prefetchers {
            cpus: cpus_of(t.cpus)?,
            prefetcher,
            on: on_off(&set)?,
        })
    }
}

impl Prefetchers {
    fn desired_words(&self) -> String {
        if self.on { "on" } else { "off" }.into()
    }

    fn summary(&self) -> String {
        format!("{} prefetcher on CPUs {}", self.prefetcher, self.cpus)
    }

    fn resolve(&self, id: &CpuId) -> Result<Resolved, Blocker> {
        let model = id.require_model()?;
        let bits: &[(&str, u32)] = match model.prefetchers {
            Some(p) if p == CORE_PREFETCHERS => {
                &[("l2-hw", 0), ("l2-adjacent", 1), ("dcu-hw", 2), ("dcu-ip", 3)]
            }
            Some(p) if p == PHI_PREFETCHERS => &[("dcu-hw", 0), ("l2-hw", 1)],
            _ => {
                return Err(Blocker::Unsupported(format!(
                    "the prefetcher bits of MSR 0x1a4 are not named for {} in the sources the model table cites",
                    model.name
                )));
            }
        };
        let Some(&(_, bit)) = bits.iter().find(|(n, _)| *n == self.prefetcher) else {
            let have: Vec<&str> = bits.iter().map(|(n, _)| *n).collect();
            return Err(Blocker::Unsupported(format!(
                "{} has no {} prefetcher bit (it has {})",
                model.name,
                self.prefetcher,
                have.join(", ")
            )));
        };
        Ok(Resolved {
            field: Field::bit(MSR_MISC_FEATURE_CONTROL, bit),
            scope: match self.prefetcher {
                "l2-hw" => model::l2_hw_prefetcher_scope(model.family, model.model),
                _ => Scope::Core,
            },
            // The bit disables the prefetcher.
            want: (!self.on) as u64,
            words: vec![(0, "on".into()), (1, "off".into())],
            label: format!("{} prefetcher", self.prefetcher),
            guards: Vec::new(),
            checks: Vec::new(),
        })
    }
}

msr_kind!(Prefetchers, KindName::Prefetchers);
