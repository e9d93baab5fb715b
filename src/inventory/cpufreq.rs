//! cpufreq: scaling driver, governor, energy-performance preference, limits, boost.
//!
//! Read per policy (`cpufreq/policyN`, which covers `related_cpus`), then
//! grouped over CPUs that agree.

use serde::{Deserialize, Serialize};

use super::{CPU_DIR, Reader, numbered};
use crate::cpulist::{CpuList, Group, group};

pub const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

/// A list no policy (or CPU) exposes is `null` in JSON, not `[]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Frequency {
    pub driver: Option<String>,
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<String>>>")]
    pub drivers: Vec<Group<String>>,
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<String>>>")]
    pub governors: Vec<Group<String>>,
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<String>>>")]
    pub epp: Vec<Group<String>>,
    pub available_governors: Option<Vec<String>>,
    pub available_epp: Option<Vec<String>>,
    /// `cpuinfo_min_freq` / `cpuinfo_max_freq`: what the hardware can do.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u64>>>")]
    pub min_khz: Vec<Group<u64>>,
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u64>>>")]
    pub max_khz: Vec<Group<u64>>,
    /// `base_frequency` (intel_pstate) or `amd_pstate_nominal_freq`.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u64>>>")]
    pub base_khz: Vec<Group<u64>>,
    /// `scaling_min_freq` / `scaling_max_freq`: the limits in force.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u64>>>")]
    pub scaling_min_khz: Vec<Group<u64>>,
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u64>>>")]
    pub scaling_max_khz: Vec<Group<u64>>,
    /// Turbo / boost enabled: `cpufreq/boost`, else the inverse of `intel_pstate/no_turbo`.
    pub boost: Option<bool>,
    pub intel_pstate_status: Option<String>,
    /// intel_pstate's global `max_perf_pct`/`min_perf_pct`: in active mode
    /// every policy's range is cut to these percentages of the highest level
    /// (Documentation/admin-guide/pm/intel_pstate.rst, "Global Attributes").
    pub max_perf_pct: Option<u32>,
    pub min_perf_pct: Option<u32>,
    /// intel_pstate's `hwp_dynamic_boost`: the driver raises the HWP floor
    /// after I/O waits, rewriting IA32_HWP_REQUEST.
    pub hwp_dynamic_boost: Option<bool>,
    pub amd_pstate_status: Option<String>,
    /// `power/energy_perf_bias` (0 = performance .. 15 = power saving).
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<u32>>>")]
    pub energy_perf_bias: Vec<Group<u32>>,
    pub policies: usize,
}

/// The kernel's rounding of a `max_perf_pct` to a P-state: the ceiling in
/// kHz of `pct` percent of `top` (intel_pstate.c `intel_pstate_update_perf_limits`
/// rounds the ratio up; a P-state is 100 MHz).
pub fn perf_pct_ceiling_khz(top: u64, pct: u64) -> u64 {
    const STEP: u64 = 100_000;
    (top * pct / 100).div_ceil(STEP) * STEP
}

/// `2100000` kHz as `2.1 GHz`, `800 MHz`, `2100001 kHz`.
pub fn show_khz(khz: u64) -> String {
    if !khz.is_multiple_of(1_000) {
        return format!("{khz} kHz");
    }
    let mhz = khz / 1_000;
    if mhz < 1_000 {
        return format!("{mhz} MHz");
    }
    let ghz = format!("{}.{:03}", mhz / 1_000, mhz % 1_000);
    format!("{} GHz", ghz.trim_end_matches('0').trim_end_matches('.'))
}

impl Frequency {
    /// intel_pstate's global limits in words, `None` where the driver has none:
    /// `min 21 %, max 50 % of the hardware max (at most 1.9 GHz)`.
    pub fn perf_pct_text(&self) -> Option<String> {
        let (min, max) = (self.min_perf_pct?, self.max_perf_pct?);
        let top = self.max_khz.iter().map(|g| g.value).max();
        let ceiling = top
            .filter(|_| max < 100)
            .map(|t| {
                let c = show_khz(perf_pct_ceiling_khz(t, max.into()));
                format!(" (at most {c})")
            })
            .unwrap_or_default();
        let mode = match self.intel_pstate_status.as_deref() {
            Some("active") | None => "",
            Some(_) => "; not in force outside active mode",
        };
        Some(format!(
            "min {min} %, max {max} % of the hardware max{ceiling}{mode}"
        ))
    }
}

struct Policy {
    cpus: Vec<u32>,
    driver: Option<String>,
    governor: Option<String>,
    epp: Option<String>,
    min: Option<u64>,
    max: Option<u64>,
    base: Option<u64>,
    smin: Option<u64>,
    smax: Option<u64>,
}

