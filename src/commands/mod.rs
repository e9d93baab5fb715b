//! One file per subcommand; each returns the process exit code.

pub(crate) mod apply;
pub(crate) mod audit;
pub(crate) mod capture;
pub(crate) mod completions;
pub(crate) mod doc;
pub(crate) mod hold;
pub(crate) mod import;
pub(crate) mod inventory;
pub(crate) mod isolate;
pub(crate) mod knobs;
pub(crate) mod man;
pub(crate) mod persist;
pub(crate) mod probe;
pub(crate) mod report;
pub(crate) mod revert;
pub(crate) mod schema;
pub(crate) mod tune;
pub(crate) mod verify;
mod verify_multi;

use anyhow::Result;

use crate::apply::Session;
use crate::cli::{self, Cli, Command, StateArg, TargetArgs};
use crate::manifest;
use crate::probe::{rpc, wakeup};
use crate::render;
use crate::root::Root;

pub fn run(cli: Cli) -> Result<i32> {
    crate::progress::enable(!quiet(&cli.command));
    crate::advice::set(advice_context(&cli.command));
    match &cli.command {
        Command::Inventory(args) => inventory::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Doc(args) => doc::run(args),
        Command::Knobs(args) => knobs::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Probe(args) => probe::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Revert(args) => revert::run(args),
        Command::Persist(args) => persist::run(args),
        Command::Hold(args) => hold::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Isolate(args) => isolate::run(args),
        Command::Import(args) => import::run(args),
        Command::Report(args) => report::run(args),
        Command::Schema(args) => schema::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}

/// The options that chose this command's host, for the commands it prints.
fn advice_context(c: &Command) -> crate::advice::Context {
    let target = |t: &TargetArgs, s: Option<&StateArg>| crate::advice::Context {
        root: Some(t.root.root.clone()),
        host: t.host.host.clone(),
        manifest: t.manifest.clone(),
        overrides: t.overrides.clone(),
        state_dir: s.map(|s| s.state_dir.clone()),
    };
    let read = |r: &cli::ReadArgs| crate::advice::Context {
        root: Some(r.root.root.clone()),
        host: r.host.host.clone(),
        ..Default::default()
    };
    match c {
        Command::Apply(a) => target(&a.change.target, Some(&a.change.state)),
        Command::Revert(a) => target(&a.change.target, Some(&a.change.state)),
        Command::Persist(a) => target(&a.change.target, Some(&a.change.state)),
        Command::Verify(a) => target(&a.change.target, Some(&a.change.state)),
        Command::Tune(a) => target(&a.change.target, Some(&a.change.state)),
        Command::Audit(a) => target(&a.target, Some(&a.state)),
        Command::Doc(a) => target(&a.target, Some(&a.state)),
        Command::Knobs(a) => target(&a.target, Some(&a.state)),
        Command::Hold(a) => target(&a.target, None),
        Command::Inventory(a) => read(&a.read),
        Command::Capture(a) => read(&a.read),
        Command::Isolate(a) => read(&a.read),
        Command::Import(a) => crate::advice::Context {
            root: Some(a.root.root.clone()),
            host: a.host.host.clone(),
            ..Default::default()
        },
        _ => Default::default(),
    }
}

/// `--quiet` where the command takes it; the others show no progress.
fn quiet(c: &Command) -> bool {
    match c {
        Command::Capture(a) => a.quiet.quiet,
        Command::Probe(a) => a.quiet,
        Command::Apply(a) => a.change.quiet.quiet,
        Command::Revert(a) => a.change.quiet.quiet,
        Command::Persist(a) => a.change.quiet.quiet,
        Command::Verify(a) => a.change.quiet.quiet,
        Command::Tune(a) => a.change.quiet.quiet,
        _ => true,
    }
}

/// Where the manifest lives unless `--manifest` (or `HOSTKNOB_MANIFEST`) says.
pub const DEFAULT_MANIFEST: &str = "/etc/hostknob/manifest";

/// The manifest directory: `--manifest DIR` (or `HOSTKNOB_MANIFEST`), else
/// `/etc/hostknob/manifest` under `--root`. The working directory is never
/// looked at, so a `./manifest` cannot be picked up by surprise; a defaulted
/// choice is said on stderr.
/// An old spelling still taken: said on stderr with the one to write.
pub(crate) fn deprecated(old: &str, new: &str) {
    eprintln!("hostknob: note: {old} is an old spelling, still taken for now: write {new}");
}

pub fn manifest_dir(t: &TargetArgs, root: &Root) -> std::path::PathBuf {
    match &t.manifest {
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

/// The manifest under `dir` with the profiles that apply to `host` (and
/// `--profile`, keeping only its knobs) and the local overrides applied.
pub fn load_manifest(
    t: &TargetArgs,
    root: &Root,
    dir: &std::path::Path,
    host: &str,
) -> Result<manifest::Manifest, manifest::ManifestErrors> {
    let mut m = manifest::load(dir)?;
    let (odir, named) = match &t.overrides {
        Some(d) => (d.clone(), true),
        None => (root.host_path(manifest::overrides::LOCAL_DIR), false),
    };
    let local = manifest::overrides::read_local(&odir, named)?;
    let facts = crate::inventory::facts::Facts::new(root);
    m.resolve(host, t.profile.as_deref(), &local, &facts)?;
    Ok(m)
}

/// With `--profile`, every id named must be one of the profile's knobs.
pub fn in_profile(m: &manifest::Manifest, ids: &[String]) -> Result<()> {
    let Some(p) = &m.profile else {
        return Ok(());
    };
    for id in ids {
        if m.get(id).is_none() {
            let members: Vec<&str> = m.knobs.iter().map(|k| k.id.as_str()).collect();
            anyhow::bail!(
                "knob {id:?} is not in profile {p} (its knobs: {}): nothing was changed",
                members.join(", ")
            );
        }
    }
    Ok(())
}

/// The root, host name and manifest directory of a command that changes the
/// host; the caller builds the [`Session`] from them.
pub struct OpenHost {
    pub root: Root,
    pub host: String,
    pub manifest_dir: std::path::PathBuf,
}

impl OpenHost {
    pub fn open(t: &TargetArgs) -> Result<OpenHost> {
        let root = Root::open(&t.root.root)?;
        let host = manifest::host::resolve(&root, t.host.host.as_deref())
            .checked()?
            .name;
        let manifest_dir = manifest_dir(t, &root);
        Ok(OpenHost {
            root,
            host,
            manifest_dir,
        })
    }

    /// The manifest, resolved for this host (see [`load_manifest`]).
    pub fn manifest(&self, t: &TargetArgs) -> Result<manifest::Manifest> {
        Ok(load_manifest(
            t,
            &self.root,
            &self.manifest_dir,
            &self.host,
        )?)
    }

    pub fn session<'r>(&'r self, state: &StateArg) -> Session<'r> {
        Session::new(
            &self.root,
            self.host.clone(),
            &self.manifest_dir,
            &state.state_dir,
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
        }
    }
}

impl From<cli::AuditFormat> for render::Format {
    fn from(f: cli::AuditFormat) -> Self {
        match f {
            cli::AuditFormat::Table => render::Format::Table,
            cli::AuditFormat::Yaml => render::Format::Yaml,
            cli::AuditFormat::Json => render::Format::Json,
            cli::AuditFormat::Prometheus => render::Format::Prometheus,
        }
    }
}

impl From<cli::Section> for crate::inventory::Section {
    fn from(s: cli::Section) -> Self {
        use crate::inventory::Section as S;
        match s {
            cli::Section::Host => S::Host,
            cli::Section::Cpu => S::Cpu,
            cli::Section::Caches => S::Caches,
            cli::Section::Numa => S::Numa,
            cli::Section::Memory => S::Memory,
            cli::Section::Idle => S::Idle,
            cli::Section::Frequency => S::Frequency,
            cli::Section::Vulnerabilities => S::Vulnerabilities,
            cli::Section::Network => S::Network,
            cli::Section::PmQos => S::PmQos,
            cli::Section::Platform => S::Platform,
            cli::Section::Processes => S::Processes,
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
