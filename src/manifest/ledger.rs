//! The ledger: what hostknob did. A host writes its own in its state
//! directory (`/var/lib/hostknob/ledger.yaml`, see `ledger_home`); the
//! collected copies live in the manifest repository, one file per host
//! (`<manifest>/ledger/<host>.yaml`), and readers merge both. Append-only:
//! each event is one YAML list item added at the end; nothing is ever
//! rewritten.
//!
//! ```yaml
//! - timestamp: 2026-07-10T09:14:03Z
//!   host: rpc-ap-1
//!   knob: cpuidle-no-deep-state
//!   action: applied
//!   persistence: runtime
//!   changes:
//!     - {path: /sys/devices/system/cpu/cpu0/cpuidle/state3/disable, before: "0", after: "1"}
//!   user: alice
//!   hostknob: 0.1.0
//!   machine_id: 3d1219c7c4c5404aaa1f6d2a48adfda4
//!   boot_id: 0b7c1e9c-5d43-4a53-9f0e-2f8f1f5e8a11
//!   root: live
//! ```
//!
//! Host names repeat (a capture of a VM named `vm` on a VM named `vm`), so
//! every entry also says which machine it is about: its machine-id and boot id
//! and whether the root was the live host or a capture (with the capture's
//! path). Readers keep only the entries of the machine they look at
//! (`ours`); entries written before these fields existed carry none and
//! are kept.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ManifestError;
use crate::cpulist::CpuList;
use crate::root::Root;
use crate::schema::Persistence;

pub const LEDGER_DIR: &str = "ledger";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Applied,
    Reverted,
    Persisted,
    /// A persistence file hostknob installed was removed (`persist --remove`).
    Unpersisted,
    Verified,
    /// A verify run after which the knob's files did not read as found: its
    /// evidence is not a verification (verify writes this instead).
    VerifyNotRestored,
}

/// One change to one file, or to a group of files that changed alike
/// (`path` then names the group, e.g. with `cpu*`, and `cpus` says which).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    /// `None`: the file did not exist (a drop-in created by apply).
    pub before: Option<String>,
    /// `None`: the file was removed.
    pub after: Option<String>,
}

/// One event. Unknown fields are tolerated so that an older hostknob can
/// read a ledger a newer one wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// RFC 3339, UTC (`2026-07-10T09:14:03Z`).
    pub timestamp: String,
    /// Unique and stable: set by the writer, kept by collection, so merged
    /// copies are de-duplicated by it (entries written before it: by content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub host: String,
    pub knob: String,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    pub persistence: Persistence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The hostknob version that wrote the entry.
    pub hostknob: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `verify`'s figures (probe, settings, rounds, medians, ratio, verdict):
    /// the summary when `samples` names the per-round detail's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
    /// The per-round samples beside the ledger (`samples/<id>.json`, see
    /// `ledger_samples`); `evidence` then holds the summary. Absent: the
    /// evidence is whole (or has no per-round detail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<String>,
    /// For `verified`: the host facts the result depends on (kernel,
    /// microcode, CPU, idle and cpufreq drivers, probe), so audit can say
    /// when the evidence is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<super::facts::Facts>,
    /// Which machine: set by the one writer (`Session::record`).
    #[serde(flatten)]
    pub identity: Identity,
}

/// Whether an entry was made on the running host or on a captured tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    Live,
    Capture,
}

/// The machine an entry is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Identity {
    /// `<root>/etc/machine-id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// `<root>/proc/sys/kernel/random/boot_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// `None` only in entries written before identity was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootKind>,
    /// The capture's directory, for `root: capture`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
}

