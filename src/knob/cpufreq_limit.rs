//! `cpufreq-min` / `cpufreq-max`: the frequency floor (`scaling_min_freq`)
//! and ceiling (`scaling_max_freq`) of every cpufreq policy that drives the
//! selected CPUs. Values are frequencies with units (`2.1 GHz`, `2100 MHz`,
//! `2100000` = kHz as the kernel's files) or `min`, `max`, `base`; each is
//! checked against the policy's `cpuinfo_min_freq`..`cpuinfo_max_freq`
//! (cpufreq.rst: the kernel clamps a value outside them, so it would read
//! back as another). Floor and ceiling are ordered against each other by
//! [`super::rules::order_bounds`].

use serde::Deserialize;

use super::cpufreq_governor::policy_targets;
use super::{
    Blocker, CPU_PERSISTENCE, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service,
    Spec, Survey, Target, WriteMode,
};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    pub cpus: Option<Scalar>,
}

/// A frequency as a manifest gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freq {
    Khz(u64),
    /// The lowest the hardware allows (`cpuinfo_min_freq`, `initial_min_freq_khz`).
    Min,
    /// The highest the hardware allows (`cpuinfo_max_freq`, `initial_max_freq_khz`).
    Max,
    /// The guaranteed frequency (`base_frequency`).
    Base,
}

/// Parses `2.1 GHz`, `2100 MHz`, `2100000 kHz`, `2100000` (kHz, as the
/// kernel's files) and the special words in `specials`.
pub fn parse_freq(field: &str, text: &str, specials: &[&str]) -> Result<Freq, FieldError> {
    let t = text.trim();
    let words = specials.join(", ");
    let help = || {
        format!(
            "give a frequency such as `2.1 GHz`, `2100 MHz` or `2100000` (kHz, as the kernel's \
             files), or one of: {words}"
        )
    };
    match t {
        "min" | "max" | "base" if specials.contains(&t) => {
            return Ok(match t {
                "min" => Freq::Min,
                "max" => Freq::Max,
                _ => Freq::Base,
            });
        }
        "min" | "max" | "base" => {
            return Err(FieldError::new(
                field,
                format!("{t:?} is not offered here: {}", help()),
            ));
        }
        _ => {}
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let per_unit: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "khz" => 1,
        "mhz" => 1_000,
        "ghz" => 1_000_000,
        _ => {
            return Err(FieldError::new(
                field,
                format!("{t:?}: unknown unit {unit:?}; {}", help()),
            ));
        }
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() || frac.contains('.') || (number.contains('.') && frac.is_empty()) {
        return Err(FieldError::new(
            field,
            format!("{t:?} is not a frequency: {}", help()),
        ));
    }
    // Exact decimal arithmetic: `2.1 GHz` is 2100000 kHz, never 2099999.
    let scale = 10u64.checked_pow(frac.len() as u32);
    let khz = (|| {
        let scale = scale?;
        let whole = int.parse::<u64>().ok()?.checked_mul(per_unit)?;
        let part = if frac.is_empty() {
            0
        } else {
            frac.parse::<u64>().ok()?.checked_mul(per_unit)?
        };
        (part % scale == 0).then(|| whole.checked_add(part / scale))?
    })();
    match khz {
        Some(0) => Err(FieldError::new(field, format!("{t:?}: a frequency above 0"))),
        Some(k) => Ok(Freq::Khz(k)),
        _ => Err(FieldError::new(
            field,
            format!("{t:?} is not a whole number of kHz: {}", help()),
        )),
    }
}

pub use crate::inventory::show_khz;

/// A file's kHz in the words `desired` uses (`2.1 GHz`); other text as it is.
pub fn shown(raw: &str) -> String {
    let raw = raw.trim();
    raw.parse::<u64>().map_or_else(|_| raw.to_string(), show_khz)
}

/// Both limits; `MAX` tells which (`scaling_max_freq` when true).
#[derive(Debug)]
pub struct CpufreqLimit<const MAX: bool> {
    pub cpus: CpuSel,
    pub freq: Freq,
    text: String,
}

pub type CpufreqMin = CpufreqLimit<false>;
pub type CpufreqMax = CpufreqLimit<true>;

impl<const MAX: bool> CpufreqLimit<MAX> {
    fn file(&self) -> &'static str {
        if MAX {
            "scaling_max_freq"
        } else {
            "scaling_min_freq"
        }
    }
}

impl<const MAX: bool> Spec for CpufreqLimit<MAX> {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let freq = parse_freq("set", &set.0, &["min", "max", "base"])?;
        let cpus = match target.and_then(|t| t.cpus) {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        let text = match freq {
            Freq::Khz(k) => show_khz(k),
            _ => set.0.trim().to_string(),
        };
        Ok(CpufreqLimit { cpus, freq, text })
    }
}

/// A number a kernel file holds.
fn number(host: &HostCtx, path: &str) -> Option<u64> {
    host.text(path)?.trim().parse().ok()
}

