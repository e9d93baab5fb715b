//! Where the ledger lives. A host writes its history into its state
//! directory (`<state-dir>/ledger.yaml`, `/var/lib/hostknob/ledger.yaml` by
//! default, through the root seam like the journal), never into the reviewed
//! manifest directory, which is distributed from review and may be replaced
//! or read-only. `collect-ledgers.yml` copies each host's ledger into the
//! manifest repository (`ledger/<host>.yaml`); readers merge that collected
//! copy with the local one, de-duplicated by entry `id` (older entries
//! without one: by content) and ordered by time.
//!
//! A manifest ledger written by an older hostknob keeps being read; the first
//! write that finds one says once on stderr where new entries go (a marker
//! in the state directory remembers it was said).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::ManifestError;
use super::ledger::{self, Entry, Identity, Place};
use super::ledger_samples::{self as samples, Samples};
use crate::root::Root;

/// The host-written ledger's name in the state directory.
pub const STATE_FILE: &str = "ledger.yaml";
/// Its presence says the move was announced on this host.
const MOVED_MARKER: &str = "ledger-moved";

/// One host's ledgers: its own in the state directory and the collected one
/// in the manifest repository.
pub struct Home<'r> {
    root: &'r Root,
    host: String,
    manifest_dir: PathBuf,
    /// The state directory, a logical path under the root.
    state_dir: String,
}

impl<'r> Home<'r> {
    /// `state_dir` is logical (under `root`), as `journal::state_dir` gives it.
    pub fn new(root: &'r Root, host: &str, manifest_dir: &Path, state_dir: &str) -> Home<'r> {
        Home {
            root,
            host: host.to_string(),
            manifest_dir: manifest_dir.to_path_buf(),
            state_dir: state_dir.trim_end_matches('/').to_string(),
        }
    }

    fn logical(&self, name: &str) -> String {
        format!("{}/{name}", self.state_dir)
    }

    fn local(&self) -> Place<'r> {
        let logical = self.logical(STATE_FILE);
        Place {
            root: self.root,
            path: self.root.host_path(&logical),
            logical,
        }
    }

    /// Where new entries go: `<state-dir>/ledger.yaml` as a real path.
    pub fn local_path(&self) -> PathBuf {
        self.local().path
    }

    /// Where new entries go as the host names it (`/var/lib/hostknob/ledger.yaml`),
    /// the same under any `--root`: for documents.
    pub fn local_logical(&self) -> String {
        self.logical(STATE_FILE)
    }

    /// The collected copy in the manifest repository.
    pub fn collected_path(&self) -> PathBuf {
        ledger::path_for(&self.manifest_dir, &self.host)
    }

    /// Reads the local ledger as the next append will, writing nothing: a
    /// ledger that cannot take the record stops a change before it starts.
    pub fn check(&self) -> Result<(), ManifestError> {
        // A state directory behind a link that leads nowhere in the root
        // (`var -> /var` in a capture): said as such, not as ELOOP.
        let mut dir = String::new();
        for part in self.state_dir.split('/').filter(|p| !p.is_empty()) {
            dir = format!("{dir}/{part}");
            if let Ok(to) = self.root.read_link(&dir)
                && !self.root.is_dir(&dir)
            {
                return Err(ManifestError {
                    file: self.local_path(),
                    line: None,
                    field: None,
                    message: format!(
                        "{dir} is a symbolic link to {} that leads nowhere inside the root",
                        to.display()
                    ),
                });
            }
        }
        ledger::check_at(&self.local())
    }

    /// Appends one event to the local ledger, giving it an id when it has
    /// none; returns the ledger's path. Evidence with per-round detail is
    /// split: the detail goes to `<state-dir>/samples/<id>.json` first
    /// (atomically), then the entry with the summary, naming it; a failed
    /// append removes the file again.
    pub fn append(&self, entry: &Entry) -> anyhow::Result<PathBuf> {
        let mut entry = entry.clone();
        let id = entry.id.get_or_insert_with(new_id).clone();
        let detail = entry.evidence.as_mut().and_then(samples::split);
        let written = match detail {
            Some(detail) => {
                let name = samples::file_name(&id)
                    .ok_or_else(|| anyhow::anyhow!("entry id {id:?} cannot name a samples file"))?;
                let logical = self.logical(&name);
                let bytes = samples::document(&id, &entry.knob, &entry.timestamp, &detail);
                self.root.replace_file(&logical, &bytes).map_err(|e| {
                    anyhow::anyhow!("writing {}: {e}", self.root.host_path(&logical).display())
                })?;
                entry.samples = Some(name);
                Some(logical)
            }
            None => None,
        };
        let place = self.local();
        if let Err(e) = ledger::append_at(&place, &entry) {
            if let Some(logical) = written {
                let _ = self.root.remove_file(&logical);
            }
            return Err(e);
        }
        self.say_moved_once();
        Ok(place.path)
    }

