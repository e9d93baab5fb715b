//! One file per subcommand; each returns the process exit code.

pub mod apply;
pub mod audit;
pub mod capture;
pub mod doc;
pub mod inventory;
pub mod knobs;
pub mod persist;
pub mod probe;
pub mod revert;
pub mod verify;

use anyhow::Result;

use crate::apply::Session;
use crate::cli::{Cli, Command, Global};
use crate::manifest;
use crate::root::Root;

pub fn run(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Inventory(args) => inventory::run(&cli.global, args),
        Command::Capture(args) => capture::run(&cli.global, args),
        Command::Doc(args) => doc::run(&cli.global, args),
        Command::Knobs => knobs::run(&cli.global),
        Command::Audit(args) => audit::run(&cli.global, args),
        Command::Probe(args) => probe::run(&cli.global, args),
        Command::Apply(args) => apply::run(&cli.global, args),
        Command::Revert(args) => revert::run(&cli.global, args),
        Command::Persist(args) => persist::run(&cli.global, args),
        Command::Verify(args) => verify::run(&cli.global, args),
    }
}

/// The root, host name and manifest directory of a command that changes the
/// host; the caller builds the [`Session`] from them.
pub struct Target {
    pub root: Root,
    pub host: String,
    pub manifest_dir: std::path::PathBuf,
}

impl Target {
    pub fn open(g: &Global) -> Result<Target> {
        let root = Root::open(&g.root)?;
        let host = manifest::host::resolve(&root, g.host.as_deref()).name;
        let manifest_dir = manifest::resolve_dir(g.manifest.as_deref(), &root);
        Ok(Target {
            root,
            host,
            manifest_dir,
        })
    }

    pub fn session<'r>(&'r self, g: &Global) -> Session<'r> {
        Session::new(
            &self.root,
            self.host.clone(),
            &self.manifest_dir,
            &g.state_dir,
        )
    }
}
