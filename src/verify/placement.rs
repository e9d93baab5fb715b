//! Where verify runs its probe: the sleeper (the CPU left idle, or the rpc
//! server) inside the knob's target CPUs, the waker (or the rpc client)
//! outside them where possible, and never on a CPU that shares a core, a
//! module (cluster) or an L2 with the sleeper: a busy neighbour keeps the
//! shared parts awake and hides the exit cost of the state being measured.
//! Where the target includes isolated CPUs (`/sys/devices/system/cpu/isolated`),
//! the sleeper is one of them: that is where the latency-sensitive work runs,
//! and the kernel leaves isolated CPUs out of every process's default
//! affinity, so choosing among the allowed CPUs alone would never measure one.

use anyhow::{Result, bail};
use serde::Serialize;

use crate::cpulist::CpuList;
use crate::inventory::{CPU_DIR, Reader};
use crate::knob::rules::cmdline as rules;
use crate::root::Root;

/// The CPUs chosen and why.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Placement {
    /// The knob's target CPUs; `None` for a knob without CPUs (THP, sysctl).
    pub target_cpus: Option<CpuList>,
    pub sleeper: u32,
    pub waker: u32,
    /// CPUs that share a core, module or L2 with the sleeper (itself left out).
    pub sleeper_neighbours: CpuList,
    /// The sleeper is an isolated CPU (`/sys/devices/system/cpu/isolated`).
    pub sleeper_isolated: bool,
    pub why: String,
    /// The noise probe's CPUs and why those (`noise_cpus`); absent for the other probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// The CPUs the noise probe measures, and why those.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Measured {
    pub cpus: CpuList,
    pub why: String,
}

/// What the user asked for with the probe's options.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked {
    pub sleeper: Option<u32>,
    pub waker: Option<u32>,
}

/// The CPUs that share a core (SMT), a cluster (module) or a cache of level
/// 2 or below with `cpu`, from sysfs under `root`. Cache levels come from
/// `level`; where a capture lacks it, `index0`-`index2` (L1d, L1i, L2 on
/// every architecture Linux lists them for) count.
pub fn neighbours(root: &Root, cpu: u32) -> CpuList {
    let r = Reader::new(root);
    let dir = format!("{CPU_DIR}/cpu{cpu}");
    let mut all: Vec<u32> = Vec::new();
    for f in [
        "topology/thread_siblings_list",
        "topology/core_cpus_list",
        "topology/cluster_cpus_list",
    ] {
        if let Some(l) = r.cpulist(&format!("{dir}/{f}")) {
            all.extend(l.as_slice());
        }
    }
    let indices = r
        .dir(&format!("{dir}/cache"))
        .map(|names| crate::inventory::numbered(&names, "index"))
        .unwrap_or_default();
    for i in indices {
        let d = format!("{dir}/cache/index{i}");
        let close = match r.parse::<u32>(&format!("{d}/level")) {
            Some(level) => level <= 2,
            None => i <= 2,
        };
        if close && let Some(l) = r.cpulist(&format!("{d}/shared_cpu_list")) {
            all.extend(l.as_slice());
        }
    }
    all.retain(|&c| c != cpu);
    all.into_iter().collect()
}

