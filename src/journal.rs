//! The state directory's lock and journal: what makes `apply` crash-safe.
//!
//! Before the first write of an apply, every file it will write is recorded
//! with its value as found, the value about to be written and the boot (the
//! journal is fsynced, and so is its directory). Entries are kept per knob
//! and file: a file already journaled for that knob keeps its first value, so
//! `revert` restores the host as it was before the first apply since the
//! journal began, even after a crash in the middle of an apply; two knobs on
//! one file each have their own entry, undone in the reverse order of their
//! applies. After the writes, each entry also gets what its file read back
//! (`seen`): revert leaves alone a file that no longer holds it.
//!
//! Both live under the state directory (default `/var/lib/hostknob`), which is
//! resolved under `--root` like every other path.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::knob::WriteMode;
use crate::root::Root;

mod lock;
pub use lock::{LOCK_FILE, Lock, LockError, set_wait_limit};

pub const JOURNAL_FILE: &str = "journal.jsonl";
/// Beside the journal: the bytes of a torn last record, kept for a person to read.
pub const TORN_SUFFIX: &str = ".torn";
/// The most the journal may hold (a 4,096-CPU host's whole plan is a few MB).
const JOURNAL_CAP: usize = 64 << 20;

/// One file's value before hostknob first wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// Logical path (`/sys/...`), as under `--root`; an ethtool value's
    /// locator (`ethtool:eth0/channels/combined`: no file).
    pub path: String,
    /// How the file is written back: a kernel attribute, or a whole file.
    #[serde(default = "attribute")]
    pub mode: WriteMode,
    /// What revert writes into a kernel attribute (in the words the kernel
    /// accepts: `madvise`, not `always [madvise] never`); for a whole file,
    /// its content. `None`: the file did not exist, and revert removes it.
    pub before: Option<String>,
    /// The file's exact content as found. A plain file (a drop-in, or any
    /// file of a captured tree) is restored to these bytes; a kernel
    /// attribute is read back against them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// The CPUs the file acts for, to group entries like apply does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<crate::cpulist::CpuList>,
    /// Directories the write created for a new file, outermost first:
    /// revert removes them again when they are empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
    /// The knob whose apply recorded it (one entry per knob and file).
    pub knob: String,
    /// RFC 3339 time it was recorded.
    pub recorded: String,
    /// What apply wrote (the request). Absent in journals of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
    /// The file's exact content read back after the write: what it holds
    /// until someone else changes it. Absent when apply stopped before it
    /// could record it (revert then compares with `written`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    /// The boot it was written in (`/proc/sys/kernel/random/boot_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<String>,
    /// A channel change in a tree: the interface's queue directories as
    /// found, which revert puts back byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<crate::ethtool::queues::Snapshot>,
}

impl Entry {
    /// Whether this is `other`'s knob and file.
    pub fn same_slot(&self, other: &Entry) -> bool {
        self.knob == other.knob && self.path == other.path
    }

    /// A kernel value written in another boot than `now`: the reboot reset it.
    pub fn stale(&self, now: Option<&str>) -> bool {
        matches!(
            self.mode,
            WriteMode::Attribute | WriteMode::Msr | WriteMode::Affinity | WriteMode::Sched
        ) && matches!((self.boot.as_deref(), now), (Some(a), Some(b)) if a != b)
    }

    /// Whether the file's content `now` is its value as found, before hostknob wrote it.
    pub fn holds_found(&self, now: Option<&str>) -> bool {
        match self.mode {
            WriteMode::File => now == self.before.as_deref(),
            _ => now
                .zip(self.found.as_deref())
                .is_some_and(|(n, f)| n.trim() == f.trim()),
        }
    }

    /// Whether the file's content `now` is what hostknob left there.
    /// A file that still holds its value before counts too: an apply that
    /// stopped before reaching it (a crash), or one put back by hand;
    /// restoring it writes the same value again.
    pub fn holds_ours(&self, now: Option<&str>) -> bool {
        let as_before = self.holds_found(now);
        // A kernel file that is gone is not someone's value: restoring it
        // fails and names it (a CPU offline). Without a read-back the apply
        // stopped before its end, maybe in the middle of writing this file
        // (a plain file truncated, not yet written).
        let in_flight = self.seen.is_none() && now.is_some_and(str::is_empty);
        if as_before
            || in_flight
            || (matches!(self.mode, WriteMode::Attribute | WriteMode::Msr) && now.is_none())
        {
            return true;
        }
        if let Some(seen) = &self.seen {
            return match self.mode {
                WriteMode::File => now == Some(seen.as_str()),
                _ => now.is_some_and(|n| n.trim() == seen.trim()),
            };
        }
        let Some(written) = self.written.as_deref() else {
            // An older journal: nothing to compare with.
            return true;
        };
        match (self.mode, now) {
            (WriteMode::File, n) => n == Some(written),
            (_, None) => false,
            (_, Some(n)) => same_words(n, written),
        }
    }
}

