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

pub mod cmdline;
pub mod coalesce;
pub mod irq;
pub mod module;
pub mod rps;
mod table;

pub use table::RULES;
use table::{AMD_PSTATE, INTEL_PSTATE};

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

/// The phase of MSR fields, after every sysfs file.
pub const MSR_PHASE: u8 = 4;

pub fn phase(path: &str) -> u8 {
    if GLOBAL_FIRST.contains(&path) {
        return 0;
    }
    // MSRs last: a sysfs write may make the kernel rewrite one (intel_pstate
    // writes MSR 0x774 on policy and EPP changes), and apply re-reads them at the end.
    if crate::msr::write::parse_path(path).is_some() {
        return MSR_PHASE;
    }
    // Channels create and remove the per-queue files and the queue IRQs.
    if is_channels(path) {
        return 0;
    }
    if is_adaptive(path) {
        return 1;
    }
    match path.rsplit('/').next() {
        Some("scaling_governor") => 1,
        // A scheduler change resets nr_requests and wbt_lat_usec (block/elevator.c).
        Some("scheduler") if path.starts_with("/sys/block/") => 1,
        Some("energy_performance_preference") => 3,
        _ => DEPENDENT_FREE,
    }
}

/// The order to restore writes in: the reverse of how they were made
/// within a phase, but phases forward (the governor goes back before EPP is
/// written under it), so every restoring write meets the state it needs.
/// Channels go back last: the per-queue files are restored while their
/// queues exist, and the queues the channels make again start fresh;
/// adaptive moderation after the fixed coalescing values ([`is_adaptive`]).
pub fn restore_order<'a, T>(items: &mut [T], path: impl Fn(&T) -> &'a str) {
    items.reverse();
    items.sort_by_key(|t| match (is_channels(path(t)), is_adaptive(path(t))) {
        (true, _) => MSR_PHASE + 1,
        (_, true) => DEPENDENT_FREE + 1,
        _ => phase(path(t)),
    });
}

/// `adaptive-rx`/`adaptive-tx`: written before every fixed coalescing value
/// (ice, i40e and iavf refuse one while adaptive is on: [`coalesce`]), and
/// restored after them, so each goes back under the mode it was read in.
pub fn is_adaptive(path: &str) -> bool {
    crate::ethtool::Field::parse(path).is_some_and(|f| {
        f.section == crate::ethtool::Section::Coalesce && f.name.starts_with("adaptive-")
    })
}

/// A `nic-channels` value: it makes and removes queues (`crate::ethtool::queues`).
pub fn is_channels(path: &str) -> bool {
    crate::ethtool::Field::parse(path)
        .is_some_and(|f| f.section == crate::ethtool::Section::Channels)
}

/// Kinds whose targets are queues or IRQs a channel change makes or
/// removes: planned again and written after an apply's channel writes.
pub const PER_QUEUE: [KindName; 3] = [KindName::Rps, KindName::Xps, KindName::IrqAffinity];

/// Floor and ceiling files of one directory (a cpufreq policy, an uncore
/// domain): the kernel keeps floor <= ceiling, so a write that would cross
/// the other bound goes after it ([`super::cpufreq_limit::order_bounds`]).
pub const BOUND_FILES: [(&str, &str); 2] = [
    ("scaling_min_freq", "scaling_max_freq"),
    ("min_freq_khz", "max_freq_khz"),
];

/// Every write through `/dev/cpu/N/msr` taints the kernel until reboot
/// (arch/x86/kernel/msr.c, `msr_write`: `add_taint(TAINT_CPU_OUT_OF_SPEC)`).
pub const MSR_TAINT: &str = "writing an MSR through /dev/cpu/N/msr taints the kernel \
     (TAINT_CPU_OUT_OF_SPEC, `S` in /proc/sys/kernel/tainted) until the next boot \
     (arch/x86/kernel/msr.c, msr_write); bug reports of a tainted kernel may be turned away";

