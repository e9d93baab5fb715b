use anyhow::{Result, anyhow};
use clap::CommandFactory;

use crate::cli::ManArgs;

pub fn run(args: &ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.out).map_err(|e| anyhow!("{}: {e}", args.out.display()))?;
    clap_mangen::generate_to(crate::cli::Cli::command(), &args.out)
        .map_err(|e| anyhow!("{}: {e}", args.out.display()))?;
    Ok(0)
}
