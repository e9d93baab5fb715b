//! The filesystem seam: every path hostknob reads or writes (`/sys`, `/proc`,
//! `/etc`, `/dev`, `/var/lib/hostknob`) is resolved under one root directory.
//!
//! Under a non-`/` root, paths are opened with `openat2(RESOLVE_IN_ROOT)`, so
//! symlinks inside a captured tree (absolute or relative, e.g. `cpu0/cpufreq ->
//! ../cpufreq/policy0`) resolve inside the root and `..` can never climb out to
//! the real `/`. The kernel does this in one syscall per file, which keeps reads
//! of a several-hundred-CPU capture fast.
//!
//! Kernels before 5.6 and seccomp policies that reject `openat2` (ENOSYS,
//! EPERM) get the same resolution done here, one component at a time with
//! `O_NOFOLLOW`: symlinks are read and their targets walked again from the
//! root (absolute) or the current directory (relative), `..` stops at the root.
//!
//! One file per concern: `resolve` (opening a logical path inside the root),
//! `read` (bounded reads), `write` (writes, whole-file replacement, removal)
//! `dir` (directory handles for many reads beneath one directory) and
//! `subtree` (a directory removed and remade without following a link).

mod dir;
mod output;
mod read;
mod resolve;
mod subtree;
mod unseen;
mod write;

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
#[cfg(test)]
use std::sync::atomic::Ordering;

use anyhow::{Context, Result, bail};

pub use dir::DirHandle;
pub use output::{create_output, write_output};
pub use read::{READ_CAP, read_system_file};
pub use subtree::{Kind, Meta, Subtree};
pub use unseen::{Concern, POD_UNSEEN, Unseen, entry_of};
pub use write::APPEND_LIMIT_VAR;
pub use write::{append, proc_write_allowed, symlink_refused};

use resolve::{PROC_SUPER_MAGIC, SYSFS_MAGIC, nodev_view, open_fs, walk_forced};

pub struct Root {
    base: PathBuf,
    /// `None` when the root is the real `/`: plain opens are then exact.
    base_fd: Option<OwnedFd>,
    /// Logical paths opened (or refused), for `capture`.
    recorder: Option<Mutex<BTreeMap<String, Access>>>,
    /// Set once `openat2` is refused (ENOSYS, EPERM): resolve by walking instead.
    walk: AtomicBool,
    /// The live `/sys` and `/proc`, opened when they are sysfs and procfs
    /// (checked once at open): see [`Root::kernel_file`].
    live_sys: Option<OwnedFd>,
    live_proc: Option<OwnedFd>,
    /// In a tree, a view of it where no device node opens: see
    /// [`resolve::nodev_view`].
    nodev: Option<OwnedFd>,
    /// Paths this root does not show (the pod's): see [`unseen`].
    hidden: Option<unseen::Hidden>,
    open_log: Option<unseen::OpenLog>,
}

/// How a recorded path was used, so `capture` can mirror it faithfully.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    File,
    Dir,
    /// The link itself was read (`readlink`): copy it, do not follow it.
    Link,
    /// Followed to its target (`resolve`).
    Follow,
    /// Exists but could not be read (permission).
    Denied,
}

impl Root {
    /// Opens `base` as the root. Fails with a one-line message when it is not a
    /// directory or holds neither `sys` nor `proc`.
    pub fn open(base: &Path) -> Result<Root> {
        let meta = std::fs::metadata(base)
            .with_context(|| format!("--root {}: cannot open", base.display()))?;
        if !meta.is_dir() {
            bail!("--root {}: not a directory", base.display());
        }
        let canonical = base
            .canonicalize()
            .with_context(|| format!("--root {}: cannot resolve", base.display()))?;
        let base_fd = if canonical == Path::new("/") {
            None
        } else {
            let f = File::open(&canonical)
                .with_context(|| format!("--root {}: cannot open", base.display()))?;
            Some(OwnedFd::from(f))
        };
        let live = base_fd.is_none();
        let walk = walk_forced();
        let nodev = base_fd.as_ref().filter(|_| !walk).and_then(nodev_view);
        let root = Root {
            base: canonical,
            base_fd,
            recorder: None,
            walk: AtomicBool::new(walk),
            live_sys: live.then(|| open_fs("/sys", SYSFS_MAGIC)).flatten(),
            live_proc: live.then(|| open_fs("/proc", PROC_SUPER_MAGIC)).flatten(),
            nodev,
            hidden: None,
            open_log: unseen::OpenLog::from_env(),
        };
        if !root.exists("/sys") && !root.exists("/proc") {
            bail!(
                "--root {}: has neither sys/ nor proc/; expected a host tree such as one made by `hostknob capture`",
                base.display()
            );
        }
        Ok(root)
    }

    /// Resolves by the component walk even where `openat2` works.
    #[cfg(test)]
    pub fn walking(self) -> Root {
        self.walk.store(true, Ordering::Relaxed);
        self
    }

    /// A directory treated as a root of its own (the manifest directory for
    /// the ledger): names under it resolve inside it, links included, and no
    /// `sys`/`proc` is asked for.
    pub fn confined(dir: &Path) -> io::Result<Root> {
        let canonical = dir.canonicalize()?;
        let f = File::open(&canonical)?;
        Ok(Root {
            base: canonical,
            base_fd: Some(OwnedFd::from(f)),
            recorder: None,
            walk: AtomicBool::new(false),
            live_sys: None,
            live_proc: None,
            nodev: None,
            hidden: None,
            open_log: None,
        })
    }

    /// Keeps a list of every path opened from now on (used by `capture`).
    pub fn recording(mut self) -> Root {
        self.recorder = Some(Mutex::new(BTreeMap::new()));
        self
    }

    /// Whether this root keeps a list of what is opened (`capture`): a
    /// reader that reads one file for many then reads each of them.
    pub fn is_recording(&self) -> bool {
        self.recorder.is_some()
    }

    pub fn recorded(&self) -> Vec<(String, Access)> {
        match &self.recorder {
            Some(m) => m
                .lock()
                .unwrap()
                .iter()
                .map(|(p, a)| (p.clone(), *a))
                .collect(),
            None => Vec::new(),
        }
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    pub fn is_live(&self) -> bool {
        self.base_fd.is_none()
    }

    /// The real path behind a logical one, for messages and for tools that
    /// must be pointed at the file (it is not resolved: symlinks stay).
    pub fn host_path(&self, logical: &str) -> PathBuf {
        self.base.join(logical.trim_start_matches('/'))
    }

    pub(super) fn record(&self, logical: &str, access: Access) {
        if let Some(m) = &self.recorder {
            m.lock().unwrap().insert(logical.to_string(), access);
        }
    }

    pub(super) fn record_result<T>(
        &self,
        logical: &str,
        access: Access,
        r: io::Result<T>,
    ) -> io::Result<T> {
        match &r {
            Ok(_) => self.record(logical, access),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                self.record(logical, Access::Denied)
            }
            Err(_) => {}
        }
        r
    }
}

/// Missing files and directories are facts about a host, not errors.
pub fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENODEV) | Some(libc::ENXIO)
    )
}

pub fn split_parent(logical: &str) -> (&str, &str) {
    match logical.rfind('/') {
        Some(0) => ("/", &logical[1..]),
        Some(i) => (&logical[..i], &logical[i + 1..]),
        None => (".", logical),
    }
}

/// Numbered entries such as `cpu12`, `state3` or `rx-0` in a directory listing, sorted by number.
pub fn numbered(names: &[String], prefix: &str) -> Vec<u32> {
    let mut v: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests;
