//! The state directory's lock and journal: what makes `apply` crash-safe.
//!
//! Before the first write of an apply, every file it will write is recorded
//! with its value as found (the journal is fsynced, and so is its directory).
//! A file already in the journal keeps its first recorded value, so `revert`
//! restores the host as it was before the first apply since the journal
//! began, even after a crash in the middle of an apply.
//!
//! Both live under the state directory (default `/var/lib/hostknob`), which is
//! resolved under `--root` like every other path.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::knob::WriteMode;

pub const JOURNAL_FILE: &str = "journal.jsonl";
pub const LOCK_FILE: &str = "lock";

/// One file's value before hostknob first wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// Logical path (`/sys/...`), as under `--root`.
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
    /// The knob whose apply first recorded it.
    pub knob: String,
    /// RFC 3339 time it was recorded.
    pub recorded: String,
}

fn attribute() -> WriteMode {
    WriteMode::Attribute
}

/// The state directory on the real filesystem (`<root>/var/lib/hostknob`, or
/// the `--state-dir` given, itself under the root).
pub fn state_dir(root: &crate::root::Root, configured: &Path) -> PathBuf {
    root.host_path(&configured.to_string_lossy())
}

/// An exclusive lock on the state directory, held until dropped.
pub struct Lock {
    file: File,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another hostknob holds it (the message names its pid).
    Held(String),
    /// The state directory or its lock file cannot be made or opened (not root,
    /// a read-only file system).
    Unavailable(anyhow::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held(m) => f.write_str(m),
            LockError::Unavailable(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for LockError {}

impl Lock {
    /// Takes the lock, or fails at once naming the holder's pid; with `wait`,
    /// blocks until the holder is done.
    pub fn acquire(dir: &Path, wait: bool) -> Result<Lock, LockError> {
        let unavailable = LockError::Unavailable;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the state directory", dir.display()))
            .map_err(unavailable)?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("{}: cannot open", path.display()))
            .map_err(unavailable)?;
        let flags = if wait {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        if unsafe { libc::flock(file.as_raw_fd(), flags) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(LockError::Held(format!(
                    "another hostknob (pid {}) holds {}: it is applying or reverting; try again when it is done, or pass --wait",
                    if holder.is_empty() { "unknown" } else { holder },
                    path.display()
                )));
            }
            return Err(unavailable(
                anyhow::Error::new(err).context(format!("{}: cannot lock", path.display())),
            ));
        }
        stamp(&mut file)
            .with_context(|| format!("{}: cannot write", path.display()))
            .map_err(unavailable)?;
        Ok(Lock { file })
    }
}

/// Leaves the holder's pid in the lock file, for the message of a second hostknob.
fn stamp(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    write!(file, "{}", std::process::id())?;
    file.flush()
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// The journal in a state directory (the caller holds the [`Lock`]).
pub struct Journal {
    path: PathBuf,
    dir: PathBuf,
}

impl Journal {
    pub fn open(dir: &Path) -> Journal {
        Journal {
            path: dir.join(JOURNAL_FILE),
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every recorded entry, oldest first. A torn last line (a crash while
    /// appending) is ignored: nothing was written for it yet.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("{}: cannot read", self.path.display()));
            }
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<Entry>(line) {
                Ok(e) => out.push(e),
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
                Err(e) => bail!(
                    "{}:{}: corrupt journal entry: {e}",
                    self.path.display(),
                    i + 1
                ),
            }
        }
        Ok(out)
    }

    /// Records the values about to be overwritten, durably, before any write.
    /// Paths already journaled keep their first value.
    pub fn record(&self, new: &[Entry]) -> Result<usize> {
        let known: std::collections::HashSet<String> =
            self.entries()?.into_iter().map(|e| e.path).collect();
        let fresh: Vec<&Entry> = new.iter().filter(|e| !known.contains(&e.path)).collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        std::fs::create_dir_all(&self.dir)?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("{}: cannot open the journal", self.path.display()))?;
        let mut buf = String::new();
        for e in &fresh {
            buf += &serde_json::to_string(e)?;
            buf.push('\n');
        }
        f.write_all(buf.as_bytes())?;
        f.sync_all()
            .with_context(|| format!("{}: fsync", self.path.display()))?;
        File::open(&self.dir)?
            .sync_all()
            .with_context(|| format!("{}: fsync", self.dir.display()))?;
        Ok(fresh.len())
    }

    /// Drops the entries for `paths` (after they were restored), durably.
    pub fn forget(&self, paths: &[String]) -> Result<()> {
        let keep: Vec<Entry> = self
            .entries()?
            .into_iter()
            .filter(|e| !paths.contains(&e.path))
            .collect();
        let tmp = self.dir.join(format!("{JOURNAL_FILE}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            for e in &keep {
                writeln!(f, "{}", serde_json::to_string(e)?)?;
            }
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(())
    }
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
        }
    }

    #[test]
    fn first_recorded_value_wins_and_forget_removes() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path());
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
        j.forget(&["/sys/a".into(), "/sys/c".into()]).unwrap();
        assert_eq!(j.entries().unwrap(), vec![entry("/sys/b", "1")]);
    }

    #[test]
    fn a_torn_last_line_is_ignored_but_corruption_elsewhere_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path());
        j.record(&[entry("/sys/a", "0")]).unwrap();
        let mut text = std::fs::read_to_string(j.path()).unwrap();
        text.push_str("{\"path\":\"/sys/b\",\"bef");
        std::fs::write(j.path(), &text).unwrap();
        assert_eq!(j.entries().unwrap().len(), 1);
        std::fs::write(j.path(), format!("garbage\n{text}\n")).unwrap();
        assert!(
            j.entries()
                .unwrap_err()
                .to_string()
                .contains(":1: corrupt journal entry")
        );
    }

    #[test]
    fn a_second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let _held = Lock::acquire(dir.path(), false).unwrap();
        let err = Lock::acquire(dir.path(), false).err().unwrap().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
    }
}
