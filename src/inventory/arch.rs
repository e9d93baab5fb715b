//! CPU identity on every architecture, named the way lscpu names it: ARM
//! implementer and part codes decoded (our own table, after util-linux's
//! `lscpu-arm.c`), POWER's `cpu` line, s390x machine types, RISC-V `uarch`
//! and vendor ids, LoongArch's and ia64's `model name`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cpuinfo::{CpuEntry, CpuInfo};
use crate::cpulist::CpuList;

/// One kind of core on a host that mixes them (ARM big.LITTLE, DynamIQ).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct CoreType {
    pub vendor: Option<String>,
    pub model: String,
    pub cpus: CpuList,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Identity {
    pub architecture: Option<String>,
    pub vendor_id: Option<String>,
    pub model_name: Option<String>,
    /// ARM `rXpY`, POWER `2.1 (pvr 004e 1201)`, ia64 revision.
    pub revision: Option<String>,
    /// POWER/ARMv7/SPARC machine line, s390x machine type.
    pub machine: Option<String>,
    pub isa: Option<String>,
    pub mmu: Option<String>,
    pub core_types: Option<Vec<CoreType>>,
}

/// Which layout `/proc/cpuinfo` has, so which words describe this CPU.
fn architecture(e: &CpuEntry, info: &CpuInfo) -> Option<&'static str> {
    if e.arm_implementer.is_some() {
        let v8 = e
            .arm_architecture
            .as_deref()
            .and_then(|a| a.trim().parse::<u32>().ok())
            .is_some_and(|a| a >= 8);
        return Some(if v8 { "arm64" } else { "arm" });
    }
    if e.machine_type.is_some() || e.vendor_id.as_deref() == Some("IBM/S390") {
        return Some("s390x");
    }
    if e.arch.as_deref() == Some("IA-64") {
        return Some("ia64");
    }
    if e.isa.is_some() {
        return Some("riscv64");
    }
    if let Some(cpu) = &e.cpu_line {
        if e.revision.as_deref().is_some_and(|r| r.contains("pvr")) {
            return Some("powerpc");
        }
        if cpu.contains("Sparc") || cpu.contains("SPARC") {
            return Some("sparc64");
        }
        if cpu.starts_with("PA") {
            return Some("parisc");
        }
    }
    if e.model_name
        .as_deref()
        .is_some_and(|m| m.starts_with("Loongson"))
    {
        return Some("loongarch64");
    }
    if e.vendor_id.is_some() && e.family.is_some() {
        return Some("x86");
    }
    let _ = info;
    None
}

pub fn identify(info: &CpuInfo, online: &CpuList) -> Identity {
    let common = &info.machine.common;
    let entries: Vec<CpuEntry> = if info.entries.is_empty() {
        vec![common.clone()]
    } else {
        info.entries.iter().map(|e| e.or_common(common)).collect()
    };
    let first = &entries[0];
    let arch = architecture(first, info);
    let mut id = Identity {
        architecture: arch.map(str::to_string),
        vendor_id: first.vendor_id.clone(),
        model_name: first.model_name.clone(),
        ..Default::default()
    };
    match arch {
        Some("arm64" | "arm") => {
            let (vendor, model) = arm_names(first);
            id.vendor_id = vendor.or(id.vendor_id);
            id.model_name = model.or(id.model_name);
            id.revision = arm_rxpy(first);
            id.machine = info.machine.machine.clone();
            id.core_types = core_types(&entries, online);
        }
        Some("powerpc") => {
            id.model_name = first.cpu_line.clone();
            id.revision = first.revision.clone();
            id.machine = info.machine.machine.clone().or(info.machine.model.clone());
            // `model: IBM,9179-MHB`: the vendor before the comma.
            id.vendor_id = info
                .machine
                .model
                .as_deref()
                .and_then(|m| m.split_once(','))
                .map(|(v, _)| v.to_string());
        }
        Some("s390x") => {
            id.vendor_id = first.vendor_id.clone();
            id.machine = first.machine_type.clone();
            id.model_name = first.machine_type.as_deref().map(|t| match s390_model(t) {
                Some(name) => format!("IBM {name} ({t})"),
                None => format!("IBM machine type {t}"),
            });
        }
        Some("riscv64") => {
            id.isa = first.isa.clone();
            id.mmu = first.mmu.clone();
            id.model_name = first.uarch.clone().or(id.model_name);
            id.vendor_id = first
                .mvendorid
                .as_deref()
                .map(|v| riscv_vendor(v).map_or_else(|| v.to_string(), str::to_string));
        }
        Some("ia64") => {
            id.revision = first.revision.clone();
            id.model_name = id.model_name.or(first.family_name.clone());
        }
        Some("sparc64" | "parisc") => {
            id.model_name = first.cpu_line.clone();
            id.machine = info.machine.machine.clone();
        }
        Some("loongarch64") => {
            id.vendor_id = id.vendor_id.or(Some("Loongson".into()));
        }
        _ => {}
    }
    id
}

