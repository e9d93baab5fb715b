//! `uncore-freq`: the uncore's frequency floor or ceiling
//! (`min_freq_khz`/`max_freq_khz`) per die
//! (Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst): the
//! MSR layout `intel_uncore_frequency/package_XX_die_YY/`, or, where TPMI
//! gives per power domain control, `uncoreNN/` with `package_id` and
//! `domain_id`. With TPMI the `package_XX_die_YY` directories are root
//! domains that write every domain of their package, so the knob writes the
//! `uncoreNN` ones only. Limits come from `initial_{min,max}_freq_khz`; the
//! hardware takes ratios of 100 MHz (`UNCORE_FREQ_KHZ_MULTIPLIER` in
//! drivers/platform/x86/intel/uncore-frequency/uncore-frequency.c and -tpmi.c).

use serde::Deserialize;

use super::cpufreq_limit::{Freq, parse_freq, show_khz, shown};
use super::{
    ATTRIBUTE_PERSISTENCE, Blocker, FieldError, HostCtx, KindName, KnobKind, ReadValue, Spec,
    Survey, Target, WriteMode,
};
use crate::cpulist::CpuList;
use crate::schema::{Persistence, Scalar};

pub use crate::inventory::uncore::{self, Domain, UNCORE_DIR};
/// One ratio step of the uncore, in kHz.
pub const UNCORE_STEP_KHZ: u64 = 100_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    pub bound: String,
    #[serde(default)]
    pub packages: Option<Scalar>,
    #[serde(default)]
    pub dies: Option<Scalar>,
}

/// `all` or a list of numbers (`0-1`).
#[derive(Clone, Debug, PartialEq)]
pub enum Ids {
    All,
    List(CpuList),
}

impl Ids {
    fn parse(field: &str, s: Option<Scalar>) -> Result<Ids, FieldError> {
        let Some(s) = s else { return Ok(Ids::All) };
        match s.0.trim() {
            "all" => Ok(Ids::All),
            t => match CpuList::parse(t) {
                Ok(l) if !l.is_empty() => Ok(Ids::List(l)),
                _ => Err(FieldError::new(
                    field,
                    format!("{t:?}: give `all` or numbers such as 0 or 0-1"),
                )),
            },
        }
    }

    fn has(&self, n: u32) -> bool {
        match self {
            Ids::All => true,
            Ids::List(l) => l.contains(n),
        }
    }
}

impl std::fmt::Display for Ids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ids::All => f.write_str("all"),
            Ids::List(l) => write!(f, "{l}"),
        }
    }
}

#[derive(Debug)]
pub struct UncoreFreq {
    pub max: bool,
    pub packages: Ids,
    pub dies: Ids,
    pub freq: Freq,
    text: String,
}

impl Spec for UncoreFreq {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.bound (min or max), and optionally packages and dies",
            )
        })?;
        let max = match t.bound.trim() {
            "max" => true,
            "min" => false,
            b => {
                return Err(FieldError::new(
                    "target.bound",
                    format!("{b:?}: the bound is `min` (the floor) or `max` (the ceiling)"),
                ));
            }
        };
        let freq = parse_freq("set", &set.0, &["min", "max"])?;
        if let Freq::Khz(k) = freq
            && !k.is_multiple_of(UNCORE_STEP_KHZ)
        {
            return Err(FieldError::new(
                "set",
                format!(
                    "{} is not a multiple of 100 MHz: the uncore takes ratios of 100 MHz \
                     (UNCORE_FREQ_KHZ_MULTIPLIER) and would read back {}",
                    show_khz(k),
                    show_khz(k - k % UNCORE_STEP_KHZ)
                ),
            ));
        }
        let text = match freq {
            Freq::Khz(k) => show_khz(k),
            _ => set.0.trim().to_string(),
        };
        Ok(UncoreFreq {
            max,
            packages: Ids::parse("target.packages", t.packages)?,
            dies: Ids::parse("target.dies", t.dies)?,
            freq,
            text,
        })
    }
}

/// The uncore domains of this host (the reader inventory uses too).
pub fn domains(host: &HostCtx) -> Vec<Domain> {
    uncore::domains(&|d| host.list(d), &|p| host.text(p))
}

impl UncoreFreq {
    fn file(&self) -> &'static str {
        if self.max { "max_freq_khz" } else { "min_freq_khz" }
    }

    fn resolve(&self, host: &HostCtx, d: &Domain) -> Result<u64, Blocker> {
        let hw = |f: &str| {
            host.text(&format!("{}/{f}", d.dir))
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| {
                    Blocker::Unsupported(format!(
                        "{}/{f} cannot be read: the limit cannot be checked against the hardware's",
                        d.dir
                    ))
                })
        };
        let (lo, hi) = (hw("initial_min_freq_khz")?, hw("initial_max_freq_khz")?);
        let khz = match self.freq {
            Freq::Min => lo,
            Freq::Max | Freq::Base => hi,
            Freq::Khz(k) => k,
        };
        if khz < lo || khz > hi {
            return Err(Blocker::Unsupported(format!(
                "{} is outside what {} allows, initial_min_freq_khz {} to initial_max_freq_khz {}",
                show_khz(khz),
                d.dir,
                show_khz(lo),
                show_khz(hi)
            )));
        }
        if d.tpmi {
            root_bound(host, d, khz)?;
        }
        Ok(khz)
    }
}

