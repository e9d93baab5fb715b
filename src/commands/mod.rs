//! One file per subcommand; each returns the process exit code.

pub(crate) mod apply;
pub(crate) mod audit;
pub(crate) mod capture;
pub(crate) mod completions;
pub(crate) mod doc;
pub(crate) mod hold;
pub(crate) mod inventory;
pub(crate) mod knobs;
pub(crate) mod man;
pub(crate) mod persist;
pub(crate) mod probe;
pub(crate) mod report;
pub(crate) mod revert;
pub(crate) mod schema;
pub(crate) mod verify;

use anyhow::Result;

use crate::apply::Session;
use crate::cli::{self, Cli, Command, Global};
use crate::probe::{rpc, wakeup};
use crate::render;
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
        Command::Hold(args) => hold::run(&cli.global, args),
        Command::Verify(args) => verify::run(&cli.global, args),
        Command::Report(args) => report::run(&cli.global, args),
        Command::Schema(args) => schema::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}

/// Where the manifest lives unless `--manifest` (or `HOSTKNOB_MANIFEST`) says.
pub const DEFAULT_MANIFEST: &str = "/etc/hostknob/manifest";

/// The manifest directory: `--manifest DIR` (or `HOSTKNOB_MANIFEST`), else
/// `/etc/hostknob/manifest` under `--root`. The working directory is never
/// looked at, so a `./manifest` cannot be picked up by surprise; a defaulted
/// choice is said on stderr.
pub fn manifest_dir(g: &Global, root: &Root) -> std::path::PathBuf {
    match &g.manifest {
        Some(dir) => dir.clone(),
        None => {
            let dir = root.host_path(DEFAULT_MANIFEST);
            eprintln!(
                "hostknob: manifest: {} (the default; --manifest DIR chooses another)",
                dir.display()
            );
            dir
        }
    }
}

/// The root, host name and manifest directory of a command that changes the
/// host; the caller builds the [`Session`] from them.
pub struct OpenHost {
    pub root: Root,
    pub host: String,
    pub manifest_dir: std::path::PathBuf,
}

impl OpenHost {
    pub fn open(g: &Global) -> Result<OpenHost> {
        let root = Root::open(&g.root)?;
        let host = manifest::host::resolve(&root, g.host.as_deref())
            .checked()?
            .name;
        let manifest_dir = manifest_dir(g, &root);
        Ok(OpenHost {
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

// The command line's value enums, mapped onto the library's types.

impl From<cli::Format> for render::Format {
    fn from(f: cli::Format) -> Self {
        match f {
            cli::Format::Table => render::Format::Table,
            cli::Format::Yaml => render::Format::Yaml,
            cli::Format::Json => render::Format::Json,
            cli::Format::Markdown => render::Format::Markdown,
            cli::Format::Prometheus => render::Format::Prometheus,
        }
    }
}

impl From<cli::Mechanism> for wakeup::Mechanism {
    fn from(m: cli::Mechanism) -> Self {
        match m {
            cli::Mechanism::Futex => wakeup::Mechanism::Futex,
            cli::Mechanism::Eventfd => wakeup::Mechanism::Eventfd,
            cli::Mechanism::Pipe => wakeup::Mechanism::Pipe,
        }
    }
}

impl From<cli::Proto> for rpc::Proto {
    fn from(p: cli::Proto) -> Self {
        match p {
            cli::Proto::Udp => rpc::Proto::Udp,
            cli::Proto::Tcp => rpc::Proto::Tcp,
        }
    }
}
