//! Platform power facts from MSRs: C1E, the package C-state limit and its
//! lock, C1 demotion, HWP and its request, EPB and the prefetchers, per CPU
//! group, each with the `rdmsr` command that shows the register.
//!
//! Which bits a model has comes from `msr::model`; registers are read
//! through `msr::Msrs` (the root seam). What cannot be read says why,
//! never a zero.

use std::io::Read as _;

use serde::{Deserialize, Serialize};

use super::uncore::Uncore;
use super::{Reader, par_map};
use crate::cpulist::{CpuList, group};
use crate::msr::model::{
    self, MSR_IA32_ENERGY_PERF_BIAS as EPB, MSR_IA32_HWP_REQUEST as HWP_REQ,
    MSR_IA32_PM_ENABLE as PM_ENABLE, MSR_IA32_POWER_CTL as POWER_CTL,
    MSR_MISC_FEATURE_CONTROL as MISC, MSR_PKG_CST_CONFIG_CONTROL as PKG_CST, Model, bits,
};
use crate::msr::{Msrs, rdmsr};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Platform {
    /// The model table's name for this CPU (`SAPPHIRERAPIDS_X`); `null` when
    /// the table does not list it.
    pub model: Option<String>,
    /// Why no register could be read at all (`null` when they could).
    pub unavailable: Option<String>,
    /// `null` when `unavailable`.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<PlatformFact>>")]
    pub facts: Vec<PlatformFact>,
    /// Uncore frequency floor and ceiling per die (sysfs, not MSRs: present
    /// even when the registers cannot be read).
    #[serde(default)]
    pub uncore: Uncore,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct PlatformFact {
    /// `c1e`, `package_cstate_limit`, `package_cstate_lock`, `c1_demotion`,
    /// `c1_undemotion`, `hwp`, `hwp_min`, `hwp_max`, `epb`, `prefetchers`.
    pub id: String,
    pub label: String,
    /// The register's address (`0x1fc`) and the bits read (`1`, `2:0`).
    pub register: String,
    pub bits: String,
    /// Why this CPU has no such fact (`null` when it has).
    pub unavailable: Option<String>,
    /// `null` when `unavailable`.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<FactGroup>>")]
    pub groups: Vec<FactGroup>,
}

/// CPUs that read alike.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FactGroup {
    pub cpus: CpuList,
    /// `on`/`off`, a named limit, a number; `null` when `unavailable`.
    pub value: Option<String>,
    /// The field as read (the whole register for `prefetchers`).
    pub raw: Option<u64>,
    pub unavailable: Option<String>,
    /// The read-only command behind it, on the group's first CPU (msr-tools).
    pub command: String,
}

/// The first processor block of /proc/cpuinfo: vendor, family, model, flags.
struct Id {
    vendor: Option<String>,
    family: Option<u32>,
    model: Option<u32>,
    flags: Vec<String>,
}

fn cpu_id(ctx: &Reader) -> Option<Id> {
    let f = ctx.root.open_read("/proc/cpuinfo").ok()?;
    let mut head = Vec::with_capacity(16 << 10);
    f.take(64 << 10).read_to_end(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head);
    let block = text.split("\n\n").next().unwrap_or("");
    let mut id = Id {
        vendor: None,
        family: None,
        model: None,
        flags: Vec::new(),
    };
    for line in block.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "vendor_id" => id.vendor = Some(v.to_string()),
            "cpu family" => id.family = v.parse().ok(),
            "model" => id.model = v.parse().ok(),
            "flags" => id.flags = v.split_whitespace().map(str::to_string).collect(),
            _ => {}
        }
    }
    Some(id)
}

/// The platform facts of the `online` CPUs.
pub fn read(ctx: &Reader, online: &CpuList) -> Platform {
    let id = cpu_id(ctx);
    let vendor = id.as_ref().and_then(|i| i.vendor.as_deref());
    Platform {
        uncore: super::uncore::read(ctx, vendor),
        ..read_msrs(ctx, online, id.as_ref())
    }
}

