//! cpuidle: driver, governor and every idle state, plus per-CPU PM QoS.
//!
//! States are described from the first online CPU's view; `disabled_cpus` and
//! the counters cover every CPU that has the state, and CPUs whose state table
//! differs (hybrid parts can) are listed in `state_tables`.

use serde::{Deserialize, Serialize};

use super::{CPU_DIR, Ctx, numbered};
use crate::cpulist::{CpuList, Group, group};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Idle {
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub available_governors: Option<Vec<String>>,
    pub states: Vec<IdleState>,
    /// CPUs with at least one idle state.
    pub cpus_with_states: CpuList,
    /// Present only when CPUs disagree on their state table: each group's
    /// `name latency/residency` list.
    pub state_tables: Option<Vec<Group<String>>>,
    /// `power/pm_qos_resume_latency_us` per CPU: `0` means no constraint,
    /// `n/a` means the CPU may not enter any idle state except polling.
    pub pm_qos_resume_latency_us: Vec<Group<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

pub fn read(ctx: &Ctx, online: &CpuList) -> Idle {
    let base = format!("{CPU_DIR}/cpuidle");
    let driver = ctx.text(&format!("{base}/current_driver"));
    if driver.is_none() {
        ctx.not_exposed("cpuidle driver", &format!("{base}/current_driver"));
    }
    let governor = ctx
        .text(&format!("{base}/current_governor"))
        .or_else(|| ctx.text(&format!("{base}/current_governor_ro")));
    let available_governors = ctx.words(&format!("{base}/available_governors"));

    let mut per_cpu: Vec<(u32, Vec<Shape>)> = Vec::new();
    let mut states: Vec<IdleState> = Vec::new();
    for &cpu in online.as_slice() {
        let dir = format!("{CPU_DIR}/cpu{cpu}/cpuidle");
        let Some(names) = ctx.dir(&dir) else { continue };
        let indices = numbered(&names, "state");
        if indices.is_empty() {
            continue;
        }
        let mut shapes = Vec::new();
        for idx in indices {
            let d = format!("{dir}/state{idx}");
            let name = ctx
                .text(&format!("{d}/name"))
                .unwrap_or_else(|| format!("state{idx}"));
            let latency = ctx.parse::<u64>(&format!("{d}/latency"));
            let residency = ctx.parse::<u64>(&format!("{d}/residency"));
            let disabled = ctx.parse::<u32>(&format!("{d}/disable")).map(|v| v != 0);
            let usage = ctx.parse::<u64>(&format!("{d}/usage"));
            let time = ctx.parse::<u64>(&format!("{d}/time"));
            let pos = match states.iter().position(|s| s.index == idx && s.name == name) {
                Some(p) => p,
                None => {
                    states.push(IdleState {
                        index: idx,
                        name: name.clone(),
                        desc: ctx.text(&format!("{d}/desc")),
                        latency_us: latency,
                        residency_us: residency,
                        disabled_cpus: CpuList::default(),
                        default_status: ctx.text(&format!("{d}/default_status")),
                        usage: Some(0),
                        time_us: Some(0),
                    });
                    states.len() - 1
                }
            };
            let s = &mut states[pos];
            if disabled == Some(true) {
                s.disabled_cpus = s
                    .disabled_cpus
                    .as_slice()
                    .iter()
                    .copied()
                    .chain([cpu])
                    .collect();
            }
            s.usage = s.usage.zip(usage).map(|(a, b)| a + b);
            s.time_us = s.time_us.zip(time).map(|(a, b)| a + b);
            shapes.push(Shape {
                name,
                latency,
                residency,
            });
        }
        per_cpu.push((cpu, shapes));
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

    let pm_qos = group(online.as_slice().iter().filter_map(|&cpu| {
        Some((
            cpu,
            ctx.text(&format!(
                "{CPU_DIR}/cpu{cpu}/power/pm_qos_resume_latency_us"
            ))?,
        ))
    }));
    if pm_qos.is_empty() {
        ctx.not_exposed(
            "PM QoS resume latency",
            &format!("{CPU_DIR}/cpu0/power/pm_qos_resume_latency_us"),
        );
    }
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

fn describe_table(shapes: &[Shape]) -> String {
    let us = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    shapes
        .iter()
        .map(|s| format!("{} {}/{}", s.name, us(s.latency), us(s.residency)))
        .collect::<Vec<_>>()
        .join(", ")
}
