//! Which Intel CPU models have which MSR bits, as data.
//!
//! Sources (cited per table below):
//! - pepc (github.com/intel/pepc, commit 5be60112): `pepclibs/msr/PCStateConfigCtl.py`
//!   (package C-state limit codes and bit ranges per model, lock bit 15, C1
//!   demotion/undemotion bits 26/28), `PowerCtl.py` (C1E bit 1),
//!   `EnergyPerfBias.py` (bits 3:0, `epb` CPU flag), `PMEnable.py` (HWP bit 0,
//!   `hwp` CPU flag), `HWPRequest.py` (min bits 7:0, max bits 15:8, package
//!   control bit 42), `CPUModels.py` (family/model numbers).
//! - Linux `arch/x86/include/asm/msr-index.h` (register addresses) and
//!   `arch/x86/kernel/cpu/resctrl/pseudo_lock.c` (`get_prefetch_disable_bits`:
//!   MSR 0x1A4 bits 0-3 on Broadwell-X, bits 0 and 2 on Goldmont).
//! - pepc `pepclibs/msr/MiscFeatureControl.py` at aea860c3 (the last commit
//!   with the file; removed in 53688904): 0x1A4 bits 0-3 on big cores from
//!   Westmere to Granite Rapids, bits 1 (L2) and 0 (DCU) on Xeon Phi.
//! - Intel, "Disclosure of Hardware Prefetcher Control on Some Intel Processors"
//!   (MSR 0x1A4 bits 0-3 on Nehalem and later big cores; bits 0-1 on Xeon Phi).

/// Register addresses (msr-index.h names).
pub const MSR_PKG_CST_CONFIG_CONTROL: u32 = 0xe2;
pub const MSR_MISC_FEATURE_CONTROL: u32 = 0x1a4;
pub const MSR_IA32_ENERGY_PERF_BIAS: u32 = 0x1b0;
pub const MSR_IA32_POWER_CTL: u32 = 0x1fc;
pub const MSR_IA32_PM_ENABLE: u32 = 0x770;
pub const MSR_IA32_HWP_CAPABILITIES: u32 = 0x771;
pub const MSR_IA32_HWP_REQUEST: u32 = 0x774;

/// Every register the inventory reads, in address order (what `capture` records).
pub const INVENTORY_REGISTERS: [u32; 6] = [
    MSR_PKG_CST_CONFIG_CONTROL,
    MSR_MISC_FEATURE_CONTROL,
    MSR_IA32_ENERGY_PERF_BIAS,
    MSR_IA32_POWER_CTL,
    MSR_IA32_PM_ENABLE,
    MSR_IA32_HWP_REQUEST,
];

/// Bits `lo..=hi` of `value`.
pub fn bits(value: u64, hi: u32, lo: u32) -> u64 {
    let width = hi - lo + 1;
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    (value >> lo) & mask
}

/// Package C-state limit encodings of MSR 0xE2 (pepc `_*_PKG_CST_LIMITS`).
#[derive(Debug, PartialEq, Eq)]
pub struct PkgLimits {
    /// The highest bit of the limit field (it starts at bit 0).
    pub hi_bit: u32,
    /// `(code, name)`; a code not listed has no documented name for the model.
    pub codes: &'static [(u64, &'static str)],
}

