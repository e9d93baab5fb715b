//! The latency probes, as one choice: what `probe` prints one of and what
//! `verify` runs in each leg. The choice itself, [`LatencyProbe`], is made by
//! the `probes!` registry in `probe/mod.rs`; each latency probe's result
//! says here how it becomes samples.

use anyhow::Result;

use crate::root::Root;

pub use super::LatencyProbe;

/// One run of a latency probe: every sample and the settings that shaped it.
pub struct LatencyRun {
    /// ns for the built-in probes (exact in f64); a command probe's values
    /// as `verify::command::to_sample` makes them.
    pub samples: Vec<f64>,
    pub settings: serde_json::Value,
    /// Per sample (the wakeup probe's): the wake and the wait for the CPU, ns.
    pub split: Option<(Vec<u64>, Vec<u64>)>,
    pub warnings: Vec<String>,
    /// Requests sent and lost (UDP rpc): verify compares the legs' losses.
    pub lost: Option<(u64, u64)>,
    /// What the leg's probe says about its result beyond the samples
    /// (the noise probe's attribution), kept as evidence.
    pub evidence: Option<serde_json::Value>,
}

/// A latency probe's result as `verify` compares it.
pub trait IntoLatencyRun {
    fn into_latency_run(self) -> Result<LatencyRun>;
}

pub fn run(root: &Root, probe: &LatencyProbe) -> Result<LatencyRun> {
    probe.run(root)
}