impl Identity {
    /// The identity of the machine behind `root`.
    pub fn of(root: &Root) -> Identity {
        let read = |p: &str| {
            root.read_string(p)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty() && t.len() <= 128)
        };
        let live = root.is_live();
        Identity {
            machine_id: read("/etc/machine-id"),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            root: Some(if live {
                RootKind::Live
            } else {
                RootKind::Capture
            }),
            capture: (!live).then(|| {
                std::fs::canonicalize(root.base())
                    .unwrap_or_else(|_| root.base().to_path_buf())
                    .display()
                    .to_string()
            }),
        }
    }

    /// Whether an entry with this identity is about the machine `here`.
    /// Unknown (legacy) entries count as this host's; a live entry never
    /// matches a capture or the other way round; two machine-ids must agree.
    pub fn same_machine(&self, here: &Identity) -> bool {
        let Some(kind) = self.root else {
            return true;
        };
        if Some(kind) != here.root {
            return false;
        }
        if kind == RootKind::Capture && self.capture != here.capture {
            return false;
        }
        match (&self.machine_id, &here.machine_id) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    /// How an entry's origin reads for a person.
    pub fn describe(&self) -> String {
        match (self.root, &self.capture, &self.machine_id) {
            (None, ..) => "an entry without machine identity".into(),
            (Some(RootKind::Capture), Some(c), _) => format!("the capture at {c}"),
            (Some(RootKind::Capture), None, _) => "a capture".into(),
            (Some(RootKind::Live), _, Some(m)) => format!("the live machine {m}"),
            (Some(RootKind::Live), _, None) => "a live machine without machine-id".into(),
        }
    }
}

/// The entries about the machine `here`, and how many others were left
/// out (another machine, or a capture).
pub fn ours(all: Vec<Entry>, here: &Identity) -> (Vec<Entry>, usize) {
    let n = all.len();
    let ours: Vec<Entry> = all
        .into_iter()
        .filter(|e| e.identity.same_machine(here))
        .collect();
    let others = n - ours.len();
    (ours, others)
}

impl Entry {
    /// Unix seconds of `timestamp`.
    pub fn when(&self) -> Option<u64> {
        crate::schema::parse_when(&self.timestamp)
            .ok()
            .map(|(t, _)| t)
    }
}

pub fn path_for(manifest_dir: &Path, host: &str) -> PathBuf {
    manifest_dir.join(LEDGER_DIR).join(format!("{host}.yaml"))
}

/// The most a ledger may hold before hostknob refuses to read it.
const LEDGER_CAP: usize = 64 << 20;

fn logical(host: &str) -> String {
    format!("/{LEDGER_DIR}/{host}.yaml")
}

/// The ledger's text and, when its last item is torn (a crash or a full
/// disk during an append), where the complete items end.
struct Text {
    text: String,
    torn_at: Option<usize>,
}

/// One ledger file: the root it is opened through (the host's, or the
/// manifest directory confined), its path there, and its path in messages.
pub(crate) struct Place<'a> {
    pub root: &'a Root,
    pub logical: String,
    pub path: PathBuf,
}

/// Reads a ledger through its seam (bounded, regular files only); `None`
/// when there is none.
fn load(place: &Place) -> Result<Option<Text>, ManifestError> {
    let err = |line: Option<usize>, field: Option<String>, message: String| ManifestError {
        file: place.path.clone(),
        line,
        field,
        message,
    };
    let bytes = match place.root.read_capped(&place.logical, LEDGER_CAP) {
        Ok(b) => b,
        Err(e) if crate::root::is_absent(&e) => return Ok(None),
        Err(e) => return Err(err(None, None, format!("cannot read: {e}"))),
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        err(Some(line), None, "not UTF-8 text".into())
    })?;
    let torn_at = torn_at(&text);
    Ok(Some(Text { text, torn_at }))
}

/// The manifest directory confined, for its collected ledgers; `None` when
/// there is no such directory.
fn manifest_root(manifest_dir: &Path) -> Result<Option<Root>, ManifestError> {
    match Root::confined(manifest_dir) {
        Ok(r) => Ok(Some(r)),
        Err(e) if crate::root::is_absent(&e) => Ok(None),
        Err(e) => Err(ManifestError {
            file: manifest_dir.to_path_buf(),
            line: None,
            field: None,
            message: format!("cannot open its directory: {e}"),
        }),
    }
}