/// intel_idle sets C1E promotion and clears C1 auto-demotion again when it
/// sets up a CPU (drivers/idle/intel_idle.c, `intel_idle_cpu_init`, run at
/// CPU online and resume, when the model's table asks for it).
pub const INTEL_IDLE_REINIT: &str = "intel_idle rewrites this bit when a CPU comes online \
     or the system resumes (drivers/idle/intel_idle.c, intel_idle_cpu_init: C1E promotion \
     per `intel_idle.c1e`/the model's flags, auto-demotion off where the model disables it): \
     a CPU brought online loses the value; audit shows it as drift";

/// The kernel's caveats of `kind`, said in plan, apply and audit.
pub fn kind_caveats(kind: KindName) -> &'static [&'static str] {
    match kind {
        KindName::C1e | KindName::C1Demotion | KindName::C1Undemotion => {
            &[MSR_TAINT, INTEL_IDLE_REINIT]
        }
        KindName::PackageCstateLimit
        | KindName::HwpMin
        | KindName::HwpMax
        | KindName::Prefetchers => &[MSR_TAINT],
        _ => &[],
    }
}

/// The order knobs are planned in, so each plans against the state after the
/// writes of those before it.
pub fn kind_phase(kind: KindName) -> u8 {
    match kind {
        // Channels first: the per-queue kinds plan the queues they leave.
        KindName::Sysfs | KindName::NicChannels => 0,
        KindName::CpufreqGovernor => 1,
        KindName::CpufreqEpp => 3,
        _ => 2,
    }
}

/// The EPP preset names in the kernel's order (`energy_perf_strings[]` after
/// `default`, in intel_pstate.c and amd-pstate.c alike).
pub const EPP_NAMES: [&str; 4] = [
    "performance",
    "balance_performance",
    "balance_power",
    "power",
];

const INTEL_PSTATE_C: &str = "drivers/cpufreq/intel_pstate.c";
const AMD_PSTATE_C: &str = "drivers/cpufreq/amd-pstate.c";

/// One CPU model's EPP numbers in [`EPP_NAMES`] order.
pub struct EppModel {
    /// The kernel's name for the model (arch/x86/include/asm/intel-family.h).
    pub name: &'static str,
    pub family: u32,
    pub model: u32,
    pub values: [u8; 4],
}

/// intel_pstate.c `epp_values[]` (HWP_EPP_PERFORMANCE 0x00, _BALANCE_PERFORMANCE
/// 0x80, _BALANCE_POWERSAVE 0xC0, _POWERSAVE 0xFF in asm/msr-index.h): every
/// model `intel_epp_default[]` does not list.
pub const INTEL_EPP_DEFAULT: [u8; 4] = [0, 128, 192, 255];

/// intel_pstate.c `intel_epp_default[]` (mainline since 6.13; older kernels
/// list fewer models): at init, with HWP, these replace `epp_values[]`, so the
/// names read and write these numbers on that model.
/// `HWP_SET_DEF_BALANCE_PERF_EPP(n)` changes balance_performance only;
/// `HWP_SET_EPP_VALUES(power, balance_power, balance_perf, perf)` all four.
pub const INTEL_EPP_MODELS: &[EppModel] = &[
    EppModel {
        name: "ALDERLAKE_L",
        family: 6,
        model: 0x9A,
        values: [0, 102, 192, 255],
    },
    EppModel {
        name: "SAPPHIRERAPIDS_X",
        family: 6,
        model: 0x8F,
        values: [0, 32, 192, 255],
    },
    EppModel {
        name: "EMERALDRAPIDS_X",
        family: 6,
        model: 0xCF,
        values: [0, 32, 192, 255],
    },
    EppModel {
        name: "GRANITERAPIDS_X",
        family: 6,
        model: 0xAD,
        values: [0, 32, 192, 255],
    },
    EppModel {
        name: "GRANITERAPIDS_D",
        family: 6,
        model: 0xAE,
        values: [0, 32, 192, 255],
    },
    EppModel {
        name: "METEORLAKE_L",
        family: 6,
        model: 0xAA,
        values: [16, 64, 179, 255],
    },
    EppModel {
        name: "ARROWLAKE",
        family: 6,
        model: 0xC6,
        values: [16, 64, 179, 255],
    },
];

/// amd-pstate.c `epp_values[]` (AMD_CPPC_EPP_PERFORMANCE 0x00,
/// _BALANCE_PERFORMANCE 0x80, _BALANCE_POWERSAVE 0xBF, _POWERSAVE 0xFF), the
/// same on every model.
pub const AMD_EPP: [u8; 4] = [0, 128, 191, 255];

