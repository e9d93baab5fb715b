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
const MSR_PERSISTS: &str = "boot unit (registers reset at every boot; the unit needs the `msr` module loaded, e.g. by modules-load.d)";
const PEPC_MSR: &str = "pepc `pepclibs/msr/PowerCtl.py`, `PCStateConfigCtl.py`, `HWPRequest.py`, `PMEnable.py` (bits, `sname` scope); arch/x86/include/asm/msr-index.h";

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
        depends_on: "governor first: in active mode the `performance` governor rejects any EPP whose number is not 0 (on Meteor Lake even `performance`, 16)",
        read_back: "a preset's name whenever the value equals that preset's number on this CPU model, else the number; never `default`. The numbers are per model: 0/128/192/255 by default, balance_performance 32 on Sapphire, Emerald and Granite Rapids, 102 on Alder Lake-L, 16/64/179/255 on Meteor Lake-L and Arrow Lake; amd-pstate 0/128/191/255. Names compare with names, numbers with numbers, a name with a number only by that table",
        persists: "boot unit, tmpfiles.d `w`",
        sources: "intel_pstate.rst (Active Mode With HWP; Energy vs Performance Hints); drivers/cpufreq/intel_pstate.c (`epp_values[]`, `intel_epp_default[]`, `intel_pstate_set_energy_pref_index`); amd-pstate.rst (energy_performance_preference); drivers/cpufreq/amd-pstate.c (`epp_values[]`)",
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
        scope: "global (`enabled`, `defrag`), or one page size (`hugepages-<size>kB/enabled`, whose own choice overrides the top level, `never` included)",
        depends_on: "none",
        read_back: "every choice is printed with the current one in brackets",
        persists: "tmpfiles.d `w`, kernel command line (`transparent_hugepage=`, `thp_anon=`); nothing where the kernel boots with the value (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS/MADVISE/NEVER, defrag `madvise`, `inherit` for the PMD size)",
        sources: "Documentation/admin-guide/mm/transhuge.rst (sysfs; boot parameters); mm/Kconfig; mm/huge_memory.c (`transparent_hugepage_flags`)",
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
    KindRules {
        kind: KindName::KernelCmdline,
        scope: "the next boot (every BLS entry and `/etc/kernel/cmdline`, or a GRUB drop-in)",
        depends_on: "GRUB: `update-grub` regenerates `/boot/grub/grub.cfg`",
        read_back: "the whole file; running is `/proc/cmdline`, where the last word of a key counts and `-`/`_` in names are the same",
        persists: "itself (the boot loader's files)",
        sources: "Documentation/admin-guide/kernel-parameters.rst; the Boot Loader Specification (type 1 `options`); kernel-install(8) (`/etc/kernel/cmdline`); GRUB manual, Simple configuration (`GRUB_CMDLINE_LINUX`, `/etc/default/grub.d`)",
    },
    KindRules {
        kind: KindName::WorkqueueCpumask,
        scope: "global (`workqueue/cpumask`, every unbound workqueue), or one `WQ_SYSFS` unbound workqueue (`workqueue/NAME/cpumask`, matched by glob)",
        depends_on: "none; a workqueue's own mask runs intersected with the global one (the global one when that is empty)",
        read_back: "a hex mask in 32-bit words (`ffffffff,ffffffff`), compared as a CPU list; written as the mask of the CPU list. EINVAL: not a mask, or (global) no possible CPU left; EOVERFLOW: a bit past `nr_cpu_ids`. Isolated CPUs (`cpumask_isolated`) are kept when asked for; `cpumask_requested` is what was written",
        persists: "boot unit (re-resolves workqueues by glob), tmpfiles.d `w`",
        sources: "Documentation/core-api/workqueue.rst (Affinity Scopes; unbound cpumask); kernel/workqueue.c (`wq_unbound_cpumask_store`, `workqueue_set_unbound_cpumask`, `wq_cpumask_store`, `wqattrs_actualize_cpumask`); lib/bitmap.c (`bitmap_parse`)",
    },
    KindRules {
        kind: KindName::SystemdCpuAffinity,
        scope: "the system manager (PID 1 and what it forks), or named services",
        depends_on: "PID 1 re-executes (`daemon-reexec`, a boot), or the unit restarts after `daemon-reload`: until then `pending-reboot`",
        read_back: "the configuration as systemd reads it (main file, then drop-ins by name; assignments merge, an empty one resets), and what runs: `Cpus_allowed_list` of PID 1 or the unit's processes, or the unit cgroup's `cpuset.cpus.effective` (AllowedCPUs)",
        persists: "its drop-in (`system.conf.d/hostknob-ID.conf` or `UNIT.d/hostknob-ID.conf`)",
        sources: "systemd-system.conf(5) (CPUAffinity=, drop-in directories); systemd.exec(5) (CPUAffinity=); systemd.resource-control(5) (AllowedCPUs=); systemd.unit(5) (drop-ins)",
    },
    KindRules {
        kind: KindName::IrqAffinity,
        scope: "IRQ (`/proc/irq/N/smp_affinity_list`, chosen by action name or network device), and `/proc/irq/default_smp_affinity`",
        depends_on: "none; managed IRQs and per-CPU interrupts cannot be moved (left out and named)",
        read_back: "`smp_affinity_list` as a CPU list (the mask as written); `effective_affinity_list` reported beside it (one CPU of the mask, moved at the next interrupt on x86); `default_smp_affinity` is a hex mask",
        persists: "boot unit (re-resolves IRQs by name at each boot; numbers change)",
        sources: "Documentation/core-api/irq/irq-affinity.rst; kernel/irq/proc.c (write_irq_affinity: EIO for managed IRQs, no-online-CPU fallback; register_irq_proc: no write bit when `irq_can_set_affinity_usr` is false); kernel-parameters.txt (isolcpus=managed_irq)",
    },
    KindRules {
        kind: KindName::Irqbalance,
        scope: "file (`IRQBALANCE_BANNED_CPULIST` in `/etc/default/irqbalance` or `/etc/sysconfig/irqbalance`, whichever exists)",
        depends_on: "none; irqbalance reads it when it starts (restart it)",
        read_back: "the file's last active assignment as a CPU list (`unset` when none); the whole file is replaced, every other line byte-identical",
        persists: "the file itself (irqbalance reads it at every start)",
        sources: "irqbalance(1) (ENVIRONMENT: IRQBALANCE_BANNED_CPULIST); Debian's debian/irqbalance.default, Fedora's misc/irqbalance.env",
    },
    KindRules {
        kind: KindName::CpufreqMin,
        scope: "cpufreq policy (`scaling_min_freq`)",
        depends_on: "the ceiling: raising the floor above the current ceiling writes `scaling_max_freq` first, lowering the ceiling below the floor writes the floor first; revert in the opposite order",
        read_back: "kHz; within `cpuinfo_min_freq`..`cpuinfo_max_freq` (outside, the kernel clamps, so such values are refused); `base` is `base_frequency` where the driver has it",
        persists: "boot unit, tmpfiles.d `w` (from boot, floor and ceiling are the hardware's, so either order is valid)",
        sources: "Documentation/admin-guide/pm/cpufreq.rst (Policy Interface in sysfs); intel_pstate.rst (base_frequency); amd-pstate.rst",
    },
    KindRules {
        kind: KindName::CpufreqMax,
        scope: "cpufreq policy (`scaling_max_freq`)",
        depends_on: "the floor, as `cpufreq-min` (one apply orders the two by direction)",
        read_back: "kHz, as `cpufreq-min`; with intel_pstate `no_turbo` 1 the CPU stays at or below `base_frequency` whatever the ceiling",
        persists: "boot unit, tmpfiles.d `w`",
        sources: "Documentation/admin-guide/pm/cpufreq.rst (Policy Interface in sysfs); intel_pstate.rst (no_turbo)",
    },
    KindRules {
        kind: KindName::Turbo,
        scope: "global (`intel_pstate/no_turbo`, else `cpufreq/boost`), or a policy's own `boost` for `target.cpus`",
        depends_on: "written before every per-policy write; a policy's `boost` is taken only while the global `boost` is 1",
        read_back: "`on`/`off`: `no_turbo` is inverted (1 = off), `boost` 1 = on",
        persists: "tmpfiles.d `w`",
        sources: "intel_pstate.rst (Global Attributes: no_turbo); cpufreq.rst (Frequency Boost Support); drivers/cpufreq/cpufreq.c (`store_local_boost`)",
    },
    KindRules {
        kind: KindName::Epb,
        scope: "CPU (`cpuN/power/energy_perf_bias`)",
        depends_on: "none",
        read_back: "a number 0-15; the names performance 0, balance-performance 4, normal 6, balance-power 8, power 15 are written as their numbers and compared as numbers",
        persists: "tmpfiles.d `w` (the kernel turns a CPU's 0 into 6 when it first brings it up, before tmpfiles runs)",
        sources: "Documentation/admin-guide/pm/intel_epb.rst; arch/x86/kernel/cpu/intel_epb.c (`intel_epb_restore`)",
    },
    KindRules {
        kind: KindName::UncoreFreq,
        scope: "die (`intel_uncore_frequency/package_XX_die_YY/`), or TPMI power domain (`uncoreNN/`, by `package_id`/`domain_id`; the package directories are then root domains, not written)",
        depends_on: "the other bound of the same directory, ordered as `cpufreq-min`/`cpufreq-max`",
        read_back: "kHz in steps of 100 MHz (other values are refused); within `initial_min_freq_khz`..`initial_max_freq_khz`",
        persists: "tmpfiles.d `w`",
        sources: "Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst; drivers/platform/x86/intel/uncore-frequency/ (`UNCORE_FREQ_KHZ_MULTIPLIER`)",
    },
    KindRules {
        kind: KindName::C1e,
        scope: "package (MSR 0x1FC bit 1: written once per package, read back on each of its CPUs)",
        depends_on: "the `msr` module loaded (never loaded by hostknob), no kernel lockdown, a model in `src/msr/model.rs`",
        read_back: "the field's bits of the register, read on every CPU of the domain: `1` on, `0` off",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::PackageCstateLimit,
        scope: "package (MSR 0xE2 bits 2:0 or 3:0 by model)",
        depends_on: "as `c1e`, and MSR 0xE2 bit 15 (lock) clear",
        read_back: "the field's bits of the register, read on every CPU of the domain, named by the model's codes (`PC6R` is 3 on Sapphire Rapids, `PC10` 8 on clients, 0 `unlimited` on Denverton)",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::C1Demotion,
        scope: "core (MSR 0xE2 bit 26)",
        depends_on: "as `c1e` (the lock bit 15 covers bits 15:0 only)",
        read_back: "the field's bits of the register, read on every CPU of the domain",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::C1Undemotion,
        scope: "core (MSR 0xE2 bit 28)",
        depends_on: "as `c1e` (the lock bit 15 covers bits 15:0 only)",
        read_back: "the field's bits of the register, read on every CPU of the domain",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::HwpMin,
        scope: "CPU (MSR 0x774 bits 7:0)",
        depends_on: "the `msr` module, no lockdown, the `hwp` CPU flag and HWP enabled (MSR 0x770 bit 0)",
        read_back: "the field's bits of the register, read on every CPU of the domain, a performance level 0-255",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::HwpMax,
        scope: "CPU (MSR 0x774 bits 15:8)",
        depends_on: "as `hwp-min`",
        read_back: "the field's bits of the register, read on every CPU of the domain, a performance level 0-255",
        persists: MSR_PERSISTS,
        sources: PEPC_MSR,
    },
    KindRules {
        kind: KindName::Prefetchers,
        scope: "core (MSR 0x1A4, one bit per prefetcher)",
        depends_on: "as `c1e`, and a model whose prefetcher bits the sources name",
        read_back: "the field's bits of the register, read on every CPU of the domain: a set bit disables the prefetcher (`off`)",
        persists: MSR_PERSISTS,
        sources: "pepc `pepclibs/msr/MiscFeatureControl.py`; Intel, Disclosure of Hardware Prefetcher Control on Some Intel Processors; arch/x86/kernel/cpu/resctrl/pseudo_lock.c",
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

/// Floor and ceiling files of one directory (a cpufreq policy, an uncore
/// domain): the kernel keeps floor <= ceiling, so a write that would cross
/// the other bound goes after it ([`super::cpufreq_limit::order_bounds`]).
pub const BOUND_FILES: [(&str, &str); 2] = [
    ("scaling_min_freq", "scaling_max_freq"),
    ("min_freq_khz", "max_freq_khz"),
];

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