/// Where a torn last item begins, if the last item is torn: a crash or a
/// full disk during an append leaves only its own item incomplete, so the
/// items before it still read. Torn: cut off in a value (no final newline, as
/// every append ends in one), fields missing at its end, or identity cut off (machine or boot id
/// without `root:`, `root: capture` without the capture, or no `root:`
/// after items that had one: an older hostknob's items never follow a newer
/// one's).
fn torn_at(text: &str) -> Option<usize> {
    if text.trim().is_empty() {
        return None;
    }
    let parse = |t: &str| serde_yaml::from_str::<Vec<Entry>>(t);
    // An item begins at a line that is `-` followed by a space, a newline or
    // nothing (a tear one byte into it).
    let at = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .rfind(|&i| {
            let rest = &text[i..];
            rest == "-" || rest.starts_with("- ") || rest.starts_with("-\n")
        })?;
    let before = match &text[..at] {
        t if t.trim().is_empty() => Vec::new(),
        t => parse(t).ok()?,
    };
    let last = &text[at..];
    let whole = last.ends_with('\n');
    let torn = match parse(last) {
        Err(e) => !whole || e.to_string().contains("missing field"),
        Ok(items) => items.iter().any(|e| {
            let id = &e.identity;
            match id.root {
                None => {
                    id.machine_id.is_some()
                        || id.boot_id.is_some()
                        || before.iter().any(|b| b.identity.root.is_some())
                }
                Some(RootKind::Capture) => !whole || id.capture.is_none(),
                Some(RootKind::Live) => !whole,
            }
        }),
    };
    torn.then_some(at)
}

/// Reads a ledger the way the next append will (bounded, a regular file,
/// UTF-8), without writing: apply and revert call it before their first
/// write to the host, so a ledger that cannot take the record stops them
/// while nothing is changed. A torn last item is fine: the append repairs it.
pub(crate) fn check_at(place: &Place) -> Result<(), ManifestError> {
    load(place)?;
    // Opened as the append will (no hard link, writable), without writing.
    match open_append(place.root, &place.logical, false) {
        Err(e) if !crate::root::is_absent(&e) => Err(ManifestError {
            file: place.path.clone(),
            line: None,
            field: None,
            message: format!("cannot append: {e}"),
        }),
        _ => Ok(()),
    }
}

fn torn_message(path: &Path, bytes: usize) -> String {
    format!(
        "{} ends in a torn item ({bytes} bytes: a crash or a full disk during an append); \
         the next apply, revert or persist keeps it in {}.torn and cuts it off",
        path.display(),
        path.display()
    )
}

/// The collected events of one host name, from the manifest repository
/// (`ledger/<host>.yaml`), in file order; no file means no events.
pub fn read(manifest_dir: &Path, host: &str) -> Result<Vec<Entry>, ManifestError> {
    if crate::name::check(host).is_err() {
        return Ok(Vec::new());
    }
    let Some(root) = manifest_root(manifest_dir)? else {
        return Ok(Vec::new());
    };
    read_at(&Place {
        root: &root,
        logical: logical(host),
        path: path_for(manifest_dir, host),
    })
}