/// Distinct (implementer, part) pairs with their CPUs, when there are several.
fn core_types(entries: &[CpuEntry], online: &CpuList) -> Option<Vec<CoreType>> {
    let mut by_kind: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for e in entries {
        let (Some(cpu), Some(imp), Some(part)) = (e.processor, &e.arm_implementer, &e.arm_part)
        else {
            continue;
        };
        if online.contains(cpu) {
            by_kind
                .entry((imp.clone(), part.clone()))
                .or_default()
                .push(cpu);
        }
    }
    if by_kind.len() < 2 {
        return None;
    }
    let mut v: Vec<CoreType> = by_kind
        .into_iter()
        .map(|((imp, part), cpus)| {
            let probe = CpuEntry {
                arm_implementer: Some(imp),
                arm_part: Some(part.clone()),
                ..Default::default()
            };
            let (vendor, model) = arm_names(&probe);
            CoreType {
                vendor,
                model: model.unwrap_or(format!("part {part}")),
                cpus: CpuList::new(cpus),
            }
        })
        .collect();
    v.sort_by_key(|t| t.cpus.first());
    Some(v)
}

fn hex(text: &str) -> Option<u32> {
    let t = text.trim();
    match t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}

fn arm_names(e: &CpuEntry) -> (Option<String>, Option<String>) {
    let Some(imp) = e.arm_implementer.as_deref().and_then(hex) else {
        return (None, None);
    };
    let Some((vendor, parts)) = ARM_IMPLEMENTERS
        .iter()
        .find(|(id, _, _)| *id == imp)
        .map(|(_, v, p)| (*v, *p))
    else {
        return (Some(format!("implementer {imp:#04x}")), None);
    };
    let part = e.arm_part.as_deref().and_then(hex);
    let model = part.and_then(|p| {
        parts
            .iter()
            .find(|(id, _)| *id == p)
            .map(|(_, n)| n.to_string())
    });
    (Some(vendor.to_string()), model)
}

/// `r<variant>p<revision>`, as ARM's manuals and lscpu write it (ARM Ltd cores).
fn arm_rxpy(e: &CpuEntry) -> Option<String> {
    let variant = hex(e.arm_variant.as_deref()?)?;
    let revision = hex(e.arm_revision.as_deref()?)?;
    Some(format!("r{variant}p{revision}"))
}

fn riscv_vendor(id: &str) -> Option<&'static str> {
    match hex(id)? {
        0x489 => Some("SiFive"),
        0x5b7 => Some("T-Head"),
        0x31e => Some("Andes"),
        0x710 => Some("SpacemiT"),
        0 => Some("(none)"),
        _ => None,
    }
}