/// Chooses the sleeper and the waker among `allowed`. An asked sleeper
/// outside the target is refused unless `force`.
pub fn place(
    root: &Root,
    allowed: &CpuList,
    target: Option<&CpuList>,
    asked: Asked,
    force: bool,
) -> Result<Placement> {
    let in_target = |c: u32| target.is_none_or(|t| t.contains(c));
    let isolated = crate::probe::isolated_cpus(root);
    // An isolated CPU of the target, the last one, allowed or not (see above).
    let isolated_target = target.and_then(|t| {
        t.as_slice()
            .iter()
            .rev()
            .copied()
            .find(|&c| isolated.contains(c))
    });
    let sleeper = match asked.sleeper {
        Some(s) if !in_target(s) && !force => bail!(
            "--sleeper-cpu {s} is outside the knob's target CPUs {}: the knob does not touch it, so verify would measure nothing; pick one of them, or pass --force to measure there anyway",
            target.map(|t| t.to_string()).unwrap_or_default()
        ),
        Some(s) => s,
        None if isolated_target.is_some() => isolated_target.unwrap_or_default(),
        None => match allowed.as_slice().iter().rev().find(|&&c| in_target(c)) {
            Some(&c) => c,
            None => bail!(
                "none of the knob's target CPUs {} can run the probe here (allowed: {allowed}): verify would measure a CPU the knob does not touch",
                target.map(|t| t.to_string()).unwrap_or_default()
            ),
        },
    };
    let near = neighbours(root, sleeper);
    let (waker, why) = match asked.waker {
        Some(w) => (w, "--waker-cpu as asked".to_string()),
        None => {
            let far = |c: &&u32| **c != sleeper && !near.contains(**c);
            let outside = allowed
                .as_slice()
                .iter()
                .rev()
                .filter(far)
                .find(|&&c| !in_target(c));
            let inside = allowed.as_slice().iter().rev().find(far);
            let other = allowed.as_slice().iter().rev().find(|&&c| c != sleeper);
            match (outside, inside, other) {
                (Some(&w), ..) => (
                    w,
                    "the waker outside the target, sharing no core, module or L2 with the sleeper"
                        .to_string(),
                ),
                (None, Some(&w), _) => (
                    w,
                    match target {
                        Some(_) => "every CPU outside the target is unusable or near the sleeper: the waker inside it, sharing no core, module or L2 with the sleeper",
                        None => "the waker sharing no core, module or L2 with the sleeper",
                    }
                    .to_string(),
                ),
                (None, None, Some(&w)) => (
                    w,
                    format!(
                        "every other usable CPU shares a core, module or L2 with the sleeper (CPUs {near}): its wakeups may understate a deep state's exit cost"
                    ),
                ),
                (None, None, None) => bail!(
                    "the probe needs two CPUs, but only CPU {allowed} can run it"
                ),
            }
        }
    };
    if waker == sleeper {
        bail!("the waker and the sleeper are both CPU {waker}: they must differ");
    }
    let sleeper_isolated = isolated.contains(sleeper);
    let why = match sleeper_isolated {
        true => {
            format!("the sleeper on isolated CPU {sleeper} (the kernel isolates {isolated}); {why}")
        }
        false => why,
    };
    Ok(Placement {
        target_cpus: target.cloned(),
        sleeper,
        waker,
        sleeper_neighbours: near,
        sleeper_isolated,
        why,
        measured: None,
    })
}

/// The keys whose CPUs are isolated (kernel/sched/isolation.c,
/// `housekeeping_nohz_full_setup`, `housekeeping_isolcpus_setup`): the
/// first word of each counts (`knob::rules::cmdline::FIRST_WINS`).
const ISOLATING: [&str; 2] = ["nohz_full", "isolcpus"];

/// The first `nohz_full=` and `isolcpus=` words of a command line with their
/// CPUs (`isolcpus=` with any flags: `managed_irq,2-3` isolates 2-3 too).
fn isolating_words<'a>(words: impl Iterator<Item = &'a str>) -> Vec<(String, CpuList)> {
    let mut out: Vec<(String, CpuList)> = Vec::new();
    for w in words {
        let Some((key, value)) = w.split_once('=') else {
            continue;
        };
        let key = key.replace('-', "_");
        let first = !out.iter().any(|(o, _)| o.starts_with(&format!("{key}=")));
        if ISOLATING.contains(&key.as_str())
            && first
            && let Some((_, cpus)) = rules::split_flags(&key, value)
        {
            out.push((format!("{key}={value}"), cpus));
        }
    }
    out
}