    /// An entry's per-round samples: read from beside the local ledger,
    /// else from beside the collected ones (`<manifest>/ledger/samples/`).
    /// Never fails: a missing or unreadable file is said in words, and the
    /// entry's id names a file only when it is a plain name.
    pub fn samples(&self, entry: &Entry) -> Samples {
        let Some(named) = &entry.samples else {
            return Samples::Inline;
        };
        let id = entry.id.as_deref().unwrap_or("");
        let Some(name) = samples::file_name(id).filter(|n| n == named) else {
            return Samples::Missing {
                path: None,
                words: format!(
                    "the entry (id {:?}) names samples file {:?}, not samples/<its id>.json \
                     of a plain id: not read",
                    clip(id),
                    clip(named)
                ),
            };
        };
        let local = self.logical(&name);
        let mut tried = vec![(
            self.root.host_path(&local),
            read_samples(self.root, &local, id),
        )];
        if let Ok(root) = Root::confined(&self.manifest_dir) {
            let logical = format!("/{}/{name}", ledger::LEDGER_DIR);
            let path = self.manifest_dir.join(ledger::LEDGER_DIR).join(&name);
            tried.push((path, read_samples(&root, &logical, id)));
        }
        let mut why = Vec::new();
        for (path, read) in tried {
            match read {
                Ok(detail) => {
                    return Samples::Present {
                        path: path.display().to_string(),
                        detail,
                    };
                }
                Err(e) => why.push(format!("{}: {e}", path.display())),
            }
        }
        Samples::Missing {
            path: Some(self.root.host_path(&local).display().to_string()),
            words: format!(
                "per-round samples not found ({}); the summary in the ledger stands \
                 (a ledger copied without its samples directory?)",
                why.join("; ")
            ),
        }
    }

    /// Says once per state directory that host-written entries found in the
    /// manifest's `ledger/` stay read but new ones go to the state directory.
    fn say_moved_once(&self) {
        let marker = self.logical(MOVED_MARKER);
        if self.root.exists(&marker) {
            return;
        }
        let old = ledger::read(&self.manifest_dir, &self.host).unwrap_or_default();
        if old.is_empty() {
            return;
        }
        eprintln!(
            "hostknob: note: the ledger now lives in the state directory: new entries go to {}; \
             the {} entries in {} are still read (audit, doc and revert merge both), and \
             collect-ledgers.yml gathers hosts' ledgers there for review (said once)",
            self.local_path().display(),
            old.len(),
            self.collected_path().display()
        );
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let _ = self.root.open_raw(&marker, flags, 0o644);
    }

    /// Every entry under this host name, local and collected, merged.
    pub fn read_all(&self) -> Result<Vec<Entry>, ManifestError> {
        let collected = ledger::read(&self.manifest_dir, &self.host)?;
        let local: Vec<Entry> = ledger::read_at(&self.local())?
            .into_iter()
            .filter(|e| e.host == self.host)
            .collect();
        Ok(merge(collected, local))
    }

    /// Every entry anyone recorded that this host can see: its own ledger
    /// (all host names) and every collected ledger in the manifest. A
    /// collected ledger that cannot be read is said on stderr and skipped:
    /// another host's file never fails this host's command.
    pub fn read_everywhere(&self) -> Vec<Entry> {
        let mut collected = Vec::new();
        if let Ok(root) = Root::confined(&self.manifest_dir) {
            let dir = format!("/{}", ledger::LEDGER_DIR);
            let mut names = root.read_dir(&dir).unwrap_or_default();
            names.sort();
            for name in names.iter().filter(|n| n.ends_with(".yaml")) {
                let place = Place {
                    root: &root,
                    logical: format!("{dir}/{name}"),
                    path: self.manifest_dir.join(ledger::LEDGER_DIR).join(name),
                };
                match ledger::read_at(&place) {
                    Ok(entries) => collected.extend(entries),
                    Err(e) => eprintln!("hostknob: warning: {e} (skipped)"),
                }
            }
        }
        let local = ledger::read_at(&self.local()).unwrap_or_default();
        merge(collected, local)
    }

