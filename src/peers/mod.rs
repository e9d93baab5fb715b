//! What other tools on the host do: one module per tool, each answering
//! "what will this tool do to a knob's files on this host", read through the
//! root seam and never run. `audit`, `import`, `persist`, `knob` and
//! `isolate` ask here; nothing here asks them (src/layering.rs checks it).

pub mod irqbalance;
pub mod network_manager;
pub mod saptune;
pub mod systemd;
pub mod tuned;
pub mod udev;
pub mod udev_rules;
