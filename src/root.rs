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

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};

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
}

const SYSFS_MAGIC: libc::c_long = 0x6265_6572;
const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;

/// `path` (on the real filesystem) opened as a directory if it is on a
/// filesystem of type `magic`.
fn open_fs(path: &str, magic: libc::c_long) -> Option<OwnedFd> {
    let fd = File::open(path).ok()?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } == 0
        && st.f_type as libc::c_long == magic;
    ok.then(|| OwnedFd::from(fd))
}

/// `openat2(dir, rel)` with `flags` (close-on-exec added), `mode` when
/// creating, and the `resolve` rules.
fn openat2(dir: &OwnedFd, rel: &str, flags: i32, mode: u32, resolve: u64) -> io::Result<OwnedFd> {
    let c = CString::new(rel).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        mode as u64
    } else {
        0
    };
    how.resolve = resolve;
    // SAFETY: `how` and the NUL-terminated `c` outlive the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `rel` opened beneath `dir` without leaving it (no absolute paths, no `..`
/// above it, no magic links) and without crossing into another mount:
/// EXDEV when it would.
fn open_beneath_same_mount(dir: &OwnedFd, rel: &str, flags: i32) -> io::Result<OwnedFd> {
    let rel = if rel.is_empty() { "." } else { rel };
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_MAGICLINKS;
    openat2(dir, rel, flags, 0, resolve)
}

/// An open that [`open_beneath_same_mount`] could not vouch for, to be
/// made again the checked way: it crosses a mount, meets a magic link
/// (ELOOP, as a real loop does), or `openat2` is refused.
fn not_vouched(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ELOOP)) || openat2_refused(e)
}

/// Test builds may force the component walk (`HOSTKNOB_NO_OPENAT2=1`), so
/// the root-seam tests cover it on kernels that have `openat2`.
#[cfg(any(test, feature = "test-hooks"))]
fn walk_forced() -> bool {
    std::env::var_os("HOSTKNOB_NO_OPENAT2").is_some_and(|v| v == "1")
}

#[cfg(not(any(test, feature = "test-hooks")))]
fn walk_forced() -> bool {
    false
}

fn openat2_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

/// Symlinks followed in one lookup before giving up, as the kernel's limit.
const MAX_LINKS: usize = 40;