fn read_msrs(ctx: &Reader, online: &CpuList, id: Option<&Id>) -> Platform {
    let none = |model: Option<&Model>, why: String| Platform {
        model: model.map(|m| m.name.to_string()),
        unavailable: Some(why),
        facts: Vec::new(),
        uncore: Uncore::default(),
    };
    let Some(id) = id else {
        return none(None, "/proc/cpuinfo is unreadable".into());
    };
    match id.vendor.as_deref() {
        Some("GenuineIntel") => {}
        Some(v) => return none(None, format!("these are Intel MSRs; this CPU is {v}")),
        None => {
            return none(
                None,
                "not an x86 CPU (no vendor_id in /proc/cpuinfo)".into(),
            );
        }
    }
    let model = match (id.family, id.model) {
        (Some(f), Some(m)) => model::lookup(f, m),
        _ => None,
    };
    let Some(&first) = online.as_slice().first() else {
        return none(model, "no online CPU".into());
    };
    let msrs = match Msrs::open(ctx.root, first) {
        Ok(m) => m,
        Err(why) => return none(model, why),
    };
    let has = |flag: &str| id.flags.iter().any(|f| f == flag);
    let plan = Plan {
        model,
        family_model: format!(
            "family {} model {}",
            id.family.unwrap_or(0),
            id.model.unwrap_or(0)
        ),
        hwp: has("hwp"),
        epb: has("epb"),
    };
    let regs = plan.registers();
    let cpus: Vec<u32> = online.as_slice().to_vec();
    let values: Vec<Vec<crate::msr::Read>> = par_map(&cpus, |&cpu| msrs.read(cpu, &regs));
    let per_cpu: Vec<Regs> = values
        .into_iter()
        .map(|v| Regs {
            regs: regs.clone(),
            values: v,
        })
        .collect();
    Platform {
        model: model.map(|m| m.name.to_string()),
        unavailable: None,
        facts: plan.facts(&cpus, &per_cpu),
        uncore: Uncore::default(),
    }
}

/// What this CPU has, by the model table and the CPU flags.
struct Plan {
    model: Option<&'static Model>,
    family_model: String,
    hwp: bool,
    epb: bool,
}

/// One CPU's registers as read.
struct Regs {
    regs: Vec<u32>,
    values: Vec<crate::msr::Read>,
}

impl Regs {
    fn get(&self, reg: u32) -> crate::msr::Read {
        match self.regs.iter().position(|r| *r == reg) {
            Some(i) => self.values[i].clone(),
            None => Err(format!("MSR {reg:#x} not read")),
        }
    }
}

/// A decoded field: its value and raw bits, or why there is none.
type Decoded = Result<(String, u64), String>;

fn on_off(b: u64) -> String {
    if b == 1 { "on" } else { "off" }.to_string()
}

impl Plan {
    fn registers(&self) -> Vec<u32> {
        let mut r = vec![POWER_CTL];
        if self.model.is_some() {
            r.push(PKG_CST);
        }
        if self.hwp {
            r.extend([PM_ENABLE, HWP_REQ]);
        }
        if self.epb {
            r.push(EPB);
        }
        if self.model.is_some_and(|m| m.prefetchers.is_some()) {
            r.push(MISC);
        }
        r
    }

    fn not_in_table(&self) -> String {
        format!(
            "{} is not in the model table (src/msr/model.rs)",
            self.family_model
        )
    }

