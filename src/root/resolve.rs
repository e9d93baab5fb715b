//! Opening a logical path inside the root: `openat2(RESOLVE_IN_ROOT)`, or the
//! same resolution walked one component at a time where `openat2` is refused.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{Access, Root, split_parent};

pub(super) const SYSFS_MAGIC: libc::c_long = 0x6265_6572;
pub(super) const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;

/// `path` (on the real filesystem) opened as a directory if it is on a
/// filesystem of type `magic`.
pub(super) fn open_fs(path: &str, magic: libc::c_long) -> Option<OwnedFd> {
    let fd = File::open(path).ok()?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } == 0
        && st.f_type as libc::c_long == magic;
    ok.then(|| OwnedFd::from(fd))
}

/// A view of the tree at `base` on which no device node can be opened: a
/// detached copy of its mounts with `nodev` set (`open_tree` and
/// `mount_setattr`, root on Linux 5.12 or later), or `base` itself when its
/// mount is `nodev` already. Opened through it without crossing a mount
/// (`RESOLVE_NO_XDEV`), a name is opened for reading at once: a device node
/// fails with EACCES before any driver is reached, so the `O_PATH` check of
/// [`guarded_open`] (four system calls more per file) is needed only then.
pub(super) fn nodev_view(base: &OwnedFd) -> Option<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    const MOUNT_ATTR_NODEV: u64 = 0x4;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatvfs(base.as_raw_fd(), &mut st) } == 0 && st.f_flag & libc::ST_NODEV != 0
    {
        return base.try_clone().ok();
    }
    let empty = c"";
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint
        | AT_RECURSIVE;
    // SAFETY: a NUL-terminated empty path and plain flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, base.as_raw_fd(), empty.as_ptr(), flags) };
    if fd < 0 {
        return None;
    }
    let view = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // struct mount_attr: attr_set, attr_clr, propagation, userns_fd.
    let attr: [u64; 4] = [MOUNT_ATTR_NODEV, 0, 0, 0];
    // SAFETY: `attr` outlives the call and its size is passed.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            view.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    (set == 0).then_some(view)
}

/// An open through a [`nodev_view`] to be made again the checked way: a
/// device node (EACCES), and what [`not_vouched`] names.
pub(super) fn nodev_not_vouched(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EACCES) || not_vouched(e)
}

/// `openat2(dir, rel)` with `flags` (close-on-exec added), `mode` when
/// creating, and the `resolve` rules.
pub(super) fn openat2(
    dir: &OwnedFd,
    rel: &str,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c = CString::new(rel).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        mode as u64
    } else {
        0
    };
    how.resolve = resolve;
    // EAGAIN: a rename or mount anywhere on the machine raced a `..` of the
    // lookup under RESOLVE_IN_ROOT/BENEATH; openat2(2) says to try again.
    // Nothing was opened or created, so a retry is safe; bounded, so a
    // machine renaming without pause still gets an answer.
    let mut tries = 0;
    loop {
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
        if fd >= 0 {
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() != Some(libc::EAGAIN) || tries >= OPENAT2_TRIES {
            return Err(e);
        }
    }
}

/// How often an `openat2` that a concurrent rename made fail (EAGAIN) is tried.
const OPENAT2_TRIES: u32 = 256;

/// `rel` opened beneath `dir` without leaving it (no absolute paths, no `..`
/// above it, no magic links) and without crossing into another mount:
/// EXDEV when it would.
pub(super) fn open_beneath_same_mount(dir: &OwnedFd, rel: &str, flags: i32) -> io::Result<OwnedFd> {
    let rel = if rel.is_empty() { "." } else { rel };
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_MAGICLINKS;
    openat2(dir, rel, flags, 0, resolve)
}

/// An open that [`open_beneath_same_mount`] could not vouch for, to be
/// made again the checked way: it crosses a mount, meets a magic link
/// (ELOOP, as a real loop does), or `openat2` is refused.
pub(super) fn not_vouched(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ELOOP)) || openat2_refused(e)
}

/// The test binary may force the component walk (`HOSTKNOB_NO_OPENAT2=1`),
/// so the root-seam tests cover it on kernels that have `openat2`.
pub(super) fn walk_forced() -> bool {
    crate::test_hooks::var_os("HOSTKNOB_NO_OPENAT2").is_some_and(|v| v == "1")
}

