//! Which CPUs to isolate: whole cores, housekeeping on every NUMA node (and
//! on every L3 of a package with several), CPU 0's core kept unless asked,
//! performance cores before efficient ones.

use anyhow::{Result, bail};

use super::topology::Topology;
use crate::cpulist::CpuList;

/// What the user asked to isolate.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `--cpus 8`: this many CPUs, chosen here.
    Count(usize),
    /// `--cpus 4-11`: exactly these.
    List(CpuList),
}

impl Request {
    /// A bare number is a count; anything else a CPU list (`8-8` is CPU 8).
    pub fn parse(text: &str) -> Result<Request> {
        let t = text.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            let n: usize = t
                .parse()
                .map_err(|_| anyhow::anyhow!("--cpus {t}: not a count"))?;
            if n == 0 {
                bail!(
                    "--cpus 0: nothing to isolate; give a count (--cpus 8) or a CPU list (--cpus 4-11)"
                );
            }
            return Ok(Request::Count(n));
        }
        match CpuList::parse(t) {
            Ok(l) if l.is_empty() => bail!("--cpus {t:?}: an empty CPU list isolates nothing"),
            Ok(l) => Ok(Request::List(l)),
            Err(e) => bail!(
                "--cpus {t:?}: {e}; give a count (--cpus 8) or a CPU list (--cpus 4-11, `8-8` for CPU 8 alone)"
            ),
        }
    }
}

/// The split and the reasons for it.
#[derive(Clone, Debug)]
pub struct Choice {
    pub isolated: CpuList,
    pub housekeeping: CpuList,
    pub isolated_cores: Vec<CpuList>,
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
}

