//! Which CPUs to isolate: whole cores, housekeeping on every NUMA node and
//! no smaller than a minimum, whole L3 domains first where a package has
//! several, a hybrid part's efficient-core L2 clusters whole, CPU 0's core
//! kept unless asked, performance cores before efficient ones.

use anyhow::{Result, bail};
use serde::Serialize;

use super::topology::Topology;
use crate::cpulist::CpuList;

/// What the user asked to isolate.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `--count 8`: this many CPUs, chosen here.
    Count(usize),
    /// `--cpus 4-11`: exactly these.
    List(CpuList),
}

impl Request {
    /// `--count N`.
    pub fn count(text: &str) -> Result<Request> {
        let t = text.trim();
        match t.parse::<usize>() {
            Ok(0) => bail!("--count 0: nothing to isolate; give how many CPUs, e.g. --count 8"),
            Ok(n) => Ok(Request::Count(n)),
            Err(_) => bail!("--count {t:?}: not a number of CPUs; for these CPUs write --cpus {t}"),
        }
    }

    /// `--cpus LIST`; a bare number is the old spelling of a count (the
    /// caller says so), as `--cpus 8` was before `--count`.
    pub fn list(text: &str) -> Result<Request> {
        let t = text.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return Self::count(t).map_err(|_| {
                anyhow::anyhow!("--cpus {t}: nothing to isolate; give a CPU list (--cpus 4-11, `{t}-{t}` for CPU {t} alone) or a count (--count 8)")
            });
        }
        match CpuList::parse(t) {
            Ok(l) if l.is_empty() => bail!("--cpus {t:?}: an empty CPU list isolates nothing"),
            Ok(l) => Ok(Request::List(l)),
            Err(e) => bail!(
                "--cpus {t:?}: {e}; give a CPU list (--cpus 4-11, `8-8` for CPU 8 alone) or a count (--count 8)"
            ),
        }
    }
}

/// Which core type a hybrid part isolates first (`--prefer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Prefer {
    #[default]
    Performance,
    Efficient,
}

impl Prefer {
    pub fn parse(text: &str) -> Option<Prefer> {
        match text {
            "performance" => Some(Prefer::Performance),
            "efficient" => Some(Prefer::Efficient),
            _ => None,
        }
    }

    /// The order a core of `rank` is taken in: the asked-for type first.
    fn order(self, rank: u8) -> u8 {
        match (self, rank) {
            (Prefer::Efficient, 0) => u8::MAX,
            (_, r) => r,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Prefer::Performance => "performance",
            Prefer::Efficient => "efficient",
        }
    }
}

/// How the split may be made.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub allow_cpu0: bool,
    /// Accept fewer housekeeping CPUs than [`minimum`] (said in a warning).
    pub allow_small_housekeeping: bool,
    pub prefer: Prefer,
}

