//! Writes inside the root: existing files in place, whole files replaced
//! through an exclusive temporary file, removals; and state-file appends.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

use super::read::{not_regular, regular};
use super::resolve::shared_inode;
use super::{Root, is_absent, split_parent};

impl Root {
    /// Writes `value` to an existing file (sysfs style: no create, no truncate
    /// semantics beyond what the file does) and flushes.
    pub fn write_existing(&self, logical: &str, value: &[u8]) -> io::Result<()> {
        let mut f = self.open_write(logical)?;
        f.write_all(value)?;
        f.flush()
    }

    /// Opens an existing file for one write (truncating a plain file).
    /// A FIFO or a device is refused, not waited on: targets are regular
    /// files (`O_TRUNC` does nothing to the others).
    pub fn open_write(&self, logical: &str) -> io::Result<File> {
        // Truncated only after the checks (`open_raw` refuses a file with
        // other names), never by the open.
        let fd = self.open_raw(
            logical,
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )?;
        let f = File::from(fd);
        regular(&f, usize::MAX)?;
        if f.metadata()?.file_type().is_file() {
            f.set_len(0)?;
        }
        Ok(f)
    }

    /// Whether `write_existing` could write the file, asked without writing:
    /// the file is opened for writing and closed. A kernel attribute changes
    /// only on a write (a zero-length one included), never on an open; no
    /// truncation; a FIFO is refused instead of waited on.
    pub fn probe_write(&self, logical: &str) -> io::Result<()> {
        self.open_raw(
            logical,
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )
        .map(drop)
    }