/// A kernel attribute's text against the text written to it, when no
/// read-back was recorded: equal but for whitespace, or the selected `[word]`
/// of a choice list (`always [madvise] never`).
fn same_words(now: &str, written: &str) -> bool {
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    if words(now) == words(written) {
        return true;
    }
    now.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .is_some_and(|sel| sel == written.trim())
}

/// The running boot's id under `root`, if the tree has one.
pub fn boot_id(root: &Root) -> Option<String> {
    root.read_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty() && t.len() <= 128)
}

fn attribute() -> WriteMode {
    WriteMode::Attribute
}

/// The state directory as a logical path under the root: `--state-dir`
/// with `.` and `..` resolved as inside the root (`/../../x` is `/x`).
pub fn state_dir(configured: &std::path::Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in configured.components() {
        match c {
            std::path::Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            std::path::Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    format!("/{}", parts.join("/"))
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Opens a state file in `dir` through the root seam: never through a link
/// (`O_NOFOLLOW`), never a FIFO or a device.
fn open_state_file(root: &Root, logical: &str, flags: i32) -> std::io::Result<File> {
    let fd = root.open_raw(
        logical,
        flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0o644,
    )?;
    let f = File::from(fd);
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Why a state file cannot be opened, in words (a link is the usual trap).
fn state_open_error(root: &Root, logical: &str, e: std::io::Error) -> anyhow::Error {
    let shown = root.host_path(logical);
    if e.raw_os_error() == Some(libc::ELOOP) {
        let to = root.link_target(logical).ok().flatten();
        return anyhow::anyhow!(
            "{}: is a symbolic link{}: hostknob keeps its state only in plain files; remove the link",
            shown.display(),
            to.map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default()
        );
    }
    anyhow::Error::new(e).context(format!("{}: cannot open", shown.display()))
}

/// Makes the state directory (and its parents) inside the root.
fn make_state_dir(root: &Root, dir: &str) -> Result<()> {
    let mut created = Vec::new();
    root.make_dirs(&join(dir, LOCK_FILE), &mut created)
        .map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "{}: cannot create the state directory",
                root.host_path(dir).display()
            ))
        })?;
    if !root.is_dir(dir) {
        bail!(
            "{}: the state directory is not a directory",
            root.host_path(dir).display()
        );
    }
    Ok(())
}

/// The journal as read: its complete records, and a torn last one if any.
pub struct Loaded {
    pub entries: Vec<Entry>,
    /// Bytes after the last complete record (a crash or a full disk while
    /// appending); its files were never written, since writes follow the fsync.
    pub torn: Option<Torn>,
}

pub struct Torn {
    /// Where the complete records end.
    pub at: u64,
    pub bytes: Vec<u8>,
}

/// The journal in a state directory (the caller holds the [`Lock`]).
pub struct Journal<'r> {
    root: &'r Root,
    dir: String,
    file: String,
}