fn s390_model(machine_type: &str) -> Option<&'static str> {
    Some(match machine_type {
        "2064" => "z900",
        "2066" => "z800",
        "2084" => "z990",
        "2086" => "z890",
        "2094" => "z9 EC",
        "2096" => "z9 BC",
        "2097" => "z10 EC",
        "2098" => "z10 BC",
        "2817" => "z196",
        "2818" => "z114",
        "2827" => "zEC12",
        "2828" => "zBC12",
        "2964" => "z13",
        "2965" => "z13s",
        "3906" => "z14",
        "3907" => "z14 ZR1",
        "8561" => "z15 T01",
        "8562" => "z15 T02",
        "3931" => "z16 A01",
        "3932" => "z16 A02",
        "9175" => "z17",
        _ => return None,
    })
}

type Parts = &'static [(u32, &'static str)];

const ARM_IMPLEMENTERS: &[(u32, &str, Parts)] = &[
    (0x41, "ARM", ARM_PARTS),
    (
        0x42,
        "Broadcom",
        &[
            (0x00f, "Brahma-B15"),
            (0x100, "Brahma-B53"),
            (0x516, "ThunderX2"),
        ],
    ),
    (
        0x43,
        "Cavium",
        &[
            (0x0a0, "ThunderX"),
            (0x0a1, "ThunderX-88XX"),
            (0x0a2, "ThunderX-81XX"),
            (0x0a3, "ThunderX-83XX"),
            (0x0af, "ThunderX2-99xx"),
            (0x0b0, "OcteonTX2"),
            (0x0b8, "ThunderX3-T110"),
        ],
    ),
    (0x44, "DEC", &[(0xa10, "SA110"), (0xa11, "SA1100")]),
    (0x46, "FUJITSU", &[(0x001, "A64FX"), (0x003, "MONAKA")]),
    (
        0x48,
        "HiSilicon",
        &[(0xd01, "Kunpeng-920"), (0xd40, "Cortex-A76")],
    ),
    (0x49, "Infineon", &[]),
    (0x4d, "Motorola/Freescale", &[]),
    (
        0x4e,
        "NVIDIA",
        &[
            (0x000, "Denver"),
            (0x003, "Denver 2"),
            (0x004, "Carmel"),
            (0x010, "Olympus"),
        ],
    ),
    (0x50, "APM", &[(0x000, "X-Gene")]),
    (
        0x51,
        "Qualcomm",
        &[
            (0x00f, "Scorpion"),
            (0x02d, "Scorpion"),
            (0x04d, "Krait"),
            (0x06f, "Krait"),
            (0x201, "Kryo"),
            (0x205, "Kryo"),
            (0x211, "Kryo"),
            (0x800, "Falkor-V1/Kryo"),
            (0x801, "Kryo-V2"),
            (0x802, "Kryo-3XX-Gold"),
            (0x803, "Kryo-3XX-Silver"),
            (0x804, "Kryo-4XX-Gold"),
            (0x805, "Kryo-4XX-Silver"),
            (0xc00, "Falkor"),
            (0xc01, "Saphira"),
        ],
    ),
    (
        0x53,
        "Samsung",
        &[
            (0x001, "exynos-m1"),
            (0x002, "exynos-m3"),
            (0x003, "exynos-m4"),
            (0x004, "exynos-m5"),
        ],
    ),
    (
        0x56,
        "Marvell",
        &[
            (0x131, "Feroceon-88FR131"),
            (0x581, "PJ4/PJ4b"),
            (0x584, "PJ4B-MP"),
        ],
    ),
    (
        0x61,
        "Apple",
        &[
            (0x020, "Icestorm-A14"),
            (0x021, "Firestorm-A14"),
            (0x022, "Icestorm-M1"),
            (0x023, "Firestorm-M1"),
            (0x024, "Icestorm-M1-Pro"),
            (0x025, "Firestorm-M1-Pro"),
            (0x028, "Icestorm-M1-Max"),
            (0x029, "Firestorm-M1-Max"),
            (0x030, "Blizzard-A15"),
            (0x031, "Avalanche-A15"),
            (0x032, "Blizzard-M2"),
            (0x033, "Avalanche-M2"),
        ],
    ),
    (0x66, "Faraday", &[(0x526, "FA526"), (0x626, "FA626")]),
    (
        0x69,
        "Intel",
        &[
            (0x200, "i80200"),
            (0x411, "PXA27x"),
            (0x682, "PXA32x"),
            (0xb11, "SA1110"),
        ],
    ),
    (0x6d, "Microsoft", &[(0xd49, "Azure-Cobalt-100")]),
    (
        0x70,
        "Phytium",
        &[
            (0x660, "FTC660"),
            (0x661, "FTC661"),
            (0x662, "FTC662"),
            (0x663, "FTC663"),
        ],
    ),
    (0xc0, "Ampere", &[(0xac3, "Ampere-1"), (0xac4, "Ampere-1a")]),
];

