//! `hostknob isolate`'s options.

use std::path::PathBuf;

use clap::Args;

use super::ReadArgs;

#[derive(Args, Debug)]
pub struct IsolateArgs {
    /// How many CPUs to isolate (`8`), or which (`4-11,16-23`; `8-8` for CPU 8 alone).
    #[arg(long, value_name = "N|LIST")]
    pub cpus: String,
    /// Write one knob file per knob, DIR/<id>.yaml, instead of printing the fragment.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: replace knob files that already exist there.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Allow CPU 0's core in the isolated set (kept for housekeeping otherwise).
    #[arg(long)]
    pub allow_cpu0: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}
