//! Bounded reads: regular files and character devices only, never past a cap.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;

use super::{Access, Root, is_absent};

/// A file of the machine hostknob runs on, whatever `--root` says (the
/// name tables `/etc/passwd` and `/etc/hosts`, read directly rather than
/// through the C library's NSS modules): its text up to [`READ_CAP`] bytes,
/// `None` when it cannot be read. Regular files only: a FIFO or device is not read.
pub fn read_system_file(path: &str) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO does not wait for a writer.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(READ_CAP as u64).read_to_string(&mut text).ok()?;
    Some(text)
}

impl Root {
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
        // A kernel file (live) or a file in a tree's nodev view: no device
        // is opened, and the kind is checked only when a read gives nothing.
        let direct = self
            .kernel_file(logical, flags)
            .or_else(|| self.nodev_file(logical, flags));
        if let Some(opened) = direct {
            let fd = self.record_result(logical, Access::File, opened)?;
            return read_checked(&File::from(fd), single_shot, cap, true);
        }
        let fd = self.record_result(logical, Access::File, self.open_raw(logical, flags, 0))?;
        // In a tree the kind was checked before the open (no device, no
        // link): what is left to refuse reads as nothing or fails.
        read_checked(&File::from(fd), single_shot, cap, !self.is_live())
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

    /// Entry names of a directory, sorted; `.` and `..` left out.
    pub fn read_dir(&self, logical: &str) -> io::Result<Vec<String>> {
        let fd = self.record_result(
            logical,
            Access::Dir,
            self.open_raw(logical, libc::O_RDONLY | libc::O_DIRECTORY, 0),
        )?;
        let mut names = entry_names(&fd)?;
        names.sort();
        Ok(names)
    }
}

/// The names in an open directory but `.` and `..`, by `getdents64`
/// (rustix's `RawDir`): `fdopendir` (nix's `Dir`) adds an `fstat` and two
/// `fcntl`s per directory.
pub(super) fn entry_names(fd: &std::os::fd::OwnedFd) -> io::Result<Vec<String>> {
    // Not zeroed (32 KiB per directory was a tenth of a live inventory's
    // instructions): only what the kernel wrote is read.
    let mut buf = Box::<[u8]>::new_uninit_slice(32 * 1024);
    let mut dir = rustix::fs::RawDir::new(fd, &mut buf);
    let mut names = Vec::new();
    while let Some(entry) = dir.next() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(names)
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

pub(super) fn not_regular(kind: libc::mode_t) -> io::Error {
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
pub(super) fn regular(f: &File, cap: usize) -> io::Result<()> {
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
pub(super) fn read_checked(
    f: &File,
    single_shot: bool,
    cap: usize,
    trusted: bool,
) -> io::Result<Vec<u8>> {
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
