//! hostknob: inventory, audit, tune and verify latency-sensitive Linux hosts.
//!
//! The binary is a thin layer over these modules: `root` is the only way to
//! touch host files, `inventory` reads facts, `render` presents them,
//! `commands` holds one file per subcommand and `cli` its options. Public
//! are what the binary and the test suite use; the rest is crate-private.

pub mod advice;
pub mod apply;
pub(crate) mod audit;
pub(crate) mod capture;
pub mod cli;
pub mod commands;
pub mod contract;
pub mod cpulist;
pub(crate) mod doc;
pub mod ethtool;
pub mod import;
pub mod inventory;
pub mod isolate;
pub(crate) mod journal;
pub mod kmod;
pub mod knob;
pub mod manifest;
pub mod msr;
pub mod name;
pub mod peers;
pub(crate) mod persist;
pub mod probe;
pub(crate) mod progress;
pub(crate) mod render;
pub(crate) mod report;
pub mod root;
pub(crate) mod sched_tunables;
pub mod schema;
pub(crate) mod spelling;
pub(crate) mod stats;
pub(crate) mod task;
pub mod test_hooks;
pub mod tune;
pub mod verify;

#[cfg(test)]
mod layering;
