//! The idle-state counters of one CPU (cpuidle `usage` and `time`), read
//! through open directory handles so sampling them costs one read each.

use anyhow::{Context, Result};

use crate::root::{DirHandle, Root};

/// One idle state of the sleeper's CPU, with its directory open.
pub(super) struct StateDir<'r> {
    pub(super) index: u32,
    pub(super) name: String,
    pub(super) latency_us: Option<u64>,
    pub(super) residency_us: Option<u64>,
    pub(super) disabled: Option<bool>,
    pub(super) dir: DirHandle<'r>,
}

impl StateDir<'_> {
    pub(super) fn counter(&self, name: &str) -> Result<u64> {
        let text = self
            .dir
            .read_string(name)
            .with_context(|| format!("{}/{name}", self.dir.logical()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{}/{name}: not a number: {text:?}", self.dir.logical()))
    }
}

pub(super) fn idle_states(root: &Root, cpu: u32) -> Result<Vec<StateDir<'_>>> {
    let base = crate::inventory::cpuidle_dir(cpu);
    let names = match root.read_dir(&base) {
        Ok(n) => n,
        Err(e) if crate::root::is_absent(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| base.clone()),
    };
    let mut out = Vec::new();
    for index in crate::inventory::state_indices(&names) {
        let path = format!("{base}/state{index}");
        let dir = root.dir_handle(&path).with_context(|| path.clone())?;
        let text = |f: &str| dir.read_string(f).ok().map(|s| s.trim().to_string());
        let num = |f: &str| text(f).and_then(|s| s.parse::<u64>().ok());
        out.push(StateDir {
            index,
            name: text("name").unwrap_or_else(|| format!("state{index}")),
            latency_us: num("latency"),
            residency_us: num("residency"),
            disabled: num("disable").map(|v| v != 0),
            dir,
        });
    }
    Ok(out)
}

pub(super) fn read_counters(states: &[StateDir], counter: &str) -> Result<Vec<u64>> {
    states.iter().map(|s| s.counter(counter)).collect()
}
