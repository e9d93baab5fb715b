//! The kernel's rules per knob kind, as data: what a knob's files act for
//! (scope), which writes must come first (dependencies), how the kernel
//! reads back what was written (normalization) and how the kind persists.
//! Every rule names the document it comes from; `docs/knob-kinds.md` prints
//! [`RULES`] as its table (a test keeps the two identical).

use super::KindName;

/// One kind's rules, in words, each with its source.
pub struct KindRules {
    pub kind: KindName,
    pub scope: &'static str,
    pub depends_on: &'static str,
    pub read_back: &'static str,
    pub persists: &'static str,
    pub sources: &'static str,
}

const INTEL_PSTATE: &str = "Documentation/admin-guide/pm/intel_pstate.rst";
const AMD_PSTATE: &str = "Documentation/admin-guide/pm/amd-pstate.rst";

pub const RULES: &[KindRules] = &[
    KindRules {
        kind: KindName::CpuidleState,
        scope: "CPU (one `stateN/disable` per CPU and state)",
        depends_on: "none",
        read_back: "`disable` reads `0`/`1` (shown as enabled/disabled); states are chosen by name or exit latency, never by index",
        persists: "boot unit (re-resolves states by name/latency), tmpfiles.d `w` (pins an index)",
        sources: "Documentation/ABI/testing/sysfs-devices-system-cpu (`cpuX/cpuidle/stateN/disable`); Documentation/admin-guide/pm/cpuidle.rst",
    },
    KindRules {
        kind: KindName::CpufreqGovernor,
        scope: "cpufreq policy (all CPUs in `related_cpus`)",
        depends_on: "driver mode (`intel_pstate/status`, `amd_pstate/status`) first",
        read_back: "the governor's name",
        persists: "boot unit, tmpfiles.d `w`",
        sources: "Documentation/admin-guide/pm/cpufreq.rst (Policy Interface in sysfs)",
    },
    KindRules {
        kind: KindName::CpufreqEpp,
        scope: "cpufreq policy",
        depends_on: "governor first: in active mode the `performance` governor rejects any EPP but `performance`",
        read_back: "intel_pstate prints a preset's name whenever the value equals it (0 performance, 128 balance_performance, 192 balance_power, 255 power) and never prints `default`",
        persists: "boot unit, tmpfiles.d `w`",
        sources: "intel_pstate.rst (Active Mode With HWP; Energy vs Performance Hints); amd-pstate.rst (energy_performance_preference)",
    },
    KindRules {
        kind: KindName::PmQosResumeLatency,
        scope: "CPU (`cpuN/power/pm_qos_resume_latency_us`)",
        depends_on: "none",
        read_back: "`0` is no constraint, `n/a` means no latency allowed; numbers in µs",
        persists: "tmpfiles.d `w`",
        sources: "Documentation/ABI/testing/sysfs-devices-power (pm_qos_resume_latency_us)",
    },
    KindRules {
        kind: KindName::Thp,
        scope: "global (`enabled`, `defrag`)",
        depends_on: "none",
        read_back: "every choice is printed with the current one in brackets",
        persists: "tmpfiles.d `w`, kernel command line",
        sources: "Documentation/admin-guide/mm/transhuge.rst (sysfs)",
    },
    KindRules {
        kind: KindName::Sysctl,
        scope: "global or per network device",
        depends_on: "none",
        read_back: "runs of white space as one space",
        persists: "sysctl.d (`.`/`/` swap when the first separator is `.`), tmpfiles.d, kernel command line",
        sources: "sysctl.d(5) (Configuration Format)",
    },
    KindRules {
        kind: KindName::Sysfs,
        scope: "file",
        depends_on: "none",
        read_back: "the bracketed choice of a `[a] b` file, else the text",
        persists: "tmpfiles.d `w`, udev",
        sources: "tmpfiles.d(5) (`w`)",
    },
    KindRules {
        kind: KindName::Allocator,
        scope: "a service's environment",
        depends_on: "none",
        read_back: "the effective environment: drop-ins of `service.d/`, the dash prefixes and the unit in name order, `override.conf` among them, then `EnvironmentFile=`",
        persists: "a systemd drop-in that sorts after every other",
        sources: "systemd.unit(5) (drop-in directories); systemd.exec(5) (Environment=, EnvironmentFile=)",
    },
    KindRules {
        kind: KindName::ModuleParam,
        scope: "global (`/sys/module/M/parameters/P`)",
        depends_on: "the module is loaded",
        read_back: "bools read `Y`/`N` (written as y/n/1/0/true/false); `-` and `_` in module names are the same",
        persists: "tmpfiles.d `w`, kernel command line (`module.param=`)",
        sources: "Documentation/admin-guide/kernel-parameters.rst (module parameters, `-`/`_`); include/linux/moduleparam.h (param_set_bool, kstrtobool)",
    },
    KindRules {
        kind: KindName::PmQos,
        scope: "global (`/dev/cpu_dma_latency`)",
        depends_on: "a process keeps the device open",
        read_back: "the aggregate (the smallest request) as a 32-bit binary value",
        persists: "hold unit (`hostknob-hold@KNOB.service`)",
        sources: "Documentation/power/pm_qos_interface.rst (the request lives while the file is open)",
    },
];