/// With TPMI, a write to a package's root domain (`package_XX_die_YY`)
/// stores limits that later writes of its power domains must stay within:
/// the kernel refuses one outside them with EINVAL
/// (drivers/platform/x86/intel/uncore-frequency/uncore-frequency-tpmi.c).
/// Checked here, at plan time, against the root's `min/max_freq_khz`.
fn root_bound(host: &HostCtx, d: &Domain, khz: u64) -> Result<(), Blocker> {
    let Some(root) = host
        .list(UNCORE_DIR)
        .into_iter()
        .find(|n| uncore::legacy_ids(n).is_some_and(|(p, _)| p == d.package))
    else {
        return Ok(());
    };
    let dir = format!("{UNCORE_DIR}/{root}");
    let read = |f: &str| host.text(&format!("{dir}/{f}"))?.parse::<u64>().ok();
    let (Some(lo), Some(hi)) = (read("min_freq_khz"), read("max_freq_khz")) else {
        return Ok(());
    };
    if khz < lo || khz > hi {
        return Err(Blocker::Unsupported(format!(
            "{} is outside the limits of package {}'s root domain {dir}, min_freq_khz {} to \
             max_freq_khz {}: the kernel refuses a power domain's write outside them (EINVAL, \
             uncore-frequency-tpmi.c); widen the root's limits first",
            show_khz(khz),
            d.package,
            show_khz(lo),
            show_khz(hi)
        )));
    }
    Ok(())
}

impl KnobKind for UncoreFreq {
    fn kind(&self) -> KindName {
        KindName::UncoreFreq
    }

    fn desired(&self) -> String {
        self.text.clone()
    }

    fn target_summary(&self) -> String {
        let what = if self.max { "ceiling" } else { "floor" };
        format!(
            "uncore frequency {what} on packages {} dies {}",
            self.packages, self.dies
        )
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        ATTRIBUTE_PERSISTENCE
    }

    fn normalize(&self, raw: &str) -> String {
        shown(raw)
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let all = domains(host);
        if all.is_empty() {
            survey.targets.push(Target::absent(
                UNCORE_DIR.into(),
                None,
                &self.text,
                "no intel_uncore_frequency here (the intel-uncore-frequency driver is not loaded, \
                 the CPU is not an Intel one that has it, or a VM)"
                    .into(),
            ));
            return Ok(survey);
        }
        let chosen: Vec<&Domain> = all
            .iter()
            .filter(|d| self.packages.has(d.package) && self.dies.has(d.die))
            .collect();
        if chosen.is_empty() {
            let present: Vec<String> = all
                .iter()
                .map(|d| format!("package {} die {}", d.package, d.die))
                .collect();
            survey.targets.push(Target::absent(
                UNCORE_DIR.into(),
                None,
                &self.text,
                format!(
                    "no uncore domain of packages {} dies {} here (present: {})",
                    self.packages,
                    self.dies,
                    present.join(", ")
                ),
            ));
            return Ok(survey);
        }
        if chosen[0].tpmi {
            survey.notes.push(
                "TPMI uncore: written per power domain (uncoreNN); package_XX_die_YY are root \
                 domains that would set every domain of the package (intel_uncore_frequency_scaling.rst)"
                    .into(),
            );
        }
        for d in chosen {
            let path = format!("{}/{}", d.dir, self.file());
            let label = Some(format!(
                "package {} {} {}",
                d.package,
                if d.tpmi { "domain" } else { "die" },
                d.die
            ));
            let current = match host.value(&path) {
                ReadValue::Value(v) => v,
                ReadValue::Absent => {
                    let why = format!("{} has no {}", d.dir, self.file());
                    survey
                        .targets
                        .push(Target::absent(path, None, &self.text, why));
                    continue;
                }
                ReadValue::Unreadable(e) => {
                    survey
                        .targets
                        .push(Target::unreadable(path, None, &self.text, &e));
                    continue;
                }
            };
            let (write, blocker) = match self.resolve(host, d) {
                Ok(k) => (Some(k.to_string()), None),
                Err(b) => (None, Some(b)),
            };
            survey.targets.push(Target {
                in_effect: blocker.is_none()
                    && write.as_deref().map(shown) == Some(shown(&current)),
                path,
                cpus: None,
                label,
                current: Some(shown(&current)),
                restore: Some(current),
                desired: write.as_deref().map_or_else(|| self.text.clone(), shown),
                write,
                mode: WriteMode::Attribute,
                blocker,
            });
        }
        Ok(survey)
    }
}
