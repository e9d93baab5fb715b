//! What every test module shares: the corpus (unpacked once, copied for tests
//! that change it), the one runner for the binary, tree snapshots, and the
//! helpers of the apply, manifest and probe tests. `tests/live.rs` includes
//! this module too.
#![allow(dead_code, unused_imports)]

pub mod apply;
pub mod block;
pub mod corpus;
pub mod ledger;
pub mod manifest;
pub mod msr;
pub mod nic;
pub mod probe;
pub mod run;
pub mod threads;
pub mod tree;
pub mod units;

pub use apply::*;
pub use corpus::*;
pub use ledger::*;
pub use manifest::*;
pub use msr::*;
pub use probe::*;
pub use run::*;
pub use threads::*;
pub use tree::*;
pub use units::*;