/// [`RULES`] as the Markdown table of docs/knob-kinds.md.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| kind | scope | depends on | read back (normalization) | persists by | source |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in RULES {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            r.kind, r.scope, r.depends_on, r.read_back, r.persists, r.sources
        ));
    }
    out
}

/// The rules of one kind.
pub fn of(kind: KindName) -> &'static KindRules {
    RULES
        .iter()
        .find(|r| r.kind == kind)
        .expect("every kind has rules")
}

/// Files whose writes come before every per-policy write: the driver mode
/// changes the driver, the governors on offer and EPP (intel_pstate.rst,
/// Operation Modes; amd-pstate.rst, `status`), boost bounds the frequencies.
const GLOBAL_FIRST: [&str; 4] = [
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/devices/system/cpu/intel_pstate/no_turbo",
    "/sys/devices/system/cpu/intel_pstate/status",
    "/sys/devices/system/cpu/amd_pstate/status",
];

/// When a write must happen relative to others: the driver mode and global
/// boost first; the governor before the energy-performance preference
/// (which `performance` pins, intel_pstate.rst "Active Mode With HWP").
/// Restoring follows the same order: the governor goes back first, so EPP is
/// written under the governor that accepts it.
/// The phase of a write nothing else depends on.
pub const DEPENDENT_FREE: u8 = 2;

pub fn phase(path: &str) -> u8 {
    if GLOBAL_FIRST.contains(&path) {
        return 0;
    }
    match path.rsplit('/').next() {
        Some("scaling_governor") => 1,
        Some("energy_performance_preference") => 3,
        _ => DEPENDENT_FREE,
    }
}

/// The order to restore writes in: the reverse of how they were made
/// within a phase, but phases forward (the governor goes back before EPP is
/// written under it), so every restoring write meets the state it needs.
pub fn restore_order<'a, T>(items: &mut [T], path: impl Fn(&T) -> &'a str) {
    items.reverse();
    items.sort_by_key(|t| phase(path(t)));
}

/// The order knobs are planned in, so each plans against the state after the
/// writes of those before it.
pub fn kind_phase(kind: KindName) -> u8 {
    match kind {
        KindName::Sysfs => 0,
        KindName::CpufreqGovernor => 1,
        KindName::CpufreqEpp => 3,
        _ => 2,
    }
}

/// intel_pstate.rst, "Energy vs Performance Hints": the presets and the EPP
/// values they stand for; reading prints the name whenever the value is one
/// of these. amd-pstate uses the same names.
pub const EPP_PRESETS: [(&str, u8); 4] = [
    ("performance", 0),
    ("balance_performance", 128),
    ("balance_power", 192),
    ("power", 255),
];

/// An EPP value in one form for comparing: the number a preset stands for.
pub fn epp_canonical(value: &str) -> String {
    let v = value.trim();
    EPP_PRESETS
        .iter()
        .find(|(name, _)| *name == v)
        .map(|(_, n)| n.to_string())
        .or_else(|| v.parse::<u8>().ok().map(|n| n.to_string()))
        .unwrap_or_else(|| v.to_string())
}

/// Whether two EPP values are the same setting (`128` is `balance_performance`).
pub fn epp_same(a: &str, b: &str) -> bool {
    epp_canonical(a) == epp_canonical(b)
}

