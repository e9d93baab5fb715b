//! `hostknob tune`: a search over a space of knob values in which every
//! accepted step is a verify verdict, and the whole search has a stated
//! false-step rate.
//!
//! The search is one pass over the space's knobs: at each knob a race of
//! the current configuration against it with each candidate value (and a
//! sham: the current configuration again, nothing written), decided by
//! `verify::rule` with the comparison's share of the search's alpha
//! (`design`: every comparison the search may make is planned before the
//! first round). The accepted set is then confirmed against the host as
//! found and pruned by the bundle's backward elimination.
//!
//! The core never touches the host: samples come from a [`Bench`] (the real
//! legs in `host`, recorded rounds in `replay`, seeded samples in the
//! simulation), so all three drive exactly the same decisions.

pub mod design;
pub mod host;
pub mod output;
pub mod race;
pub mod replay;
pub mod search;
pub mod space;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_model;

use anyhow::Result;

/// One configuration: per knob of the space, the index of its value
/// (`None`: as found, nothing written).
pub type Config = Vec<Option<usize>>;

/// One leg of a race: what it sets, and its label in records and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leg {
    pub label: String,
    pub config: Config,
}

/// Where samples come from: the host, a record, or a simulation.
/// A stop's reasons: Ctrl-C (or SIGTERM), and `--budget`'s wall clock.
pub const SIGNAL: &str = "a signal";
pub const OUT_OF_TIME: &str = "the time budget ran out";

pub trait Bench {
    /// Runs one round of `race`: `legs` in `order` (indices into `legs`);
    /// each leg's samples in `legs`' order, or `None` when a signal stopped it.
    fn round(&mut self, race: &str, legs: &[Leg], order: &[usize])
    -> Result<Option<Vec<Vec<f64>>>>;

    /// After the pilot: the legs the budget allows in all, `used` included
    /// (a time budget turned into legs); `None` keeps the settings' figure.
    fn budget_legs(&mut self, used: usize) -> Option<usize> {
        let _ = used;
        None
    }

    /// Seconds per leg, where measured (for the plan's time estimate).
    fn leg_seconds(&self) -> Option<f64> {
        None
    }

    /// Why the last `round` returned `None`.
    fn stop_reason(&self) -> String {
        SIGNAL.into()
    }
}