impl<'r> Journal<'r> {
    pub fn open(root: &'r Root, dir: &str) -> Journal<'r> {
        Journal {
            root,
            dir: dir.to_string(),
            file: join(dir, JOURNAL_FILE),
        }
    }

    /// The journal's real path, for messages.
    pub fn path(&self) -> PathBuf {
        self.root.host_path(&self.file)
    }

    /// Whether the journal file is there (empty or not).
    pub fn exists(&self) -> bool {
        self.root.exists(&self.file)
    }

    fn torn_path(&self) -> String {
        format!("{}{TORN_SUFFIX}", self.file)
    }

    /// Every complete record and a torn tail, read through the seam.
    pub fn load(&self) -> Result<Loaded> {
        let shown = self.path();
        let text = match self.root.read_capped(&self.file, JOURNAL_CAP) {
            Ok(t) => t,
            Err(e) if crate::root::is_absent(&e) => {
                return Ok(Loaded {
                    entries: Vec::new(),
                    torn: None,
                });
            }
            Err(e) => {
                return Err(state_open_error(self.root, &self.file, e))
                    .with_context(|| format!("{}: cannot read", shown.display()));
            }
        };
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let torn = (complete < text.len()).then(|| Torn {
            at: complete as u64,
            bytes: text[complete..].to_vec(),
        });
        let body = std::str::from_utf8(&text[..complete]).map_err(|e| {
            let line = text[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            anyhow::anyhow!(
                "{}:{line}: corrupt journal entry: not UTF-8",
                shown.display()
            )
        })?;
        let mut entries = Vec::new();
        for (i, line) in body.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Entry>(line) {
                Ok(mut e) => {
                    // An ethtool value under its old pseudo-path is the same slot.
                    if let Some(f) = crate::ethtool::Field::parse(&e.path) {
                        e.path = f.path();
                    }
                    entries.push(e)
                }
                Err(e) => bail!(
                    "{}:{}: corrupt journal entry: {e}; the entries before and after it are \
                     intact: move it aside by hand, then revert",
                    shown.display(),
                    i + 1
                ),
            }
        }
        Ok(Loaded { entries, torn })
    }

    /// Every complete entry, oldest first (a torn last record is left out).
    pub fn entries(&self) -> Result<Vec<Entry>> {
        Ok(self.load()?.entries)
    }

    /// What a torn tail means, in one line.
    pub fn torn_message(&self, torn: &Torn) -> String {
        format!(
            "{} ended in a torn record ({} bytes after its last complete line: a crash or a full \
             disk while it was written); they are kept in {} and left out",
            self.path().display(),
            torn.bytes.len(),
            self.root.host_path(&self.torn_path()).display()
        )
    }

    /// Cuts the journal back to its last complete record, keeping the torn
    /// bytes in `journal.jsonl.torn` (appended, fsynced) first.
    pub fn repair(&self, torn: &Torn) -> Result<()> {
        let kept = self.torn_path();
        let mut t = open_state_file(
            self.root,
            &kept,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
        )
        .map_err(|e| state_open_error(self.root, &kept, e))?;
        t.write_all(&torn.bytes)
            .and_then(|_| t.write_all(b"\n"))
            .and_then(|_| t.sync_all())
            .with_context(|| format!("{}: cannot write", self.root.host_path(&kept).display()))?;
        let f = open_state_file(self.root, &self.file, libc::O_WRONLY)
            .map_err(|e| state_open_error(self.root, &self.file, e))?;
        f.set_len(torn.at)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("{}: cannot cut back", self.path().display()))?;
        Ok(())
    }

    /// Records the values about to be overwritten, durably, before any write.
    /// A knob's file already journaled keeps its first value; an entry of
    /// that knob and file from another boot is replaced (the reboot reset
    /// it). A torn last record is repaired first (said on stderr); a failed
    /// append is cut back off.
    pub fn record(&self, new: &[Entry]) -> Result<usize> {
        let loaded = self.load()?;
        if let Some(torn) = &loaded.torn {
            self.repair(torn)?;
            eprintln!("hostknob: warning: {}", self.torn_message(torn));
        }
        let now = new.first().and_then(|e| e.boot.as_deref());
        let slots: HashSet<(&str, &str)> = new.iter().map(slot).collect();
        let (stale, kept): (Vec<&Entry>, Vec<&Entry>) = loaded
            .entries
            .iter()
            .partition(|e| e.stale(now) && slots.contains(&slot(e)));
        let known: HashSet<(&str, &str)> = kept.iter().map(|e| slot(e)).collect();
        let fresh: Vec<&Entry> = new.iter().filter(|e| !known.contains(&slot(e))).collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        make_state_dir(self.root, &self.dir)?;
        if !stale.is_empty() {
            self.rewrite(kept.into_iter().chain(fresh.iter().copied()))?;
            return Ok(fresh.len());
        }
        let mut f = open_state_file(
            self.root,
            &self.file,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
        )
        .map_err(|e| state_open_error(self.root, &self.file, e))?;
        let mut buf = String::new();
        for e in &fresh {
            buf += &serde_json::to_string(e)?;
            buf.push('\n');
        }
        let len_before = f.metadata()?.len();
        let appended =
            crate::root::append(&mut f, buf.as_bytes(), "journal").and_then(|_| f.sync_all());
        if let Err(e) = appended {
            // Leave no fragment for the next reader: cut back to the last record.
            let cut = f.set_len(len_before).and_then(|_| f.sync_all());
            let cut = match cut {
                Ok(()) => "cut back to its last complete record".to_string(),
                Err(c) => {
                    format!("and cutting it back failed too ({c}): the next apply repairs it")
                }
            };
            return Err(anyhow::Error::new(e)
                .context(format!("{}: cannot append ({cut})", self.path().display())));
        }
        self.sync_dir()?;
        Ok(fresh.len())
    }

