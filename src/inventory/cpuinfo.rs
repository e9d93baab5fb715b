//! `/proc/cpuinfo`, reduced to the fields inventory uses. A 512-CPU file is a
//! megabyte; keeping only these fields makes parsing it ~1 ms, not ~5.
//!
//! Every architecture writes it differently: x86 and ia64 per-CPU blocks with
//! vendor and model names, ARM `CPU implementer`/`CPU part` codes, POWER a
//! `cpu` line plus machine-wide `platform`/`machine` lines at the end, s390x
//! `processor N: ... machine = NNNN` lines, RISC-V `isa`/`mmu`/`uarch`,
//! LoongArch `Model Name`, SPARC a single machine-wide block.

#[derive(Debug, Default, Clone, PartialEq)]
pub struct CpuEntry {
    pub processor: Option<u32>,
    pub vendor_id: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    pub microcode: Option<String>,
    pub physical_id: Option<u32>,
    pub core_id: Option<u32>,
    pub hypervisor_flag: Option<bool>,
    /// ARM `CPU implementer`, `CPU part`, `CPU variant`, `CPU revision` (hex or decimal text).
    pub arm_implementer: Option<String>,
    pub arm_part: Option<String>,
    pub arm_variant: Option<String>,
    pub arm_revision: Option<String>,
    pub arm_architecture: Option<String>,
    /// POWER's `cpu` line (`POWER9, altivec supported`), SPARC's too.
    pub cpu_line: Option<String>,
    /// POWER's and ia64's `revision` text (`2.1 (pvr 004e 1201)`).
    pub revision: Option<String>,
    /// s390x's machine type (`machine = 2964`).
    pub machine_type: Option<String>,
    /// RISC-V.
    pub isa: Option<String>,
    pub mmu: Option<String>,
    pub uarch: Option<String>,
    pub mvendorid: Option<String>,
    pub marchid: Option<String>,
    /// ia64's `arch` (IA-64).
    pub arch: Option<String>,
    /// `family` when it is a name (ia64's `Itanium 2`), not a number.
    pub family_name: Option<String>,
}

/// Lines outside the per-CPU blocks (POWER's trailer, ARMv7's shared
/// `CPU implementer` and `Hardware`, s390x's header, SPARC's whole file).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Machine {
    /// Per-CPU fields written once for all CPUs.
    pub common: CpuEntry,
    /// POWER `machine`, ARM `Hardware`, SPARC `type`.
    pub machine: Option<String>,
    pub platform: Option<String>,
    pub model: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct CpuInfo {
    pub entries: Vec<CpuEntry>,
    pub machine: Machine,
}

/// Entries in file order; each starts at a `processor` line.
#[cfg(test)]
pub fn parse(text: &str) -> Vec<CpuEntry> {
    parse_all(text).entries
}

pub fn parse_all(text: &str) -> CpuInfo {
    let mut out: Vec<CpuEntry> = Vec::new();
    let mut machine = Machine::default();
    // After a blank line following a block, lines are machine-wide (POWER, ARMv7).
    let mut in_block = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            in_block = false;
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "processor" {
            out.push(CpuEntry {
                processor: value.parse().ok(),
                ..Default::default()
            });
            in_block = true;
            continue;
        }
        // s390x: `processor 3: version = 00,  identification = 279F25,  machine = 2817`
        if let Some(n) = key.strip_prefix("processor ")
            && let Ok(n) = n.trim().parse::<u32>()
        {
            let machine_type = value
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| k.trim() == "machine")
                .map(|(_, v)| v.trim().to_string());
            out.push(CpuEntry {
                processor: Some(n),
                machine_type,
                ..Default::default()
            });
            in_block = false;
            continue;
        }
        let lower = key.to_ascii_lowercase();
        match out.last_mut() {
            Some(e) if in_block => set_field(e, &lower, value),
            _ => {
                let v = Some(value.to_string());
                match lower.as_str() {
                    "machine" | "hardware" | "type" => machine.machine = v,
                    "platform" => machine.platform = v,
                    "model" => machine.model = v,
                    _ => {}
                }
                set_field(&mut machine.common, &lower, value);
            }
        }
    }
    CpuInfo {
        entries: out,
        machine,
    }
}

