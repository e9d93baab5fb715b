//! cpuidle: driver, governor and every idle state, plus per-CPU PM QoS.
//!
//! States are described from the first online CPU's view; `disabled_cpus` and
//! the counters cover every CPU that has the state, and CPUs whose state table
//! differs (hybrid parts can) are listed in `state_tables`.

use serde::{Deserialize, Serialize};

use super::idle_states::{CpuIdleDir, Listing, state_path};
use super::pm_qos::resume_latency_path;
use super::{CPU_DIR, Reader};
use crate::cpulist::{CpuList, Group, group};
use crate::root::DirHandle;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Idle {
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub available_governors: Option<Vec<String>>,
    /// `null` when no CPU exposes an idle state.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<IdleState>>")]
    pub states: Vec<IdleState>,
    /// CPUs with at least one idle state.
    pub cpus_with_states: CpuList,
    /// Present only when CPUs disagree on their state table: each group's
    /// `name latency/residency` list.
    pub state_tables: Option<Vec<Group<String>>>,
    /// `power/pm_qos_resume_latency_us` per CPU: `0` means no constraint,
    /// `n/a` means the CPU may not enter any idle state except polling.
    #[serde(with = "super::absent", default)]
    #[schemars(with = "Option<Vec<Group<String>>>")]
    pub pm_qos_resume_latency_us: Vec<Group<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    pub desc: Option<String>,
    /// Exit latency, µs.
    pub latency_us: Option<u64>,
    /// Target residency, µs.
    pub residency_us: Option<u64>,
    pub disabled_cpus: CpuList,
    pub default_status: Option<String>,
    /// Entries summed over all CPUs (a live counter).
    pub usage: Option<u64>,
    /// Time spent, µs, summed over all CPUs (a live counter).
    pub time_us: Option<u64>,
}

#[derive(Clone, PartialEq)]
struct Shape {
    name: String,
    latency: Option<u64>,
    residency: Option<u64>,
}

/// Without `with_states` (the `pm_qos` section alone), only the driver,
/// governor and per-CPU resume latencies: no state directory is opened.
pub fn read(ctx: &Reader, online: &CpuList, with_states: bool) -> Idle {
    let base = format!("{CPU_DIR}/cpuidle");
    let driver = ctx.text(&format!("{base}/current_driver"));
    if driver.is_none() {
        ctx.not_exposed("cpuidle driver", &format!("{base}/current_driver"));
    }
    let governor = ctx
        .text(&format!("{base}/current_governor"))
        .or_else(|| ctx.text(&format!("{base}/current_governor_ro")));
    let available_governors = ctx.words(&format!("{base}/available_governors"));

    // Per-CPU reads run on all cores; folding them is cheap.
    let with_states_on: &[u32] = if with_states { online.as_slice() } else { &[] };
    let Some((&first_cpu, rest)) = with_states_on.split_first() else {
        return Idle {
            driver,
            governor,
            available_governors,
            states: Vec::new(),
            cpus_with_states: CpuList::default(),
            state_tables: None,
            pm_qos_resume_latency_us: match online.is_empty() {
                true => Vec::new(),
                false => resume_latencies(ctx, online),
            },
        };
    };
    // One handle on the CPU directory for the whole pass: per-CPU handles
    // cost an open and a close each (1,024 system calls on 512 CPUs).
    let cpus = ctx.root.dir_handle(CPU_DIR).ok();
    let cpus = cpus.as_ref();
    let (first_states, listing) = read_cpu(ctx, cpus, first_cpu, None);
    let first_shapes: Vec<(u32, Shape)> = first_states
        .iter()
        .map(|r| (r.index, r.shape.clone()))
        .collect();
    let first = First {
        shapes: &first_shapes,
        listing: &listing.unwrap_or_default(),
    };
    let raw: Vec<(u32, Vec<RawState>)> = std::iter::once((first_cpu, first_states))
        .chain(ctx.par_map(rest, |ctx, &cpu| {
            (cpu, read_cpu(ctx, cpus, cpu, Some(&first)).0)
        }))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let mut states: Vec<IdleState> = Vec::new();
    let mut disabled: Vec<Vec<u32>> = Vec::new();
    let mut per_cpu: Vec<(u32, Vec<Shape>)> = Vec::new();
    for (cpu, list) in raw {
        let mut shapes = Vec::new();
        for r in list {
            let pos = match states
                .iter()
                .position(|s| s.index == r.index && s.name == r.shape.name)
            {
                Some(p) => p,
                None => {
                    states.push(IdleState {
                        index: r.index,
                        name: r.shape.name.clone(),
                        desc: ctx.text(&state_path(cpu, r.index, "desc")),
                        latency_us: r.shape.latency,
                        residency_us: r.shape.residency,
                        disabled_cpus: CpuList::default(),
                        default_status: ctx.text(&state_path(cpu, r.index, "default_status")),
                        usage: Some(0),
                        time_us: Some(0),
                    });
                    disabled.push(Vec::new());
                    states.len() - 1
                }
            };
            let s = &mut states[pos];
            if r.disabled == Some(true) {
                disabled[pos].push(cpu);
            }
            s.usage = s.usage.zip(r.usage).map(|(a, b)| a + b);
            s.time_us = s.time_us.zip(r.time).map(|(a, b)| a + b);
            shapes.push(r.shape);
        }
        per_cpu.push((cpu, shapes));
    }
    for (s, d) in states.iter_mut().zip(disabled) {
        s.disabled_cpus = CpuList::new(d);
    }
    if states.is_empty() {
        ctx.not_exposed(
            "idle states",
            &format!(
                "{CPU_DIR}/cpu{}/cpuidle/state0",
                online.first().unwrap_or(0)
            ),
        );
    }
    let cpus_with_states: CpuList = per_cpu.iter().map(|(c, _)| *c).collect();
    let tables = group(
        per_cpu
            .into_iter()
            .map(|(c, shapes)| (c, describe_table(&shapes))),
    );
    let state_tables = if tables.len() > 1 { Some(tables) } else { None };
    // Keep only the first CPU's table in `states` order; others are in `state_tables`.
    states.sort_by_key(|s| s.index);

    let pm_qos = resume_latencies(ctx, online);
    Idle {
        driver,
        governor,
        available_governors,
        states,
        cpus_with_states,
        state_tables,
        pm_qos_resume_latency_us: pm_qos,
    }
}

