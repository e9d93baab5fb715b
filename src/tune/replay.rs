//! Recorded rounds as a bench: `tune --replay DIR` runs the same search on
//! them, so every decision is derived again from the samples, without the
//! host. A search that asks for another round than the record holds has
//! diverged, and says where.

use anyhow::{Result, bail};

use super::race::RoundRecord;
use super::{Bench, Leg};

pub struct Replay {
    records: Vec<RoundRecord>,
    at: usize,
    /// The run's budget in legs after its pilot, and its seconds per leg.
    pub budget_legs: Option<usize>,
    pub leg_seconds: Option<f64>,
    /// Why the recorded run stopped early, where it did.
    pub stopped: Option<String>,
}

impl Replay {
    pub fn new(records: Vec<RoundRecord>) -> Replay {
        Replay {
            records,
            at: 0,
            budget_legs: None,
            leg_seconds: None,
            stopped: None,
        }
    }

    /// Every recorded round was asked for: the replay followed the run to its end.
    pub fn finish(&self) -> Result<()> {
        if self.at != self.records.len() {
            bail!(
                "the replay asked for {} rounds, the record holds {}: the search diverged from the recorded run",
                self.at,
                self.records.len()
            );
        }
        Ok(())
    }
}

impl Bench for Replay {
    fn round(
        &mut self,
        race: &str,
        legs: &[Leg],
        order: &[usize],
    ) -> Result<Option<Vec<Vec<f64>>>> {
        // The record ends where the run was stopped.
        let Some(r) = self.records.get(self.at) else {
            return Ok(None);
        };
        let labels: Vec<&str> = legs.iter().map(|l| l.label.as_str()).collect();
        if r.race != race || r.legs != labels || r.order != order {
            bail!(
                "the replay diverged at recorded round {}: the record has {:?} with legs {:?} in order {:?}, the search asked for {race:?} with legs {labels:?} in order {order:?}",
                self.at + 1,
                r.race,
                r.legs,
                r.order
            );
        }
        if r.samples.len() != legs.len() {
            bail!(
                "recorded round {}: {} legs but samples for {}",
                self.at + 1,
                legs.len(),
                r.samples.len()
            );
        }
        self.at += 1;
        Ok(Some(r.samples.clone()))
    }

    fn budget_legs(&mut self, _: usize) -> Option<usize> {
        self.budget_legs
    }

    fn leg_seconds(&self) -> Option<f64> {
        self.leg_seconds
    }

    fn stop_reason(&self) -> String {
        self.stopped.clone().unwrap_or_else(|| super::SIGNAL.into())
    }
}
