//! CPU caches per level and type, with their sharing.
//!
//! Each cache instance is read once (through the first CPU that shares it), so
//! a 576-CPU host costs a few hundred reads, not thousands.

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use super::par::par_parts;
use super::{CPU_DIR, Reader, numbered};
use crate::cpulist::CpuList;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Cache {
    /// `None` where the host does not expose `level` (the `index` name is kept).
    pub level: Option<u32>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub index: String,
    /// Size of one instance.
    pub size_kib: Option<u64>,
    pub instances: usize,
    pub shared_cpu_lists: Vec<CpuList>,
}

/// `siblings`: the CPU lists of cores with more than one thread, so that the
/// prefetch keeps a core's threads together (they share its L1 and L2).
pub fn read(ctx: &Reader, online: &CpuList, siblings: &[CpuList]) -> Vec<Cache> {
    let Some(first) = online.first() else {
        return Vec::new();
    };
    let first_dir = format!("{CPU_DIR}/cpu{first}/cache");
    let Some(names) = ctx.dir(&first_dir) else {
        ctx.not_exposed("caches", &first_dir);
        return Vec::new();
    };
    // (level, type, size, index) -> instances
    let mut caches: Vec<Cache> = Vec::new();
    // Every CPU has the first CPU's cache indices; listing 576 directories costs more than it tells.
    let indices = numbered(&names, "index");
    // Per index, the CPUs an instance already read covers (a flag per CPU
    // number: searching the lists read so far was quadratic on big hosts).
    let slots = online.as_slice().last().map_or(0, |&c| c as usize + 1);
    let mut prefetched = prefetch(ctx, &core_order(online, siblings), &indices, slots);
    let mut covered = vec![vec![false; slots]; indices.len()];
    for &cpu in online.as_slice() {
        let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
        for (pos, &idx) in indices.iter().enumerate() {
            let index = format!("index{idx}");
            if covered[pos][cpu as usize] {
                continue;
            }
            let d = format!("{dir}/{index}");
            let (list, size) = prefetched
                .remove(&(cpu, pos))
                .unwrap_or_else(|| read_instance(ctx, &d));
            let Some(shared) = ctx.cpulist_from(|| format!("{d}/shared_cpu_list"), list) else {
                continue;
            };
            // An index has one level and type on every CPU; only sizes vary (hybrid L2).
            let (level, kind) = match caches.iter().find(|c| c.index == index) {
                Some(c) => (c.level, c.kind.clone()),
                None => (
                    ctx.parse::<u32>(&format!("{d}/level")),
                    ctx.text(&format!("{d}/type")),
                ),
            };
            let size_kib = ctx
                .text_from(|| format!("{d}/size"), size)
                .and_then(|s| parse_size_kib(ctx, &d, &s));
            for &c in shared.as_slice() {
                if let Some(slot) = covered[pos].get_mut(c as usize) {
                    *slot = true;
                }
            }
            match caches.iter_mut().find(|c| {
                c.index == index && c.level == level && c.kind == kind && c.size_kib == size_kib
            }) {
                Some(c) => {
                    c.instances += 1;
                    c.shared_cpu_lists.push(shared);
                }
                None => caches.push(Cache {
                    level,
                    kind,
                    index,
                    size_kib,
                    instances: 1,
                    shared_cpu_lists: vec![shared],
                }),
            }
        }
    }
    if caches.iter().all(|c| c.level.is_none()) {
        ctx.not_exposed(
            "cache level, type and size",
            &format!("{first_dir}/index0/level"),
        );
    }
    caches.sort_by(|a, b| (a.level, &a.index, a.size_kib).cmp(&(b.level, &b.index, b.size_kib)));
    caches
}

/// One instance's `shared_cpu_list` and `size`, as read (the pass turns
/// them into values and warnings, so prefetching changes no output).
type Raw = (std::io::Result<String>, std::io::Result<String>);

fn read_instance(ctx: &Reader, dir: &str) -> Raw {
    (
        ctx.root.read_string(&format!("{dir}/shared_cpu_list")),
        ctx.root.read_string(&format!("{dir}/size")),
    )
}

/// The reads the pass above will make, made first on all cores: each part
/// of the CPU list runs the same covering on its own, so only an instance
/// that spans parts is read more than once. The pass reads whatever is not
/// here itself.
fn prefetch(
    ctx: &Reader,
    cpus: &[u32],
    indices: &[u32],
    slots: usize,
) -> HashMap<(u32, usize), Raw> {
    let parts = par_parts(cpus, |cpus| {
        let mut covered = vec![vec![false; slots]; indices.len()];
        let mut reads = Vec::new();
        for &cpu in cpus {
            for (pos, &idx) in indices.iter().enumerate() {
                if covered[pos][cpu as usize] {
                    continue;
                }
                let raw = read_instance(ctx, &format!("{CPU_DIR}/cpu{cpu}/cache/index{idx}"));
                if let Ok(Ok(list)) = raw
                    .0
                    .as_deref()
                    .map(|t| CpuList::parse(super::trim_text(t)))
                {
                    for &c in list.as_slice() {
                        if let Some(slot) = covered[pos].get_mut(c as usize) {
                            *slot = true;
                        }
                    }
                }
                reads.push(((cpu, pos), raw));
            }
        }
        reads
    });
    parts.into_iter().flatten().collect()
}

/// The online CPUs with each core's threads next to each other (a big
/// host numbers a core's second thread after all the first ones).
fn core_order(online: &CpuList, siblings: &[CpuList]) -> Vec<u32> {
    let mut core_of: HashMap<u32, u32> = HashMap::new();
    for list in siblings {
        if let Some(first) = list.first() {
            for &c in list.as_slice() {
                core_of.entry(c).or_insert(first);
            }
        }
    }
    let mut cpus = online.as_slice().to_vec();
    cpus.sort_by_key(|c| (core_of.get(c).copied().unwrap_or(*c), *c));
    cpus
}

/// `32K`, `1024K`, `32M` as the kernel writes them.
fn parse_size_kib(ctx: &Reader, dir: &str, s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1),
        'M' => (&s[..s.len() - 1], 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    match num.parse::<u64>() {
        Ok(n) => Some(n * mult),
        Err(_) => {
            ctx.warn(format!(
                "{dir}/size: expected a size such as 32K, found {s:?}"
            ));
            None
        }
    }
}