/// The CPUs the noise probe measures under verify: those asked for
/// (`-- --cpus`); else the CPUs the knob itself isolates (its `isolcpus=` /
/// `nohz_full=`); else those the running kernel isolates by any means:
/// `nohz_full=` and every `isolcpus=` flag on `/proc/cmdline` (isolate's
/// default `isolcpus=managed_irq,LIST` leaves `cpu/isolated`, which lists
/// domain isolation only, empty), `cpu/isolated` and `cpu/nohz_full`; else
/// the allowed CPUs outside the knob's target (what an isolation knob moves
/// work away from); else the sleeper's CPU. Only online CPUs count.
pub fn noise_cpus(
    root: &Root,
    given: &CpuList,
    knob_args: Option<&[String]>,
    sleeper: u32,
    target: Option<&CpuList>,
) -> Measured {
    let measured = |cpus: CpuList, why: String| Measured { cpus, why };
    if !given.is_empty() {
        return measured(given.clone(), "--cpus as asked".into());
    }
    let r = Reader::new(root);
    let online = r.cpulist(&format!("{CPU_DIR}/online")).unwrap_or_default();
    let union = |sets: &[(String, CpuList)]| -> CpuList {
        sets.iter()
            .flat_map(|(_, c)| c.as_slice().iter().copied())
            .filter(|&c| online.contains(c))
            .collect()
    };
    let said = |sets: &[(String, CpuList)]| {
        sets.iter()
            .map(|(w, _)| w.as_str())
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let own = isolating_words(knob_args.unwrap_or_default().iter().map(String::as_str));
    let cpus = union(&own);
    if !cpus.is_empty() {
        return measured(cpus, format!("the CPUs the knob isolates ({})", said(&own)));
    }
    let cmdline = root.read_string("/proc/cmdline").unwrap_or_default();
    let mut running = isolating_words(cmdline.split_whitespace());
    for (file, what) in [("isolated", "domain-isolated"), ("nohz_full", "nohz_full")] {
        let path = format!("{CPU_DIR}/{file}");
        if let Some(c) = r.cpulist(&path).filter(|c| !c.is_empty()) {
            running.push((format!("{path} ({what} {c})"), c));
        }
    }
    let cpus = union(&running);
    if !cpus.is_empty() {
        let words: Vec<(String, CpuList)> = running
            .iter()
            .map(|(w, c)| match w.starts_with('/') {
                true => (w.clone(), c.clone()),
                false => (format!("{w} on /proc/cmdline"), c.clone()),
            })
            .collect();
        return measured(
            cpus,
            format!("the CPUs the running kernel isolates: {}", said(&words)),
        );
    }
    let outside: CpuList = crate::probe::Cpus::read(root)
        .map(|c| c.allowed)
        .unwrap_or_default()
        .as_slice()
        .iter()
        .copied()
        .filter(|&c| target.is_some_and(|t| !t.contains(c)))
        .collect();
    match (outside.is_empty(), target) {
        (false, Some(t)) => measured(
            outside,
            format!(
                "no CPU is isolated: the allowed CPUs outside the knob's target {t}, where it moves work away from"
            ),
        ),
        _ => measured(
            std::iter::once(sleeper).collect(),
            format!(
                "no CPU is isolated and none lies outside the knob's target: the sleeper's CPU {sleeper}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_isolating_word_of_each_key_counts_with_any_flags() {
        let w = isolating_words(
            "ro isolcpus=managed_irq,domain,2-3 nohz-full=2-5 isolcpus=7 rcu_nocbs=2-5".split(' '),
        );
        let got: Vec<(String, String)> =
            w.iter().map(|(k, c)| (k.clone(), c.to_string())).collect();
        assert_eq!(
            got,
            vec![
                (
                    "isolcpus=managed_irq,domain,2-3".to_string(),
                    "2-3".to_string()
                ),
                ("nohz_full=2-5".to_string(), "2-5".to_string()),
            ]
        );
    }
}
