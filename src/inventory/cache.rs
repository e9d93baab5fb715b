//! CPU caches per level and type, with their sharing.
//!
//! Each cache instance is read once (through the first CPU that shares it), so
//! a 576-CPU host costs a few hundred reads, not thousands.

use serde::{Deserialize, Serialize};

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

pub fn read(ctx: &Reader, online: &CpuList) -> Vec<Cache> {
    let Some(first) = online.first() else {
        return Vec::new();
    };
    let first_dir = format!("{CPU_DIR}/cpu{first}/cache");
    if ctx.dir(&first_dir).is_none() {
        ctx.not_exposed("caches", &first_dir);
        return Vec::new();
    }
    // (level, type, size, index) -> instances
    let mut caches: Vec<Cache> = Vec::new();
    // Every CPU has the first CPU's cache indices; listing 576 directories costs more than it tells.
    let indices = numbered(&ctx.dir(&first_dir).unwrap_or_default(), "index");
    // Per index, the CPUs an instance already read covers (a flag per CPU
    // number: searching the lists read so far was quadratic on big hosts).
    let slots = online.as_slice().last().map_or(0, |&c| c as usize + 1);
    let mut covered = vec![vec![false; slots]; indices.len()];
    for &cpu in online.as_slice() {
        let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
        for (pos, &idx) in indices.iter().enumerate() {
            let index = format!("index{idx}");
            if covered[pos][cpu as usize] {
                continue;
            }
            let d = format!("{dir}/{index}");
            let Some(shared) = ctx.cpulist(&format!("{d}/shared_cpu_list")) else {
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
                .text(&format!("{d}/size"))
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