const ARM_PARTS: Parts = &[
    (0x810, "ARM810"),
    (0x920, "ARM920"),
    (0x922, "ARM922"),
    (0x926, "ARM926"),
    (0x940, "ARM940"),
    (0x946, "ARM946"),
    (0x966, "ARM966"),
    (0xa20, "ARM1020"),
    (0xa22, "ARM1022"),
    (0xa26, "ARM1026"),
    (0xb02, "ARM11 MPCore"),
    (0xb36, "ARM1136"),
    (0xb56, "ARM1156"),
    (0xb76, "ARM1176"),
    (0xc05, "Cortex-A5"),
    (0xc07, "Cortex-A7"),
    (0xc08, "Cortex-A8"),
    (0xc09, "Cortex-A9"),
    (0xc0d, "Cortex-A17"),
    (0xc0f, "Cortex-A15"),
    (0xc0e, "Cortex-A17"),
    (0xc14, "Cortex-R4"),
    (0xc15, "Cortex-R5"),
    (0xc17, "Cortex-R7"),
    (0xc18, "Cortex-R8"),
    (0xc20, "Cortex-M0"),
    (0xc21, "Cortex-M1"),
    (0xc23, "Cortex-M3"),
    (0xc24, "Cortex-M4"),
    (0xc27, "Cortex-M7"),
    (0xc60, "Cortex-M0+"),
    (0xd01, "Cortex-A32"),
    (0xd02, "Cortex-A34"),
    (0xd03, "Cortex-A53"),
    (0xd04, "Cortex-A35"),
    (0xd05, "Cortex-A55"),
    (0xd06, "Cortex-A65"),
    (0xd07, "Cortex-A57"),
    (0xd08, "Cortex-A72"),
    (0xd09, "Cortex-A73"),
    (0xd0a, "Cortex-A75"),
    (0xd0b, "Cortex-A76"),
    (0xd0c, "Neoverse-N1"),
    (0xd0d, "Cortex-A77"),
    (0xd0e, "Cortex-A76AE"),
    (0xd13, "Cortex-R52"),
    (0xd15, "Cortex-R82"),
    (0xd20, "Cortex-M23"),
    (0xd21, "Cortex-M33"),
    (0xd40, "Neoverse-V1"),
    (0xd41, "Cortex-A78"),
    (0xd42, "Cortex-A78AE"),
    (0xd43, "Cortex-A65AE"),
    (0xd44, "Cortex-X1"),
    (0xd46, "Cortex-A510"),
    (0xd47, "Cortex-A710"),
    (0xd48, "Cortex-X2"),
    (0xd49, "Neoverse-N2"),
    (0xd4a, "Neoverse-E1"),
    (0xd4b, "Cortex-A78C"),
    (0xd4c, "Cortex-X1C"),
    (0xd4d, "Cortex-A715"),
    (0xd4e, "Cortex-X3"),
    (0xd4f, "Neoverse-V2"),
    (0xd80, "Cortex-A520"),
    (0xd81, "Cortex-A720"),
    (0xd82, "Cortex-X4"),
    (0xd83, "Neoverse-V3AE"),
    (0xd84, "Neoverse-V3"),
    (0xd85, "Cortex-X925"),
    (0xd87, "Cortex-A725"),
    (0xd88, "Cortex-A520AE"),
    (0xd89, "Cortex-A720AE"),
    (0xd8e, "Neoverse-N3"),
    (0xd8f, "Cortex-A320"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::cpuinfo::parse_all;

    #[test]
    fn decodes_arm_codes_and_big_little() {
        let text = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd85\nCPU revision\t: 1\n\n\
                    processor\t: 1\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd87\nCPU revision\t: 1\n\n";
        let id = identify(&parse_all(text), &CpuList::new(vec![0, 1]));
        assert_eq!(id.architecture.as_deref(), Some("arm64"));
        assert_eq!(id.vendor_id.as_deref(), Some("ARM"));
        assert_eq!(id.model_name.as_deref(), Some("Cortex-X925"));
        assert_eq!(id.revision.as_deref(), Some("r0p1"));
        let types = id.core_types.unwrap();
        assert_eq!(types.len(), 2);
        assert_eq!(types[1].model, "Cortex-A725");
        assert_eq!(types[1].cpus, CpuList::new(vec![1]));
    }

    #[test]
    fn armv7_shares_the_codes_after_the_blocks() {
        let text = "Processor\t: ARMv7 Processor rev 1 (v7l)\nprocessor\t: 0\nBogoMIPS\t: 1595.80\n\n\
                    Features\t: swp half\nCPU implementer\t: 0x41\nCPU architecture: 7\nCPU part\t: 0xc09\n\nHardware\t: ST-Ericsson MOP500 platform\n";
        let id = identify(&parse_all(text), &CpuList::new(vec![0]));
        assert_eq!(id.architecture.as_deref(), Some("arm"));
        assert_eq!(id.model_name.as_deref(), Some("Cortex-A9"));
        assert_eq!(id.machine.as_deref(), Some("ST-Ericsson MOP500 platform"));
    }

    #[test]
    fn names_power_s390_riscv() {
        let p = "processor\t: 0\ncpu\t\t: POWER9, altivec supported\nrevision\t: 2.1 (pvr 004e 1201)\n\n\
                 timebase\t: 512000000\nplatform\t: PowerNV\nmodel\t\t: 8335-GTW\nmachine\t\t: PowerNV 8335-GTW\n";
        let id = identify(&parse_all(p), &CpuList::new(vec![0]));
        assert_eq!(id.architecture.as_deref(), Some("powerpc"));
        assert_eq!(id.model_name.as_deref(), Some("POWER9, altivec supported"));
        assert_eq!(id.machine.as_deref(), Some("PowerNV 8335-GTW"));
        let s = "vendor_id       : IBM/S390\n# processors    : 2\nprocessor 0: version = 00,  identification = 279F25,  machine = 2817\n";
        let id = identify(&parse_all(s), &CpuList::new(vec![0]));
        assert_eq!(id.architecture.as_deref(), Some("s390x"));
        assert_eq!(id.vendor_id.as_deref(), Some("IBM/S390"));
        assert_eq!(id.model_name.as_deref(), Some("IBM z196 (2817)"));
        let r = "processor\t: 0\nhart\t\t: 0\nisa\t\t: rv64imafdc_zicsr\nmmu\t\t: sv39\nuarch\t\t: sifive,u74-mc\nmvendorid\t: 0x489\n\n";
        let id = identify(&parse_all(r), &CpuList::new(vec![0]));
        assert_eq!(id.architecture.as_deref(), Some("riscv64"));
        assert_eq!(id.model_name.as_deref(), Some("sifive,u74-mc"));
        assert_eq!(id.vendor_id.as_deref(), Some("SiFive"));
        assert_eq!(id.mmu.as_deref(), Some("sv39"));
    }
}
