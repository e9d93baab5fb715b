//! CPU identity and topology: packages, dies, cores, SMT siblings, hybrid core
//! types, online / isolated / nohz_full CPUs.
//!
//! Topology comes from the `topology/*` sibling lists (or the hex masks old
//! kernels write) when the kernel exposes them: one read per core, package,
//! cluster, die, book and drawer rather than per CPU, and right where ids are
//! -1 (POWER, s390x, ARM without dies). Else from `core_id` and
//! `physical_package_id`, else from `physical id` / `core id` in
//! `/proc/cpuinfo` (pepc captures lack `topology/*`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::arch::{self, CoreType};
use super::cpuinfo::{self, CpuEntry, CpuInfo};
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
    /// Inferred from `/proc/cpuinfo`'s layout: x86, arm64, arm, powerpc, s390x,
    /// riscv64, loongarch64, sparc64, ia64, parisc.
    #[serde(default)]
    pub architecture: Option<String>,
    /// ARM `rXpY`, POWER `2.1 (pvr 004e 1201)`, ia64 revision.
    #[serde(default)]
    pub revision: Option<String>,
    /// POWER/ARM/SPARC machine line, s390x machine type.
    #[serde(default)]
    pub machine: Option<String>,
    /// RISC-V `isa` and `mmu`.
    #[serde(default)]
    pub isa: Option<String>,
    #[serde(default)]
    pub mmu: Option<String>,
    /// Several core designs on one host (ARM big.LITTLE), from `CPU part`.
    #[serde(default)]
    pub core_types: Option<Vec<CoreType>>,
    /// The `hypervisor` CPU flag: this is a virtual machine.
    pub virtualized: Option<bool>,
    pub online: CpuList,
    pub online_count: usize,
    pub present: Option<CpuList>,
    pub offline: Option<CpuList>,
    /// `None` (with the reason in `not_exposed`) where the host exposes no topology.
    pub packages: Option<usize>,
    pub dies: Option<usize>,
    /// CPUs sharing a cluster (ARM: an L2 or L3 slice; x86: an L2), `cluster_cpus_list`.
    #[serde(default)]
    pub clusters: Option<usize>,
    /// s390x books and drawers (`book_siblings_list`, `drawer_siblings_list`).
    #[serde(default)]
    pub books: Option<usize>,
    #[serde(default)]
    pub drawers: Option<usize>,
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
    let info = read_cpuinfo(ctx);
    let entries = info.as_ref().map(|i| &i.entries).filter(|e| !e.is_empty());
    let online = online_cpus(ctx, entries)?;
    let present = ctx.cpulist(&format!("{CPU_DIR}/present"));
    let offline = ctx.cpulist(&format!("{CPU_DIR}/offline"));
    let first = entries
        .and_then(|e| e.first())
        .map(|e| e.or_common(&info.as_ref().unwrap().machine.common));
    let first = first.as_ref();
    let id = info
        .as_ref()
        .map(|i| arch::identify(i, &online))
        .unwrap_or_default();

    let first_cpu = online.first().unwrap_or(0);
    let topo = format!("{CPU_DIR}/cpu{first_cpu}/topology");
    let ids_usable = || {
        ctx.root.exists(&format!("{topo}/core_id"))
            && ctx
                .parse::<i64>(&format!("{topo}/physical_package_id"))
                .is_some_and(|p| p >= 0)
    };
    let core_groups = level(
        ctx,
        &online,
        &[
            "core_cpus_list",
            "thread_siblings_list",
            "core_cpus",
            "thread_siblings",
        ],
    );
    let package_groups = level(
        ctx,
        &online,
        &[
            "package_cpus_list",
            "core_siblings_list",
            "package_cpus",
            "core_siblings",
        ],
    );
    let (cores, packages, source) = if core_groups.is_some() || package_groups.is_some() {
        (
            core_groups.unwrap_or_default(),
            package_groups
                .map(|p| number_packages(ctx, p))
                .unwrap_or_default(),
            "sysfs",
        )
    } else if ids_usable() {
        let (c, p) = group_places(&places_from_sysfs(ctx, &online));
        (c, p, "sysfs")
    } else {
        let (c, p) = group_places(&places_from_cpuinfo(ctx, entries, &online));
        (c, p, "/proc/cpuinfo")
    };
    let sysfs_topology = source == "sysfs";
    let known = !cores.is_empty();
    // A host whose sibling lists name no package (PS3) has cores but no package count.
    let packages_known = !packages.is_empty();
    let mut histogram = BTreeMap::new();
    for cpus in &cores {
        *histogram.entry(cpus.len() as u32).or_insert(0) += 1;
    }
    let threads_per_core = histogram.keys().copied().max();
    let mut sibling_lists: Vec<CpuList> = cores.iter().filter(|c| c.len() > 1).cloned().collect();
    sibling_lists.sort_by_key(|l| l.first());

    let dies = count_dies(ctx, &online, &packages);
    // -1 ids mean the level does not exist (ARM has no dies, x86 no books).
    let level_if = |id_file: &str, files: &[&str]| -> Option<usize> {
        ctx.parse::<i64>(&format!("{topo}/{id_file}"))
            .filter(|i| *i >= 0)?;
        level(ctx, &online, files).map(|g| g.len())
    };
    let clusters = level_if("cluster_id", &["cluster_cpus_list", "cluster_cpus"]);
    let books = level_if("book_id", &["book_siblings_list", "book_siblings"]);
    let drawers = level_if("drawer_id", &["drawer_siblings_list", "drawer_siblings"]);
    let smt_control = ctx.text(&format!("{CPU_DIR}/smt/control"));
    let smt_active = ctx
        .parse::<u32>(&format!("{CPU_DIR}/smt/active"))
        .map(|v| v == 1)
        .or(threads_per_core.map(|t| t > 1));

    let hybrid = hybrid(ctx);
    let isolated = kernel_cpulist(ctx, &format!("{CPU_DIR}/isolated"));
    if isolated.is_none() {
        ctx.not_exposed("isolated CPUs", &format!("{CPU_DIR}/isolated"));
    }
    let nohz_full = kernel_cpulist(ctx, &format!("{CPU_DIR}/nohz_full"));
    if nohz_full.is_none() {
        ctx.not_exposed("nohz_full CPUs", &format!("{CPU_DIR}/nohz_full"));
    }
    let virtualized = first.and_then(|c| c.hypervisor_flag);

    Ok(Cpu {
        vendor_id: id.vendor_id,
        model_name: id.model_name,
        family: first.and_then(|c| c.family),
        model: first.and_then(|c| c.model),
        stepping: first.and_then(|c| c.stepping),
        microcode: first.and_then(|c| c.microcode.clone()),
        architecture: id.architecture,
        revision: id.revision,
        machine: id.machine,
        isa: id.isa,
        mmu: id.mmu,
        core_types: id.core_types,
        virtualized,
        online_count: online.len(),
        online,
        present,
        offline,
        packages: packages_known.then_some(packages.len()),
        dies,
        clusters,
        books,
        drawers,
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
                .map(|(package, cpus)| PackageCpus { package, cpus })
                .collect(),
        },
    })
}