fn openat(dir: &OwnedFd, name: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn readlink_at(dir: &OwnedFd, name: &str) -> io::Result<Vec<u8>> {
    let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

fn is_symlink(fd: &OwnedFd) -> io::Result<bool> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// `rel` opened under `root` as `openat2(RESOLVE_IN_ROOT)` would: every
/// component opened with `O_NOFOLLOW`, symlinks resolved by hand inside the
/// root, `..` never above it.
fn walk_in_root(root: &OwnedFd, rel: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let dup = |fd: &OwnedFd| fd.try_clone();
    // The directories from the root down to the current one.
    let mut stack: Vec<OwnedFd> = vec![dup(root)?];
    let mut todo: std::collections::VecDeque<String> = rel.split('/').map(str::to_string).collect();
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        let last = todo.iter().all(|n| n.is_empty() || n == ".");
        let cur = stack.last().unwrap();
        match name.as_str() {
            "" | "." => {
                if last {
                    return openat(cur, ".", flags, mode);
                }
                continue;
            }
            ".." => {
                if stack.len() > 1 {
                    stack.pop();
                }
                if last {
                    return openat(stack.last().unwrap(), ".", flags, mode);
                }
                continue;
            }
            _ => {}
        }
        let probe = match openat(cur, &name, libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => Some(fd),
            Err(e)
                if last && e.raw_os_error() == Some(libc::ENOENT) && flags & libc::O_CREAT != 0 =>
            {
                None
            }
            Err(e) => return Err(e),
        };
        let follow = !(last && flags & libc::O_NOFOLLOW != 0);
        if let Some(p) = &probe
            && follow
            && is_symlink(p)?
        {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = readlink_at(cur, &name)?;
            let target = String::from_utf8(target).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "link target is not UTF-8")
            })?;
            if target.starts_with('/') {
                stack.truncate(1);
            }
            for part in target.split('/').rev() {
                todo.push_front(part.to_string());
            }
            continue;
        }
        if last {
            return openat(cur, &name, flags | libc::O_NOFOLLOW, mode);
        }
        let next = openat(cur, &name, dir_flags, 0)?;
        stack.push(next);
    }
    openat(stack.last().unwrap(), ".", flags, mode)
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
        let root = Root {
            base: canonical,
            base_fd,
            recorder: None,
            walk: AtomicBool::new(walk_forced()),
            live_sys: live.then(|| open_fs("/sys", SYSFS_MAGIC)).flatten(),
            live_proc: live.then(|| open_fs("/proc", PROC_SUPER_MAGIC)).flatten(),
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
    #[cfg(any(test, feature = "test-hooks"))]
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
        })
    }

    /// Keeps a list of every path opened from now on (used by `capture`).
    pub fn recording(mut self) -> Root {
        self.recorder = Some(Mutex::new(BTreeMap::new()));
        self
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

    fn record(&self, logical: &str, access: Access) {
        if let Some(m) = &self.recorder {
            m.lock().unwrap().insert(logical.to_string(), access);
        }
    }

    fn record_result<T>(&self, logical: &str, access: Access, r: io::Result<T>) -> io::Result<T> {
        match &r {
            Ok(_) => self.record(logical, access),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                self.record(logical, Access::Denied)
            }
            Err(_) => {}
        }
        r
    }

    /// Opens `logical` with `flags` (and `mode` when creating), resolved inside the root.
    pub(crate) fn open_raw(&self, logical: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        debug_assert!(
            logical.starts_with('/'),
            "logical paths are absolute: {logical}"
        );
        match &self.base_fd {
            None => {
                let c = CString::new(logical).map_err(|_| io::ErrorKind::InvalidInput)?;
                let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            }
            Some(dir) => {
                let rel = logical.trim_start_matches('/');
                let rel = if rel.is_empty() { "." } else { rel };
                if self.walk.load(Ordering::Relaxed) {
                    return walk_in_root(dir, rel, flags, mode);
                }
                let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
                match openat2(dir, rel, flags, mode, resolve) {
                    Err(e) if openat2_refused(&e) => {
                        self.walk.store(true, Ordering::Relaxed);
                        walk_in_root(dir, rel, flags, mode)
                    }
                    r => r,
                }
            }
        }
    }

    pub fn open_read(&self, logical: &str) -> io::Result<File> {
        let fd = self.record_result(
            logical,
            Access::File,
            self.open_raw(
                logical,
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
                0,
            ),
        )?;
        Ok(File::from(fd))
    }

    /// The whole file, which must be a regular file (sysfs and procfs files
    /// are) or a character device, of at most [`READ_CAP`] bytes: a FIFO is
    /// refused instead of waited on, and nothing is read forever.
    pub fn read(&self, logical: &str) -> io::Result<Vec<u8>> {
        self.read_capped(logical, READ_CAP)
    }

    /// [`Root::read`] with a cap of `cap` bytes.
    pub fn read_capped(&self, logical: &str, cap: usize) -> io::Result<Vec<u8>> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let single_shot = logical.starts_with("/sys/");
        if let Some(opened) = self.kernel_file(logical, flags) {
            let fd = self.record_result(logical, Access::File, opened)?;
            return read_checked(&File::from(fd), single_shot, cap, true);
        }
        let fd = self.record_result(logical, Access::File, self.open_raw(logical, flags, 0))?;
        read_checked(&File::from(fd), single_shot, cap, false)
    }

    /// `logical` opened as a file only the running kernel makes, when it is
    /// one: on the live host, a path under `/sys` or `/proc` that stays on
    /// the sysfs or procfs mount there (beneath it, no `..`, no mount
    /// crossed, no magic link such as `/proc/PID/fd/N`). These hold only
    /// regular files, directories and links, so the `fstat` that refuses
    /// FIFOs and devices before a read is left to the reads that return
    /// nothing or fail: one system call of four per file. `None`: open it
    /// the checked way (a capture, another path, another mount).
    fn kernel_file(&self, logical: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        let (mount, rel) = if let Some(rel) = logical.strip_prefix("/sys/") {
            (self.live_sys.as_ref()?, rel)
        } else {
            (self.live_proc.as_ref()?, logical.strip_prefix("/proc/")?)
        };
        if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        match open_beneath_same_mount(mount, rel, flags) {
            Err(e) if not_vouched(&e) => None,
            r => Some(r),
        }
    }

    /// A character device's first bytes (`/dev/cpu_dma_latency`), at most `cap`.
    pub fn read_device(&self, logical: &str, cap: usize) -> io::Result<Vec<u8>> {
        let f = self.open_read(logical)?;
        let kind = file_kind(&f)?;
        if kind != libc::S_IFCHR && kind != libc::S_IFREG {
            return Err(not_regular(kind));
        }
        let mut buf = vec![0u8; cap];
        let n = (&f).read(&mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    pub fn read_string(&self, logical: &str) -> io::Result<String> {
        let bytes = self.read(logical)?;
        String::from_utf8(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    }

    /// The file's text with surrounding white space removed; `None` if it is absent.
    pub fn read_trimmed(&self, logical: &str) -> io::Result<Option<String>> {
        match self.read_string(logical) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn exists(&self, logical: &str) -> bool {
        self.open_raw(logical, libc::O_PATH, 0).is_ok()
    }

    pub fn is_dir(&self, logical: &str) -> bool {
        self.open_raw(logical, libc::O_PATH | libc::O_DIRECTORY, 0)
            .is_ok()
    }

    /// Entry names of a directory, sorted; `.` and `..` left out.
    pub fn read_dir(&self, logical: &str) -> io::Result<Vec<String>> {
        let fd = self.record_result(
            logical,
            Access::Dir,
            self.open_raw(logical, libc::O_RDONLY | libc::O_DIRECTORY, 0),
        )?;
        let dir = nix::dir::Dir::from_fd(fd).map_err(io::Error::from)?;
        let mut names = Vec::new();
        for entry in dir {
            let entry = entry.map_err(io::Error::from)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(String::from_utf8_lossy(name).into_owned());
        }
        names.sort();
        Ok(names)
    }

    /// A handle on a directory for reading many files in it: each read is then
    /// one short lookup instead of a walk of the whole path.
    pub fn dir_handle(&self, logical: &str) -> io::Result<DirHandle<'_>> {
        let flags = libc::O_PATH | libc::O_DIRECTORY;
        let (fd, kernel) = match self.kernel_file(logical, flags) {
            Some(opened) => (opened?, true),
            None if logical == "/proc" && self.live_proc.is_some() => {
                let proc = self.live_proc.as_ref().expect("checked");
                (open_beneath_same_mount(proc, "", flags)?, true)
            }
            None => (self.open_raw(logical, flags, 0)?, false),
        };
        Ok(DirHandle {
            root: self,
            fd,
            logical: logical.to_string(),
            kernel,
        })
    }

    /// Where a symlink points (its text, unresolved). Parents are resolved in the root.
    pub fn read_link(&self, logical: &str) -> io::Result<PathBuf> {
        let (parent, name) = split_parent(logical);
        let dir = self.open_raw(parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        let cname = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        self.record(logical, Access::Link);
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&buf)))
    }

    /// The logical path a path resolves to inside the root (symlinks followed),
    /// e.g. `/sys/class/net/eth0` -> `/sys/devices/.../net/eth0`.
    pub fn resolve(&self, logical: &str) -> io::Result<String> {
        let fd = self.record_result(
            logical,
            Access::Follow,
            self.open_raw(logical, libc::O_PATH, 0),
        )?;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        let rel = real.strip_prefix(&self.base).map_err(|_| {
            io::Error::new(io::ErrorKind::PermissionDenied, "resolves outside the root")
        })?;
        Ok(format!("/{}", rel.to_string_lossy()))
    }

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
        let fd = self.open_raw(
            logical,
            libc::O_WRONLY | libc::O_TRUNC | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )?;
        let f = File::from(fd);
        regular(&f, usize::MAX)?;
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
        let mode = self.replaced_mode(&dir, logical, name)?;
        let tmp = temp_name(name);
        let f = match create_exclusive(&dir, &tmp) {
            // A leftover of a crash, or something placed there (a hard link):
            // unlinking the name leaves whatever it pointed at untouched.
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                unlink_at(&dir, &tmp, 0)?;
                create_exclusive(&dir, &tmp)?
            }
            other => other?,
        };
        let mut f = f;
        f.write_all(bytes)?;
        if unsafe { libc::fchmod(f.as_raw_fd(), mode) } != 0 {
            return Err(io::Error::last_os_error());
        }
        f.sync_all()?;
        drop(f);
        let (ctmp, cname) = (cstr(&tmp)?, cstr(name)?);
        if unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                ctmp.as_ptr(),
                dir.as_raw_fd(),
                cname.as_ptr(),
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        dir.sync_all()
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

