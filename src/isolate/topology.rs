//! The host's layout as the planner needs it, from `inventory`: cores (SMT
//! siblings together), NUMA nodes, L3 domains and hybrid core types.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use crate::cpulist::CpuList;
use crate::inventory::{Cache, Inventory};

/// One physical core: its threads, and the domains it belongs to.
#[derive(Clone, Debug)]
pub struct Core {
    pub cpus: CpuList,
    /// Index into [`Topology::nodes`].
    pub node: usize,
    /// Index into [`Topology::l3`].
    pub l3: Option<usize>,
    /// The cores sharing this core's L2 (itself included) where several do:
    /// a hybrid part's efficient-core cluster.
    pub l2_cluster: Option<CpuList>,
    /// 0 for a performance core (or any core of a part with one type), 1 for
    /// an efficient core, 2 for a low-power efficient core.
    pub rank: u8,
}

#[derive(Clone, Debug)]
pub struct Node {
    /// `None`: the host exposes no NUMA nodes, so all CPUs count as one.
    pub id: Option<u32>,
    pub cpus: CpuList,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub online: CpuList,
    /// Every CPU that exists (`present`, else online).
    pub present: CpuList,
    pub cores: Vec<Core>,
    pub nodes: Vec<Node>,
    /// L3 instances.
    pub l3: Vec<L3>,
    /// `cpu_core`, `cpu_atom`, `cpu_lowpower` CPUs on hybrid parts.
    pub hybrid: Option<Vec<(String, CpuList)>>,
    /// `nohz_full` is exposed (the kernel is built with CONFIG_NO_HZ_FULL).
    pub nohz_full_exposed: bool,
    /// CPUs the running kernel already isolates.
    pub isolated_now: Option<CpuList>,
}

#[derive(Clone, Debug)]
pub struct L3 {
    pub cpus: CpuList,
    /// Its package holds more than one L3 (a CCD, a cluster): the planner
    /// isolates whole ones where it can.
    pub split_package: bool,
}

impl Topology {
    pub fn from_inventory(inv: &Inventory) -> Result<Topology> {
        let cpu = &inv.cpu;
        let online = cpu.online.clone();
        if cpu.cores.is_none() {
            bail!(
                "this host does not say which CPUs share a core (no topology/core_cpus_list, core_id or `core id` in /proc/cpuinfo): isolating whole cores needs that"
            );
        }
        let mut cores: Vec<CpuList> = cpu.smt.sibling_lists.clone();
        let in_lists: CpuList = cores.iter().flat_map(|c| c.as_slice().to_vec()).collect();
        cores.extend(
            online
                .as_slice()
                .iter()
                .filter(|c| !in_lists.contains(**c))
                .map(|&c| CpuList::new(vec![c])),
        );
        cores.sort_by_key(|c| c.first());

        let mut nodes: Vec<Node> = inv
            .numa
            .nodes
            .iter()
            .filter_map(|n| {
                let cpus: CpuList = n
                    .cpus
                    .as_ref()?
                    .as_slice()
                    .iter()
                    .copied()
                    .filter(|c| online.contains(*c))
                    .collect();
                // Memory-only nodes (CXL, HBM) have no CPUs to keep.
                (!cpus.is_empty()).then_some(Node {
                    id: Some(n.id),
                    cpus,
                })
            })
            .collect();
        if nodes.is_empty() {
            nodes.push(Node {
                id: None,
                cpus: online.clone(),
            });
        }

        let packages: Vec<&CpuList> = cpu.topology.package_cpus.iter().map(|p| &p.cpus).collect();
        let l3 = l3_domains(&inv.caches, &online, &packages);
        let l2 = level_lists(&inv.caches, 2, "index2", &online);
        let hybrid = cpu.hybrid.as_ref().map(|h| {
            h.iter()
                .map(|k| (k.kind.clone(), k.cpus.clone()))
                .collect::<Vec<_>>()
        });
        let rank_of = |c: u32| -> u8 {
            let Some(h) = &hybrid else { return 0 };
            match h
                .iter()
                .find(|(_, cpus)| cpus.contains(c))
                .map(|(k, _)| k.as_str())
            {
                Some("cpu_atom") => 1,
                Some("cpu_lowpower") => 2,
                _ => 0,
            }
        };
        let cores = cores
            .into_iter()
            .map(|cpus| {
                let first = cpus.first().unwrap_or(0);
                Core {
                    node: nodes
                        .iter()
                        .position(|n| n.cpus.contains(first))
                        .unwrap_or(0),
                    l3: l3.iter().position(|d| d.cpus.contains(first)),
                    // Only an efficient core's L2 is shared by several cores.
                    l2_cluster: l2
                        .iter()
                        .find(|l| l.contains(first) && l.len() > cpus.len())
                        .filter(|_| rank_of(first) > 0)
                        .cloned(),
                    rank: rank_of(first),
                    cpus,
                }
            })
            .collect();
        Ok(Topology {
            present: cpu.present.clone().unwrap_or_else(|| online.clone()),
            online,
            cores,
            nodes,
            l3,
            hybrid,
            nohz_full_exposed: cpu.nohz_full.is_some(),
            isolated_now: cpu.isolated.clone().filter(|l| !l.is_empty()),
        })
    }

    pub fn core_of(&self, cpu: u32) -> Option<&Core> {
        self.cores.iter().find(|c| c.cpus.contains(cpu))
    }

    pub fn node_name(&self, node: usize) -> String {
        match self.nodes[node].id {
            Some(id) => format!("NUMA node {id} (CPUs {})", self.nodes[node].cpus),
            None => format!("the host (no NUMA nodes exposed; CPUs {})", self.online),
        }
    }

    pub fn is_hybrid(&self) -> bool {
        let mut ranks: Vec<u8> = self.cores.iter().map(|c| c.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks.len() > 1
    }
}

/// The L3 instances: caches of level 3, or `index3` where a capture lacks the
/// level (index0-3 are L1d, L1i, L2, L3 on x86, the hosts with several L3s).
fn l3_domains(caches: &[Cache], online: &CpuList, packages: &[&CpuList]) -> Vec<L3> {
    let lists = level_lists(caches, 3, "index3", online);
    let mut per_package: BTreeMap<usize, usize> = BTreeMap::new();
    let package_of = |l: &CpuList| {
        let first = l.first().unwrap_or(0);
        packages.iter().position(|p| p.contains(first)).unwrap_or(0)
    };
    for l in &lists {
        *per_package.entry(package_of(l)).or_default() += 1;
    }
    lists
        .into_iter()
        .map(|cpus| L3 {
            split_package: per_package.get(&package_of(&cpus)).is_some_and(|n| *n > 1),
            cpus,
        })
        .collect()
}

/// The online CPU lists sharing a cache of `level` (`index` where a capture
/// lacks levels), each once, by first CPU.
fn level_lists(caches: &[Cache], level: u32, index: &str, online: &CpuList) -> Vec<CpuList> {
    let levels_known = caches.iter().any(|c| c.level.is_some());
    let mut lists: Vec<CpuList> = caches
        .iter()
        .filter(|c| match levels_known {
            true => c.level == Some(level) && c.kind.as_deref() != Some("Instruction"),
            false => c.index == index,
        })
        .flat_map(|c| c.shared_cpu_lists.iter().cloned())
        .map(|l| {
            l.as_slice()
                .iter()
                .copied()
                .filter(|c| online.contains(*c))
                .collect()
        })
        .filter(|l: &CpuList| !l.is_empty())
        .collect();
    lists.sort_by_key(|l| l.first());
    lists.dedup();
    lists
}