pub fn choose(topo: &Topology, req: &Request, allow_cpu0: bool) -> Result<Choice> {
    let (picked, mut warnings) = match req {
        Request::Count(n) => (by_count(topo, *n, allow_cpu0)?, Vec::new()),
        Request::List(l) => by_list(topo, l, allow_cpu0)?,
    };
    let isolated: CpuList = picked
        .iter()
        .flat_map(|&i| topo.cores[i].cpus.as_slice().to_vec())
        .collect();
    let housekeeping: CpuList = topo
        .online
        .as_slice()
        .iter()
        .copied()
        .filter(|c| !isolated.contains(*c))
        .collect();
    let smt = picked.iter().any(|&i| topo.cores[i].cpus.len() > 1);
    let mut reasons = vec![format!(
        "whole cores: {} core(s){} ({})",
        picked.len(),
        if smt {
            ", SMT siblings together"
        } else {
            ", one thread each (no SMT siblings)"
        },
        picked
            .iter()
            .map(|&i| topo.cores[i].cpus.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    )];
    for (n, node) in topo.nodes.iter().enumerate() {
        let hk: CpuList = node
            .cpus
            .as_slice()
            .iter()
            .copied()
            .filter(|c| housekeeping.contains(*c))
            .collect();
        reasons.push(format!(
            "{} keeps housekeeping CPUs {hk}",
            topo.node_name(n)
        ));
    }
    if topo.l3.iter().any(|d| d.keeps_housekeeping) {
        reasons.push(format!(
            "a package holds several L3 caches ({} in all): each keeps at least one housekeeping core",
            topo.l3.len()
        ));
    }
    if let Some(c0) = topo.core_of(0) {
        match c0.cpus.as_slice().iter().any(|c| isolated.contains(*c)) {
            false => reasons.push(format!(
                "CPU 0's core ({}) stays housekeeping: the boot CPU takes work that cannot move (timekeeping duties, some platform interrupts)",
                c0.cpus
            )),
            true => warnings.push(format!(
                "CPU 0's core ({}) is isolated (--allow-cpu0): some interrupts and timekeeping work stay on CPU 0 whatever the affinity says",
                c0.cpus
            )),
        }
    }
    if topo.is_hybrid() {
        let p_iso = picked.iter().filter(|&&i| topo.cores[i].rank == 0).count();
        reasons.push(format!(
            "hybrid part: performance cores are isolated first ({p_iso} of {} chosen are P-cores)",
            picked.len()
        ));
        let mixed = picked.iter().any(|&i| topo.cores[i].rank > 0);
        if mixed {
            warnings.push(
                "the isolated set mixes performance and efficient cores: the workload's threads will see different speeds depending on where they run".into(),
            );
        }
    }
    if housekeeping.len() == 1 {
        let whole = match topo.online.len() {
            2 => {
                "; a 2-CPU host without SMT can be split no other way: one CPU isolated, one for housekeeping"
            }
            _ => "",
        };
        warnings.push(format!(
            "housekeeping is the single CPU {housekeeping}: every interrupt, kernel thread and system service shares it{whole}"
        ));
    }
    if let Some(now) = &topo.isolated_now {
        warnings.push(format!(
            "the running kernel already isolates CPUs {now} (/sys/devices/system/cpu/isolated): the fragment replaces that choice at the next boot"
        ));
    }
    Ok(Choice {
        isolated_cores: picked.iter().map(|&i| topo.cores[i].cpus.clone()).collect(),
        isolated,
        housekeeping,
        reasons,
        warnings,
    })
}

/// Core indices in the order they are isolated: P-cores first, then by
/// number (the lowest CPUs after CPU 0's core, as people number them).
fn candidates(topo: &Topology, allow_cpu0: bool) -> Vec<usize> {
    let mut v: Vec<usize> = (0..topo.cores.len())
        .filter(|&i| allow_cpu0 || !topo.cores[i].cpus.contains(0))
        .collect();
    v.sort_by_key(|&i| (topo.cores[i].rank, topo.cores[i].cpus.first()));
    v
}

/// Greedy: take each candidate core that fits the count and leaves its node
/// (and its L3, where kept) a housekeeping core.
fn greedy(topo: &Topology, n: usize, allow_cpu0: bool) -> Vec<usize> {
    let mut node_hk = vec![0usize; topo.nodes.len()];
    let mut l3_hk = vec![0usize; topo.l3.len()];
    for c in &topo.cores {
        node_hk[c.node] += 1;
        if let Some(d) = c.l3 {
            l3_hk[d] += 1;
        }
    }
    let mut left = n;
    let mut picked = Vec::new();
    for i in candidates(topo, allow_cpu0) {
        let c = &topo.cores[i];
        let l3_ok =
            c.l3.is_none_or(|d| !topo.l3[d].keeps_housekeeping || l3_hk[d] > 1);
        if c.cpus.len() <= left && node_hk[c.node] > 1 && l3_ok {
            node_hk[c.node] -= 1;
            if let Some(d) = c.l3 {
                l3_hk[d] -= 1;
            }
            left -= c.cpus.len();
            picked.push(i);
            if left == 0 {
                break;
            }
        }
    }
    picked
}

fn cpus_of(topo: &Topology, picked: &[usize]) -> usize {
    picked.iter().map(|&i| topo.cores[i].cpus.len()).sum()
}

fn by_count(topo: &Topology, n: usize, allow_cpu0: bool) -> Result<Vec<usize>> {
    let picked = greedy(topo, n, allow_cpu0);
    if cpus_of(topo, &picked) == n {
        return Ok(picked);
    }
    let max = cpus_of(topo, &greedy(topo, usize::MAX, allow_cpu0));
    let keeps = format!(
        "whole cores only, housekeeping kept on each of the {} NUMA node(s){}{}",
        topo.nodes.len(),
        if topo.l3.iter().any(|d| d.keeps_housekeeping) {
            format!(" and each of the {} L3 caches", topo.l3.len())
        } else {
            String::new()
        },
        if allow_cpu0 {
            ""
        } else {
            ", CPU 0's core kept (--allow-cpu0 lifts that)"
        }
    );
    if max == 0 {
        bail!(
            "--cpus {n}: this host ({} online CPU(s)) cannot be split: no core can be isolated with {keeps}",
            topo.online.len()
        );
    }
    if n > max {
        bail!(
            "--cpus {n}: at most {max} of the {} online CPUs can be isolated here ({keeps})",
            topo.online.len()
        );
    }
    let reachable = |m: usize| cpus_of(topo, &greedy(topo, m, allow_cpu0)) == m;
    let below = (1..n).rev().find(|&m| reachable(m));
    let above = (n + 1..=max).find(|&m| reachable(m));
    let near: Vec<String> = [below, above]
        .into_iter()
        .flatten()
        .map(|m| m.to_string())
        .collect();
    bail!(
        "--cpus {n}: {n} CPUs cannot be made of whole cores here (a core's SMT siblings are isolated together); ask for {}",
        near.join(" or ")
    )
}

fn by_list(topo: &Topology, list: &CpuList, allow_cpu0: bool) -> Result<(Vec<usize>, Vec<String>)> {
    let mut problems = Vec::new();
    for &c in list.as_slice() {
        if !topo.present.contains(c) && !topo.online.contains(c) {
            problems.push(format!(
                "CPU {c} does not exist on this host (CPUs {})",
                topo.present
            ));
        } else if !topo.online.contains(c) {
            problems.push(format!(
                "CPU {c} is offline (online CPUs: {}): isolating it means nothing until it is brought online, and its core's siblings cannot be checked",
                topo.online
            ));
        }
    }
    let mut picked: Vec<usize> = Vec::new();
    for (i, core) in topo.cores.iter().enumerate() {
        let inside: Vec<u32> = core
            .cpus
            .as_slice()
            .iter()
            .copied()
            .filter(|c| list.contains(*c))
            .collect();
        if inside.is_empty() {
            continue;
        }
        if inside.len() < core.cpus.len() {
            let missing: CpuList = core
                .cpus
                .as_slice()
                .iter()
                .copied()
                .filter(|c| !list.contains(*c))
                .collect();
            problems.push(format!(
                "the list splits core {}: it names {} without its SMT sibling(s) {missing}, which share the core's pipeline and L1/L2, so work there is noise on the isolated CPU; add {missing} or leave the core out",
                core.cpus,
                inside.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
            ));
            continue;
        }
        if core.cpus.contains(0) && !allow_cpu0 {
            problems.push(format!(
                "the list includes CPU 0's core ({}): the boot CPU takes work that cannot move; leave it out or pass --allow-cpu0",
                core.cpus
            ));
            continue;
        }
        picked.push(i);
    }
    for (n, node) in topo.nodes.iter().enumerate() {
        if node.cpus.as_slice().iter().all(|c| list.contains(*c)) {
            problems.push(format!(
                "{} would keep no housekeeping CPU: its interrupts, kernel threads and per-node work need one; leave at least one of its cores out of the list",
                topo.node_name(n)
            ));
        }
    }
    if !problems.is_empty() {
        bail!(
            "--cpus {list} is refused, nothing was written:\n  {}",
            problems.join("\n  ")
        );
    }
    let mut warnings = Vec::new();
    for d in topo.l3.iter().filter(|d| d.keeps_housekeeping) {
        if d.cpus.as_slice().iter().all(|c| list.contains(*c)) {
            warnings.push(format!(
                "the L3 shared by CPUs {} keeps no housekeeping core: accepted as asked (a whole L3 for the workload keeps housekeeping's cache traffic out of it), but its cache-local kernel work runs elsewhere",
                d.cpus
            ));
        }
    }
    if topo.is_hybrid() {
        let p_left = topo
            .cores
            .iter()
            .enumerate()
            .any(|(i, c)| c.rank == 0 && !picked.contains(&i) && !c.cpus.contains(0));
        if p_left && picked.iter().any(|&i| topo.cores[i].rank > 0) {
            warnings.push(
                "the list isolates efficient cores while performance cores other than CPU 0's stay housekeeping".into(),
            );
        }
    }
    Ok((picked, warnings))
}