/// Ice Lake, Granite Rapids, Sierra Forest, Clearwater Forest Xeons.
pub const ICX_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 2,
    codes: &[(0, "PC0"), (1, "PC2"), (2, "PC6"), (7, "unlimited")],
};
/// Emerald/Sapphire Rapids, Cooper/Cascade/Sky Lake Xeons, Knights Mill/Landing.
pub const SKX_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 2,
    codes: &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC6"),
        (3, "PC6R"),
        (7, "unlimited"),
    ],
};
/// Broadwell-D and Broadwell-G.
pub const BDWD_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 3,
    codes: &[(0, "PC0"), (1, "PC2"), (2, "PC3"), (3, "PC6")],
};
/// Broadwell and Haswell Xeons.
pub const HSX_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 2,
    codes: &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC3"),
        (3, "PC6"),
        (7, "unlimited"),
    ],
};
/// Ivy Bridge Xeon (Ivy Town).
pub const IVT_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 2,
    codes: &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC6"),
        (3, "PC6R"),
        (7, "unlimited"),
    ],
};
/// Denverton (Goldmont-D): 0 means unlimited here.
pub const DNV_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 3,
    codes: &[(0, "unlimited"), (2, "PC2"), (3, "PC6")],
};
/// Lunar Lake, Panther Lake.
pub const LNL_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 3,
    codes: &[(0, "PC0"), (1, "PC2"), (3, "PC6"), (8, "PC10")],
};
/// Clients from Haswell-ULT to Arrow Lake.
pub const PC8_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 3,
    codes: &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC3"),
        (3, "PC6"),
        (4, "PC7"),
        (5, "PC7S"),
        (6, "PC8"),
        (7, "PC9"),
        (8, "PC10"),
    ],
};
/// Haswell desktop and Haswell-G.
pub const PC7S_LIMITS: PkgLimits = PkgLimits {
    hi_bit: 3,
    codes: &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC3"),
        (3, "PC6"),
        (4, "PC7"),
        (5, "PC7S"),
    ],
};

/// Names of MSR 0x1A4's disable bits, `(bit, prefetcher)`.
pub type Prefetchers = &'static [(u32, &'static str)];

/// Big cores (Intel's disclosure; the kernel's resctrl uses all four on
/// Broadwell-X): given to Xeons from Ivy Bridge on and to Haswell and
/// Broadwell clients; later clients are left unnamed (no source checked).
pub const CORE_PREFETCHERS: Prefetchers = &[
    (0, "L2 hardware (streamer)"),
    (1, "L2 adjacent cache line"),
    (2, "DCU hardware (next line)"),
    (3, "DCU IP"),
];
/// Xeon Phi (Intel's disclosure, bits 0-1).
pub const PHI_PREFETCHERS: Prefetchers = &[(0, "DCU hardware"), (1, "L2 hardware")];

/// One CPU model: family 6 model number, pepc's name, what it has.
#[derive(Debug)]
pub struct Model {
    pub family: u32,
    pub model: u32,
    pub name: &'static str,
    pub pkg_limits: &'static PkgLimits,
    /// `None`: 0x1A4's bits are not named for this model in the sources above.
    pub prefetchers: Option<Prefetchers>,
}

const fn m(
    model: u32,
    name: &'static str,
    pkg_limits: &'static PkgLimits,
    prefetchers: Option<Prefetchers>,
) -> Model {
    Model {
        family: 6,
        model,
        name,
        pkg_limits,
        prefetchers,
    }
}

const CORE: Option<Prefetchers> = Some(CORE_PREFETCHERS);