/// The temporary name [`Root::replace_file`] writes before renaming: fixed,
/// so that a later restore can find and remove one left by a crash.
fn temp_name(name: &str) -> String {
    format!(".{name}.hostknob-new")
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::ErrorKind::InvalidInput.into())
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

/// Test-only (the `test-hooks` feature): `WHAT:N` makes an append to `WHAT`
/// (`journal` or `ledger`) write at most N bytes, then fail as a full disk
/// would (ENOSPC).
#[cfg(feature = "test-hooks")]
pub const APPEND_LIMIT_VAR: &str = "HOSTKNOB_TEST_APPEND_LIMIT";

/// Appends `bytes` to a state file (`what`: the journal, the ledger) in one write.
pub fn append(f: &mut File, bytes: &[u8], what: &str) -> io::Result<()> {
    #[cfg(not(feature = "test-hooks"))]
    let _ = what;
    #[cfg(feature = "test-hooks")]
    if let Some(n) = std::env::var(APPEND_LIMIT_VAR)
        .ok()
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

/// The most hostknob reads from one host file: a 4,096-CPU host's
/// `/proc/cpuinfo` is a few MB, and a bigger file is not a host's.
pub const READ_CAP: usize = 16 << 20;

fn file_kind(f: &File) -> io::Result<libc::mode_t> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_mode & libc::S_IFMT)
}

