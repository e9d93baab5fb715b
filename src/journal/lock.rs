//! The state directory's lock: one hostknob changes a host at a time.
//!
//! The lock file may be removed by its holder (a revert that leaves nothing
//! journaled tidies the state directory), so a lock is only taken once the
//! file locked is still the one at the path; a waiter that locked a removed
//! file opens the path again.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{join, make_state_dir, open_state_file, state_open_error};
use crate::root::Root;

pub const LOCK_FILE: &str = "lock";

/// How long `--wait` waits, in milliseconds (0: until the holder is done).
/// Set once from the command line (`--wait-limit`): a boot unit must not
/// stall boot behind a held lock, and every lock taker honours it.
static WAIT_LIMIT_MS: AtomicU64 = AtomicU64::new(0);

/// Bounds every later wait for the lock (`--wait-limit`).
pub fn set_wait_limit(limit: Duration) {
    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
    WAIT_LIMIT_MS.store(ms, Ordering::Relaxed);
}

fn wait_limit() -> Option<Duration> {
    match WAIT_LIMIT_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    }
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
    /// blocks until the holder is done. Creates the state directory and the
    /// lock file: call it only when a write follows.
    pub fn acquire(root: &Root, dir: &str, wait: bool) -> Result<Lock, LockError> {
        let unavailable = LockError::Unavailable;
        make_state_dir(root, dir).map_err(unavailable)?;
        let path = join(dir, LOCK_FILE);
        // A holder may remove the file while we wait on it: then lock the new one.
        for _ in 0..1000 {
            let file = open_state_file(root, &path, libc::O_RDWR | libc::O_CREAT)
                .map_err(|e| unavailable(state_open_error(root, &path, e)))?;
            let lock = Self::take(root, &path, file, wait)?;
            if lock.is_at(root, &path) {
                return Ok(lock);
            }
        }
        Err(unavailable(anyhow::anyhow!(
            "{}: the lock file keeps being replaced",
            root.host_path(&path).display()
        )))
    }

    /// Fails when another hostknob holds the lock now; creates nothing.
    pub fn check_free(root: &Root, dir: &str) -> Result<(), LockError> {
        let path = join(dir, LOCK_FILE);
        match open_state_file(root, &path, libc::O_RDWR) {
            Ok(file) => {
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
                {
                    return Err(held(root, &path, file));
                }
                unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    /// Whether the locked file is still the one at `path`.
    fn is_at(&self, root: &Root, path: &str) -> bool {
        let Ok(now) = root
            .open_raw(path, libc::O_PATH | libc::O_NOFOLLOW, 0)
            .map(File::from)
            .and_then(|f| f.metadata())
        else {
            return false;
        };
        self.file
            .metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == (now.dev(), now.ino()))
    }

    fn take(root: &Root, path: &str, mut file: File, wait: bool) -> Result<Lock, LockError> {
        let shown = root.host_path(path);
        let limit = wait.then(wait_limit).flatten();
        let flags = if wait && limit.is_none() {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        let _waiting = wait.then(|| {
            let what = format!("waiting for the lock {}", shown.display());
            crate::progress::Ticker::start(&what, None, || {})
        });
        let start = Instant::now();
        while unsafe { libc::flock(file.as_raw_fd(), flags) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                // A bounded wait polls (flock has no timeout of its own).
                match limit {
                    Some(l) if start.elapsed() < l => {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    Some(l) => return Err(held_after(root, path, file, l)),
                    None => return Err(held(root, path, file)),
                }
            }
            return Err(LockError::Unavailable(
                anyhow::Error::new(err).context(format!("{}: cannot lock", shown.display())),
            ));
        }
        // The pid is only for a second hostknob's message: a full disk must
        // not stop a revert from putting the host back.
        let _ = stamp(&mut file);
        Ok(Lock { file })
    }

    /// Removes the lock file while holding it, then releases it (a waiter
    /// finds the file gone and makes a new one).
    pub fn remove(self, root: &Root, dir: &str) -> anyhow::Result<()> {
        let path = join(dir, LOCK_FILE);
        if self.is_at(root, &path) {
            root.remove_file(&path)
                .with_context(|| format!("{}: cannot remove", root.host_path(&path).display()))?;
        }
        Ok(())
    }
}

fn holder(mut file: File) -> String {
    let mut holder = String::new();
    let _ = (&mut file).take(64).read_to_string(&mut holder);
    match holder.trim() {
        "" => "unknown".into(),
        h => h.into(),
    }
}

fn held(root: &Root, path: &str, file: File) -> LockError {
    LockError::Held(format!(
        "another hostknob (pid {}) holds {}: it is applying or reverting; try again when it is done, or pass --wait",
        holder(file),
        root.host_path(path).display()
    ))
}

fn held_after(root: &Root, path: &str, file: File, limit: Duration) -> LockError {
    LockError::Held(format!(
        "another hostknob (pid {}) still holds {} after --wait-limit {}: nothing was changed",
        holder(file),
        root.host_path(path).display(),
        humantime::format_duration(limit)
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    const SD: &str = "/var/lib/hostknob";

    /// A waiter that locked the file its holder removed locks the new one:
    /// never two holders.
    #[test]
    fn a_removed_lock_is_taken_afresh_by_its_waiter() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let held = Lock::acquire(&root, SD, false).unwrap();
        let base = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let root = Root::open(&base).unwrap();
            let lock = Lock::acquire(&root, SD, true).unwrap();
            let at = lock.is_at(&root, &join(SD, LOCK_FILE));
            (lock, at)
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        held.remove(&root, SD).unwrap();
        let (lock, at) = waiter.join().unwrap();
        assert!(at, "the waiter holds the file at the path");
        assert!(matches!(
            Lock::check_free(&root, SD),
            Err(LockError::Held(_))
        ));
        drop(lock);
        Lock::check_free(&root, SD).unwrap();
    }
}