    /// The merged entries about the machine `here`, and how many others were
    /// left out (another machine, or a capture).
    pub fn read_for(&self, here: &Identity) -> Result<(Vec<Entry>, usize), ManifestError> {
        Ok(ledger::ours(self.read_all()?, here))
    }
}

/// At most 80 characters of a name from a ledger, for messages.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// A samples file's detail, through its root (bounded, a regular file, no link).
fn read_samples(root: &Root, logical: &str, id: &str) -> Result<serde_json::Value, String> {
    match root.read_capped(logical, samples::SAMPLES_CAP) {
        Ok(bytes) => samples::parse(&bytes, id),
        Err(e) if crate::root::is_absent(&e) => Err("missing".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The collected and the local entries as one history: each entry once (by
/// id, else by content), in time order (equal times: collected first, then
/// file order).
pub fn merge(collected: Vec<Entry>, local: Vec<Entry>) -> Vec<Entry> {
    let mut seen = HashSet::new();
    let mut all: Vec<Entry> = collected
        .into_iter()
        .chain(local)
        .filter(|e| seen.insert(key(e)))
        .collect();
    all.sort_by_key(|e| e.when().unwrap_or(0));
    all
}

fn key(e: &Entry) -> String {
    match &e.id {
        Some(id) => format!("id:{id}"),
        None => format!("content:{}", serde_yaml::to_string(e).unwrap_or_default()),
    }
}

/// A new entry id: 128 random bits in hex (unique without coordination
/// between hosts).
pub fn new_id() -> String {
    let mut buf = [0u8; 16];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the buffer's remaining length into it.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n <= 0 {
            // No entropy source: the clock and the pid still separate writers.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            buf = (t ^ (u128::from(std::process::id()) << 96)).to_be_bytes();
            break;
        }
        filled += n as usize;
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ledger::Action;
    use crate::schema::Persistence;

    fn entry(ts: &str, id: Option<&str>) -> Entry {
        Entry {
            timestamp: ts.into(),
            id: id.map(str::to_string),
            host: "h".into(),
            knob: "k".into(),
            action: Action::Applied,
            changes: Vec::new(),
            persistence: Persistence::Runtime,
            user: None,
            hostknob: "0.1.0".into(),
            note: None,
            evidence: None,
            facts: None,
            samples: None,
            identity: Identity::default(),
        }
    }

    /// A host tree (with `proc`), its root, and a manifest directory.
    fn dirs() -> (tempfile::TempDir, tempfile::TempDir, Root) {
        let host = tempfile::tempdir().unwrap();
        std::fs::create_dir(host.path().join("proc")).unwrap();
        let root = Root::open(host.path()).unwrap();
        (host, tempfile::tempdir().unwrap(), root)
    }

    #[test]
    fn merging_keeps_each_entry_once_in_time_order() {
        let old = entry("2026-07-01T00:00:00Z", None);
        let a = entry("2026-07-02T00:00:00Z", Some("aa"));
        let b = entry("2026-07-03T00:00:00Z", Some("bb"));
        let c = entry("2026-07-01T12:00:00Z", Some("cc"));
        let merged = merge(
            vec![old.clone(), a.clone(), b.clone()],
            vec![old.clone(), c.clone(), a.clone(), b.clone()],
        );
        assert_eq!(merged, vec![old, c, a, b]);
    }

    #[test]
    fn per_round_detail_goes_beside_the_ledger_before_the_entry_names_it() {
        let (host, manifest, root) = dirs();
        let home = Home::new(&root, "h", manifest.path(), "/var/lib/hostknob");
        let mut e = entry("2026-07-02T00:00:00Z", None);
        e.evidence = Some(serde_json::json!({"ratio": 0.9, "ratios": [0.8, 1.0]}));
        home.append(&e).unwrap();
        let all = home.read_all().unwrap();
        let id = all[0].id.clone().unwrap();
        assert_eq!(all[0].samples, Some(format!("samples/{id}.json")));
        assert_eq!(all[0].evidence, Some(serde_json::json!({"ratio": 0.9})));
        let file = host
            .path()
            .join(format!("var/lib/hostknob/samples/{id}.json"));
        match home.samples(&all[0]) {
            Samples::Present { path, detail } => {
                assert_eq!(path, file.display().to_string());
                assert_eq!(detail, serde_json::json!({"ratios": [0.8, 1.0]}));
            }
            other => panic!("{other:?}"),
        }
        // Collected without its samples: said, with where it was looked for.
        std::fs::remove_file(&file).unwrap();
        let Samples::Missing { words, .. } = home.samples(&all[0]) else {
            panic!("missing")
        };
        assert!(
            words.contains("not found") && words.contains("missing"),
            "{words}"
        );
        // The collected copy's samples are read when the host's are not there.
        let beside = manifest.path().join(format!("ledger/samples/{id}.json"));
        std::fs::create_dir_all(beside.parent().unwrap()).unwrap();
        std::fs::write(
            &beside,
            samples::document(&id, "k", "t", &serde_json::json!({"ratios": [1.0]})),
        )
        .unwrap();
        assert!(matches!(home.samples(&all[0]), Samples::Present { .. }));
        // A ledger that cannot take the entry: no samples file stays behind.
        let ledger = host.path().join("var/lib/hostknob/ledger.yaml");
        std::fs::remove_file(&ledger).unwrap();
        std::fs::create_dir(&ledger).unwrap();
        let mut f = entry("2026-07-03T00:00:00Z", Some("ff"));
        f.evidence = e.evidence.clone();
        assert!(home.append(&f).is_err());
        assert!(
            !host
                .path()
                .join("var/lib/hostknob/samples/ff.json")
                .exists()
        );
    }

    #[test]
    fn an_id_that_is_not_a_plain_name_names_no_file() {
        let (host, manifest, root) = dirs();
        let home = Home::new(&root, "h", manifest.path(), "/var/lib/hostknob");
        let long = "a".repeat(65);
        for id in ["../x", "/etc/passwd", "a.b", long.as_str()] {
            let mut e = entry("2026-07-02T00:00:00Z", Some(id));
            e.samples = Some(format!("samples/{id}.json"));
            let Samples::Missing { path, words } = home.samples(&e) else {
                panic!("{id}")
            };
            assert_eq!(path, None, "{id}");
            assert!(words.contains("not read"), "{words}");
            // Nor does the writer take one.
            e.evidence = Some(serde_json::json!({"ratios": [1.0]}));
            assert!(home.append(&e).is_err(), "{id}");
        }
        assert!(!host.path().join("var/lib/hostknob/ledger.yaml").exists());
    }

    #[test]
    fn ids_are_distinct_hex() {
        let a = new_id();
        let b = new_id();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn appends_go_to_the_state_directory_and_reads_merge_both() {
        let (host, manifest, root) = dirs();
        let home = Home::new(&root, "h", manifest.path(), "/var/lib/hostknob");
        let collected = entry("2026-07-01T00:00:00Z", None);
        std::fs::create_dir_all(manifest.path().join("ledger")).unwrap();
        std::fs::write(
            manifest.path().join("ledger/h.yaml"),
            serde_yaml::to_string(&vec![&collected]).unwrap(),
        )
        .unwrap();
        let before = std::fs::read(manifest.path().join("ledger/h.yaml")).unwrap();
        let path = home.append(&entry("2026-07-02T00:00:00Z", None)).unwrap();
        assert_eq!(path, host.path().join("var/lib/hostknob/ledger.yaml"));
        assert_eq!(
            std::fs::read(manifest.path().join("ledger/h.yaml")).unwrap(),
            before,
            "the manifest's ledger is never written"
        );
        assert!(host.path().join("var/lib/hostknob/ledger-moved").exists());
        let all = home.read_all().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], collected);
        assert!(all[1].id.as_ref().is_some_and(|i| i.len() == 32));
        // Collected again (the same bytes in the manifest): still two.
        let local = std::fs::read_to_string(home.local_path()).unwrap();
        let mut text = String::from_utf8(before).unwrap();
        text.push_str(&local);
        std::fs::write(manifest.path().join("ledger/h.yaml"), text).unwrap();
        assert_eq!(home.read_all().unwrap(), all);
    }
}