fn read_cpuinfo(ctx: &Reader) -> Option<CpuInfo> {
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
    let info = cpuinfo::parse_all(&text);
    if info.entries.is_empty() && info.machine.common == CpuEntry::default() {
        ctx.warn("/proc/cpuinfo: no `processor` entries (empty or truncated file)".into());
        return None;
    }
    Some(info)
}

/// The online CPUs where sysfs lists them, as [`read`] finds them; `None`
/// where only `/proc/cpuinfo` does (then only `read` can say).
pub fn online_ahead(ctx: &Reader) -> Option<CpuList> {
    online_cpus(ctx, None).ok()
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
                    // An empty file (some ia64 dumps) says nothing: online.
                    ctx.text(&format!("{CPU_DIR}/cpu{c}/online"))
                        .is_none_or(|v| v.trim() != "0")
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

/// Splits the online CPUs into the groups one topology level's sibling files
/// describe, reading one file per group. `None` when the first CPU has none
/// of the files.
fn level(ctx: &Reader, online: &CpuList, files: &[&str]) -> Option<Vec<CpuList>> {
    let mut assigned: BTreeSet<u32> = BTreeSet::new();
    let mut groups = Vec::new();
    for &cpu in online.as_slice() {
        if assigned.contains(&cpu) {
            continue;
        }
        let dir = format!("{CPU_DIR}/cpu{cpu}/topology");
        let list = files.iter().find_map(|f| {
            let text = ctx.text(&format!("{dir}/{f}"))?;
            let parsed = if f.ends_with("_list") {
                CpuList::parse(&text)
            } else {
                CpuList::parse_mask(&text)
            };
            match parsed {
                Ok(l) => Some(l),
                Err(e) => {
                    ctx.warn(format!("{dir}/{f}: {e}"));
                    None
                }
            }
        });
        let list = match list {
            Some(l) => l,
            None if groups.is_empty() => return None,
            None => CpuList::new(vec![cpu]),
        };
        // Offline siblings and CPUs an earlier (inconsistent) list claimed stay out.
        let mut members: Vec<u32> = list
            .as_slice()
            .iter()
            .copied()
            .filter(|c| online.contains(*c) && !assigned.contains(c))
            .collect();
        if !members.contains(&cpu) {
            members.push(cpu);
        }
        assigned.extend(members.iter().copied());
        groups.push(CpuList::new(members));
    }
    Some(groups)
}

/// Package numbers: `physical_package_id` where the kernel knows it, else the
/// group's position.
fn number_packages(ctx: &Reader, groups: Vec<CpuList>) -> BTreeMap<u32, CpuList> {
    let mut out = BTreeMap::new();
    let mut next = 0u32;
    for g in groups {
        let cpu = g.first().unwrap_or(0);
        let id = ctx
            .parse::<i64>(&format!("{CPU_DIR}/cpu{cpu}/topology/physical_package_id"))
            .filter(|i| *i >= 0 && !out.contains_key(&(*i as u32)))
            .map(|i| i as u32);
        let id = id.unwrap_or_else(|| {
            while out.contains_key(&next) {
                next += 1;
            }
            next
        });
        out.insert(id, g);
    }
    out
}

fn group_places(places: &[Place]) -> (Vec<CpuList>, BTreeMap<u32, CpuList>) {
    let mut cores: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    let mut packages: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in places {
        cores.entry((p.package, p.core)).or_default().push(p.cpu);
        packages.entry(p.package).or_default().push(p.cpu);
    }
    (
        cores.into_values().map(CpuList::new).collect(),
        packages
            .into_iter()
            .map(|(k, v)| (k, CpuList::new(v)))
            .collect(),
    )
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

fn count_dies(ctx: &Reader, online: &CpuList, packages: &BTreeMap<u32, CpuList>) -> Option<usize> {
    let first = online.first()?;
    let die_id = ctx.parse::<i64>(&format!("{CPU_DIR}/cpu{first}/topology/die_id"))?;
    if die_id < 0 {
        return None;
    }
    if let Some(groups) = level(ctx, online, &["die_cpus_list", "die_cpus"]) {
        return Some(groups.len());
    }
    let package_of: BTreeMap<u32, u32> = packages
        .iter()
        .flat_map(|(p, cpus)| cpus.as_slice().iter().map(move |c| (*c, *p)))
        .collect();
    let ids = ctx.par_map(online.as_slice(), |ctx, &cpu| {
        ctx.parse::<u32>(&format!("{CPU_DIR}/cpu{cpu}/topology/die_id"))
    });
    let mut dies = BTreeSet::new();
    for (&cpu, die) in online.as_slice().iter().zip(ids) {
        dies.insert((package_of.get(&cpu).copied().unwrap_or(0), die?));
    }
    Some(dies.len())
}

pub(super) fn hybrid(ctx: &Reader) -> Option<Vec<Hybrid>> {
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

/// A CPU list the kernel may write as `(null)` or a lone NUL when empty
/// (older kernels without nohz_full configured).
pub(super) fn kernel_cpulist(ctx: &Reader, path: &str) -> Option<CpuList> {
    let text = ctx.text(path)?;
    let text = super::trim_text(&text);
    if text.is_empty() || text == "(null)" {
        return Some(CpuList::default());
    }
    match CpuList::parse(text) {
        Ok(l) => Some(l),
        Err(e) => {
            ctx.warn(format!("{path}: {e}"));
            None
        }
    }
}
