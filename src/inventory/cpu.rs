//! CPU identity and topology: packages, dies, cores, SMT siblings, hybrid core
//! types, online / isolated / nohz_full CPUs.
//!
//! Topology comes from `topology/*` when the kernel exposes it, else from
//! `physical id` / `core id` in `/proc/cpuinfo` (pepc captures lack the former).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::cpuinfo::{self, CpuEntry};
use super::{CPU_DIR, Reader, numbered};
use crate::cpulist::CpuList;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Cpu {
    pub vendor_id: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    pub microcode: Option<String>,
    /// The `hypervisor` CPU flag: this is a virtual machine.
    pub virtualized: Option<bool>,
    pub online: CpuList,
    pub online_count: usize,
    pub present: Option<CpuList>,
    pub offline: Option<CpuList>,
    /// `None` (with the reason in `not_exposed`) where the host exposes no topology.
    pub packages: Option<usize>,
    pub dies: Option<usize>,
    pub cores: Option<usize>,
    /// The largest number of threads on one core.
    pub threads_per_core: Option<u32>,
    /// threads per core -> number of cores with that many (hybrid parts mix 1 and 2).
    pub threads_per_core_histogram: BTreeMap<u32, usize>,
    pub smt: Smt,
    pub hybrid: Option<Vec<Hybrid>>,
    pub isolated: Option<CpuList>,
    pub nohz_full: Option<CpuList>,
    pub topology: CpuTopology,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Smt {
    /// `/sys/devices/system/cpu/smt/control`: on, off, forceoff, notsupported, notimplemented.
    pub control: Option<String>,
    pub active: Option<bool>,
    /// CPU lists of cores that run more than one thread, e.g. `0,160`.
    pub sibling_lists: Vec<CpuList>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Hybrid {
    /// The PMU's name: `cpu_core` (performance cores), `cpu_atom` (efficient
    /// cores) or `cpu_lowpower` (low-power efficient cores).
    pub kind: String,
    pub cpus: CpuList,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct CpuTopology {
    /// `sysfs` or `/proc/cpuinfo`.
    pub source: String,
    pub package_cpus: Vec<PackageCpus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct PackageCpus {
    pub package: u32,
    pub cpus: CpuList,
}

struct Place {
    cpu: u32,
    package: u32,
    core: u32,
}

pub fn read(ctx: &Reader) -> Result<Cpu> {
    let cpuinfo = read_cpuinfo(ctx);
    let online = online_cpus(ctx, cpuinfo.as_ref())?;
    let present = ctx.cpulist(&format!("{CPU_DIR}/present"));
    let offline = ctx.cpulist(&format!("{CPU_DIR}/offline"));
    let first = cpuinfo.as_ref().and_then(|c| c.first());

    let first_cpu = online.first().unwrap_or(0);
    let sysfs_topology = ctx
        .root
        .exists(&format!("{CPU_DIR}/cpu{first_cpu}/topology/core_id"));
    let places = if sysfs_topology {
        places_from_sysfs(ctx, &online)
    } else {
        places_from_cpuinfo(ctx, cpuinfo.as_ref(), &online)
    };

    let mut cores: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    let mut packages: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in &places {
        cores.entry((p.package, p.core)).or_default().push(p.cpu);
        packages.entry(p.package).or_default().push(p.cpu);
    }
    let mut histogram = BTreeMap::new();
    for cpus in cores.values() {
        *histogram.entry(cpus.len() as u32).or_insert(0) += 1;
    }
    let known = !places.is_empty();
    let threads_per_core = histogram.keys().copied().max();
    let mut sibling_lists: Vec<CpuList> = cores
        .values()
        .filter(|c| c.len() > 1)
        .map(|c| CpuList::new(c.clone()))
        .collect();
    sibling_lists.sort_by_key(|l| l.first());

    let dies = count_dies(ctx, &online, &packages);
    let smt_control = ctx.text(&format!("{CPU_DIR}/smt/control"));
    let smt_active = ctx
        .parse::<u32>(&format!("{CPU_DIR}/smt/active"))
        .map(|v| v == 1)
        .or(threads_per_core.map(|t| t > 1));

    let hybrid = hybrid(ctx);
    let isolated = ctx.cpulist(&format!("{CPU_DIR}/isolated"));
    if isolated.is_none() {
        ctx.not_exposed("isolated CPUs", &format!("{CPU_DIR}/isolated"));
    }
    let nohz_full = ctx.cpulist(&format!("{CPU_DIR}/nohz_full"));
    if nohz_full.is_none() {
        ctx.not_exposed("nohz_full CPUs", &format!("{CPU_DIR}/nohz_full"));
    }
    let virtualized = first.and_then(|c| c.hypervisor_flag);

    Ok(Cpu {
        vendor_id: first.and_then(|c| c.vendor_id.clone()),
        model_name: first.and_then(|c| c.model_name.clone()),
        family: first.and_then(|c| c.family),
        model: first.and_then(|c| c.model),
        stepping: first.and_then(|c| c.stepping),
        microcode: first.and_then(|c| c.microcode.clone()),
        virtualized,
        online_count: online.len(),
        online,
        present,
        offline,
        packages: known.then_some(packages.len()),
        dies,
        cores: known.then_some(cores.len()),
        threads_per_core,
        threads_per_core_histogram: histogram,
        smt: Smt {
            control: smt_control,
            active: smt_active,
            sibling_lists,
        },
        hybrid,
        isolated,
        nohz_full,
        topology: CpuTopology {
            source: if sysfs_topology {
                "sysfs".into()
            } else {
                "/proc/cpuinfo".into()
            },
            package_cpus: packages
                .into_iter()
                .map(|(package, cpus)| PackageCpus {
                    package,
                    cpus: CpuList::new(cpus),
                })
                .collect(),
        },
    })
}

fn read_cpuinfo(ctx: &Reader) -> Option<Vec<CpuEntry>> {
    let text = match ctx.root.read_string("/proc/cpuinfo") {
        Ok(t) => t,
        Err(e) => {
            if crate::root::is_absent(&e) {
                ctx.not_exposed("CPU identity", "/proc/cpuinfo");
            } else {
                ctx.warn(format!("/proc/cpuinfo: {e}"));
            }
            return None;
        }
    };
    let entries = cpuinfo::parse(&text);
    if entries.is_empty() {
        ctx.warn("/proc/cpuinfo: no `processor` entries (empty or truncated file)".into());
        return None;
    }
    Some(entries)
}

/// `cpu/online`, else the per-CPU `online` files (cpu0 has none: it is online),
/// else the processors listed in `/proc/cpuinfo`.
fn online_cpus(ctx: &Reader, cpuinfo: Option<&Vec<CpuEntry>>) -> Result<CpuList> {
    if let Some(list) = ctx.cpulist(&format!("{CPU_DIR}/online")) {
        return Ok(list);
    }
    if let Some(names) = ctx.dir(CPU_DIR) {
        let cpus = numbered(&names, "cpu");
        if !cpus.is_empty() {
            let online = cpus
                .into_iter()
                .filter(|c| {
                    ctx.parse::<u32>(&format!("{CPU_DIR}/cpu{c}/online"))
                        .is_none_or(|v| v == 1)
                })
                .collect();
            return Ok(online);
        }
    }
    if let Some(info) = cpuinfo {
        let list: CpuList = info.iter().filter_map(|e| e.processor).collect();
        if !list.is_empty() {
            return Ok(list);
        }
    }
    bail!(
        "no CPUs found under {}: neither {CPU_DIR}/online, {CPU_DIR}/cpuN nor /proc/cpuinfo describe any",
        ctx.root.base().display()
    )
}

fn places_from_sysfs(ctx: &Reader, online: &CpuList) -> Vec<Place> {
    online
        .as_slice()
        .iter()
        .filter_map(|&cpu| {
            let dir = format!("{CPU_DIR}/cpu{cpu}/topology");
            let package = ctx.parse::<u32>(&format!("{dir}/physical_package_id"))?;
            let core = ctx.parse::<u32>(&format!("{dir}/core_id"))?;
            Some(Place { cpu, package, core })
        })
        .collect()
}

fn places_from_cpuinfo(
    ctx: &Reader,
    cpuinfo: Option<&Vec<CpuEntry>>,
    online: &CpuList,
) -> Vec<Place> {
    let Some(info) = cpuinfo else {
        ctx.not_exposed(
            "CPU topology",
            &format!("{CPU_DIR}/cpuN/topology and /proc/cpuinfo"),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut missing = false;
    for e in info {
        let Some(cpu) = e.processor else {
            continue;
        };
        if !online.contains(cpu) {
            continue;
        }
        match (e.physical_id, e.core_id) {
            (Some(package), Some(core)) => out.push(Place { cpu, package, core }),
            // Some VMs and architectures list neither: say so rather than guess.
            _ => missing = true,
        }
    }
    if missing {
        ctx.not_exposed("CPU topology", "/proc/cpuinfo (physical id, core id)");
        return Vec::new();
    }
    out
}

fn count_dies(ctx: &Reader, online: &CpuList, packages: &BTreeMap<u32, Vec<u32>>) -> Option<usize> {
    let first = online.first()?;
    if !ctx
        .root
        .exists(&format!("{CPU_DIR}/cpu{first}/topology/die_id"))
    {
        return None;
    }
    let package_of: BTreeMap<u32, u32> = packages
        .iter()
        .flat_map(|(p, cpus)| cpus.iter().map(move |c| (*c, *p)))
        .collect();
    let ids = super::par_map(online.as_slice(), |&cpu| {
        ctx.parse::<u32>(&format!("{CPU_DIR}/cpu{cpu}/topology/die_id"))
    });
    let mut dies = BTreeSet::new();
    for (&cpu, die) in online.as_slice().iter().zip(ids) {
        dies.insert((package_of.get(&cpu).copied().unwrap_or(0), die?));
    }
    Some(dies.len())
}

fn hybrid(ctx: &Reader) -> Option<Vec<Hybrid>> {
    // cpu_core, cpu_atom, and on Arrow/Lunar Lake also cpu_lowpower.
    let kinds: Vec<Hybrid> = ctx
        .dir("/sys/devices")?
        .into_iter()
        .filter(|k| k.starts_with("cpu_"))
        .filter_map(|k| {
            Some(Hybrid {
                cpus: ctx.cpulist(&format!("/sys/devices/{k}/cpus"))?,
                kind: k,
            })
        })
        .collect();
    if kinds.is_empty() { None } else { Some(kinds) }
}