    /// Whether a new file could be created at `logical`: its nearest existing
    /// ancestor must be a directory this process may write (checked with
    /// `faccessat2`, which also reports a read-only file system).
    pub fn probe_create(&self, logical: &str) -> io::Result<()> {
        let mut dir = split_parent(logical).0;
        loop {
            match self.open_raw(dir, libc::O_PATH | libc::O_DIRECTORY, 0) {
                Ok(fd) => {
                    let empty = c"";
                    let r = unsafe {
                        libc::syscall(
                            libc::SYS_faccessat2,
                            fd.as_raw_fd(),
                            empty.as_ptr(),
                            libc::W_OK,
                            libc::AT_EMPTY_PATH | libc::AT_EACCESS,
                        )
                    };
                    return if r == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    };
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) && dir != "/" => {
                    dir = split_parent(dir).0;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether the file is a kernel attribute (on sysfs or procfs) rather than
    /// a plain file, such as one in a captured tree.
    pub fn is_kernel_file(&self, logical: &str) -> io::Result<bool> {
        let fd = self.open_raw(logical, libc::O_PATH, 0)?;
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The field's and the constants' types differ between architectures.
        #[allow(clippy::unnecessary_cast)]
        let (magic, sysfs, proc) = (
            st.f_type as i64,
            libc::SYSFS_MAGIC as i64,
            libc::PROC_SUPER_MAGIC as i64,
        );
        Ok(magic == sysfs || magic == proc)
    }

    /// The ancestors of `logical` that do not exist yet, outermost first:
    /// what [`Root::replace_file`] would create.
    pub fn missing_dirs(&self, logical: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut dir = split_parent(logical).0;
        while dir != "/" && !self.exists(dir) {
            out.push(dir.to_string());
            dir = split_parent(dir).0;
        }
        out.reverse();
        out
    }

    /// Creates or replaces a whole file atomically: missing parent
    /// directories are made (0755), the bytes go to a temporary file beside
    /// it, which is synced and renamed over the name, and the directory is
    /// synced. A file that existed keeps its permission bits; a new one gets
    /// 0644. On failure before the rename, the temporary file and the
    /// directories made are removed again: nothing is left half-done.
    pub fn replace_file(&self, logical: &str, bytes: &[u8]) -> io::Result<()> {
        let mut created = Vec::new();
        let result = self
            .make_dirs(logical, &mut created)
            .and_then(|_| self.write_and_rename(logical, bytes));
        if result.is_err() {
            let _ = self.discard_partial(logical);
            for dir in created.iter().rev() {
                let _ = self.remove_empty_dir(dir);
            }
        }
        result
    }

    /// Makes the missing ancestors of `logical` (0755), outermost first,
    /// pushing each one made onto `created`.
    pub(crate) fn make_dirs(&self, logical: &str, created: &mut Vec<String>) -> io::Result<()> {
        for dir in self.missing_dirs(logical) {
            let (parent, name) = split_parent(&dir);
            let pfd = self.open_raw(parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
            if unsafe { libc::mkdirat(pfd.as_raw_fd(), c.as_ptr(), 0o755) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
                // Exists but does not resolve: a link that leads nowhere.
                if !self.is_dir(&dir) {
                    return Err(match self.read_link(&dir) {
                        Ok(to) => io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "{dir} is a symbolic link to {} that leads nowhere inside the root",
                                to.display()
                            ),
                        ),
                        Err(_) => io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            format!("{dir} exists and is not a directory"),
                        ),
                    });
                }
            } else {
                created.push(dir);
            }
        }
        Ok(())
    }

    fn write_and_rename(&self, logical: &str, bytes: &[u8]) -> io::Result<()> {
        let (parent, name) = split_parent(logical);
        let dir = File::from(self.open_raw(parent, libc::O_RDONLY | libc::O_DIRECTORY, 0)?);
        // No whole file is ever written under /proc (not even where an attribute may be).
        let in_dir = self.opened_path(&dir);
        if is_proc(&dir, in_dir.as_deref().unwrap_or(parent)) {
            return Err(proc_refused(logical));
        }
        let mode = self.replaced_mode(&dir, logical, name)?;
        write_beside(&dir, name, bytes, mode)
    }

    /// The mode a replacement of `name` gets: the replaced regular file's,
    /// masked with 022 and without set-id bits; 0644 for a new file. A link
    /// is refused, never followed or replaced: its own mode is 0777, and a
    /// link to /dev/null is systemd's mask.
    fn replaced_mode(&self, dir: &File, logical: &str, name: &str) -> io::Result<libc::mode_t> {
        let cname = cstr(name)?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                cname.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENOENT) {
                Ok(0o644)
            } else {
                Err(e)
            };
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG if st.st_nlink > 1 => Err(shared_inode(logical, st.st_nlink)),
            libc::S_IFREG => Ok(st.st_mode & 0o755),
            libc::S_IFDIR => Err(io::Error::from_raw_os_error(libc::EISDIR)),
            libc::S_IFLNK => Err(symlink_refused(
                logical,
                self.read_link(logical).ok().as_deref(),
            )),
            kind => Err(not_regular(kind)),
        }
    }

    /// Whether the last component of `logical` is a symbolic link, and where it points.
    pub fn link_target(&self, logical: &str) -> io::Result<Option<PathBuf>> {
        match self.read_link(logical) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) || is_absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes a file and syncs its directory. Also removes the temporary
    /// file an interrupted [`Root::replace_file`] may have left beside it.
    pub fn remove_file(&self, logical: &str) -> io::Result<()> {
        self.discard_partial(logical)?;
        let (parent, name) = split_parent(logical);
        let dir = File::from(self.open_raw(parent, libc::O_RDONLY | libc::O_DIRECTORY, 0)?);
        unlink_at(&dir, name, 0)?;
        dir.sync_all()
    }

    /// Removes the temporary file an interrupted [`Root::replace_file`] of
    /// `logical` left, if any.
    pub fn discard_partial(&self, logical: &str) -> io::Result<()> {
        let (parent, name) = split_parent(logical);
        let dir = match self.open_raw(parent, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(fd) => File::from(fd),
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        match unlink_at(&dir, &temp_name(name), 0) {
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes a directory if it is empty; `Ok(false)` when it is not (or is gone).
    pub fn remove_empty_dir(&self, logical: &str) -> io::Result<bool> {
        let (parent, name) = split_parent(logical);
        let dir = File::from(self.open_raw(parent, libc::O_RDONLY | libc::O_DIRECTORY, 0)?);
        match unlink_at(&dir, name, libc::AT_REMOVEDIR) {
            Ok(()) => dir.sync_all().map(|_| true),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::ENOENT)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// `/proc` is written only where a knob kind writes it: sysctls under
/// `/proc/sys` (sysctl), an IRQ's `smp_affinity_list` and
/// `/proc/irq/default_smp_affinity` (irq-affinity), and in a captured tree
/// a thread's `PID/task/TID/status`, whose `Cpus_allowed_list` line stands
/// for `sched_setaffinity(2)` (thread-affinity), and its `stat`, whose
/// policy fields stand for `sched_setscheduler(2)` (thread-policy; the
/// kernel's files are read-only). Anything else there (`sysrq-trigger`, `PID/environ`,
/// `irq/N/smp_affinity`) is refused.
pub fn proc_write_allowed(path: &str) -> bool {
    if path.starts_with("/proc/sys/") || path == "/proc/irq/default_smp_affinity" {
        return true;
    }
    if thread_file(path) {
        return true;
    }
    path.strip_prefix("/proc/irq/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(n, leaf)| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && leaf == "smp_affinity_list"
        })
}

/// `/proc/PID/task/TID/status` or `stat`.
fn thread_file(path: &str) -> bool {
    let digits = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    path.strip_prefix("/proc/")
        .and_then(|r| r.split_once("/task/"))
        .and_then(|(pid, rest)| Some((pid, rest.split_once('/')?)))
        .is_some_and(|(pid, (tid, leaf))| {
            digits(pid) && digits(tid) && (leaf == "status" || leaf == "stat")
        })
}

pub(super) fn proc_refused(logical: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{logical}: hostknob writes /proc only under /proc/sys, an IRQ's \
             /proc/irq/N/smp_affinity_list or /proc/irq/default_smp_affinity, and (in a \
             captured tree) a thread's /proc/PID/task/TID/status or stat; refused"
        ),
    )
}

/// Whether an open file is procfs's, or named under `/proc` (in a tree).
pub(super) fn is_proc(f: &impl AsRawFd, path: &str) -> bool {
    on_procfs(f) || path == "/proc" || path.starts_with("/proc/")
}

fn on_procfs(f: &impl AsRawFd) -> bool {
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // The field's and the constant's types differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    let procfs = unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } == 0
        && st.f_type as i64 == libc::PROC_SUPER_MAGIC as i64;
    procfs
}

impl Root {
    /// The logical path an open descriptor has (links followed), when
    /// `/proc/self/fd` tells it and it lies inside the root.
    pub(super) fn opened_path(&self, f: &impl AsRawFd) -> Option<String> {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
        let rel = real.strip_prefix(&self.base).ok()?;
        Some(format!("/{}", rel.to_string_lossy()))
    }

    /// Refuses a file opened for writing under `/proc` outside
    /// [`proc_write_allowed`], judged by where the open landed (a link or
    /// `..` cannot lead around it).
    pub(super) fn refuse_proc_write(&self, f: &impl AsRawFd, logical: &str) -> io::Result<()> {
        let landed = self.opened_path(f);
        let path = landed.as_deref().unwrap_or(logical);
        // A thread's status file stands for its affinity only in a captured
        // tree: a real procfs one (mounted under a root) is never written.
        let refused = !proc_write_allowed(path) || (thread_file(path) && on_procfs(f));
        if is_proc(f, path) && refused {
            return Err(proc_refused(logical));
        }
        Ok(())
    }

    /// The permission bits of a file (`st_mode & 0o7777`), links followed.
    pub fn mode(&self, logical: &str) -> io::Result<u32> {
        let fd = self.open_raw(logical, libc::O_PATH, 0)?;
        Ok(super::resolve::fstat(&fd)?.st_mode as u32 & 0o7777)
    }
}

/// The temporary name [`Root::replace_file`] writes before renaming: fixed,
/// so that a later restore can find and remove one left by a crash.
fn temp_name(name: &str) -> String {
    format!(".{name}.hostknob-new")
}

pub(super) fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::ErrorKind::InvalidInput.into())
}

