//! What other tools on the host will do: one module per tool.

pub mod network_manager;
pub mod udev;