pub fn read(ctx: &Reader, online: &CpuList) -> Option<Frequency> {
    let names = ctx.dir(CPUFREQ_DIR).unwrap_or_default();
    let ids = numbered(&names, "policy");
    if ids.is_empty() {
        ctx.not_exposed(
            "cpufreq",
            &format!("{CPU_DIR}/cpu{}/cpufreq", online.first().unwrap_or(0)),
        );
        return None;
    }
    let first = format!("{CPUFREQ_DIR}/policy{}", ids[0]);
    let available_governors = ctx.words(&format!("{first}/scaling_available_governors"));
    let available_epp = ctx.words(&format!("{first}/energy_performance_available_preferences"));
    // One driver serves every policy (cpufreq.c: `cpufreq_driver` is one
    // pointer, `show_scaling_driver` prints its name), so it is read once;
    // `capture` still copies every policy's file, which the EPP knob reads.
    let every_driver = ctx.root.is_recording();
    let driver = match every_driver {
        true => None,
        false => ctx.text(&format!("{first}/scaling_driver")),
    };
    // Policies are read beneath one handle on the cpufreq directory: a
    // handle per policy cost an open and a close each.
    let base = ctx.root.dir_handle(CPUFREQ_DIR).ok();
    let policies: Vec<Policy> = ctx
        .par_map(&ids, |ctx, id| {
            let sub = format!("policy{id}");
            let at = match &base {
                Some(base) => ctx.beneath(base, &sub),
                None => ctx.at(&format!("{CPUFREQ_DIR}/{sub}"))?,
            };
            let listed = at
                .cpulist("related_cpus")
                .or_else(|| at.cpulist("affected_cpus"));
            if listed.is_none() && !at.exists(".") {
                return None;
            }
            let cpus = listed.unwrap_or_else(|| CpuList::new(vec![*id]));
            Some(Policy {
                cpus: cpus
                    .as_slice()
                    .iter()
                    .copied()
                    .filter(|c| online.contains(*c))
                    .collect(),
                driver: match every_driver {
                    true => at.text("scaling_driver"),
                    false => driver.clone(),
                },
                governor: at.text("scaling_governor"),
                epp: at.text("energy_performance_preference"),
                min: at.parse("cpuinfo_min_freq"),
                max: at.parse("cpuinfo_max_freq"),
                base: at
                    .parse("base_frequency")
                    .or_else(|| at.parse("amd_pstate_nominal_freq")),
                smin: at.parse("scaling_min_freq"),
                smax: at.parse("scaling_max_freq"),
            })
        })
        .into_iter()
        .flatten()
        .collect();
    fn by<T: PartialEq + Clone>(
        policies: &[Policy],
        f: impl Fn(&Policy) -> Option<T>,
    ) -> Vec<Group<T>> {
        group(policies.iter().flat_map(|p| {
            let v = f(p);
            p.cpus.iter().filter_map(move |c| Some((*c, v.clone()?)))
        }))
    }
    let drivers = by(&policies, |p| p.driver.clone());
    let epb = group(
        ctx.par_map(online.as_slice(), |ctx, &c| {
            Some((
                c,
                ctx.parse::<u32>(&format!("{CPU_DIR}/cpu{c}/power/energy_perf_bias"))?,
            ))
        })
        .into_iter()
        .flatten(),
    );
    let intel_pstate_status = ctx.text(&format!("{CPU_DIR}/intel_pstate/status"));
    let pstate = |f: &str| ctx.parse::<u32>(&format!("{CPU_DIR}/intel_pstate/{f}"));
    let boost = ctx
        .parse::<u32>(&format!("{CPUFREQ_DIR}/boost"))
        .map(|v| v == 1)
        .or_else(|| pstate("no_turbo").map(|v| v == 0));
    Some(Frequency {
        driver: drivers.first().map(|g| g.value.clone()),
        drivers,
        governors: by(&policies, |p| p.governor.clone()),
        epp: by(&policies, |p| p.epp.clone()),
        available_governors,
        available_epp,
        min_khz: by(&policies, |p| p.min),
        max_khz: by(&policies, |p| p.max),
        base_khz: by(&policies, |p| p.base),
        scaling_min_khz: by(&policies, |p| p.smin),
        scaling_max_khz: by(&policies, |p| p.smax),
        boost,
        intel_pstate_status,
        max_perf_pct: pstate("max_perf_pct"),
        min_perf_pct: pstate("min_perf_pct"),
        hwp_dynamic_boost: pstate("hwp_dynamic_boost").map(|v| v == 1),
        amd_pstate_status: ctx.text(&format!("{CPU_DIR}/amd_pstate/status")),
        energy_perf_bias: epb,
        policies: ids.len(),
    })
}