/// pepc's `_PKG_CST_LIMITS` (family 6 models), with the prefetcher names.
pub const MODELS: &[Model] = &[
    // Xeons.
    m(0xdd, "ATOM_DARKMONT_X", &ICX_LIMITS, None),
    m(0xaf, "ATOM_CRESTMONT_X", &ICX_LIMITS, None),
    m(0xad, "GRANITERAPIDS_X", &ICX_LIMITS, CORE),
    m(0xae, "GRANITERAPIDS_D", &ICX_LIMITS, CORE),
    m(0xcf, "EMERALDRAPIDS_X", &SKX_LIMITS, CORE),
    m(0x8f, "SAPPHIRERAPIDS_X", &SKX_LIMITS, CORE),
    m(0x6a, "ICELAKE_X", &ICX_LIMITS, CORE),
    m(0x6c, "ICELAKE_D", &ICX_LIMITS, CORE),
    m(0x55, "SKYLAKE_X", &SKX_LIMITS, CORE),
    m(0x4f, "BROADWELL_X", &HSX_LIMITS, CORE),
    m(0x56, "BROADWELL_D", &BDWD_LIMITS, CORE),
    m(0x47, "BROADWELL_G", &BDWD_LIMITS, CORE),
    m(0x3f, "HASWELL_X", &HSX_LIMITS, CORE),
    m(0x3e, "IVYBRIDGE_X", &IVT_LIMITS, CORE),
    // Xeon Phi.
    m(0x85, "XEON_PHI_KNM", &SKX_LIMITS, Some(PHI_PREFETCHERS)),
    m(0x57, "XEON_PHI_KNL", &SKX_LIMITS, Some(PHI_PREFETCHERS)),
    // Atom micro servers.
    m(0x5f, "ATOM_GOLDMONT_D", &DNV_LIMITS, None),
    // Clients.
    m(0xcc, "PANTHERLAKE_L", &LNL_LIMITS, None),
    m(0xbd, "LUNARLAKE_M", &LNL_LIMITS, None),
    m(0xc5, "ARROWLAKE", &PC8_LIMITS, None),
    m(0xc6, "ARROWLAKE_H", &PC8_LIMITS, None),
    m(0xb5, "ARROWLAKE_U", &PC8_LIMITS, None),
    m(0xaa, "METEORLAKE_L", &PC8_LIMITS, None),
    m(0xac, "METEORLAKE", &PC8_LIMITS, None),
    m(0xb7, "RAPTORLAKE", &PC8_LIMITS, None),
    m(0xbf, "RAPTORLAKE_S", &PC8_LIMITS, None),
    m(0xba, "RAPTORLAKE_P", &PC8_LIMITS, None),
    m(0x97, "ALDERLAKE", &PC8_LIMITS, None),
    m(0x9a, "ALDERLAKE_L", &PC8_LIMITS, None),
    m(0xbe, "ALDERLAKE_N", &PC8_LIMITS, None),
    m(0xa7, "ROCKETLAKE", &PC8_LIMITS, None),
    m(0x8d, "TIGERLAKE", &PC8_LIMITS, None),
    m(0x8c, "TIGERLAKE_L", &PC8_LIMITS, None),
    m(0x8a, "LAKEFIELD", &PC8_LIMITS, None),
    m(0xa5, "COMETLAKE", &PC8_LIMITS, None),
    m(0xa6, "COMETLAKE_L", &PC8_LIMITS, None),
    m(0x9e, "KABYLAKE", &PC8_LIMITS, None),
    m(0x8e, "KABYLAKE_L", &PC8_LIMITS, None),
    m(0x7e, "ICELAKE_L", &PC8_LIMITS, None),
    m(0x9d, "ICELAKE_NNPI", &PC8_LIMITS, None),
    m(0x66, "CANNONLAKE_L", &PC8_LIMITS, None),
    m(0x5e, "SKYLAKE", &PC8_LIMITS, None),
    m(0x4e, "SKYLAKE_L", &PC8_LIMITS, None),
    m(0x3d, "BROADWELL", &PC8_LIMITS, CORE),
    m(0x45, "HASWELL_L", &PC8_LIMITS, CORE),
    m(0x3c, "HASWELL", &PC7S_LIMITS, CORE),
    m(0x46, "HASWELL_G", &PC7S_LIMITS, CORE),
];

/// The CPUs a feature affects (pepc's `sname`): a knob covers whole
/// domains. Not the CPUs sharing one copy of the register (`iosname`):
/// every CPU of a domain gets its own write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Core,
    /// The cores sharing an L2 cache (a Xeon Phi tile, an Atom module):
    /// pepc reads it from `cache/index2` (`_CPUInfoBase.py`, `_add_modules`).
    Module,
    /// One die of a package (`topology/die_id`).
    Die,
    Package,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Thread => "CPU",
            Scope::Core => "core",
            Scope::Module => "module",
            Scope::Die => "die",
            Scope::Package => "package",
        }
    }
}