/// Why the driver refuses writing `epp` under `governor`, if it does:
/// intel_pstate.rst, "Active Mode With HWP": with the `performance` policy
/// "any attempts to change the EPP/EPB to a value different from 0
/// (performance) via sysfs ... will be rejected"; amd-pstate-epp (active
/// mode) pins EPP to performance under the performance policy the same way
/// (amd-pstate.rst, `energy_performance_preference`).
pub fn epp_refused(driver: &str, active: bool, governor: &str, epp: &str) -> Option<String> {
    let pins = match driver {
        "intel_pstate" => active,
        "amd-pstate-epp" => true,
        _ => false,
    };
    (pins && governor == "performance" && epp_canonical(epp) != "0").then(|| {
        format!(
            "{driver} in active mode rejects EPP {epp} while the governor is performance \
             ({}, Active Mode With HWP): set the governor to powersave first \
             (one apply with both knobs writes the governor, then EPP)",
            if driver == "intel_pstate" {
                INTEL_PSTATE
            } else {
                AMD_PSTATE
            }
        )
    })
}

/// `default` is accepted for writing but never read back (intel_pstate.rst,
/// "Energy vs Performance Hints": reads print a preset's name or a number),
/// so a knob set to it could never be confirmed or audited.
pub fn epp_default_refused(driver: &str) -> Option<String> {
    matches!(driver, "intel_pstate" | "amd-pstate-epp").then(|| {
        format!(
            "{driver} accepts `default` but never reads it back (it prints the preset or \
             number the power-on default is): set that preset or number instead"
        )
    })
}

/// kernel-parameters.rst: "dashes and underscores are interchangeable" in
/// parameter and module names; `/sys/module` uses underscores.
pub fn module_dir_name(module: &str) -> String {
    module.replace('-', "_")
}

/// moduleparam.h `param_set_bool` (kstrtobool): the words a bool parameter
/// takes, and `Y`/`N`, what it prints. `None`: not a bool word.
pub fn param_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "1" | "true" | "on" => Some(true),
        "n" | "no" | "0" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// sysctl.d(5), Configuration Format: "If the first separator is a slash,
/// remaining slashes and dots are left intact. If the first separator is a
/// dot, dots and slashes are interchanged." Returns the /proc/sys path's
/// components joined by `/`.
pub fn sysctl_key_path(key: &str) -> String {
    match key.find(['.', '/']) {
        Some(i) if key.as_bytes()[i] == b'.' => key
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_names_swap_as_sysctl_d_says() {
        assert_eq!(
            sysctl_key_path("net.ipv4.conf.eth0/100.rp_filter"),
            "net/ipv4/conf/eth0.100/rp_filter"
        );
        assert_eq!(
            sysctl_key_path("net/ipv4/conf/eth0.100/rp_filter"),
            "net/ipv4/conf/eth0.100/rp_filter"
        );
        assert_eq!(sysctl_key_path("vm.swappiness"), "vm/swappiness");
    }

    #[test]
    fn epp_presets_are_their_numbers() {
        assert!(epp_same("128", "balance_performance"));
        assert!(epp_same("performance", "0"));
        assert!(!epp_same("127", "balance_performance"));
        assert!(epp_refused("intel_pstate", true, "performance", "128").is_some());
        assert!(epp_refused("intel_pstate", true, "performance", "0").is_none());
        assert!(epp_refused("intel_pstate", true, "powersave", "power").is_none());
        assert!(epp_refused("intel_cpufreq", false, "performance", "power").is_none());
    }

    #[test]
    fn dependencies_order_the_phases() {
        let gov = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor";
        let epp = "/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference";
        let boost = "/sys/devices/system/cpu/cpufreq/policy0/boost";
        let global = "/sys/devices/system/cpu/cpufreq/boost";
        let idle = "/sys/devices/system/cpu/cpu0/cpuidle/state3/disable";
        assert!(phase(global) < phase(boost));
        assert!(phase(gov) < phase(epp));
        assert!(phase(global) < phase(gov));
        assert_eq!(phase(idle), phase(boost));
        assert_eq!(
            phase("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
            phase(gov)
        );
        assert!(kind_phase(KindName::CpufreqGovernor) < kind_phase(KindName::CpufreqEpp));
    }

    #[test]
    fn the_docs_table_is_the_rules() {
        let docs = include_str!("../../docs/knob-kinds.md");
        let table = markdown_table();
        assert!(docs.contains(&table), "docs/knob-kinds.md lacks:\n{table}");
        assert_eq!(RULES.len(), KindName::ALL.len());
    }

    #[test]
    fn bools_and_module_names() {
        assert_eq!(param_bool("Y"), Some(true));
        assert_eq!(param_bool("true"), Some(true));
        assert_eq!(param_bool("N"), Some(false));
        assert_eq!(param_bool("2"), None);
        assert_eq!(module_dir_name("nvme-core"), "nvme_core");
    }
}
