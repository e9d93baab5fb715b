//! Uncore frequency limits per die (intel_uncore_frequency): the MSR layout
//! `package_XX_die_YY/`, or, with TPMI, `uncoreNN/` with `package_id` and
//! `domain_id` (Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst).
//! `domains` is the one reader of that layout: the `uncore-freq` knob uses it too.

use serde::{Deserialize, Serialize};

use super::Reader;

pub const UNCORE_DIR: &str = "/sys/devices/system/cpu/intel_uncore_frequency";

/// One uncore control directory.
#[derive(Clone, Debug, PartialEq)]
pub struct Domain {
    pub dir: String,
    pub package: u32,
    /// The die (MSR layout) or power domain (TPMI).
    pub die: u32,
    pub tpmi: bool,
}

/// `package_01_die_00` as (1, 0).
pub fn legacy_ids(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("package_")?;
    let (p, d) = rest.split_once("_die_")?;
    Some((p.parse().ok()?, d.parse().ok()?))
}

/// The uncore domains of this host, the TPMI ones where there are any: with
/// TPMI the `package_XX_die_YY` directories are root domains that stand for
/// every domain of their package.
pub fn domains(
    list: &dyn Fn(&str) -> Vec<String>,
    text: &dyn Fn(&str) -> Option<String>,
) -> Vec<Domain> {
    let mut names = list(UNCORE_DIR);
    names.sort();
    let tpmi: Vec<Domain> = names
        .iter()
        .filter(|n| {
            n.strip_prefix("uncore")
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        })
        .filter_map(|n| {
            let dir = format!("{UNCORE_DIR}/{n}");
            let id = |f: &str| text(&format!("{dir}/{f}"))?.trim().parse::<u32>().ok();
            Some(Domain {
                package: id("package_id")?,
                die: id("domain_id")?,
                dir,
                tpmi: true,
            })
        })
        .collect();
    if !tpmi.is_empty() {
        return tpmi;
    }
    names
        .iter()
        .filter_map(|n| {
            let (package, die) = legacy_ids(n)?;
            Some(Domain {
                dir: format!("{UNCORE_DIR}/{n}"),
                package,
                die,
                tpmi: false,
            })
        })
        .collect()
}

/// The uncore frequency limits of every die.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Uncore {
    /// Why there are none (`null` when `domains` lists them).
    pub unavailable: Option<String>,
    /// `tpmi` (per power domain, `uncoreNN/`) or `msr` (`package_XX_die_YY/`);
    /// `null` when `unavailable`.
    pub layout: Option<String>,
    pub domains: Vec<UncoreDomain>,
}

/// One die's (or TPMI power domain's) uncore limits, in kHz; a `null` is a
/// file this kernel or capture does not have.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct UncoreDomain {
    pub package: u32,
    /// The die (`msr` layout) or power domain (`tpmi`).
    pub die: u32,
    pub dir: String,
    /// The floor and ceiling in force (`min_freq_khz`, `max_freq_khz`).
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    /// What the hardware allows (`initial_min_freq_khz`, `initial_max_freq_khz`).
    pub initial_min_khz: Option<u64>,
    pub initial_max_khz: Option<u64>,
    /// `current_freq_khz` when the capture or kernel has it.
    pub current_khz: Option<u64>,
    /// The read-only command that shows the floor and ceiling.
    pub command: String,
}

pub fn read(ctx: &Reader) -> Uncore {
    let list = |d: &str| ctx.root.read_dir(d).unwrap_or_default();
    let text = |p: &str| ctx.root.read_string(p).ok().map(|s| s.trim().to_string());
    let found = domains(&list, &text);
    if found.is_empty() {
        return Uncore {
            unavailable: Some(format!(
                "no {UNCORE_DIR} (the intel-uncore-frequency driver is not loaded, the CPU \
                 has no such control, or a VM)"
            )),
            layout: None,
            domains: Vec::new(),
        };
    }
    let layout = if found[0].tpmi { "tpmi" } else { "msr" };
    let domains = found
        .into_iter()
        .map(|d| {
            let khz = |f: &str| text(&format!("{}/{f}", d.dir))?.parse::<u64>().ok();
            UncoreDomain {
                package: d.package,
                die: d.die,
                min_khz: khz("min_freq_khz"),
                max_khz: khz("max_freq_khz"),
                initial_min_khz: khz("initial_min_freq_khz"),
                initial_max_khz: khz("initial_max_freq_khz"),
                current_khz: khz("current_freq_khz"),
                command: format!("cat {0}/min_freq_khz {0}/max_freq_khz", d.dir),
                dir: d.dir,
            }
        })
        .collect();
    Uncore {
        unavailable: None,
        layout: Some(layout.into()),
        domains,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_names() {
        assert_eq!(legacy_ids("package_01_die_00"), Some((1, 0)));
        assert_eq!(legacy_ids("uncore00"), None);
    }
}
