//! Where a host's ledger is: every test reads it through these, so a move
//! of the ledger's home is one edit here.

use std::path::{Path, PathBuf};

use super::tree::STATE_DIR;

/// The ledger hostknob writes for the host under `root` (its state directory).
pub fn ledger_file(root: &Path) -> PathBuf {
    root.join(STATE_DIR).join("ledger.yaml")
}

/// The ledger's text; empty when there is none.
pub fn ledger_text(root: &Path) -> String {
    std::fs::read_to_string(ledger_file(root)).unwrap_or_default()
}

/// The collected ledger of `host` in a manifest repository (written by
/// collection, read by hostknob, never written by it).
pub fn collected_ledger(manifest: &Path, host: &str) -> PathBuf {
    manifest.join("ledger").join(format!("{host}.yaml"))
}

/// Nothing was recorded: no ledger in the state directory, and none ever in
/// the manifest.
pub fn nothing_recorded(root: &Path, manifest: &Path) -> bool {
    !ledger_file(root).exists() && !manifest.join("ledger").exists()
}

/// Appends entries to the collected ledger of their host in `manifest`, as
/// `collect-ledgers.yml` would.
pub fn append_collected(manifest: &Path, entries: &[hostknob::manifest::ledger::Entry]) {
    use std::io::Write;
    for e in entries {
        let path = collected_ledger(manifest, &e.host);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(serde_yaml::to_string(&vec![e]).unwrap().as_bytes())
            .unwrap();
    }
}
