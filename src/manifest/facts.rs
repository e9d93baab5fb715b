//! The host facts a `verified` ledger entry depends on: a later audit
//! compares them with the host as it is now (evidence that expires), and
//! finds verified entries of the same hardware class on other hosts.

use serde::{Deserialize, Serialize};

use crate::root::Root;

/// What a verify result depends on, as read when it ran. Every field may be
/// absent (a tree without the file); absent facts are never called changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Facts {
    /// `/proc/sys/kernel/osrelease`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `/proc/cpuinfo`'s `microcode` (CPU 0's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microcode: Option<String>,
    /// `vendor_id` (`GenuineIntel`), or the ARM implementer code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// `family/model` in decimal (`6/143`), or the ARM part code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// `model name`, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model_name: Option<String>,
    /// CPU 0's `stepping` (a new stepping can change errata and C-states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_stepping: Option<String>,
    /// `/sys/class/dmi/id/bios_version` and `bios_date`: firmware sets
    /// C-state, HWP and power limits below the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios_date: Option<String>,
    /// The latency-relevant words of `/proc/cmdline` ([`CMDLINE_WORDS`]), in
    /// order, space-separated ("" when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_driver: Option<String>,
    /// `current_governor` (or `current_governor_ro`) beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_governor: Option<String>,
    /// CPU 0's `cpufreq/scaling_driver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_driver: Option<String>,
    /// The hostknob that measured (recorded, not compared: a new hostknob
    /// does not change what a knob does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostknob: Option<String>,
    /// The probe and its options (recorded, not compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_options: Option<serde_json::Value>,
}

/// The compared facts: (name in messages, value).
type Named<'a> = [(&'static str, &'a Option<String>); 11];

/// Kernel parameters that change idle, frequency or interrupt behaviour (and
/// so latency): `intel_idle.max_cstate` and `processor.max_cstate` cap
/// C-states (drivers/idle/intel_idle.c, drivers/acpi/processor_idle.c),
/// `idle=` replaces the idle loop, `intel_pstate=` the frequency driver's
/// mode, `isolcpus`/`nohz_full` take CPUs from the scheduler and the tick,
/// `mitigations=` changes every kernel entry's cost
/// (Documentation/admin-guide/kernel-parameters.txt).
pub const CMDLINE_WORDS: [&str; 7] = [
    "intel_idle.max_cstate",
    "idle",
    "intel_pstate",
    "processor.max_cstate",
    "isolcpus",
    "nohz_full",
    "mitigations",
];

