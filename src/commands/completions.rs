use anyhow::Result;
use clap::CommandFactory;

use crate::cli::CompletionsArgs;

pub fn run(args: &CompletionsArgs) -> Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "hostknob", &mut std::io::stdout());
    Ok(0)
}