/// amd-pstate.c `show_energy_performance_available_preferences`: under the
/// performance policy only `performance` is listed, under any other every
/// string of `energy_perf_strings[]`.
pub const AMD_EPP_AVAILABLE: [&str; 5] = [
    "default",
    "performance",
    "balance_performance",
    "balance_power",
    "power",
];

/// The CPU as `/proc/cpuinfo` names it (its first processor).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
}

impl CpuId {
    /// `vendor_id`, `cpu family` and `model` of the first processor block.
    pub fn parse(cpuinfo: &str) -> Option<CpuId> {
        let (mut vendor, mut family, mut model) = (None, None, None);
        for line in cpuinfo.lines() {
            if line.trim().is_empty() && vendor.is_some() {
                break;
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            match k.trim() {
                "vendor_id" => vendor = Some(v.trim().to_string()),
                "cpu family" => family = v.trim().parse().ok(),
                "model" => model = v.trim().parse().ok(),
                _ => {}
            }
        }
        Some(CpuId {
            vendor: vendor?,
            family: family?,
            model: model?,
        })
    }
}

/// What the preset names stand for with one driver on one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EppPresets {
    pub values: [u8; 4],
    /// Where the numbers come from, for messages.
    pub source: String,
}

impl EppPresets {
    /// The kernel's table for `driver` on `cpu`; `None` when the driver has no
    /// EPP presets or the CPU could not be read (then names are compared with
    /// names and numbers with numbers only).
    pub fn of(driver: &str, cpu: Option<&CpuId>) -> Option<EppPresets> {
        match driver {
            "intel_pstate" | "intel_cpufreq" => {
                let cpu = cpu.filter(|c| c.vendor == "GenuineIntel")?;
                let m = INTEL_EPP_MODELS
                    .iter()
                    .find(|m| m.family == cpu.family && m.model == cpu.model);
                Some(match m {
                    Some(m) => EppPresets {
                        values: m.values,
                        source: format!(
                            "{INTEL_PSTATE_C} intel_epp_default[], {} (family {} model {:#x})",
                            m.name, m.family, m.model
                        ),
                    },
                    None => EppPresets {
                        values: INTEL_EPP_DEFAULT,
                        source: format!(
                            "{INTEL_PSTATE_C} epp_values[] (family {} model {:#x} is not in intel_epp_default[])",
                            cpu.family, cpu.model
                        ),
                    },
                })
            }
            "amd-pstate-epp" => Some(EppPresets {
                values: AMD_EPP,
                source: format!("{AMD_PSTATE_C} epp_values[]"),
            }),
            _ => None,
        }
    }

    /// The number a preset name stands for here.
    pub fn value(&self, name: &str) -> Option<u8> {
        EPP_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| self.values[i])
    }

    /// The name the kernel prints for `n` here, if it prints one.
    pub fn name(&self, n: u8) -> Option<&'static str> {
        self.values
            .iter()
            .position(|v| *v == n)
            .map(|i| EPP_NAMES[i])
    }

    /// `name (n here)` or the value as given.
    pub fn describe(&self, value: &str) -> String {
        match self.value(value.trim()) {
            Some(n) => format!("{value} (= {n} on this CPU)"),
            None => value.to_string(),
        }
    }
}

/// An EPP value as a number, when it is one.
fn epp_number(value: &str) -> Option<u8> {
    value.trim().parse::<u8>().ok()
}

/// The number `value` writes here: itself, or the preset's number on this CPU.
pub fn epp_value(presets: Option<&EppPresets>, value: &str) -> Option<u8> {
    epp_number(value).or_else(|| presets?.value(value.trim()))
}

/// Whether two EPP values are the same setting: names compare with names,
/// numbers with numbers, and a name equals a number only where the kernel's
/// table for this CPU says so (`32` is `balance_performance` on Sapphire
/// Rapids, `128` is not).
pub fn epp_same(presets: Option<&EppPresets>, a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    match (epp_number(a), epp_number(b)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a == b,
        (Some(n), None) => presets.and_then(|p| p.value(b)) == Some(n),
        (None, Some(n)) => presets.and_then(|p| p.value(a)) == Some(n),
    }
}