    /// Records what each file read back after apply wrote it (`(knob, path,
    /// content)`), so that revert can tell a later change by someone else.
    pub fn confirm(&self, seen: &[(String, String, String)]) -> Result<()> {
        let mut entries = self.entries()?;
        let mut changed = false;
        for e in &mut entries {
            if let Some((.., c)) = seen.iter().find(|(k, p, _)| *k == e.knob && *p == e.path) {
                changed |= e.seen.as_ref() != Some(c);
                e.seen = Some(c.clone());
            }
        }
        if changed {
            self.rewrite(entries.iter())?;
        }
        Ok(())
    }

    /// Replaces the journal with `entries`, durably (a new file renamed over
    /// it). When the disk is full, a journal that shrinks is rewritten in
    /// place instead: its blocks are already there, and a revert must not
    /// fail for want of space.
    fn rewrite<'e>(&self, entries: impl Iterator<Item = &'e Entry>) -> Result<()> {
        let mut text = String::new();
        for e in entries {
            text += &serde_json::to_string(e)?;
            text.push('\n');
        }
        let full =
            |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
        match self.root.replace_file(&self.file, text.as_bytes()) {
            Err(e) if full(&e) => self.overwrite(text.as_bytes()).map_err(|_| e),
            r => r,
        }
        .map_err(|e| state_open_error(self.root, &self.file, e))
        .with_context(|| format!("{}: cannot rewrite", self.path().display()))
    }

    fn overwrite(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut f = open_state_file(self.root, &self.file, libc::O_WRONLY)?;
        if f.metadata()?.len() < bytes.len() as u64 {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        f.write_all(bytes)?;
        f.set_len(bytes.len() as u64)?;
        f.sync_all()
    }

    /// Removes the journal when it holds nothing (no entry, no torn tail):
    /// a fully reverted host keeps no state. Returns whether it is gone.
    pub fn remove_if_empty(&self) -> Result<bool> {
        let loaded = self.load()?;
        if !loaded.entries.is_empty() || loaded.torn.is_some() {
            return Ok(false);
        }
        match self.root.remove_file(&self.file) {
            Err(e) if !crate::root::is_absent(&e) => {
                Err(anyhow::Error::new(e)
                    .context(format!("{}: cannot remove", self.path().display())))
            }
            _ => Ok(true),
        }
    }

    fn sync_dir(&self) -> Result<()> {
        let fd = self
            .root
            .open_raw(&self.dir, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        File::from(fd)
            .sync_all()
            .with_context(|| format!("{}: fsync", self.root.host_path(&self.dir).display()))
    }

    /// Drops the entries of `(knob, path)` (after they were restored),
    /// durably. A torn tail is kept aside first.
    pub fn forget(&self, gone: &[Slot]) -> Result<()> {
        let loaded = self.load()?;
        if let Some(torn) = &loaded.torn {
            self.repair(torn)?;
        }
        let gone: HashSet<(&str, &str)> =
            gone.iter().map(|(k, p)| (k.as_str(), p.as_str())).collect();
        self.rewrite(loaded.entries.iter().filter(|e| !gone.contains(&slot(e))))
    }
}

/// A journal entry's key: its knob and its path.
pub type Slot = (String, String);

fn slot(e: &Entry) -> (&str, &str) {
    (e.knob.as_str(), e.path.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, before: &str) -> Entry {
        Entry {
            path: path.into(),
            mode: WriteMode::Attribute,
            before: Some(before.into()),
            found: Some(format!("{before}\n")),
            cpus: None,
            created_dirs: Vec::new(),
            knob: "k".into(),
            recorded: "t".into(),
            written: None,
            seen: None,
            boot: None,
            queues: None,
        }
    }

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        (dir, root)
    }

    const SD: &str = "/var/lib/hostknob";

    #[test]
    fn first_recorded_value_wins_and_forget_removes() {
        let (_d, root) = tree();
        let j = Journal::open(&root, SD);
        assert_eq!(
            j.record(&[entry("/sys/a", "0"), entry("/sys/b", "1")])
                .unwrap(),
            2
        );
        assert_eq!(
            j.record(&[entry("/sys/a", "1"), entry("/sys/c", "x")])
                .unwrap(),
            1
        );
        let e = j.entries().unwrap();
        assert_eq!(
            e.iter()
                .find(|e| e.path == "/sys/a")
                .unwrap()
                .before
                .as_deref(),
            Some("0")
        );
        j.forget(&[("k".into(), "/sys/a".into()), ("k".into(), "/sys/c".into())])
            .unwrap();
        assert_eq!(j.entries().unwrap(), vec![entry("/sys/b", "1")]);
        // Another knob on a journaled file gets its own entry.
        let mut other = entry("/sys/b", "2");
        other.knob = "k2".into();
        assert_eq!(j.record(std::slice::from_ref(&other)).unwrap(), 1);
        assert_eq!(j.entries().unwrap(), vec![entry("/sys/b", "1"), other]);
        j.forget(&[
            ("k".into(), "/sys/b".into()),
            ("k2".into(), "/sys/b".into()),
        ])
        .unwrap();
        assert!(j.remove_if_empty().unwrap());
        assert!(!j.path().exists());
    }

    #[test]
    fn an_entry_from_another_boot_is_stale_and_replaced_by_a_new_apply() {
        let (_d, root) = tree();
        let j = Journal::open(&root, SD);
        let mut old = entry("/sys/a", "0");
        old.boot = Some("b1".into());
        j.record(std::slice::from_ref(&old)).unwrap();
        assert!(old.stale(Some("b2")) && !old.stale(Some("b1")) && !old.stale(None));
        let mut new = entry("/sys/a", "5");
        new.boot = Some("b2".into());
        assert_eq!(j.record(std::slice::from_ref(&new)).unwrap(), 1);
        assert_eq!(j.entries().unwrap(), vec![new]);
    }

    #[test]
    fn a_file_holds_ours_by_its_read_back_else_by_the_words_written() {
        let mut e = entry("/sys/thp", "madvise");
        assert!(
            e.holds_ours(Some("anything")),
            "an old entry has nothing to compare"
        );
        e.written = Some("never".into());
        assert!(e.holds_ours(Some("always madvise [never]\n")));
        assert!(!e.holds_ours(Some("always madvise never\n")));
        assert!(
            e.holds_ours(Some("madvise\n")),
            "still as found: not written yet"
        );
        assert!(e.holds_ours(None), "a gone attribute: restoring names it");
        assert!(e.holds_ours(Some("")), "truncated by an apply that stopped");
        e.seen = Some("balance_performance\n".into());
        e.written = Some("32".into());
        assert!(e.holds_ours(Some("balance_performance")));
        assert!(!e.holds_ours(Some("32")));
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_kept_aside_before_appending() {
        let (d, root) = tree();
        let j = Journal::open(&root, SD);
        j.record(&[entry("/sys/a", "0")]).unwrap();
        let mut text = std::fs::read_to_string(j.path()).unwrap();
        text.push_str("{\"path\":\"/sys/b\",\"bef");
        std::fs::write(j.path(), &text).unwrap();
        let loaded = j.load().unwrap();
        assert_eq!(loaded.entries.len(), 1);
        assert_eq!(
            loaded.torn.as_ref().unwrap().bytes,
            b"{\"path\":\"/sys/b\",\"bef"
        );
        j.record(&[entry("/sys/c", "1")]).unwrap();
        let paths: Vec<String> = j.entries().unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(paths, ["/sys/a", "/sys/c"]);
        assert!(j.load().unwrap().torn.is_none());
        let kept = d.path().join("var/lib/hostknob/journal.jsonl.torn");
        assert_eq!(
            std::fs::read_to_string(kept).unwrap(),
            "{\"path\":\"/sys/b\",\"bef\n"
        );
        std::fs::write(j.path(), format!("garbage\n{text}\n")).unwrap();
        assert!(
            j.entries()
                .unwrap_err()
                .to_string()
                .contains(":1: corrupt journal entry")
        );
    }

    #[test]
    fn a_second_lock_names_the_holder_and_a_check_creates_nothing() {
        let (d, root) = tree();
        Lock::check_free(&root, SD).unwrap();
        assert!(!d.path().join("var").exists(), "a check creates nothing");
        let _held = Lock::acquire(&root, SD, false).unwrap();
        for err in [
            Lock::acquire(&root, SD, false).err().unwrap().to_string(),
            Lock::check_free(&root, SD).err().unwrap().to_string(),
        ] {
            assert!(
                err.contains(&format!("pid {}", std::process::id())),
                "{err}"
            );
        }
    }

    #[test]
    fn state_dir_stays_inside_the_root() {
        assert_eq!(
            state_dir(std::path::Path::new("/../../outside/sd")),
            "/outside/sd"
        );
        assert_eq!(
            state_dir(std::path::Path::new("var/lib/./x/../hk")),
            "/var/lib/hk"
        );
    }
}