impl<const MAX: bool> CpufreqLimit<MAX> {
    /// The kHz this knob means on the policy in `dir`, or why it has none.
    fn resolve(&self, host: &HostCtx, dir: &str, driver: &str) -> Result<u64, Blocker> {
        let hw = |f: &str| {
            number(host, &format!("{dir}/{f}")).ok_or_else(|| {
                Blocker::Unsupported(format!(
                    "{dir}/{f} cannot be read: the limit cannot be checked against the hardware's"
                ))
            })
        };
        let (lo, hi) = (hw("cpuinfo_min_freq")?, hw("cpuinfo_max_freq")?);
        let khz = match self.freq {
            Freq::Min => lo,
            Freq::Max => hi,
            Freq::Base => number(host, &format!("{dir}/base_frequency")).ok_or_else(|| {
                Blocker::Unsupported(format!(
                    "{dir} has no base_frequency (driver {driver}; intel_pstate exposes it, \
                     cpufreq.rst lists no such file for others): give the frequency instead of `base`"
                ))
            })?,
            Freq::Khz(k) => k,
        };
        if khz < lo || khz > hi {
            return Err(Blocker::Unsupported(format!(
                "{} is outside what {dir} allows, cpuinfo_min_freq {} to cpuinfo_max_freq {} \
                 (the kernel would clamp it and read back another value)",
                show_khz(khz),
                show_khz(lo),
                show_khz(hi)
            )));
        }
        Ok(khz)
    }
}

impl<const MAX: bool> KnobKind for CpufreqLimit<MAX> {
    fn kind(&self) -> KindName {
        if MAX {
            KindName::CpufreqMax
        } else {
            KindName::CpufreqMin
        }
    }

    fn desired(&self) -> String {
        self.text.clone()
    }