/// A ledger's events in file order; no file means no events. A torn last
/// item is left out (and said on stderr).
pub(crate) fn read_at(place: &Place) -> Result<Vec<Entry>, ManifestError> {
    let path = &place.path;
    let err = |line: Option<usize>, field: Option<String>, message: String| ManifestError {
        file: path.clone(),
        line,
        field,
        message,
    };
    let Some(Text { text, torn_at }) = load(place)? else {
        return Ok(Vec::new());
    };
    let text = match torn_at {
        Some(at) => {
            eprintln!("hostknob: warning: {}", torn_message(path, text.len() - at));
            text[..at].to_string()
        }
        None => text,
    };
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let entries: Vec<Entry> = serde_yaml::from_str(&text).map_err(|e| {
        let (field, message) = super::split_yaml_message(&e.to_string());
        err(e.location().map(|l| l.line()), field, message)
    })?;
    for (i, e) in entries.iter().enumerate() {
        if crate::schema::parse_when(&e.timestamp).is_err() {
            let line = super::locate::line_of(&text, &format!("[{i}].timestamp"));
            return Err(err(
                line,
                Some(format!("[{i}].timestamp")),
                format!("{:?} is not an RFC 3339 time", e.timestamp),
            ));
        }
    }
    Ok(entries)
}

