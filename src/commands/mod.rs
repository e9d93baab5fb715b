//! One file per subcommand; each returns the process exit code.

pub mod capture;
pub mod inventory;
pub mod probe;

use anyhow::Result;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Inventory => inventory::run(&cli.global),
        Command::Capture(args) => capture::run(&cli.global, args),
        Command::Probe(args) => probe::run(&cli.global, args),
    }
}
