//! One file per subcommand; each returns the process exit code.

pub mod audit;
pub mod capture;
pub mod doc;
pub mod inventory;
pub mod knobs;
pub mod probe;

use anyhow::Result;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Inventory => inventory::run(&cli.global),
        Command::Capture(args) => capture::run(&cli.global, args),
        Command::Doc(args) => doc::run(&cli.global, args),
        Command::Knobs => knobs::run(&cli.global),
        Command::Audit(args) => audit::run(&cli.global, args),
        Command::Probe(args) => probe::run(&cli.global, args),
    }
}