fn not_regular(kind: libc::mode_t) -> io::Error {
    let what = match kind {
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFDIR => "a directory",
        _ => "not a plain file",
    };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "is {what}, not a regular file: hostknob reads and writes only regular files and devices here"
        ),
    )
}

fn too_big(cap: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "larger than {} MiB, the most hostknob reads from one file (a 4,096-CPU host's \
             /proc/cpuinfo is a few MB)",
            cap >> 20
        ),
    )
}

/// `f` if it is a regular file no bigger than `cap` (by its size; procfs
/// files say 0 and are capped while read), or a character device (opened
/// `O_NONBLOCK`, read up to `cap`: `/dev/zero` ends at the cap). A FIFO, a
/// socket, a block device or a directory is refused.
fn regular(f: &File, cap: usize) -> io::Result<()> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFCHR {
        return Ok(());
    }
    if kind != libc::S_IFREG {
        return Err(not_regular(kind));
    }
    if st.st_size as u64 > cap as u64 {
        return Err(too_big(cap));
    }
    Ok(())
}

/// [`read_all`] of a file checked by [`regular`]: before the read, or, for a
/// file the kernel made (`trusted`), only when the read returned nothing or
/// failed, which is all a FIFO or a directory can give.
fn read_checked(f: &File, single_shot: bool, cap: usize, trusted: bool) -> io::Result<Vec<u8>> {
    if !trusted {
        regular(f, cap)?;
        return read_all(f, single_shot, cap);
    }
    match read_all(f, single_shot, cap) {
        Ok(bytes) if !bytes.is_empty() => Ok(bytes),
        other => {
            regular(f, cap)?;
            other
        }
    }
}

/// The first bytes of a file are read onto the stack: most files are one
/// short attribute, and a zeroed 4 KiB heap buffer per file was a tenth of
/// inventory's instructions.
const FIRST_READ: usize = 4096;