    fn target_summary(&self) -> String {
        let what = if MAX { "ceiling" } else { "floor" };
        format!("frequency {what} ({}) on CPUs {}", self.file(), self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        CPU_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &Service::ALL
    }

    fn normalize(&self, raw: &str) -> String {
        shown(raw)
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let mut capped = false;
        for (p, partial) in policy_targets(host, &self.cpus, &self.text, &mut survey) {
            let path = format!("{}/{}", p.dir, self.file());
            let cpus = Some(p.cpus.clone());
            let current = match host.value(&path) {
                ReadValue::Value(v) => v,
                ReadValue::Absent => {
                    let why = format!("{} has no {}", p.dir, self.file());
                    survey.targets.push(Target::absent(path, cpus, &self.text, why));
                    continue;
                }
                ReadValue::Unreadable(e) => {
                    survey
                        .targets
                        .push(Target::unreadable(path, cpus, &self.text, &e));
                    continue;
                }
            };
            let driver = p.driver.as_deref().unwrap_or("unknown");
            let (write, blocker) = match partial
                .map_or_else(|| self.resolve(host, &p.dir, driver), Err)
                .and_then(|k| global_bound(host, &p.dir, driver, k, MAX).map(|_| k))
            {
                Ok(k) => (Some(k.to_string()), None),
                Err(b) => (None, Some(b)),
            };
            if MAX
                && blocker.is_none()
                && host.text("/sys/devices/system/cpu/intel_pstate/no_turbo").as_deref() == Some("1")
                && number(host, &format!("{}/base_frequency", p.dir))
                    .is_some_and(|b| write.as_deref().and_then(|w| w.parse::<u64>().ok()).is_some_and(|d| d > b))
            {
                capped = true;
            }
            survey.targets.push(Target {
                in_effect: blocker.is_none() && write.as_deref().map(shown) == Some(shown(&current)),
                path,
                cpus,
                label: None,
                current: Some(shown(&current)),
                restore: Some(current),
                desired: write.as_deref().map_or_else(|| self.text.clone(), shown),
                write,
                mode: WriteMode::Attribute,
                blocker,
            });
        }
        if capped {
            survey.notes.push(
                "turbo is off (intel_pstate/no_turbo is 1): the CPUs run at most at base_frequency \
                 whatever the ceiling above it says (intel_pstate.rst, no_turbo)"
                    .into(),
            );
        }
        Ok(survey)
    }
}

/// intel_pstate's global `max_perf_pct`/`min_perf_pct` bound every policy in
/// active mode: the effective range is the policy's within them, in percent
/// of the highest (turbo) level (intel_pstate.rst "Global Attributes";
/// intel_pstate.c `intel_pstate_update_perf_limits`). A limit outside them
/// is not what the CPUs get: said, and not written. Within one 100 MHz step
/// (the kernel rounds the percentage to a P-state) nothing is said.
fn global_bound(
    host: &HostCtx,
    dir: &str,
    driver: &str,
    khz: u64,
    max: bool,
) -> Result<(), Blocker> {
    const PSTATE: &str = "/sys/devices/system/cpu/intel_pstate";
    const STEP: u64 = 100_000;
    if driver != "intel_pstate"
        || host.text(&format!("{PSTATE}/status")).as_deref() != Some("active")
    {
        return Ok(());
    }
    let Some(top) = number(host, &format!("{dir}/cpuinfo_max_freq")) else {
        return Ok(());
    };
    let pct = |f: &str| number(host, &format!("{PSTATE}/{f}"));
    let ceiling =
        pct("max_perf_pct").map(|p| crate::inventory::perf_pct_ceiling_khz(top, p));
    let floor = pct("min_perf_pct").map(|p| top * p / 100);
    let why = match (ceiling, floor) {
        (Some(c), _) if khz > c => format!(
            "intel_pstate's max_perf_pct caps every policy at {} ({PSTATE}/max_perf_pct, in \
             percent of cpuinfo_max_freq {}): {} is not in effect; raise max_perf_pct",
            show_khz(c),
            show_khz(top),
            show_khz(khz)
        ),
        (_, Some(f)) if !max && khz + STEP < f => format!(
            "intel_pstate's min_perf_pct keeps every policy at {} or above ({PSTATE}/min_perf_pct, \
             in percent of cpuinfo_max_freq {}): a floor of {} is not in effect; lower min_perf_pct",
            show_khz(f),
            show_khz(top),
            show_khz(khz)
        ),
        _ => return Ok(()),
    };
    Err(Blocker::Unsupported(why))
}

/// Orders the floor and ceiling writes of each directory (a policy, an
/// uncore domain, [`super::rules::BOUND_FILES`]) so that every write meets
/// a valid pair: a ceiling that rises goes first, one that falls goes after
/// the floor. Reverting restores in the reverse order, which is again valid.
/// Refuses a floor that would end above its ceiling (written or current).
/// `write` gives an item's path and text, `who` its knob, `current` a
/// file's number now.
pub fn order_bounds<T>(
    items: &mut [T],
    write: impl Fn(&T) -> (&str, &str),
    who: impl Fn(&T) -> String,
    current: impl Fn(&str) -> Option<u64>,
) -> Result<(), String> {
    let mut pairs: std::collections::BTreeMap<(String, usize), [Option<usize>; 2]> =
        Default::default();
    for (i, item) in items.iter().enumerate() {
        let Some((dir, name)) = write(item).0.rsplit_once('/') else {
            continue;
        };
        for (k, (lo, hi)) in super::rules::BOUND_FILES.iter().enumerate() {
            let slot = pairs.entry((dir.to_string(), k));
            if name == *lo {
                slot.or_default()[0] = Some(i);
            } else if name == *hi {
                slot.or_default()[1] = Some(i);
            }
        }
    }
    for ((dir, k), [floor_at, ceiling_at]) in pairs {
        let files = super::rules::BOUND_FILES[k];
        let value = |at: Option<usize>, file: &str| match at {
            Some(i) => write(&items[i]).1.trim().parse::<u64>().ok(),
            None => current(&format!("{dir}/{file}")),
        };
        let (floor, ceiling) = (value(floor_at, files.0), value(ceiling_at, files.1));
        if let (Some(f), Some(c)) = (floor, ceiling)
            && f > c
        {
            let by = |at: Option<usize>| match at {
                Some(i) => format!("written by knob {}", who(&items[i])),
                None => "as it is now".to_string(),
            };
            return Err(format!(
                "{dir}: the floor {} ({}, {}) would be above the ceiling {} ({}, {}): the kernel \
                 keeps the floor at or below the ceiling: set both in one apply (the write that \
                 makes room goes first) or choose values that keep floor <= ceiling",
                show_khz(f),
                files.0,
                by(floor_at),
                show_khz(c),
                files.1,
                by(ceiling_at)
            ));
        }
        if let (Some(fi), Some(ci)) = (floor_at, ceiling_at) {
            let now = current(&format!("{dir}/{}", files.1));
            let ceiling_first = match (ceiling, now) {
                (Some(new), Some(now)) => new >= now,
                _ => true,
            };
            if ceiling_first != (ci < fi) {
                items.swap(fi, ci);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_with_units_are_exact_khz() {
        let all = ["min", "max", "base"];
        let p = |t| parse_freq("set", t, &all);
        assert_eq!(p("2.1 GHz").unwrap(), Freq::Khz(2_100_000));
        assert_eq!(p("2100 MHz").unwrap(), Freq::Khz(2_100_000));
        assert_eq!(p("2100000").unwrap(), Freq::Khz(2_100_000));
        assert_eq!(p("2100000 kHz").unwrap(), Freq::Khz(2_100_000));
        assert_eq!(p("0.8GHz").unwrap(), Freq::Khz(800_000));
        assert_eq!(p("base").unwrap(), Freq::Base);
        for bad in ["2.1 Ghz x", "2.1", "fast", "0", "1.2.3 GHz", "2. GHz", "2.1 THz", "", "-1"] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(parse_freq("set", "base", &["min", "max"]).is_err());
        assert_eq!(show_khz(2_100_000), "2.1 GHz");
        assert_eq!(show_khz(800_000), "800 MHz");
        assert_eq!(show_khz(3_800_241), "3800241 kHz");
        assert_eq!(show_khz(3_000_000), "3 GHz");
    }
}