/// Why the driver refuses writing `epp` under `governor`, if it does. Both
/// drivers compare the number the write stands for with 0:
/// `if (epp > 0 && policy == CPUFREQ_POLICY_PERFORMANCE) return -EBUSY;`
/// (intel_pstate.c `intel_pstate_set_energy_pref_index`, amd-pstate.c
/// `amd_pstate_set_energy_pref_index`; intel_pstate.rst, Active Mode With
/// HWP), so where `performance` is not 0 (Meteor Lake: 16) even it is refused.
pub fn epp_refused(
    driver: &str,
    active: bool,
    governor: &str,
    epp: &str,
    presets: Option<&EppPresets>,
) -> Option<String> {
    let pins = match driver {
        "intel_pstate" => active,
        "amd-pstate-epp" => true,
        _ => false,
    };
    if !pins || governor != "performance" {
        return None;
    }
    let doc = if driver == "intel_pstate" {
        INTEL_PSTATE
    } else {
        AMD_PSTATE
    };
    let refused = match epp_value(presets, epp) {
        Some(n) => n > 0,
        // An unknown CPU: only `performance` may be 0.
        None => epp.trim() != "performance",
    };
    refused.then(|| {
        let number = match (epp_number(epp), presets.and_then(|p| p.value(epp.trim()))) {
            (None, Some(n)) => format!(
                " ({epp} is {n} on this CPU: {})",
                presets.map(|p| p.source.as_str()).unwrap_or("")
            ),
            _ => String::new(),
        };
        format!(
            "{driver} in active mode rejects EPP {epp} while the governor is performance{number}: \
             it takes only 0 there (EBUSY otherwise; {doc}, Active Mode With HWP): set the \
             governor to powersave first (one apply with both knobs writes the governor, then EPP)"
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
    fn epp_presets_are_their_numbers_per_model() {
        let intel = |model| CpuId {
            vendor: "GenuineIntel".into(),
            family: 6,
            model,
        };
        let spr = EppPresets::of("intel_pstate", Some(&intel(0x8F)));
        let tgl = EppPresets::of("intel_pstate", Some(&intel(0x8C)));
        let mtl = EppPresets::of("intel_pstate", Some(&intel(0xAA)));
        let amd = EppPresets::of("amd-pstate-epp", None);
        assert!(epp_same(tgl.as_ref(), "128", "balance_performance"));
        assert!(!epp_same(spr.as_ref(), "128", "balance_performance"));
        assert!(epp_same(spr.as_ref(), "32", "balance_performance"));
        assert!(epp_same(amd.as_ref(), "191", "balance_power"));
        assert!(!epp_same(None, "128", "balance_performance"));
        assert!(epp_same(None, "0128", "128"));
        assert!(!epp_same(tgl.as_ref(), "127", "balance_performance"));
        assert_eq!(
            spr.as_ref().and_then(|p| p.name(32)),
            Some("balance_performance")
        );
        assert_eq!(spr.as_ref().and_then(|p| p.name(128)), None);
        let refused = |p: &Option<EppPresets>, gov, v| {
            epp_refused("intel_pstate", true, gov, v, p.as_ref()).is_some()
        };
        assert!(refused(&tgl, "performance", "128"));
        assert!(!refused(&tgl, "performance", "0"));
        assert!(!refused(&tgl, "performance", "performance"));
        assert!(refused(&mtl, "performance", "performance"));
        assert!(!refused(&mtl, "performance", "0"));
        assert!(!refused(&tgl, "powersave", "power"));
        assert!(epp_refused("intel_cpufreq", false, "performance", "power", None).is_none());
    }

    #[test]
    fn cpuinfo_names_the_first_processor() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: X\n\nprocessor\t: 1\nmodel\t\t: 1\n";
        assert_eq!(
            CpuId::parse(text),
            Some(CpuId {
                vendor: "GenuineIntel".into(),
                family: 6,
                model: 143
            })
        );
        assert_eq!(CpuId::parse("processor : 0\n"), None);
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
        let docs = include_str!("../../../docs/knob-kinds.md");
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
