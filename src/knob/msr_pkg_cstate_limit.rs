//! `package-cstate-limit`: the deepest package C-state, MSR_PKG_CST_CONFIG_CONTROL
//! (0xE2) bits `hi:0` with the model's codes (pepc `PCStateConfigCtl.py`,
//! `_PKG_CST_LIMITS`, as `src/msr/model.rs` holds them), one per package
//! (per die on CLX-AP, pepc `get_clx_ap_adjusted_msr_scope`).
//! Bit 15 set means the BIOS locked bits 15:0: refused at plan time.

use super::msr_field::{CpuId, CpusTarget, Guard, Resolved, cpus_of, msr_kind};
use super::{Blocker, CpuSel, FieldError, KindName, Spec};
use crate::msr::model::{MODELS, MSR_PKG_CST_CONFIG_CONTROL};
use crate::msr::write::Field;
use crate::schema::Scalar;

#[derive(Debug)]
pub struct PackageCstateLimit {
    pub cpus: CpuSel,
    /// A limit's name as some model's table spells it (`PC2`, `unlimited`).
    pub limit: String,
}

/// Every limit name of the model table, once, in table order.
fn known_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for m in MODELS {
        for (_, n) in m.pkg_limits.codes {
            if !out.contains(n) {
                out.push(n);
            }
        }
    }
    out
}

impl Spec for PackageCstateLimit {
    type Target = CpusTarget;
    type Set = Scalar;

    fn new(target: Option<CpusTarget>, set: Scalar) -> Result<Self, FieldError> {
        let text = set.0.trim();
        let Some(limit) = known_names()
            .into_iter()
            .find(|n| n.eq_ignore_ascii_case(text))
        else {
            return Err(FieldError::new(
                "set",
                format!(
                    "{text:?} is not a package C-state limit; limits by model: {}",
                    known_names().join(", ")
                ),
            ));
        };
        Ok(PackageCstateLimit {
            cpus: cpus_of(target.and_then(|t| t.cpus))?,
            limit: limit.to_string(),
        })
    }
}

impl PackageCstateLimit {
    fn desired_words(&self) -> String {
        self.limit.clone()
    }

    fn summary(&self) -> String {
        format!("package C-state limit on CPUs {}", self.cpus)
    }

    fn resolve(&self, id: &CpuId) -> Result<Resolved, Blocker> {
        let model = id.require_model()?;
        let limits = model.pkg_limits;
        let Some(&(code, _)) = limits.codes.iter().find(|(_, n)| *n == self.limit) else {
            let names: Vec<&str> = limits.codes.iter().map(|(_, n)| *n).collect();
            return Err(Blocker::Unsupported(format!(
                "{} has no package C-state limit {} (its limits: {})",
                model.name,
                self.limit,
                names.join(", ")
            )));
        };
        Ok(Resolved {
            field: Field::new(MSR_PKG_CST_CONFIG_CONTROL, limits.hi_bit, 0),
            scope: id.package_scope(),
            want: code,
            words: limits.codes.iter().map(|(c, n)| (*c, n.to_string())).collect(),
            label: "package C-state limit".into(),
            guards: vec![Guard {
                field: Field::bit(MSR_PKG_CST_CONFIG_CONTROL, 15),
                want: 0,
                refusal: "locked by BIOS: the package C-state limit can only be read (some BIOSes have a setting that unlocks it)",
            }],
            checks: Vec::new(),
        })
    }
}

msr_kind!(PackageCstateLimit, KindName::PackageCstateLimit);
