//! `hostknob import`'s options.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{HostArg, RootArg};

#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// A tuned profile, read as tuned reads it, as one knob per setting.
    #[command(
        long_about = include_str!("../help/import.txt"),
        after_help = "Examples:\n  hostknob import tuned --list\n  \
hostknob import tuned latency-performance --out manifest/tuned/\n  \
hostknob --root /tmp/spr1 import tuned network-latency --out /tmp/nl\n  \
hostknob import tuned my-profile --from ./tuned-profiles --out /tmp/mine"
    )]
    Tuned(ImportTunedArgs),
}

/// Kept for the subcommand's shared options.
pub type ImportArgs = ImportTunedArgs;

#[derive(Args, Debug)]
pub struct ImportTunedArgs {
    /// The tuned profile (a directory name: latency-performance, network-latency, ...).
    #[arg(value_name = "PROFILE", required_unless_present = "list")]
    pub profile: Option<String>,
    /// Write the knob files, IMPORTED.md and NOT-IMPORTED.md into DIR (made when missing).
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