/// The words of a kernel command line whose parameter is in [`CMDLINE_WORDS`].
pub fn latency_words(cmdline: &str) -> String {
    cmdline
        .split_whitespace()
        .filter(|w| CMDLINE_WORDS.contains(&w.split('=').next().unwrap_or(w)))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Facts {
    /// The host's facts now (`probe` and its options are the caller's).
    pub fn of(root: &Root) -> Facts {
        // The facts `when:` reads too, read the same way (one reader of each).
        let host = crate::inventory::facts::Facts::new(root);
        let fact = |name: &str| {
            host.get(name)
                .known_text()
                .filter(|t| !t.is_empty() && t.len() <= 256)
        };
        let cpuinfo = root
            .read_string("/proc/cpuinfo")
            .map(|t| crate::inventory::cpuinfo::parse_all(&t))
            .unwrap_or_default();
        let first = cpuinfo
            .entries
            .first()
            .map(|e| e.or_common(&cpuinfo.machine.common))
            .unwrap_or_else(|| cpuinfo.machine.common.clone());
        let dmi = |f: &str| {
            root.read_trimmed(&format!("/sys/class/dmi/id/{f}"))
                .ok()
                .flatten()
                .filter(|t| !t.is_empty() && t.len() <= 256)
        };
        let cpu_model = match (first.family, first.model) {
            (Some(f), Some(m)) => Some(format!("{f}/{m}")),
            _ => first.arm_part.clone(),
        };
        Facts {
            kernel: fact("kernel"),
            microcode: first.microcode.clone(),
            vendor: first.vendor_id.clone().or(first.arm_implementer.clone()),
            cpu_model,
            cpu_model_name: first.model_name.clone(),
            cpu_stepping: first.stepping.map(|s| s.to_string()),
            bios_version: dmi("bios_version"),
            bios_date: dmi("bios_date"),
            cmdline: root
                .read_string("/proc/cmdline")
                .ok()
                .map(|t| latency_words(&t)),
            idle_driver: fact("idle_driver"),
            idle_governor: fact("idle_governor"),
            cpufreq_driver: fact("cpufreq_driver"),
            hostknob: Some(env!("CARGO_PKG_VERSION").to_string()),
            probe: None,
            probe_options: None,
        }
    }

    fn compared(&self) -> Named<'_> {
        [
            ("kernel", &self.kernel),
            ("microcode", &self.microcode),
            ("CPU vendor", &self.vendor),
            ("CPU model", &self.cpu_model),
            ("CPU stepping", &self.cpu_stepping),
            ("BIOS version", &self.bios_version),
            ("BIOS date", &self.bios_date),
            ("kernel command line", &self.cmdline),
            ("idle driver", &self.idle_driver),
            ("idle governor", &self.idle_governor),
            ("cpufreq driver", &self.cpufreq_driver),
        ]
    }

    /// What changed from `self` (then) to `now`, in words
    /// (`kernel 6.1.0 -> 6.18.44`); a fact either side lacks is not a change.
    pub fn changes(&self, now: &Facts) -> Vec<String> {
        self.compared()
            .iter()
            .zip(now.compared())
            .filter_map(|((name, then), (_, now))| match (then, now) {
                (Some(a), Some(b)) if a != b => {
                    let or = |t: &str| {
                        if t.is_empty() {
                            "(none)".to_string()
                        } else {
                            t.to_string()
                        }
                    };
                    Some(format!("{name} {} -> {}", or(a), or(b)))
                }
                _ => None,
            })
            .collect()
    }

    /// The hardware class (vendor, model, idle driver), when all are known.
    pub fn class(&self) -> Option<(&str, &str, &str)> {
        Some((
            self.vendor.as_deref()?,
            self.cpu_model.as_deref()?,
            self.idle_driver.as_deref()?,
        ))
    }

    /// The class in words: `GenuineIntel 6/143 (Intel(R) Xeon(R) ...), intel_idle`.
    pub fn describe_class(&self) -> String {
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        format!(
            "{} {}{}, idle driver {}",
            or(&self.vendor),
            or(&self.cpu_model),
            self.cpu_model_name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            self.idle_driver.as_deref().unwrap_or("none")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_what_differs_and_skip_what_is_unknown() {
        let then = Facts {
            kernel: Some("6.1.0".into()),
            microcode: Some("0x2b000590".into()),
            idle_driver: Some("intel_idle".into()),
            ..Facts::default()
        };
        let now = Facts {
            kernel: Some("6.18.44".into()),
            microcode: None,
            idle_driver: Some("intel_idle".into()),
            hostknob: Some("9.9.9".into()),
            ..Facts::default()
        };
        assert_eq!(then.changes(&now), vec!["kernel 6.1.0 -> 6.18.44"]);
        assert!(then.changes(&then).is_empty());
        assert_eq!(then.class(), None);
    }

    #[test]
    fn bios_stepping_and_the_latency_words_of_the_cmdline_date_evidence() {
        let then = Facts {
            bios_version: Some("1.2".into()),
            bios_date: Some("01/02/2025".into()),
            cpu_stepping: Some("6".into()),
            cmdline: Some(latency_words(
                "BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet intel_idle.max_cstate=1 nohz_full=2-3",
            )),
            ..Facts::default()
        };
        assert_eq!(
            then.cmdline.as_deref(),
            Some("intel_idle.max_cstate=1 nohz_full=2-3")
        );
        let now = Facts {
            bios_version: Some("1.3".into()),
            bios_date: Some("01/02/2025".into()),
            cpu_stepping: Some("8".into()),
            cmdline: Some(latency_words("root=/dev/sda1 quiet splash")),
            ..Facts::default()
        };
        assert_eq!(
            then.changes(&now),
            vec![
                "CPU stepping 6 -> 8",
                "BIOS version 1.2 -> 1.3",
                "kernel command line intel_idle.max_cstate=1 nohz_full=2-3 -> (none)",
            ]
        );
        // Words that do not change latency are not a change.
        let quiet = Facts {
            cmdline: Some(latency_words(
                "root=/dev/sdb1 intel_idle.max_cstate=1 nohz_full=2-3",
            )),
            ..then.clone()
        };
        assert!(then.changes(&quiet).is_empty());
        assert_eq!(
            latency_words(
                "idle=poll isolcpus=1 mitigations=off intel_pstate=passive processor.max_cstate=1 idlex=1"
            ),
            "idle=poll isolcpus=1 mitigations=off intel_pstate=passive processor.max_cstate=1"
        );
    }
}
