//! `hostknob isolate`: from the host's topology to the CPUs to isolate, and
//! from those to a manifest fragment (kernel command line, interrupts,
//! irqbalance, workqueues, systemd). It reads the host and changes nothing:
//! the user reviews the fragment, commits it, then applies it.

mod choose;
mod knobs;
mod nic;
mod spec;
mod topology;

use serde::Serialize;

use crate::cpulist::CpuList;
use crate::inventory::Inventory;

pub use choose::{Choice, Options, Prefer, Request};
pub use knobs::{Context, Isolcpus, KnobFile};
pub use nic::Nics;
pub use topology::Topology;

/// The chosen split, its reasons and the knobs made from it (`--format json`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct IsolatePlan {
    pub host: String,
    /// The day it was planned (UTC), as the knobs' history says.
    pub date: String,
    /// What was asked: a count, or a CPU list.
    pub request: Asked,
    pub isolated: CpuList,
    pub housekeeping: CpuList,
    /// The isolated cores, each a core's SMT siblings.
    pub isolated_cores: Vec<CpuList>,
    pub topology: Layout,
    /// Why this split, one rule per line.
    pub reasons: Vec<String>,
    /// What the split costs or leaves undone.
    pub warnings: Vec<String>,
    pub knobs: Vec<PlannedKnob>,
    /// How to check that the isolated CPUs are quiet: the noise probe, per knob.
    pub verify: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Asked {
    /// `--count N`.
    pub count: Option<usize>,
    /// `--cpus LIST`.
    pub cpus: Option<CpuList>,
    pub allow_cpu0: bool,
    /// `--allow-small-housekeeping`.
    pub allow_small_housekeeping: bool,
    /// `--isolcpus`: the flags of `isolcpus=` (`none`: no such parameter).
    pub isolcpus: Isolcpus,
    /// `--prefer`: the core type a hybrid part isolates first.
    pub prefer: Prefer,
}

/// The layout the choice was made from.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Layout {
    pub online: CpuList,
    pub cores: usize,
    pub numa_nodes: Vec<Split>,
    /// L3 instances, listed where a package holds several (whole ones are isolated first).
    pub l3_domains: Vec<Split>,
    /// Performance cores (`cpu_core`) on a hybrid part; `null` elsewhere.
    pub performance_cores: Option<CpuList>,
}

/// A domain's CPUs and how the split divides them.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Split {
    /// The NUMA node's number; `null` for an L3, or a host without NUMA nodes.
    pub id: Option<u32>,
    pub cpus: CpuList,
    pub isolated: CpuList,
    pub housekeeping: CpuList,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PlannedKnob {
    pub id: String,
    pub kind: String,
    /// The file written (`--out`); `null` when the fragment went to stdout.
    pub file: Option<String>,
    /// The knob file's YAML text.
    pub document: String,
}

/// Plans the split of `inv`'s host as `req` asks.
pub fn plan(
    inv: &Inventory,
    req: &Request,
    opts: Options,
    isolcpus: Isolcpus,
    nics: &Nics,
    cx: &Context,
) -> anyhow::Result<IsolatePlan> {
    let topo = Topology::from_inventory(inv)?;
    let mut choice = choose::choose(&topo, req, opts)?;
    let files = knobs::fragment(&topo, &choice, isolcpus, nics, cx);
    choice.reasons.extend(nics.reasons());
    let split = |id: Option<u32>, cpus: &CpuList| {
        let part = |set: &CpuList| -> CpuList {
            cpus.as_slice()
                .iter()
                .copied()
                .filter(|c| set.contains(*c))
                .collect()
        };
        Split {
            id,
            cpus: cpus.clone(),
            isolated: part(&choice.isolated),
            housekeeping: part(&choice.housekeeping),
        }
    };
    Ok(IsolatePlan {
        host: cx.host.to_string(),
        date: cx.date.to_string(),
        request: Asked {
            count: match req {
                Request::Count(n) => Some(*n),
                Request::List(_) => None,
            },
            cpus: match req {
                Request::List(l) => Some(l.clone()),
                Request::Count(_) => None,
            },
            allow_cpu0: opts.allow_cpu0,
            allow_small_housekeeping: opts.allow_small_housekeeping,
            isolcpus,
            prefer: opts.prefer,
        },
        isolated: choice.isolated.clone(),
        housekeeping: choice.housekeeping.clone(),
        isolated_cores: choice.isolated_cores.clone(),
        topology: Layout {
            online: topo.online.clone(),
            cores: topo.cores.len(),
            numa_nodes: topo.nodes.iter().map(|n| split(n.id, &n.cpus)).collect(),
            l3_domains: topo
                .l3
                .iter()
                .filter(|d| d.split_package)
                .map(|d| split(None, &d.cpus))
                .collect(),
            performance_cores: topo.is_hybrid().then(|| {
                topo.cores
                    .iter()
                    .filter(|c| c.rank == 0)
                    .flat_map(|c| c.cpus.as_slice().to_vec())
                    .collect()
            }),
        },
        verify: files
            .iter()
            .map(|f| verify_line(&f.id, f.kind, &choice.isolated))
            .collect(),
        reasons: choice.reasons,
        warnings: choice.warnings,
        knobs: files
            .into_iter()
            .map(|f| PlannedKnob {
                id: f.id,
                kind: f.kind.to_string(),
                file: None,
                document: f.text,
            })
            .collect(),
    })
}

/// The command that verifies a knob of the plan with the noise probe on the
/// isolated CPUs; a command line takes effect at boot, so it is measured after.
fn verify_line(id: &str, kind: &str, isolated: &CpuList) -> String {
    if kind == "kernel-cmdline" {
        format!(
            "{id}: after the reboot, `hostknob probe noise --cpus {isolated} --duration 10s` (a command line cannot be switched per verify leg)"
        )
    } else {
        format!("{id}: `hostknob verify {id} --probe noise -- --cpus {isolated} --duration 2s`")
    }
}
