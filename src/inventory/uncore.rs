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

/// `uncore07`: a TPMI power domain's directory.
fn is_tpmi(name: &str) -> bool {
    name.strip_prefix("uncore")
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
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
        .filter(|n| is_tpmi(n))
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
    /// `null`, never `[]`, when `unavailable`.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<UncoreDomain>>")]
    pub domains: Vec<UncoreDomain>,
}

/// One die's (or TPMI power domain's) uncore limits, in kHz; a `null` is a
/// file this kernel or capture does not have, or one that did not parse (a
/// warning names it).
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

/// The limits of every domain; `vendor` (`/proc/cpuinfo`'s `vendor_id`) only
/// words the reason when there are none.
pub fn read(ctx: &Reader, vendor: Option<&str>) -> Uncore {
    let names = ctx.dir(UNCORE_DIR);
    // `domains` lists only UNCORE_DIR: the listing read once here.
    let list = |_: &str| names.clone().unwrap_or_default();
    let text = |p: &str| ctx.text(p);
    let found = domains(&list, &text);
    // A TPMI directory whose ids do not parse is left out: say which.
    let kept = |dir: &str| found.iter().any(|d| d.dir == dir);
    for n in names.iter().flatten().filter(|n| is_tpmi(n)) {
        let dir = format!("{UNCORE_DIR}/{n}");
        if !kept(&dir) {
            ctx.warn(format!(
                "{dir}: left out, its package_id or domain_id is missing or not a number"
            ));
        }
    }
    if found.is_empty() {
        let why = match (&names, vendor) {
            (None, Some(v)) if v != "GenuineIntel" => {
                format!("no {UNCORE_DIR} (an Intel driver; this CPU is {v})")
            }
            (None, _) => format!(
                "no {UNCORE_DIR} (the intel-uncore-frequency driver is not loaded, the CPU \
                 has no such control, or a VM)"
            ),
            (Some(_), _) => format!("{UNCORE_DIR} has no package_XX_die_YY or uncoreNN directory"),
        };
        return Uncore {
            unavailable: Some(why),
            layout: None,
            domains: Vec::new(),
        };
    }
    let layout = if found[0].tpmi { "tpmi" } else { "msr" };
    let domains = found
        .into_iter()
        .map(|d| {
            let khz = |f: &str| ctx.parse::<u64>(&format!("{}/{f}", d.dir));
            UncoreDomain {
                package: d.package,
                die: d.die,
                min_khz: khz("min_freq_khz"),
                max_khz: khz("max_freq_khz"),
                initial_min_khz: khz("initial_min_freq_khz"),
                initial_max_khz: khz("initial_max_freq_khz"),
                current_khz: khz("current_freq_khz"),
                command: format!("cat {}/{{min,max}}_freq_khz", d.dir),
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
        assert!(is_tpmi("uncore09") && !is_tpmi("uncore") && !is_tpmi("package_00_die_00"));
    }
}