pub(super) fn openat2_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

/// Symlinks followed in one lookup before giving up, as the kernel's limit.
const MAX_LINKS: usize = 40;

pub(super) fn openat(dir: &OwnedFd, name: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
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

impl Root {
    /// Opens `logical` with `flags` (and `mode` when creating), resolved inside the root.
    /// A tree's device node is never opened (opening `/dev/watchdog` arms it,
    /// `cpu_dma_latency` adds a request), and a regular file with more than
    /// one name is never opened for writing: see [`guarded_open`].
    pub(crate) fn open_raw(&self, logical: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        debug_assert!(
            logical.starts_with('/'),
            "logical paths are absolute: {logical}"
        );
        self.ask(logical)?;
        match &self.base_fd {
            None => {
                let c = CString::new(logical).map_err(|_| io::ErrorKind::InvalidInput)?;
                let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                if writes(flags) {
                    refuse_shared(&fd, logical)?;
                    self.refuse_proc_write(&fd, logical)?;
                }
                Ok(fd)
            }
            Some(_) => {
                let fd = guarded_open(&|| logical.to_string(), flags, mode, |f, m| {
                    self.open_in_tree(logical, f, m)
                })?;
                if writes(flags) {
                    self.refuse_proc_write(&fd, logical)?;
                }
                Ok(fd)
            }
        }
    }

    /// [`Root::open_raw`] under a non-`/` root, without the guard.
    fn open_in_tree(&self, logical: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        match &self.base_fd {
            None => unreachable!("a tree has a base directory"),
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

    /// `logical` opened as a file only the running kernel makes, when it is
    /// one: on the live host, a path under `/sys` or `/proc` that stays on
    /// the sysfs or procfs mount there (beneath it, no `..`, no mount
    /// crossed, no magic link such as `/proc/PID/fd/N`). These hold only
    /// regular files, directories and links, so the `fstat` that refuses
    /// FIFOs and devices before a read is left to the reads that return
    /// nothing or fail: one system call of four per file. `None`: open it
    /// the checked way (a capture, another path, another mount).
    pub(super) fn kernel_file(&self, logical: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        if let Err(e) = self.ask(logical) {
            return Some(Err(e));
        }
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

    /// `logical` in a tree opened through its [`nodev_view`] (reads and
    /// directory handles only), without crossing a mount; `None`: open it the
    /// checked way (no view, the component walk, a device node, a mount).
    pub(super) fn nodev_file(&self, logical: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        if let Err(e) = self.ask(logical) {
            return Some(Err(e));
        }
        let view = self.nodev.as_ref()?;
        if self.walk.load(Ordering::Relaxed) {
            return None;
        }
        let rel = logical.trim_start_matches('/');
        let rel = if rel.is_empty() { "." } else { rel };
        let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
        match openat2(view, rel, flags, 0, resolve) {
            Err(e) if nodev_not_vouched(&e) => None,
            r => Some(r),
        }
    }

    pub fn exists(&self, logical: &str) -> bool {
        self.open_raw(logical, libc::O_PATH, 0).is_ok()
    }

    pub fn is_dir(&self, logical: &str) -> bool {
        self.open_raw(logical, libc::O_PATH | libc::O_DIRECTORY, 0)
            .is_ok()
    }

    /// Where a symlink points (its text, unresolved). Parents are resolved in the root.
    pub fn read_link(&self, logical: &str) -> io::Result<PathBuf> {
        self.ask(logical)?;
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
}

/// Whether `flags` open for writing.
pub(super) fn writes(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// Opens a name inside a tree without opening what it must not: `open(flags,
/// mode)` is first called with `O_PATH` (which reaches no driver), the kind is
/// checked, and only then is the same inode reopened through
/// `/proc/self/fd` with the real flags. Directories (`O_DIRECTORY`) and
/// `O_PATH` opens reach no driver and are made at once. A name that does not
/// exist is created with `O_EXCL`, so nothing else is opened in its place.
pub(super) fn guarded_open(
    logical: &dyn Fn() -> String,
    flags: i32,
    mode: u32,
    open: impl Fn(i32, u32) -> io::Result<OwnedFd>,
) -> io::Result<OwnedFd> {
    if flags & (libc::O_PATH | libc::O_DIRECTORY) != 0 {
        return open(flags, mode);
    }
    let path_flags = libc::O_PATH | (flags & libc::O_NOFOLLOW);
    for _ in 0..3 {
        let handle = match open(path_flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && flags & libc::O_CREAT != 0 => {
                match open(flags | libc::O_EXCL, mode) {
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                    r => return r,
                }
            }
            Err(e) => return Err(e),
        };
        let st = fstat(&handle)?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => return Err(io::Error::from_raw_os_error(libc::ELOOP)),
            libc::S_IFCHR | libc::S_IFBLK => return Err(device_in_tree(&logical(), &st)),
            libc::S_IFREG if writes(flags) && st.st_nlink > 1 => {
                return Err(shared_inode(&logical(), st.st_nlink));
            }
            _ => {}
        }
        if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let reopen = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW);
        return reopen_fd(&handle, reopen);
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// The inode behind an `O_PATH` handle opened for real, through
/// `/proc/self/fd/N` (looked up beneath a handle on `/proc/self/fd` kept
/// open: one name instead of four).
fn reopen_fd(handle: &OwnedFd, flags: i32) -> io::Result<OwnedFd> {
    static FD_DIR: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    let name = handle.as_raw_fd().to_string();
    match FD_DIR.get_or_init(|| File::open("/proc/self/fd").ok().map(OwnedFd::from)) {
        Some(dir) => openat(dir, &name, flags, 0),
        None => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "/proc/self/fd is not readable: hostknob needs /proc to open files in a tree",
        )),
    }
}

pub(super) fn fstat(fd: &impl AsRawFd) -> io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Refuses a regular file opened for writing that has other names: a write
/// would reach every one of them (a hard link planted as the lock, the
/// journal, the ledger or a knob's file).
pub(super) fn refuse_shared(fd: &OwnedFd, logical: &str) -> io::Result<()> {
    let st = fstat(fd)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_nlink > 1 {
        return Err(shared_inode(logical, st.st_nlink));
    }
    Ok(())
}

pub(super) fn shared_inode(logical: &str, links: libc::nlink_t) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{logical} has {links} hard links: writing it would change the other names too; \
             hostknob does not write a file that is not only its own (remove the other links)"
        ),
    )
}

fn device_in_tree(logical: &str, st: &libc::stat) -> io::Error {
    let kind = if st.st_mode & libc::S_IFMT == libc::S_IFCHR {
        "character"
    } else {
        "block"
    };
    let (major, minor) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{logical} is a {kind} device node ({major}:{minor}) inside the tree: hostknob opens \
             devices only on the live root (/), never in a tree (opening one can act on this machine)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::Root;

    /// A `..` in a lookup under RESOLVE_IN_ROOT fails with EAGAIN while any
    /// rename runs on the machine; reads through the root must not.
    #[test]
    fn reads_under_a_root_survive_concurrent_renames() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        std::fs::create_dir_all(base.join("sys/class/net")).unwrap();
        std::fs::create_dir_all(base.join("sys/devices/eth9")).unwrap();
        std::fs::write(base.join("sys/devices/eth9/mtu"), "1500\n").unwrap();
        std::os::unix::fs::symlink("../../devices/eth9", base.join("sys/class/net/eth9")).unwrap();
        let root = Root::open(base).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = {
            let (stop, dir) = (stop.clone(), base.join("spin"));
            std::fs::create_dir(&dir).unwrap();
            std::thread::spawn(move || {
                let (a, b) = (dir.join("a"), dir.join("b"));
                std::fs::write(&a, "").unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::fs::rename(&a, &b).unwrap();
                    std::fs::rename(&b, &a).unwrap();
                }
            })
        };
        let mut failed = Vec::new();
        for _ in 0..20_000 {
            if let Err(e) = root.read_string("/sys/class/net/eth9/mtu") {
                failed.push(e.to_string());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.join().unwrap();
        assert!(
            failed.is_empty(),
            "{} failed reads, first: {}",
            failed.len(),
            failed[0]
        );
    }
}