/// Opens a ledger file for appending through the seam: no link (symbolic
/// or hard), no FIFO.
fn open_append(root: &Root, logical: &str, create: bool) -> std::io::Result<std::fs::File> {
    let flags = libc::O_WRONLY
        | libc::O_APPEND
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | if create { libc::O_CREAT } else { 0 };
    let f = std::fs::File::from(root.open_raw(logical, flags, 0o644)?);
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Appends one event (creating the ledger's directory and file when needed)
/// and syncs it to disk before returning. A torn last item is first kept in
/// `<file>.torn` and cut off (said on stderr); an append that fails is cut
/// back off, so the ledger always ends in a complete item.
pub(crate) fn append_at(place: &Place, entry: &Entry) -> anyhow::Result<()> {
    use anyhow::Context;
    let (root, file, path) = (place.root, place.logical.as_str(), &place.path);
    let mut created = Vec::new();
    root.make_dirs(file, &mut created).with_context(|| {
        format!(
            "creating {}",
            path.parent().unwrap_or(Path::new("/")).display()
        )
    })?;
    let existing = load(place).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut text = String::new();
    if let Some(t) = &existing {
        if let Some(at) = t.torn_at {
            let mut kept = open_append(root, &format!("{file}.torn"), true)
                .with_context(|| format!("{}.torn: cannot open", path.display()))?;
            kept.write_all(&t.text.as_bytes()[at..])?;
            kept.sync_all()?;
            let f = open_append(root, file, false)?;
            f.set_len(at as u64)?;
            f.sync_all()?;
            eprintln!(
                "hostknob: warning: {}",
                torn_message(path, t.text.len() - at)
                    .replace("the next apply, revert or persist keeps", "kept")
            );
        } else if !t.text.is_empty() && !t.text.ends_with('\n') {
            // A file whose last line lacks its newline would swallow the new item.
            text.push('\n');
        }
    }
    text.push_str(&serde_yaml::to_string(&vec![entry])?);
    let mut f =
        open_append(root, file, true).with_context(|| format!("opening {}", path.display()))?;
    let len_before = f.metadata()?.len();
    let written = crate::root::append(&mut f, text.as_bytes(), "ledger").and_then(|_| f.sync_all());
    if let Err(e) = written {
        let cut = f.set_len(len_before).and_then(|_| f.sync_all());
        return Err(anyhow::Error::new(e).context(format!(
            "writing {} ({})",
            path.display(),
            match cut {
                Ok(()) => "cut back to its last complete item".to_string(),
                Err(c) => format!("cutting it back failed too: {c}; the next append repairs it"),
            }
        )));
    }
    Ok(())
}

/// Now, as the ledger writes it.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Today (UTC, `YYYY-MM-DD`): the `date:` of history a command writes now.
pub fn today() -> String {
    now_rfc3339()[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ts: &str, action: Action) -> Entry {
        Entry {
            timestamp: ts.into(),
            id: None,
            host: "rpc-ap-1".into(),
            knob: "k".into(),
            action,
            changes: vec![Change {
                path: "/sys/devices/system/cpu/cpu*/cpuidle/state3/disable".into(),
                cpus: Some(CpuList::parse("0-63").unwrap()),
                before: Some("0".into()),
                after: Some("1".into()),
            }],
            persistence: Persistence::Runtime,
            user: Some("alice".into()),
            hostknob: env!("CARGO_PKG_VERSION").into(),
            note: None,
            evidence: None,
            facts: None,
            samples: None,
            identity: Identity::default(),
        }
    }

    /// Appends to the collected ledger in `dir` (as a collection would).
    fn append(dir: &Path, e: &Entry) -> anyhow::Result<()> {
        let root = Root::confined(dir)?;
        append_at(
            &Place {
                root: &root,
                logical: logical(&e.host),
                path: path_for(dir, &e.host),
            },
            e,
        )
    }

    fn read_for(
        dir: &Path,
        host: &str,
        here: &Identity,
    ) -> Result<(Vec<Entry>, usize), ManifestError> {
        Ok(ours(read(dir, host)?, here))
    }

    #[test]
    fn identity_round_trips_and_separates_machines() {
        let dir = tempfile::tempdir().unwrap();
        let live = Identity {
            machine_id: Some("aaaa".into()),
            boot_id: Some("b1".into()),
            root: Some(RootKind::Live),
            capture: None,
        };
        let cap = Identity {
            machine_id: None,
            boot_id: None,
            root: Some(RootKind::Capture),
            capture: Some("/tmp/copy".into()),
        };
        let mut a = entry("2026-07-10T09:14:03Z", Action::Applied);
        a.identity = cap.clone();
        let mut b = entry("2026-07-11T10:00:00Z", Action::Applied);
        b.identity = live.clone();
        let legacy = entry("2026-07-09T10:00:00Z", Action::Applied);
        for e in [&legacy, &a, &b] {
            append(dir.path(), e).unwrap();
        }
        let text = std::fs::read_to_string(path_for(dir.path(), "rpc-ap-1")).unwrap();
        assert!(
            text.contains("root: capture") && text.contains("capture: /tmp/copy"),
            "{text}"
        );
        assert!(
            text.contains("machine_id: aaaa") && text.contains("root: live"),
            "{text}"
        );
        let (ours, others) = read_for(dir.path(), "rpc-ap-1", &live).unwrap();
        assert_eq!((ours, others), (vec![legacy.clone(), b.clone()], 1));
        let (ours, others) = read_for(dir.path(), "rpc-ap-1", &cap).unwrap();
        assert_eq!((ours, others), (vec![legacy.clone(), a], 1));
        let elsewhere = Identity {
            machine_id: Some("cccc".into()),
            ..live
        };
        let (ours, others) = read_for(dir.path(), "rpc-ap-1", &elsewhere).unwrap();
        assert_eq!((ours, others), (vec![legacy], 2));
    }

    #[test]
    fn appends_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = entry("2026-07-10T09:14:03Z", Action::Applied);
        let b = entry("2026-07-11T10:00:00Z", Action::Reverted);
        append(dir.path(), &a).unwrap();
        let before = std::fs::read_to_string(path_for(dir.path(), "rpc-ap-1")).unwrap();
        append(dir.path(), &b).unwrap();
        let after = std::fs::read_to_string(path_for(dir.path(), "rpc-ap-1")).unwrap();
        assert!(after.starts_with(&before), "append-only");
        assert_eq!(read(dir.path(), "rpc-ap-1").unwrap(), vec![a, b]);
        assert_eq!(read(dir.path(), "other").unwrap(), vec![]);
    }

    #[test]
    fn a_bad_ledger_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ledger")).unwrap();
        std::fs::write(
            path_for(dir.path(), "h"),
            "- timestamp: 2026-07-10T09:14:03Z\n  host: h\n  knob: k\n  action: exploded\n  persistence: runtime\n  hostknob: 0.1.0\n",
        )
        .unwrap();
        let e = read(dir.path(), "h").unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.to_string().contains("h.yaml:4"), "{e}");
    }
}