/// Reads a whole file, at most `cap` bytes. A sysfs attribute arrives whole
/// in one read (at most a page), so a short read is its end (`single_shot`):
/// this saves the EOF read, statx and lseek that `read_to_end` costs, which is
/// most of inventory's time on big hosts.
fn read_all(f: &File, single_shot: bool, cap: usize) -> io::Result<Vec<u8>> {
    let fd = f.as_raw_fd();
    let limit = FIRST_READ.min(cap.saturating_add(1));
    let mut first = [std::mem::MaybeUninit::<u8>::uninit(); FIRST_READ];
    let mut len = 0;
    loop {
        let want = limit - len;
        let n = read_raw(fd, first[len..limit].as_mut_ptr().cast(), want)?;
        len += n;
        if n == 0 || (single_shot && n < want) || len == limit {
            break;
        }
    }
    // SAFETY: `read` initialised the first `len` bytes.
    let head = unsafe { std::slice::from_raw_parts(first.as_ptr().cast::<u8>(), len) };
    if len < limit {
        return Ok(head.to_vec());
    }
    if len > cap {
        return Err(too_big(cap));
    }
    // A big file (`/proc/cpuinfo`, `/proc/interrupts` on a big host): a heap
    // buffer that doubles, read into without zeroing it.
    let mut buf = Vec::with_capacity(4 * FIRST_READ);
    buf.extend_from_slice(head);
    loop {
        if buf.len() > cap {
            return Err(too_big(cap));
        }
        if buf.len() == buf.capacity() {
            buf.reserve_exact(buf.capacity().min(cap.saturating_add(1) - buf.len()));
        }
        let want = buf.capacity() - buf.len();
        // SAFETY: the spare capacity is `want` bytes; `read` initialises `n` of them.
        let n = read_raw(fd, unsafe { buf.as_mut_ptr().add(buf.len()) }, want)?;
        unsafe { buf.set_len(buf.len() + n) };
        if n == 0 || (single_shot && n < want) {
            break;
        }
    }
    if buf.len() > cap {
        return Err(too_big(cap));
    }
    Ok(buf)
}

