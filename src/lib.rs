//! hostknob: inventory, audit, tune and verify latency-sensitive Linux hosts.
//!
//! The binary is a thin layer over these modules: `root` is the only way to
//! touch host files, `inventory` reads facts, `render` presents them,
//! `commands` holds one file per subcommand.

pub mod apply;
pub mod audit;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod contract;
pub mod cpulist;
pub mod doc;
pub mod inventory;
pub mod journal;
pub mod knob;
pub mod manifest;
pub mod persist;
pub mod probe;
pub mod render;
pub mod report;
pub mod root;
pub mod stats;
pub mod verify;