fn set_field(e: &mut CpuEntry, lower_key: &str, value: &str) {
    let num = || value.parse::<u32>().ok();
    let text = || Some(value.to_string());
    match lower_key {
        "vendor_id" | "vendor" => e.vendor_id = text(),
        "model name" => e.model_name = text(),
        "cpu family" | "family" => {
            e.family = num();
            if e.family.is_none() {
                e.family_name = text();
            }
        }
        "model" => e.model = num(),
        "stepping" => e.stepping = num(),
        "microcode" => e.microcode = text(),
        "physical id" => e.physical_id = num(),
        "core id" => e.core_id = num(),
        "flags" => e.hypervisor_flag = Some(value.split_whitespace().any(|f| f == "hypervisor")),
        "cpu implementer" => e.arm_implementer = text(),
        "cpu part" => e.arm_part = text(),
        "cpu variant" => e.arm_variant = text(),
        "cpu revision" => e.arm_revision = text(),
        "cpu architecture" => e.arm_architecture = text(),
        "cpu" => e.cpu_line = text(),
        "revision" => e.revision = text(),
        "isa" => e.isa = text(),
        "mmu" => e.mmu = text(),
        "uarch" => e.uarch = text(),
        "mvendorid" => e.mvendorid = text(),
        "marchid" => e.marchid = text(),
        "arch" => e.arch = text(),
        _ => {}
    }
}

impl CpuEntry {
    /// Fills what this block lacks from the machine-wide lines.
    pub fn or_common(&self, c: &CpuEntry) -> CpuEntry {
        fn pick<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
            a.clone().or_else(|| b.clone())
        }
        CpuEntry {
            processor: self.processor,
            vendor_id: pick(&self.vendor_id, &c.vendor_id),
            model_name: pick(&self.model_name, &c.model_name),
            family: pick(&self.family, &c.family),
            model: pick(&self.model, &c.model),
            stepping: pick(&self.stepping, &c.stepping),
            microcode: pick(&self.microcode, &c.microcode),
            physical_id: self.physical_id,
            core_id: self.core_id,
            hypervisor_flag: pick(&self.hypervisor_flag, &c.hypervisor_flag),
            arm_implementer: pick(&self.arm_implementer, &c.arm_implementer),
            arm_part: pick(&self.arm_part, &c.arm_part),
            arm_variant: pick(&self.arm_variant, &c.arm_variant),
            arm_revision: pick(&self.arm_revision, &c.arm_revision),
            arm_architecture: pick(&self.arm_architecture, &c.arm_architecture),
            cpu_line: pick(&self.cpu_line, &c.cpu_line),
            revision: pick(&self.revision, &c.revision),
            machine_type: pick(&self.machine_type, &c.machine_type),
            isa: pick(&self.isa, &c.isa),
            mmu: pick(&self.mmu, &c.mmu),
            uarch: pick(&self.uarch, &c.uarch),
            mvendorid: pick(&self.mvendorid, &c.mvendorid),
            marchid: pick(&self.marchid, &c.marchid),
            arch: pick(&self.arch, &c.arch),
            family_name: pick(&self.family_name, &c.family_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_of_each_processor_block() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\
                    model name\t: Intel(R) Xeon(R) Platinum 8460H\nstepping\t: 8\nphysical id\t: 0\n\
                    core id\t\t: 3\nflags\t\t: fpu vme hypervisor\n\nprocessor\t: 1\nphysical id\t: 1\ncore id\t\t: 0\n";
        let e = parse(text);
        assert_eq!(e.len(), 2);
        assert_eq!(
            e[0].model_name.as_deref(),
            Some("Intel(R) Xeon(R) Platinum 8460H")
        );
        assert_eq!(
            (e[0].family, e[0].model, e[0].stepping),
            (Some(6), Some(143), Some(8))
        );
        assert_eq!(
            (e[0].physical_id, e[0].core_id, e[0].hypervisor_flag),
            (Some(0), Some(3), Some(true))
        );
        assert_eq!(
            (e[1].processor, e[1].physical_id, e[1].core_id),
            (Some(1), Some(1), Some(0))
        );
        assert!(parse("").is_empty());
        assert!(parse("garbage without colons\n").is_empty());
    }
}
