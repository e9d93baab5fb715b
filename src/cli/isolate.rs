//! `hostknob isolate`'s options.

use std::path::PathBuf;

use clap::Args;

use super::ReadArgs;

#[derive(Args, Debug)]
pub struct IsolateArgs {
    /// How many CPUs to isolate, chosen from the topology (`--count 8`).
    #[arg(
        long,
        value_name = "N",
        required_unless_present = "cpus",
        conflicts_with = "cpus"
    )]
    pub count: Option<String>,
    /// Which CPUs to isolate, a CPU list (`4-11,16-23`, `8-8`). A bare
    /// number here is the old spelling of --count and still read as a count
    /// (with a note): write `8-8` for CPU 8 alone.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Write one knob file per knob, DIR/<id>.yaml, instead of printing the fragment.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: replace knob files that already exist there.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Allow CPU 0's core in the isolated set (kept for housekeeping otherwise).
    #[arg(long)]
    pub allow_cpu0: bool,
    /// Accept a split leaving fewer housekeeping CPUs than the minimum (one
    /// core per NUMA node and 1 in 16 CPUs).
    #[arg(long)]
    pub allow_small_housekeeping: bool,
    /// The flags of isolcpus=: `managed_irq` (managed interrupts off the
    /// isolated CPUs), `domain` (also out of scheduler load balancing;
    /// deprecated by the kernel in favour of cpusets) or `none`.
    #[arg(long, value_name = "MODE", default_value = "managed_irq", value_parser = ["none", "managed_irq", "domain"])]
    pub isolcpus: String,
    /// On a hybrid part, the core type isolated first: `performance` or
    /// `efficient` (whole L2 clusters of E-cores).
    #[arg(long, value_name = "TYPE", default_value = "performance", value_parser = ["performance", "efficient"])]
    pub prefer: String,
    #[command(flatten)]
    pub read: ReadArgs,
}