/// `power/pm_qos_resume_latency_us` of each online CPU, grouped.
fn resume_latencies(ctx: &Reader, online: &CpuList) -> Vec<Group<String>> {
    let pm_qos = group(
        ctx.par_map(online.as_slice(), |ctx, &cpu| {
            Some((cpu, ctx.text(&resume_latency_path(cpu))?))
        })
        .into_iter()
        .flatten(),
    );
    if pm_qos.is_empty() {
        ctx.not_exposed("PM QoS resume latency", &resume_latency_path(0));
    }
    pm_qos
}

struct RawState {
    index: u32,
    shape: Shape,
    disabled: Option<bool>,
    usage: Option<u64>,
    time: Option<u64>,
}

/// The first CPU's table, as the other CPUs are read against it.
struct First<'a> {
    shapes: &'a [(u32, Shape)],
    listing: &'a Listing,
}

/// One CPU's states, and its listing when its directory was listed. Given
/// the first CPU's table, a CPU that has it ([`CpuIdleDir::read_as`]) is
/// taken to have exactly that table, and only `disable` and the counters are
/// read: on a 512-CPU host each file per CPU costs about 2 ms. Read beneath
/// `cpus` (the open CPU directory) when there is one.
fn read_cpu(
    ctx: &Reader,
    cpus: Option<&DirHandle>,
    cpu: u32,
    first: Option<&First>,
) -> (Vec<RawState>, Option<Listing>) {
    let dir = match cpus {
        Some(cpus) => CpuIdleDir::beneath(cpus, cpu),
        None => match CpuIdleDir::open(ctx.root, cpu) {
            Ok(Some(d)) => d,
            Ok(None) => return (Vec::new(), None),
            Err(e) => {
                ctx.warn(format!("{}: {e}", super::cpuidle_dir(cpu)));
                return (Vec::new(), None);
            }
        },
    };
    // Read through `Reader`, so unreadable or garbled files become warnings.
    let text =
        |index: u32, attr: &str| ctx.text_from(|| dir.path(index, attr), dir.read(index, attr));
    fn parse<T: std::str::FromStr>(
        ctx: &Reader,
        dir: &CpuIdleDir,
        text: Option<String>,
        index: u32,
        attr: &str,
    ) -> Option<T> {
        ctx.parse_text(|| dir.path(index, attr), text?)
    }
    let state = |index: u32, shape: Shape| RawState {
        index,
        shape,
        disabled: parse::<u32>(ctx, &dir, text(index, "disable"), index, "disable").map(|v| v != 0),
        usage: parse(ctx, &dir, text(index, "usage"), index, "usage"),
        time: parse(ctx, &dir, text(index, "time"), index, "time"),
    };
    if let Some(first) = first {
        // A state whose `disable` is missing (a CPU without cpuidle, a
        // smaller table) sends the CPU to the listing at once.
        let shape = |i: u32| {
            first
                .shapes
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, s)| s.clone())
        };
        let as_first = dir.read_as(first.listing, |i| {
            let r = state(i, shape(i)?);
            r.disabled.is_some().then_some(r)
        });
        if let Some(read) = as_first {
            return (read, None);
        }
    }
    let listing = match dir.listing() {
        Ok(l) => l,
        Err(e) => {
            if !crate::root::is_absent(&e) {
                ctx.warn(format!("{}: {e}", dir.logical()));
            }
            return (Vec::new(), None);
        }
    };
    let states = listing
        .indices
        .iter()
        .copied()
        .map(|index| {
            let shape = Shape {
                name: text(index, "name").unwrap_or_else(|| format!("state{index}")),
                latency: parse(ctx, &dir, text(index, "latency"), index, "latency"),
                residency: parse(ctx, &dir, text(index, "residency"), index, "residency"),
            };
            state(index, shape)
        })
        .collect();
    (states, Some(listing))
}

fn describe_table(shapes: &[Shape]) -> String {
    let us = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    shapes
        .iter()
        .map(|s| format!("{} {}/{}", s.name, us(s.latency), us(s.residency)))
        .collect::<Vec<_>>()
        .join(", ")
}
