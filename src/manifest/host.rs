//! The host's name, as knobs and the ledger know it.

use serde::Serialize;

use crate::root::Root;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct HostName {
    pub name: String,
    /// Where it came from: `--host` or a file under the root.
    pub source: String,
}

/// Where the name of a tree that names no host "came from".
pub const UNNAMED_SOURCE: &str =
    "nothing: the tree has no /proc/sys/kernel/hostname and no `host:` in hostknob-capture.yaml";

/// What such a tree is called: not a valid name (so nothing is written under
/// it, and no knob's host pattern but `"*"` matches it).
pub const UNNAMED: &str = "(unnamed)";

/// `--host`, else `/proc/sys/kernel/hostname` under the root, else `host:` in
/// the capture's `hostknob-capture.yaml`. Never the directory the tree was
/// copied to: a copy renamed `spr1-old/` is still the host it was taken from.
/// A tree naming no host (corpus dumps) is [`UNNAMED`] until `--host` names it.
pub fn resolve(root: &Root, explicit: Option<&str>) -> HostName {
    let found = |name: String, source: &str| HostName {
        name,
        source: source.to_string(),
    };
    if let Some(h) = explicit.map(str::trim).filter(|h| !h.is_empty()) {
        return found(h.to_string(), "--host");
    }
    if let Ok(Some(h)) = root.read_trimmed("/proc/sys/kernel/hostname")
        && !h.is_empty()
    {
        return found(h, "/proc/sys/kernel/hostname");
    }
    let meta = format!("/{}", crate::capture::METADATA_FILE);
    if !root.is_live()
        && let Ok(bytes) = root.read_capped(&meta, 1 << 20)
        && let Ok(text) = String::from_utf8(bytes)
        && let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(&text)
        && let Some(h) = doc.get("host").and_then(|v| v.as_str())
        && !h.trim().is_empty()
    {
        return found(h.trim().to_string(), crate::capture::METADATA_FILE);
    }
    found(UNNAMED.to_string(), UNNAMED_SOURCE)
}

impl HostName {
    /// The name, if it can name files (the ledger, the host document); else
    /// a one-line error saying where it came from. Checked before any write.
    pub fn checked(self) -> anyhow::Result<HostName> {
        match crate::name::check(&self.name) {
            Ok(()) => Ok(self),
            Err(m) if self.source == "--host" => anyhow::bail!("--host: {m}"),
            Err(_) if self.source == UNNAMED_SOURCE => {
                anyhow::bail!("no host name: {UNNAMED_SOURCE}; pass --host NAME")
            }
            Err(m) => anyhow::bail!("the host name from {}: {m}; pass --host NAME", self.source),
        }
    }
}
