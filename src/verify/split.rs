//! The wakeup probe's split per leg: the wake itself and the wait for the
//! CPU after it (`probe::wake_split`), pooled over the rounds, so a knob that
//! speeds the wake but slows scheduling shows both.

use serde::Serialize;

use crate::stats::Summary;

/// Per leg (as found, applied): null where the probe gave no split.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct WakeSplit {
    pub legs: [Option<Parts>; 2],
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Parts {
    /// From the wake request until the sleeper was queued to run.
    pub wake: Summary,
    /// From queued until it ran (the sleeper's schedstat run delay).
    pub run_delay: Summary,
}

/// The samples of each leg so far.
#[derive(Default)]
pub struct Pool {
    legs: [(Vec<u64>, Vec<u64>); 2],
    any: bool,
}

impl Pool {
    pub fn add(&mut self, applied: bool, split: Option<(Vec<u64>, Vec<u64>)>) {
        if let Some((w, d)) = split {
            let l = &mut self.legs[applied as usize];
            l.0.extend(w);
            l.1.extend(d);
            self.any = true;
        }
    }

    /// Null when no leg had a split (a probe without one).
    pub fn report(&mut self) -> Option<WakeSplit> {
        if !self.any {
            return None;
        }
        let legs = std::mem::take(&mut self.legs).map(|(w, d)| {
            Some(Parts {
                wake: Summary::from_ns(&w)?,
                run_delay: Summary::from_ns(&d)?,
            })
        });
        Some(WakeSplit { legs })
    }
}
