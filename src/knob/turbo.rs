//! `turbo`: frequencies above the base one, on or off. For every CPU (the
//! default) through the driver's global switch: intel_pstate's `no_turbo`
//! (inverted: `1` is off; intel_pstate.rst, Global Attributes) or
//! cpufreq's `boost` (acpi-cpufreq, amd-pstate; cpufreq.rst, Frequency Boost
//! Support). For some CPUs (`target.cpus`) through each policy's own `boost`
//! where the kernel has one, which it takes only while the global `boost`
//! is on (cpufreq.c `store_local_boost`).

use serde::Deserialize;

use super::cpufreq_governor::policy_targets;
use super::ctx::CPUFREQ_DIR;
use super::{
    ATTRIBUTE_PERSISTENCE, Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue,
    Service, Spec, Survey, Target, WriteMode,
};
use crate::cpulist::CpuList;
use crate::schema::{Persistence, Scalar};

pub const NO_TURBO: &str = "/sys/devices/system/cpu/intel_pstate/no_turbo";
pub const BOOST: &str = "/sys/devices/system/cpu/cpufreq/boost";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    pub cpus: Option<Scalar>,
}

#[derive(Debug)]
pub struct Turbo {
    pub cpus: CpuSel,
    pub on: bool,
}

impl Spec for Turbo {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let on = match set.0.trim() {
            "on" | "true" => true,
            "off" | "false" => false,
            other => {
                return Err(FieldError::new(
                    "set",
                    format!("{other:?}: turbo is `on` or `off`"),
                ));
            }
        };
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        Ok(Turbo { cpus, on })
    }
}

/// `on`/`off` from a file's text: `no_turbo` reads `1` for off, `boost` `1` for on.
fn words(path: &str, raw: &str) -> Option<&'static str> {
    let inverted = path == NO_TURBO;
    match (raw.trim(), inverted) {
        ("1", false) | ("0", true) => Some("on"),
        ("0", false) | ("1", true) => Some("off"),
        _ => None,
    }
}

impl Turbo {
    fn word(&self) -> &'static str {
        if self.on { "on" } else { "off" }
    }

    /// The text that sets this knob in the file at `path`.
    fn text_for(&self, path: &str) -> &'static str {
        if self.on == (path == NO_TURBO) { "0" } else { "1" }
    }

    fn target(&self, path: String, cpus: Option<CpuList>, raw: String, blocker: Option<Blocker>) -> Target {
        let current = words(&path, &raw).map(str::to_string);
        let blocker = blocker.or_else(|| {
            current.is_none().then(|| {
                Blocker::Unsupported(format!("{path} holds {raw:?}, neither 0 nor 1"))
            })
        });
        Target {
            in_effect: current.as_deref() == Some(self.word()),
            write: Some(self.text_for(&path).to_string()),
            path,
            cpus,
            label: None,
            current,
            desired: self.word().into(),
            restore: Some(raw),
            mode: WriteMode::Attribute,
            blocker,
        }
    }

    /// One file's target, or `None` when the file is absent.
    fn file(&self, host: &HostCtx, path: &str, cpus: Option<CpuList>) -> Option<Target> {
        match host.value(path) {
            ReadValue::Value(raw) => Some(self.target(path.into(), cpus, raw, None)),
            ReadValue::Absent => None,
            ReadValue::Unreadable(e) => Some(Target::unreadable(path.into(), cpus, self.word(), &e)),
        }
    }

    /// `target.cpus`: each policy's own `boost`.
    fn per_policy(&self, host: &HostCtx, survey: &mut Survey) {
        let global = host.text(BOOST);
        for (p, partial) in policy_targets(host, &self.cpus, self.word(), survey) {
            let path = format!("{}/boost", p.dir);
            let cpus = Some(p.cpus.clone());
            let driver = p.driver.as_deref().unwrap_or("unknown");
            let Some(mut t) = self.file(host, &path, cpus.clone()) else {
                survey.targets.push(Target {
                    blocker: Some(Blocker::Unsupported(format!(
                        "{} has no per-policy boost ({driver}{}): turbo can be set for all CPUs \
                         only (leave out target.cpus)",
                        p.dir,
                        if host.text(NO_TURBO).is_some() { ", intel_pstate/no_turbo acts for every CPU" } else { "" }
                    ))),
                    ..Target::absent(path, cpus, self.word(), String::new())
                });
                continue;
            };
            if t.blocker.is_none() {
                t.blocker = partial;
            }
            if t.blocker.is_none() && !t.in_effect && global.as_deref() == Some("0") {
                t.blocker = Some(Blocker::Unsupported(format!(
                    "{BOOST} is 0: the kernel takes a policy's boost only while the global one \
                     is on (cpufreq.c store_local_boost): set turbo on for all CPUs first"
                )));
            }
            survey.targets.push(t);
        }
    }
}

impl KnobKind for Turbo {
    fn kind(&self) -> KindName {
        KindName::Turbo
    }

    fn desired(&self) -> String {
        self.word().into()
    }

    fn target_summary(&self) -> String {
        match self.cpus {
            CpuSel::All => "turbo for every CPU".into(),
            _ => format!("turbo (per-policy boost) on CPUs {}", self.cpus),
        }
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        ATTRIBUTE_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &Service::ALL
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        Ok(host
            .root
            .read_trimmed(path)?
            .map(|raw| words(path, &raw).map_or(raw.clone(), str::to_string)))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        if self.cpus != CpuSel::All {
            self.per_policy(host, &mut survey);
            return Ok(survey);
        }
        let online = Some(host.online().clone());
        if let Some(t) = self
            .file(host, NO_TURBO, online.clone())
            .or_else(|| self.file(host, BOOST, online.clone()))
        {
            survey.targets.push(t);
            return Ok(survey);
        }
        let policies = host.policies();
        let reason = match policies.first().and_then(|p| p.driver.clone()) {
            _ if policies.is_empty() => {
                "no cpufreq on this host (no cpufreq policies; a VM or a disabled driver): \
                 nothing to turn turbo on or off with"
                    .to_string()
            }
            driver => format!(
                "the cpufreq driver ({}) offers no turbo switch: neither {NO_TURBO} nor {BOOST}",
                driver.as_deref().unwrap_or("unknown")
            ),
        };
        survey.targets.push(Target::absent(
            format!("{CPUFREQ_DIR}/boost"),
            online,
            self.word(),
            reason,
        ));
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_turbo_reads_inverted() {
        assert_eq!(words(NO_TURBO, "1"), Some("off"));
        assert_eq!(words(BOOST, "1"), Some("on"));
        assert_eq!(words("/sys/devices/system/cpu/cpufreq/policy3/boost", "0"), Some("off"));
        assert_eq!(words(BOOST, "2"), None);
        let on = Turbo { cpus: CpuSel::All, on: true };
        assert_eq!(on.text_for(NO_TURBO), "0");
        assert_eq!(on.text_for(BOOST), "1");
    }
}