/// pepc `CPUModels.py` (5be60112) `CPU_GROUPS["PHI"]`: Knights Landing and Mill.
const PHI: [u32; 2] = [0x57, 0x85];
/// `CPU_GROUPS` `GOLDMONT` (0x5c, 0x5f, 0x7a) and `TREMONT` (0x96, 0x9c, 0x86).
const GOLDMONT_TREMONT: [u32; 6] = [0x5c, 0x5f, 0x7a, 0x96, 0x9c, 0x86];
/// `CPU_GROUPS` `SILVERMONT` (0x37, 0x4a, 0x5a, 0x4d) and `AIRMONT` (0x4c).
const SILVERMONT_AIRMONT: [u32; 5] = [0x37, 0x4a, 0x5a, 0x4d, 0x4c];
/// `SKYLAKE_X`, which is also Cascade Lake and, with two dies a package, CLX-AP.
const SKYLAKE_X: u32 = 0x55;

/// Scope of C1 demotion/undemotion (MSR 0xE2 bits 26/28): pepc
/// `PCStateConfigCtl.py` (5be60112) takes the register's I/O scope, which is
/// package on Xeon Phi and module on Silvermont/Airmont, core elsewhere
/// (and core on ICX/SPR/EMR, `_CORE_C1D_SCOPE_VFMS`).
pub fn c1_demotion_scope(family: u32, model: u32) -> Scope {
    match family == 6 {
        true if PHI.contains(&model) => Scope::Package,
        true if SILVERMONT_AIRMONT.contains(&model) => Scope::Module,
        _ => Scope::Core,
    }
}

/// Scope of the `l2-hw` prefetcher (MSR 0x1A4): module on Tremont, Xeon Phi
/// and Goldmont, core elsewhere (pepc `MiscFeatureControl.py` at aea860c3,
/// `_MODULE_SCOPE_L2_HW_PREFETCHER`; the file was removed in 53688904).
pub fn l2_hw_prefetcher_scope(family: u32, model: u32) -> Scope {
    match family == 6 && (PHI.contains(&model) || GOLDMONT_TREMONT.contains(&model)) {
        true => Scope::Module,
        false => Scope::Core,
    }
}

/// Scope of the package-scoped features of MSRs 0xE2 (package C-state limit)
/// and 0x1FC (C1E): die on CLX-AP, a SKYLAKE_X model with more than one die
/// in package 0, package elsewhere (pepc `_FeaturedMSR.py` (5be60112),
/// `get_clx_ap_adjusted_msr_scope`, used by `PCStateConfigCtl.py` and `PowerCtl.py`).
pub fn package_scope(family: u32, model: u32, dies_in_package0: usize) -> Scope {
    match family == 6 && model == SKYLAKE_X && dies_in_package0 > 1 {
        true => Scope::Die,
        false => Scope::Package,
    }
}

/// The table's entry for an Intel family/model.
pub fn lookup(family: u32, model: u32) -> Option<&'static Model> {
    MODELS
        .iter()
        .find(|m| m.family == family && m.model == model)
}

impl PkgLimits {
    /// The limit field of an 0xE2 value and its name for the model.
    pub fn decode(&self, value: u64) -> (u64, Option<&'static str>) {
        let code = bits(value, self.hi_bit, 0);
        let name = self.codes.iter().find(|(c, _)| *c == code).map(|(_, n)| *n);
        (code, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_listed_once() {
        for (i, a) in MODELS.iter().enumerate() {
            assert!(
                MODELS[i + 1..]
                    .iter()
                    .all(|b| (a.family, a.model) != (b.family, b.model)),
                "{} listed twice",
                a.name
            );
        }
    }

    #[test]
    fn limits_decode_by_the_models_bits() {
        // spr1's 0xE2: bits 2:0 = 3 (PC6R); bit 3 is not part of the field on SKX.
        assert_eq!(SKX_LIMITS.decode(0x1400_040b), (3, Some("PC6R")));
        // adl0's 0xE2: bits 3:0 = 8 (PC10).
        assert_eq!(PC8_LIMITS.decode(0x7400_0008), (8, Some("PC10")));
        assert_eq!(DNV_LIMITS.decode(0), (0, Some("unlimited")));
        assert_eq!(ICX_LIMITS.decode(3), (3, None));
        assert_eq!(bits(u64::MAX, 63, 0), u64::MAX);
    }
}