    fn facts(&self, cpus: &[u32], per_cpu: &[Regs]) -> Vec<PlatformFact> {
        let field = |reg: u32, hi: u32, lo: u32, f: fn(u64) -> String| {
            move |r: &Regs| -> Decoded {
                let v = bits(r.get(reg)?, hi, lo);
                Ok((f(v), v))
            }
        };
        let mut out = Vec::new();
        let mut add = |id: &str,
                       label: &str,
                       reg: u32,
                       bits: &str,
                       gate: Option<String>,
                       d: &dyn Fn(&Regs) -> Decoded| {
            out.push(fact(id, label, reg, bits, gate, cpus, per_cpu, d));
        };
        add(
            "c1e",
            "C1E auto-promotion",
            POWER_CTL,
            "1",
            None,
            &field(POWER_CTL, 1, 1, on_off),
        );
        let table = self.model.is_none().then(|| self.not_in_table());
        let limits = self.model.map(|m| m.pkg_limits);
        let limit_bits = limits.map_or("3:0".to_string(), |l| format!("{}:0", l.hi_bit));
        add(
            "package_cstate_limit",
            "package C-state limit",
            PKG_CST,
            &limit_bits,
            table.clone(),
            &|r: &Regs| {
                let l = limits.expect("gated on the model");
                let (code, name) = l.decode(r.get(PKG_CST)?);
                let text = name.map_or(
                    format!("code {code} (not named for this model)"),
                    str::to_string,
                );
                Ok((text, code))
            },
        );
        let locked = |b: u64| if b == 1 { "locked" } else { "unlocked" }.to_string();
        add(
            "package_cstate_lock",
            "package C-state limit lock",
            PKG_CST,
            "15",
            table.clone(),
            &field(PKG_CST, 15, 15, locked),
        );
        add(
            "c1_demotion",
            "C1 demotion",
            PKG_CST,
            "26",
            table.clone(),
            &field(PKG_CST, 26, 26, on_off),
        );
        add(
            "c1_undemotion",
            "C1 undemotion",
            PKG_CST,
            "28",
            table.clone(),
            &field(PKG_CST, 28, 28, on_off),
        );
        let no_hwp =
            (!self.hwp).then(|| "the CPU has no HWP (no `hwp` flag in /proc/cpuinfo)".to_string());
        add(
            "hwp",
            "HWP",
            PM_ENABLE,
            "0",
            no_hwp.clone(),
            &field(PM_ENABLE, 0, 0, on_off),
        );
        let request = |hi: u32, lo: u32| {
            move |r: &Regs| -> Decoded {
                if bits(r.get(PM_ENABLE)?, 0, 0) == 0 {
                    return Err("HWP is off (MSR 0x770 bit 0): the request is not in use".into());
                }
                let v = bits(r.get(HWP_REQ)?, hi, lo);
                Ok((v.to_string(), v))
            }
        };
        add(
            "hwp_min",
            "HWP request min perf",
            HWP_REQ,
            "7:0",
            no_hwp.clone(),
            &request(7, 0),
        );
        add(
            "hwp_max",
            "HWP request max perf",
            HWP_REQ,
            "15:8",
            no_hwp,
            &request(15, 8),
        );
        let no_epb =
            (!self.epb).then(|| "the CPU has no EPB (no `epb` flag in /proc/cpuinfo)".to_string());
        add(
            "epb",
            "energy-performance bias",
            EPB,
            "3:0",
            no_epb,
            &field(EPB, 3, 0, |v| v.to_string()),
        );
        let names = self.model.and_then(|m| m.prefetchers);
        let no_names = match self.model {
            None => Some(self.not_in_table()),
            Some(m) if m.prefetchers.is_none() => Some(format!(
                "the model table names no prefetcher bits of MSR 0x1a4 for {}",
                m.name
            )),
            Some(_) => None,
        };
        let pf_bits = names.map_or(String::new(), |n| {
            n.iter()
                .map(|(b, _)| b.to_string())
                .collect::<Vec<_>>()
                .join(",")
        });
        add(
            "prefetchers",
            "hardware prefetchers",
            MISC,
            &pf_bits,
            no_names,
            &|r: &Regs| {
                let v = r.get(MISC)?;
                Ok((prefetchers(names.expect("gated on the names"), v), v))
            },
        );
        out
    }
}

/// `all on`, or the prefetchers a set disable bit turns off, and any other bit set.
pub fn prefetchers(names: model::Prefetchers, value: u64) -> String {
    let off: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits(value, *b, *b) == 1)
        .map(|(_, n)| *n)
        .collect();
    let named: u64 = names.iter().map(|(b, _)| 1u64 << b).sum();
    let mut text = if off.is_empty() {
        "all on".to_string()
    } else {
        format!("off: {}", off.join(", "))
    };
    if value & !named != 0 {
        text += &format!(" (other bits set: {:#x})", value & !named);
    }
    text
}

#[allow(clippy::too_many_arguments)]
fn fact(
    id: &str,
    label: &str,
    reg: u32,
    bits: &str,
    gate: Option<String>,
    cpus: &[u32],
    per_cpu: &[Regs],
    decode: &dyn Fn(&Regs) -> Decoded,
) -> PlatformFact {
    let groups = if gate.is_some() {
        Vec::new()
    } else {
        group(cpus.iter().zip(per_cpu).map(|(&cpu, r)| (cpu, decode(r))))
            .into_iter()
            .map(|g| {
                let command = rdmsr(g.cpus.first().unwrap_or(0), reg);
                let (value, raw, unavailable) = match g.value {
                    Ok((v, raw)) => (Some(v), Some(raw), None),
                    Err(why) => (None, None, Some(why)),
                };
                FactGroup {
                    cpus: g.cpus,
                    value,
                    raw,
                    unavailable,
                    command,
                }
            })
            .collect()
    };
    PlatformFact {
        id: id.into(),
        label: label.into(),
        register: format!("{reg:#x}"),
        bits: bits.into(),
        unavailable: gate,
        groups,
    }
}
