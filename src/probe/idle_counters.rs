//! The idle-state counters of the sleeper's CPU (cpuidle `usage` and `time`),
//! read through its open cpuidle directory (`inventory::CpuIdleDir`, the one
//! reader of idle states) so sampling them costs one read each.

use anyhow::{Context, Result};

use crate::inventory::{CpuIdleDir, StateFacts};
use crate::root::Root;

/// The states of one CPU as found at the start, and its directory for counters.
pub(super) struct IdleCounters<'r> {
    dir: Option<CpuIdleDir<'r>>,
    pub(super) states: Vec<StateFacts>,
}

impl<'r> IdleCounters<'r> {
    pub(super) fn open(root: &'r Root, cpu: u32) -> Result<IdleCounters<'r>> {
        let base = crate::inventory::cpuidle_dir(cpu);
        let dir = CpuIdleDir::open(root, cpu).with_context(|| base.clone())?;
        let states = match &dir {
            Some(d) => d.states().with_context(|| base.clone())?,
            None => Vec::new(),
        };
        Ok(IdleCounters { dir, states })
    }

    /// `counter` of every state, in `states` order.
    pub(super) fn read(&self, counter: &str) -> Result<Vec<u64>> {
        let Some(dir) = &self.dir else {
            return Ok(Vec::new());
        };
        self.states
            .iter()
            .map(|s| dir.counter(s.index, counter))
            .collect()
    }
}
