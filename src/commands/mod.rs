//! One file per subcommand; each returns the process exit code.

pub mod capture;
pub mod doc;
pub mod inventory;

use anyhow::Result;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Inventory => inventory::run(&cli.global),
        Command::Capture(args) => capture::run(&cli.global, args),
        Command::Doc(args) => doc::run(&cli.global, args),
    }
}

/// The host's name for documents, the manifest and the ledger: `--host`, else
/// its hostname, else the `host` a capture recorded, else the root's directory name.
pub fn host_name(
    g: &crate::cli::Global,
    root: &crate::root::Root,
    inv: &crate::inventory::Inventory,
) -> String {
    if let Some(h) = &g.host {
        return h.clone();
    }
    if let Some(h) = &inv.host.hostname {
        return h.clone();
    }
    if let Ok(meta) = root.read_string(&format!("/{}", crate::capture::METADATA_FILE)) {
        if let Some(h) = meta.lines().find_map(|l| l.strip_prefix("host: ")) {
            let h = h.trim().trim_matches('\'').trim_matches('"');
            if !h.is_empty() && h != "null" {
                return h.to_string();
            }
        }
    }
    root.base()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "localhost".into())
}
