//! The latency probes, as one choice: what `probe` prints one of and what
//! `verify` runs in each leg.

use anyhow::Result;

use super::{rpc, timer, wakeup};
use crate::root::Root;

#[derive(Clone, Debug)]
pub enum LatencyProbe {
    Wakeup(wakeup::Options),
    Timer(timer::Options),
    Rpc(rpc::Options),
}

/// One run of a latency probe: every sample and the settings that shaped it.
pub struct LatencyRun {
    pub samples_ns: Vec<u64>,
    pub settings: serde_json::Value,
    pub warnings: Vec<String>,
}

pub fn run(root: &Root, probe: &LatencyProbe) -> Result<LatencyRun> {
    Ok(match probe {
        LatencyProbe::Wakeup(o) => {
            let r = wakeup::run(root, o)?;
            LatencyRun {
                samples_ns: r.raw.iter().map(|s| s.latency_ns).collect(),
                settings: serde_json::to_value(&r.settings)?,
                warnings: r.warnings,
            }
        }
        LatencyProbe::Timer(o) => {
            let r = timer::run(root, o)?;
            LatencyRun {
                samples_ns: r.raw,
                settings: serde_json::to_value(&r.settings)?,
                warnings: Vec::new(),
            }
        }
        LatencyProbe::Rpc(o) => {
            let r = rpc::run(root, o)?;
            LatencyRun {
                samples_ns: r.raw.iter().map(|&(_, rtt)| rtt).collect(),
                settings: serde_json::to_value(&r.settings)?,
                warnings: Vec::new(),
            }
        }
    })
}
