use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::{Args, CommandFactory};

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory for hostknob.1 and hostknob-SUBCOMMAND.1 (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: &ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.out).map_err(|e| anyhow!("{}: {e}", args.out.display()))?;
    clap_mangen::generate_to(crate::cli::Cli::command(), &args.out)
        .map_err(|e| anyhow!("{}: {e}", args.out.display()))?;
    Ok(0)
}