/// The fewest housekeeping CPUs a split may leave, and why: one core on
/// every NUMA node and at least one CPU in 16, since every IRQ, RCU
/// callback, unbound workqueue item, kernel thread and system service runs
/// there (the ratio is the planner's rule of thumb, as NTO's reserved set;
/// no kernel rule sets it).
pub fn minimum(topo: &Topology) -> (usize, String) {
    let per_node: usize = (0..topo.nodes.len())
        .map(|n| {
            topo.cores
                .iter()
                .filter(|c| c.node == n)
                .map(|c| c.cpus.len())
                .min()
                .unwrap_or(0)
        })
        .sum();
    let ratio = topo.online.len().div_ceil(16);
    let n = per_node.max(ratio);
    (
        n,
        format!(
            "housekeeping keeps at least {n} CPU(s): one core on each of the {} NUMA node(s) ({per_node}) and at least 1 in 16 of the {} online CPUs ({ratio}), as every interrupt, RCU callback, unbound workqueue item and system service runs there",
            topo.nodes.len(),
            topo.online.len()
        ),
    )
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

pub fn choose(topo: &Topology, req: &Request, opts: Options) -> Result<Choice> {
    let allow_cpu0 = opts.allow_cpu0;
    let (min, min_why) = minimum(topo);
    let floor = match opts.allow_small_housekeeping {
        true => 1,
        false => min,
    };
    let (picked, mut warnings) = match req {
        Request::Count(n) => (by_count(topo, *n, opts, floor, &min_why)?, Vec::new()),
        Request::List(l) => by_list(topo, l, allow_cpu0, floor, &min_why)?,
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
    match housekeeping.len() < min {
        true => warnings.push(format!(
            "--allow-small-housekeeping: {} housekeeping CPU(s), fewer than the minimum: {min_why}",
            housekeeping.len()
        )),
        false => reasons.push(min_why),
    }
    if topo.l3.iter().any(|d| d.split_package) {
        let whole: Vec<String> = topo
            .l3
            .iter()
            .filter(|d| d.cpus.as_slice().iter().all(|c| isolated.contains(*c)))
            .map(|d| d.cpus.to_string())
            .collect();
        reasons.push(format!(
            "a package holds several L3 caches ({} in all): whole L3 domains are isolated first, away from CPU 0's, so housekeeping's cache traffic stays out of them{}",
            topo.l3.len(),
            match whole.is_empty() {
                true => String::new(),
                false => format!(" (isolated whole: {})", whole.join(" ")),
            }
        ));
    }
    if picked.iter().any(|&i| topo.cores[i].l2_cluster.is_some()) {
        reasons.push(
            "efficient cores are isolated by whole L2 cluster: the cores of a cluster share their L2, so housekeeping on one of them would evict the workload's cache on the others".into(),
        );
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
    hybrid(topo, req, opts, floor, &picked, &mut reasons, &mut warnings);
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

/// What the core types did to the choice: the type taken first, a count
/// made as a combination, a mixed set, a `--prefer` with nothing to choose.
fn hybrid(
    topo: &Topology,
    req: &Request,
    opts: Options,
    floor: usize,
    picked: &[usize],
    reasons: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let allow_cpu0 = opts.allow_cpu0;
    if let Request::Count(n) = req
        && cpus_of(
            topo,
            &greedy(topo, &candidates(topo, allow_cpu0, opts.prefer), *n, floor),
        ) != *n
    {
        reasons.push(format!(
            "{n} CPUs are a combination of whole cores and whole clusters: taking them in order ({} first) does not reach {n}, so some of that type stay housekeeping",
            opts.prefer.words()
        ));
    }
    if topo.is_hybrid() {
        let p_iso = picked.iter().filter(|&&i| topo.cores[i].rank == 0).count();
        reasons.push(format!(
            "hybrid part: {} cores are isolated first{} ({p_iso} of {} chosen are P-cores)",
            opts.prefer.words(),
            match opts.prefer {
                Prefer::Performance => "",
                Prefer::Efficient => ", as --prefer efficient asks",
            },
            picked.len()
        ));
        let mixed = picked.iter().any(|&i| topo.cores[i].rank > 0);
        if mixed {
            warnings.push(
                "the isolated set mixes performance and efficient cores: the workload's threads will see different speeds depending on where they run".into(),
            );
        }
    }
    if opts.prefer == Prefer::Efficient && !topo.is_hybrid() {
        warnings.push(
            "--prefer efficient: this part has one core type, so there is no choice to make".into(),
        );
    }
}

/// Groups of core indices in the order they are isolated, each taken whole:
/// the preferred core type first (P-cores unless `--prefer efficient`); where a package holds several L3s, the L3 domains away
/// from CPU 0's first; a hybrid part's efficient cores by L2 cluster; then
/// by number (the lowest CPUs after CPU 0's core, as people number them).
fn candidates(topo: &Topology, allow_cpu0: bool, prefer: Prefer) -> Vec<Vec<usize>> {
    let cpu0_l3 = topo.core_of(0).and_then(|c| c.l3);
    let split = topo.l3.iter().any(|d| d.split_package);
    let mut v: Vec<usize> = (0..topo.cores.len())
        .filter(|&i| allow_cpu0 || !topo.cores[i].cpus.contains(0))
        .collect();
    v.sort_by_key(|&i| {
        let c = &topo.cores[i];
        (
            prefer.order(c.rank),
            split && c.l3.is_some() && c.l3 == cpu0_l3,
            c.l3.filter(|_| split),
            c.cpus.first(),
        )
    });
    let mut units: Vec<Vec<usize>> = Vec::new();
    for i in v {
        let cluster = &topo.cores[i].l2_cluster;
        match units
            .iter_mut()
            .find(|u| cluster.is_some() && topo.cores[u[0]].l2_cluster == *cluster)
        {
            Some(u) => u.push(i),
            None => units.push(vec![i]),
        }
    }
    units
}

/// Greedy: take each candidate group that fits the count, leaves its node a
/// housekeeping core and housekeeping at least `floor` CPUs.
fn greedy(topo: &Topology, units: &[Vec<usize>], n: usize, floor: usize) -> Vec<usize> {
    let mut node_hk = vec![0usize; topo.nodes.len()];
    for c in &topo.cores {
        node_hk[c.node] += 1;
    }
    let mut left = n;
    let mut hk = topo.online.len();
    let mut picked = Vec::new();
    for unit in units {
        let size = cpus_of(topo, unit);
        let mut after = node_hk.clone();
        for &i in unit {
            after[topo.cores[i].node] = after[topo.cores[i].node].saturating_sub(1);
        }
        let nodes_ok = unit.iter().all(|&i| after[topo.cores[i].node] > 0);
        if size <= left && nodes_ok && hk >= floor + size {
            node_hk = after;
            left -= size;
            hk -= size;
            picked.extend(unit);
            if left == 0 {
                break;
            }
        }
    }
    picked
}

/// Exactly `n` CPUs of whole units where greedy's units-in-order missed a
/// combination (a hybrid part: 2-CPU P-cores and 4-CPU E-clusters make 8 as
/// P+P+E, not P+P+P then nothing). Each node keeps its last unit in order as
/// housekeeping (CPU 0's core already does that for its node). Of all
/// combinations, the first in unit order: with one size per core type that
/// is the one with the most CPUs of the preferred type.
fn combination(topo: &Topology, units: &[Vec<usize>], n: usize, floor: usize) -> Vec<usize> {
    if topo.online.len() < floor.saturating_add(n) {
        return Vec::new();
    }
    // A node with a core outside every unit (CPU 0's) keeps that one.
    let mut in_unit = vec![false; topo.cores.len()];
    units.iter().flatten().for_each(|&i| in_unit[i] = true);
    let mut kept = vec![false; topo.nodes.len()];
    for (i, c) in topo.cores.iter().enumerate() {
        kept[c.node] |= !in_unit[i];
    }
    let mut usable = vec![true; units.len()];
    for (u, unit) in units.iter().enumerate().rev() {
        let node = topo.cores[unit[0]].node;
        if !kept[node] {
            kept[node] = true;
            usable[u] = false;
        }
    }
    // can[u][s]: `s` CPUs can be made of usable units u.. .
    let mut can = vec![vec![false; n + 1]; units.len() + 1];
    can[units.len()][0] = true;
    for u in (0..units.len()).rev() {
        let size = cpus_of(topo, &units[u]);
        for s in 0..=n {
            can[u][s] = can[u + 1][s] || (usable[u] && size <= s && can[u + 1][s - size]);
        }
    }
    if !can[0][n] {
        return Vec::new();
    }
    let (mut left, mut picked) = (n, Vec::new());
    for (u, unit) in units.iter().enumerate() {
        let size = cpus_of(topo, unit);
        if usable[u] && size <= left && can[u + 1][left - size] {
            picked.extend(unit);
            left -= size;
        }
    }
    picked
}

/// `n` CPUs of whole units, or fewer when none make it.
fn pick(topo: &Topology, units: &[Vec<usize>], n: usize, floor: usize) -> Vec<usize> {
    let picked = greedy(topo, units, n, floor);
    if cpus_of(topo, &picked) == n {
        return picked;
    }
    match combination(topo, units, n, floor) {
        c if c.is_empty() => picked,
        c => c,
    }
}

fn cpus_of(topo: &Topology, picked: &[usize]) -> usize {
    picked.iter().map(|&i| topo.cores[i].cpus.len()).sum()
}

fn by_count(
    topo: &Topology,
    n: usize,
    opts: Options,
    floor: usize,
    min_why: &str,
) -> Result<Vec<usize>> {
    let allow_cpu0 = opts.allow_cpu0;
    let units = candidates(topo, allow_cpu0, opts.prefer);
    let picked = pick(topo, &units, n, floor);
    if cpus_of(topo, &picked) == n {
        return Ok(picked);
    }
    let max = cpus_of(topo, &greedy(topo, &units, usize::MAX, floor));
    let keeps = format!(
        "whole cores only{}, housekeeping kept on each of the {} NUMA node(s); {min_why}{}{}",
        if topo.cores.iter().any(|c| c.l2_cluster.is_some()) {
            " and whole L2 clusters of efficient cores"
        } else {
            ""
        },
        topo.nodes.len(),
        if floor > 1 {
            " (--allow-small-housekeeping lifts that)"
        } else {
            ""
        },
        if allow_cpu0 {
            ""
        } else {
            "; CPU 0's core kept (--allow-cpu0 lifts that)"
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
    let reachable = |m: usize| cpus_of(topo, &pick(topo, &units, m, floor)) == m;
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

fn by_list(
    topo: &Topology,
    list: &CpuList,
    allow_cpu0: bool,
    floor: usize,
    min_why: &str,
) -> Result<(Vec<usize>, Vec<String>)> {
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
    let hk = topo
        .online
        .as_slice()
        .iter()
        .filter(|c| !list.contains(**c))
        .count();
    if hk < floor {
        problems.push(format!(
            "it leaves {hk} housekeeping CPU(s), fewer than the minimum: {min_why}; isolate fewer CPUs, or pass --allow-small-housekeeping"
        ));
    }
    if !problems.is_empty() {
        bail!(
            "--cpus {list} is refused, nothing was written:\n  {}",
            problems.join("\n  ")
        );
    }
    let mut warnings = Vec::new();
    for c in &topo.cores {
        let Some(l2) = &c.l2_cluster else { continue };
        let inside = l2.as_slice().iter().filter(|x| list.contains(**x)).count();
        let w = format!(
            "the list splits the efficient-core L2 cluster {l2}: its cores share their L2, so housekeeping work there evicts the workload's cache"
        );
        if inside > 0 && inside < l2.len() && !warnings.contains(&w) {
            warnings.push(w);
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
