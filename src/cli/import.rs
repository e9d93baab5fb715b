//! `hostknob import`'s options.

use std::path::PathBuf;

use clap::Args;

use super::{HostArg, RootArg};

/// The tools whose tuning can be imported.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportTool {
    /// A tuned profile, read as tuned reads it.
    Tuned,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The tool whose configuration is read: tuned.
    #[arg(value_enum, value_name = "TOOL")]
    pub tool: ImportTool,
    /// The tuned profile (a directory name: latency-performance, network-latency, ...).
    #[arg(value_name = "PROFILE", required_unless_present = "list")]
    pub profile: Option<String>,
    /// Write the knob files, profiles/PROFILE.yaml, IMPORTED.md and NOT-IMPORTED.md into DIR (made when missing).
    #[arg(long, value_name = "DIR", required_unless_present = "list")]
    pub out: Option<PathBuf>,
    /// Read profiles from DIR (DIR/NAME/tuned.conf) instead of /usr/lib/tuned and /etc/tuned under --root.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// List the profiles found (name, directory, summary) and write nothing.
    #[arg(long, conflicts_with_all = ["profile", "out"])]
    pub list: bool,
    #[command(flatten)]
    pub root: RootArg,
    #[command(flatten)]
    pub host: HostArg,
}