/// Puts `bytes` at `name` in `dir` with permission bits `mode`: written to
/// a new temporary file beside it, synced, renamed over the name, the
/// directory synced.
pub(super) fn write_beside(dir: &File, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = temp_name(name);
    let mut f = match create_exclusive(dir, &tmp) {
        // A leftover of a crash, or something placed there (a hard link):
        // unlinking the name leaves whatever it pointed at untouched.
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            unlink_at(dir, &tmp, 0)?;
            create_exclusive(dir, &tmp)?
        }
        other => other?,
    };
    f.write_all(bytes)?;
    if unsafe { libc::fchmod(f.as_raw_fd(), mode) } != 0 {
        return Err(io::Error::last_os_error());
    }
    f.sync_all()?;
    drop(f);
    let (ctmp, cname) = (cstr(&tmp)?, cstr(name)?);
    let fd = dir.as_raw_fd();
    if unsafe { libc::renameat(fd, ctmp.as_ptr(), fd, cname.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    dir.sync_all()
}

/// A new file only: `O_EXCL` refuses an existing name, `O_NOFOLLOW` a link.
fn create_exclusive(dir: &File, name: &str) -> io::Result<File> {
    let c = cstr(name)?;
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Why a file behind a symbolic link is not written.
pub fn symlink_refused(logical: &str, to: Option<&Path>) -> io::Error {
    let to = to.map(|t| t.display().to_string()).unwrap_or_default();
    let mask = if to == "/dev/null" {
        " (systemd's mask: the unit is masked on purpose)"
    } else {
        ""
    };
    io::Error::other(format!(
        "{logical} is a symbolic link to {to}{mask}: hostknob does not write through or replace a \
         link; remove it or point the knob at the file itself"
    ))
}

fn unlink_at(dir: &File, name: &str, flags: i32) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Test-only ([`crate::test_hooks`]): `WHAT:N` makes an append to `WHAT`
/// (`journal` or `ledger`) write at most N bytes, then fail as a full disk
/// would (ENOSPC).
pub const APPEND_LIMIT_VAR: &str = "HOSTKNOB_TEST_APPEND_LIMIT";

/// Appends `bytes` to a state file (`what`: the journal, the ledger) in one write.
pub fn append(f: &mut File, bytes: &[u8], what: &str) -> io::Result<()> {
    if let Some(n) = crate::test_hooks::var(APPEND_LIMIT_VAR)
        .and_then(|v| {
            let (w, n) = v.split_once(':')?;
            (w == what).then(|| n.parse::<usize>().ok())?
        })
        .filter(|&n| n < bytes.len())
    {
        f.write_all(&bytes[..n])?;
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    f.write_all(bytes)
}