/// One `read(2)` of at most `len` bytes into `buf`, retried when interrupted.
fn read_raw(fd: libc::c_int, buf: *mut u8, len: usize) -> io::Result<usize> {
    loop {
        let n = unsafe { libc::read(fd, buf.cast(), len) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// An open directory inside the root; names are looked up beneath it only.
pub struct DirHandle<'r> {
    root: &'r Root,
    fd: OwnedFd,
    logical: String,
    /// A directory on the live sysfs or procfs mount: see
    /// [`DirHandle::kernel_file`].
    kernel: bool,
}

impl DirHandle<'_> {
    /// Opens `rel` (a name or a relative path such as `state3/disable`)
    /// beneath this directory; a symlink leading out of it is resolved within
    /// the root instead, the long way.
    fn open_at(&self, rel: &str, flags: i32) -> io::Result<OwnedFd> {
        if self.root.is_live() {
            return openat(&self.fd, rel, flags, 0);
        }
        let the_long_way = || {
            self.root
                .open_raw(&format!("{}/{}", self.logical, rel), flags, 0)
        };
        if self.root.walk.load(Ordering::Relaxed) {
            return the_long_way();
        }
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        match openat2(&self.fd, rel, flags, 0, resolve) {
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) || openat2_refused(&e) => {
                the_long_way()
            }
            r => r,
        }
    }

    pub fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        self.read_with(rel, self.logical.starts_with("/sys"))
    }

    /// A procfs file the kernel writes as one record (`PID/stat`): like a
    /// sysfs attribute, a short read is its end, which saves the EOF read.
    pub fn read_record(&self, rel: &str) -> io::Result<Vec<u8>> {
        self.read_with(rel, true)
    }

    fn read_with(&self, rel: &str, single_shot: bool) -> io::Result<Vec<u8>> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let (fd, trusted) = match self.kernel_file(rel, flags) {
            Some(opened) => (opened, true),
            None => (self.open_at(rel, flags), false),
        };
        // The path is spelled only for `capture`'s record: a format per read
        // is measurable on a 512-CPU host.
        let fd = match self.root.recorder {
            Some(_) => {
                self.root
                    .record_result(&format!("{}/{}", self.logical, rel), Access::File, fd)
            }
            None => fd,
        }?;
        read_checked(&File::from(fd), single_shot, READ_CAP, trusted)
    }

    /// [`Root::kernel_file`] for `rel` beneath this directory, on the same
    /// mount.
    fn kernel_file(&self, rel: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        if !self.kernel || rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        match open_beneath_same_mount(&self.fd, rel, flags) {
            Err(e) if not_vouched(&e) => None,
            r => Some(r),
        }
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.open_at(rel, libc::O_PATH).is_ok()
    }

    pub fn read_string(&self, name: &str) -> io::Result<String> {
        String::from_utf8(self.read(name)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    }

    pub fn logical(&self) -> &str {
        &self.logical
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn open(base: &Path, walk: bool) -> Root {
        let root = Root::open(base).unwrap();
        if walk { root.walking() } else { root }
    }

    #[test]
    fn symlinks_cannot_leave_the_root() {
        for walk in [false, true] {
            symlinks_cannot_leave_the_root_when(walk);
        }
    }

    fn symlinks_cannot_leave_the_root_when(walk: bool) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        std::fs::create_dir_all(base.join("sys/a")).unwrap();
        std::fs::write(base.join("sys/a/value"), "inside\n").unwrap();
        symlink("/etc", base.join("sys/abs")).unwrap();
        symlink("../../../../../../etc", base.join("sys/rel")).unwrap();
        symlink("../sys/a", base.join("sys/ok")).unwrap();
        // Chains: an absolute link to a relative one, `..` at the root, a loop.
        symlink("/sys/ok", base.join("sys/chain")).unwrap();
        symlink("../../../sys/a/../a/value", base.join("sys/dots")).unwrap();
        symlink("loop2", base.join("sys/loop1")).unwrap();
        symlink("loop1", base.join("sys/loop2")).unwrap();
        let root = open(base, walk);
        assert_eq!(
            root.read_trimmed("/sys/chain/value").unwrap().as_deref(),
            Some("inside")
        );
        assert_eq!(
            root.read_trimmed("/sys/dots").unwrap().as_deref(),
            Some("inside")
        );
        assert_eq!(
            root.read("/sys/loop1").unwrap_err().raw_os_error(),
            Some(libc::ELOOP)
        );
        assert_eq!(root.read_dir("/sys/ok").unwrap(), vec!["value"]);
        let handle = root.dir_handle("/sys/ok").unwrap();
        assert_eq!(handle.read_string("value").unwrap(), "inside\n");
        assert!(handle.read("../abs/hostname").is_err());
        assert_eq!(
            root.read_trimmed("/sys/ok/value").unwrap().as_deref(),
            Some("inside")
        );
        // Both would reach the real /etc/hostname outside; inside the root there is none.
        assert!(root.read("/sys/abs/hostname").is_err());
        assert!(root.read("/sys/rel/hostname").is_err());
        assert!(root.read("/../../../etc/hostname").is_err());
        assert_eq!(root.resolve("/sys/ok").unwrap(), "/sys/a");
    }

    #[test]
    fn kernel_files_are_told_from_plain_ones() {
        let live = Root::open(Path::new("/")).unwrap();
        assert!(live.is_kernel_file("/proc/self/stat").unwrap());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
        std::fs::write(dir.path().join("proc/self/stat"), "1 (x)\n").unwrap();
        let copy = Root::open(dir.path()).unwrap();
        assert!(!copy.is_kernel_file("/proc/self/stat").unwrap());
    }

    #[test]
    fn replace_and_remove_files_inside_the_root() {
        for walk in [false, true] {
            replace_and_remove_files_inside_the_root_when(walk);
        }
    }

    fn replace_and_remove_files_inside_the_root_when(walk: bool) {
        let dir = tempfile::tempdir().unwrap();
        for d in ["sys", "etc", "tmp"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let root = open(dir.path(), walk);
        let f = "/etc/a/b/c.conf";
        assert_eq!(root.missing_dirs(f), vec!["/etc/a", "/etc/a/b"]);
        root.probe_create(f).unwrap();
        root.replace_file(f, b"one\n").unwrap();
        assert_eq!(root.read(f).unwrap(), b"one\n");
        root.replace_file(f, b"two\n").unwrap();
        root.probe_write(f).unwrap();
        assert_eq!(root.read(f).unwrap(), b"two\n", "a probe writes nothing");
        root.remove_file(f).unwrap();
        assert!(!root.exists(f));
        assert!(root.remove_empty_dir("/etc/a/b").unwrap());
        assert!(!root.remove_empty_dir("/etc").unwrap(), "not empty: kept");
        // A link leading out of the root is followed inside it, never outside.
        std::os::unix::fs::symlink("/tmp", dir.path().join("etc/out")).unwrap();
        root.replace_file("/etc/out/hk-root-test", b"x").unwrap();
        assert!(dir.path().join("tmp/hk-root-test").exists());
        assert!(!Path::new("/tmp/hk-root-test").exists());
    }

    #[test]
    fn whole_files_are_read_across_the_first_buffer_and_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        for len in [0, 1, 4095, 4096, 4097, 8192, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            for d in ["sys", "proc"] {
                std::fs::write(dir.path().join(d).join("f"), &bytes).unwrap();
                let logical = format!("/{d}/f");
                assert_eq!(
                    root.read(&logical).unwrap(),
                    bytes,
                    "{logical}, {len} bytes"
                );
                // Exactly at the cap is whole; one byte over is an error.
                if len > 0 {
                    assert_eq!(root.read_capped(&logical, len).unwrap(), bytes);
                    let err = root.read_capped(&logical, len - 1).unwrap_err();
                    assert!(
                        err.to_string().contains("larger than"),
                        "{logical} {len}: {err}"
                    );
                }
            }
        }
    }

    /// The live sysfs is read without an `fstat` first, and only on its own
    /// mount; what only the check after an empty read sees (a directory) is
    /// still refused by name.
    #[test]
    fn live_sysfs_files_are_read_and_directories_refused() {
        let live = Root::open(Path::new("/")).unwrap();
        if live.live_sys.is_none() {
            return; // no sysfs at /sys here: nothing of the rule to see
        }
        let flags = libc::O_RDONLY | libc::O_NONBLOCK;
        assert!(
            live.kernel_file("/sys/devices/system/cpu/online", flags)
                .is_some()
        );
        assert!(
            live.kernel_file("/sys/../dev/sda", flags).is_none(),
            "`..` leaves sysfs"
        );
        assert!(live.kernel_file("/sys//etc/passwd", flags).is_none());
        assert!(live.kernel_file("/etc/hostname", flags).is_none());
        assert!(live.kernel_file("/sysfoo/x", flags).is_none());
        // Another mount under /sys (cgroup, debugfs...) is read the checked way.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        if let Some(other) = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .find(|m| m.starts_with("/sys/") && Path::new(m).is_dir())
        {
            assert!(
                live.kernel_file(other, libc::O_PATH).is_none(),
                "{other} is another mount"
            );
            assert!(!live.dir_handle(other).unwrap().kernel, "{other}");
        }
        let online = live.read_string("/sys/devices/system/cpu/online").unwrap();
        assert!(online.trim().starts_with('0'), "{online:?}");
        let err = live.read("/sys/devices/system/cpu").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let handle = live.dir_handle("/sys/devices/system").unwrap();
        assert!(handle.kernel);
        let err = handle.read("cpu").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert!(handle.kernel_file("/etc/passwd", flags).is_none());
        if live.live_proc.is_some() {
            let proc = live.dir_handle("/proc").unwrap();
            assert!(proc.kernel);
            assert!(proc.kernel_file("1/stat", flags).is_some());
            assert!(proc.kernel_file("self/stat", flags).is_some());
            assert!(proc.kernel_file("1/../1/stat", flags).is_none());
            // A magic link is followed only the checked way.
            assert!(proc.kernel_file("self/fd/0", flags).is_none());
            assert!(live.kernel_file("/proc/self/fd/0", flags).is_none());
            assert!(live.kernel_file("/proc/cpuinfo", flags).is_some());
            let me = std::process::id();
            let stat = proc.read_record(&format!("{me}/stat")).unwrap();
            assert!(stat.starts_with(format!("{me} (").as_bytes()));
        }
    }

    #[test]
    fn a_root_without_sys_or_proc_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = Root::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("neither sys/ nor proc/"), "{err}");
        let err = Root::open(&dir.path().join("nope")).err().unwrap();
        assert!(format!("{err:#}").contains("cannot open"));
    }
}
