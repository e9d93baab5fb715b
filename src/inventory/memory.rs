//! Memory, NUMA nodes, huge pages and transparent huge pages.

use procfs::FromBufRead;
use serde::{Deserialize, Serialize};

use super::{Reader, bracketed, numbered};
use crate::cpulist::CpuList;

pub const NODE_DIR: &str = "/sys/devices/system/node";
pub const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Memory {
    pub mem_total_kib: Option<u64>,
    pub mem_available_kib: Option<u64>,
    pub mem_free_kib: Option<u64>,
    pub swap_total_kib: Option<u64>,
    pub hugepages: Option<Vec<HugePages>>,
    /// The bracketed choice of `transparent_hugepage/enabled`: always, madvise or never.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    /// `transparent_hugepage/hugepages-<size>kB/enabled` per page size, by
    /// size; `null` where the kernel has no per-size files.
    #[serde(default)]
    pub thp_sizes: Option<Vec<ThpSize>>,
    /// `transparent_hugepage/hpage_pmd_size` in KiB: the size that inherits
    /// the top level by default.
    #[serde(default)]
    pub thp_pmd_size_kib: Option<u64>,
    /// Drivers that resize this guest's memory at run time (virtio_balloon,
    /// virtio_mem, hv_balloon, vmw_balloon); empty on other hosts.
    #[serde(default)]
    pub balloon: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HugePages {
    pub size_kib: u64,
    pub total: Option<u64>,
    pub free: Option<u64>,
}

/// One page size's transparent huge page setting.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ThpSize {
    pub size_kib: u64,
    /// The file's bracketed choice: always, inherit, madvise or never.
    pub enabled: String,
    /// The choice in force: the top level's for `inherit`, else `enabled`.
    pub effective: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Numa {
    pub nodes: Vec<NumaNode>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Option<CpuList>,
    pub mem_total_kib: Option<u64>,
}

pub fn read(ctx: &Reader) -> Memory {
    let meminfo = meminfo(ctx);
    let kib = |v: u64| v / 1024;
    let thp_enabled = ctx
        .text(&format!("{THP_DIR}/enabled"))
        .and_then(|t| bracketed(&t));
    if thp_enabled.is_none() {
        ctx.not_exposed("transparent huge pages", &format!("{THP_DIR}/enabled"));
    }
    Memory {
        mem_total_kib: meminfo.as_ref().map(|m| kib(m.mem_total)),
        mem_available_kib: meminfo.as_ref().and_then(|m| m.mem_available).map(kib),
        mem_free_kib: meminfo.as_ref().map(|m| kib(m.mem_free)),
        swap_total_kib: meminfo.as_ref().map(|m| kib(m.swap_total)),
        hugepages: hugepages(ctx),
        thp_enabled: thp_enabled.clone(),
        thp_defrag: ctx
            .text(&format!("{THP_DIR}/defrag"))
            .and_then(|t| bracketed(&t)),
        thp_sizes: thp_sizes(ctx, thp_enabled.as_deref()),
        thp_pmd_size_kib: ctx
            .parse::<u64>(&format!("{THP_DIR}/hpage_pmd_size"))
            .map(|b| b / 1024),
        balloon: balloon(ctx),
    }
}

/// `/proc/meminfo`, parsed; what went wrong is noted on `ctx`.
pub(super) fn meminfo(ctx: &Reader) -> Option<procfs::Meminfo> {
    match ctx.root.read("/proc/meminfo") {
        Ok(bytes) => match procfs::Meminfo::from_buf_read(bytes.as_slice()) {
            Ok(m) => Some(m),
            Err(e) => {
                ctx.warn(format!("/proc/meminfo: cannot parse: {e}"));
                None
            }
        },
        Err(e) if crate::root::is_absent(&e) => {
            ctx.not_exposed("memory", "/proc/meminfo");
            None
        }
        Err(e) => {
            ctx.warn(format!("/proc/meminfo: {e}"));
            None
        }
    }
}

/// The per-size THP directories among `names`: (size in KiB, directory
/// name `hugepages-<size>kB`), by size.
pub fn thp_size_dirs(names: &[String]) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = names
        .iter()
        .filter_map(|n| {
            let kb = n
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            Some((kb, n.clone()))
        })
        .collect();
    out.sort();
    out
}

/// transhuge.rst: `inherit` takes the top-level choice; any other choice
/// overrides it, `never` included.
fn thp_sizes(ctx: &Reader, top: Option<&str>) -> Option<Vec<ThpSize>> {
    let names = ctx.root.read_dir(THP_DIR).unwrap_or_default();
    let sizes: Vec<ThpSize> = thp_size_dirs(&names)
        .into_iter()
        .filter_map(|(size_kib, dir)| {
            let enabled = bracketed(&ctx.text(&format!("{THP_DIR}/{dir}/enabled"))?)?;
            let effective = match enabled.as_str() {
                "inherit" => top.map(str::to_string),
                other => Some(other.to_string()),
            };
            Some(ThpSize {
                size_kib,
                enabled,
                effective,
            })
        })
        .collect();
    (!sizes.is_empty()).then_some(sizes)
}

/// A virtio driver counts when a device is bound to it; Hyper-V's and
/// VMware's when their module is loaded.
fn balloon(ctx: &Reader) -> Vec<String> {
    let mut out = Vec::new();
    for d in ["virtio_balloon", "virtio_mem"] {
        let dir = format!("/sys/bus/virtio/drivers/{d}");
        // Reading the device link (not just listing it) lets `capture` keep it.
        let bound = ctx.root.read_dir(&dir).is_ok_and(|names| {
            names
                .iter()
                .filter(|n| n.starts_with("virtio"))
                .any(|n| ctx.root.read_link(&format!("{dir}/{n}")).is_ok())
        });
        if bound {
            out.push(d.to_string());
        }
    }
    for m in ["hv_balloon", "vmw_balloon"] {
        if ctx.root.exists(&format!("/sys/module/{m}")) {
            out.push(m.to_string());
        }
    }
    out
}

fn hugepages(ctx: &Reader) -> Option<Vec<HugePages>> {
    let dir = "/sys/kernel/mm/hugepages";
    let Some(names) = ctx.dir(dir) else {
        ctx.not_exposed("huge pages", dir);
        return None;
    };
    let mut out: Vec<HugePages> = names
        .iter()
        .filter_map(|n| {
            let size_kib = n
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            Some(HugePages {
                size_kib,
                total: ctx.parse(&format!("{dir}/{n}/nr_hugepages")),
                free: ctx.parse(&format!("{dir}/{n}/free_hugepages")),
            })
        })
        .collect();
    out.sort_by_key(|h| h.size_kib);
    Some(out)
}

pub fn read_numa(ctx: &Reader) -> Numa {
    let Some(names) = ctx.dir(NODE_DIR) else {
        ctx.not_exposed("NUMA nodes", NODE_DIR);
        return Numa { nodes: Vec::new() };
    };
    let nodes = numbered(&names, "node")
        .into_iter()
        .map(|id| {
            let d = format!("{NODE_DIR}/node{id}");
            let mem_total_kib = ctx.text(&format!("{d}/meminfo")).and_then(|t| {
                // "Node 0 MemTotal:       24684096 kB"
                t.lines()
                    .find(|l| l.contains("MemTotal:"))?
                    .split_whitespace()
                    .nth(3)?
                    .parse()
                    .ok()
            });
            NumaNode {
                id,
                cpus: ctx.cpulist(&format!("{d}/cpulist")),
                mem_total_kib,
            }
        })
        .collect();
    Numa { nodes }
}
