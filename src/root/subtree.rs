//! A directory worked on beneath one handle without following a link: each
//! name below it is looked at with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened
//! with `O_NOFOLLOW`, one component at a time, so a link, FIFO or device
//! planted inside is seen for what it is, never for what it points at. A
//! link is removed as a name, never descended into. Used where hostknob
//! removes and remakes directories in a tree (a NIC's queue directories,
//! `ethtool::queues`).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};

use super::read::entry_names;
use super::resolve::openat;
use super::write::{cstr, write_beside};
use super::{Root, is_absent};

/// What a name below a [`Subtree`] is, as `lstat` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// A regular file.
    File,
    Link,
    /// A FIFO, socket or device node.
    Other,
}

/// A name's kind, permission bits, hard links and size.
#[derive(Clone, Copy, Debug)]
pub struct Meta {
    pub kind: Kind,
    pub mode: u32,
    pub links: u64,
    pub size: u64,
}

/// An open directory of the root; every path given to it is relative to it,
/// plain names joined by `/` (no `.`, `..` or empty name).
pub struct Subtree {
    fd: OwnedFd,
    logical: String,
}

/// Deeper than any directory a caller of [`Subtree::remove`] expects.
const MAX_DEPTH: usize = 16;

impl Root {
    /// The directory `logical` as a [`Subtree`]: links in its path (its own
    /// name included) resolve in the root as everywhere, none below it.
    pub fn subtree(&self, logical: &str) -> io::Result<Subtree> {
        let fd = self.open_raw(logical, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(Subtree {
            fd,
            logical: logical.to_string(),
        })
    }
}

fn names(rel: &str) -> io::Result<Vec<&str>> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{rel:?} is not a plain relative path"),
        ));
    }
    Ok(parts)
}

fn lstat_at(dir: &OwnedFd, name: &str) -> io::Result<Option<Meta>> {
    let c = cstr(name)?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW;
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, flags) } != 0 {
        let e = io::Error::last_os_error();
        return if is_absent(&e) { Ok(None) } else { Err(e) };
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFLNK => Kind::Link,
        _ => Kind::Other,
    };
    Ok(Some(Meta {
        kind,
        mode: st.st_mode & 0o7777,
        links: st.st_nlink as u64,
        size: st.st_size as u64,
    }))
}

fn unlink(dir: &OwnedFd, name: &str, flags: i32) -> io::Result<()> {
    let c = cstr(name)?;
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn open_dir(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    openat(dir, name, flags, 0)
}

/// Removes `name` in `dir` and all below it; a link is removed, not followed.
fn remove_at(dir: &OwnedFd, name: &str, depth: usize) -> io::Result<()> {
    match lstat_at(dir, name)? {
        None => Ok(()),
        Some(m) if m.kind == Kind::Dir => {
            if depth > MAX_DEPTH {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let sub = open_dir(dir, name)?;
            for n in entry_names(&sub)? {
                remove_at(&sub, &n, depth + 1)?;
            }
            match unlink(dir, name, libc::AT_REMOVEDIR) {
                Err(e) if is_absent(&e) => Ok(()),
                r => r,
            }
        }
        Some(_) => match unlink(dir, name, 0) {
            Err(e) if is_absent(&e) => Ok(()),
            r => r,
        },
    }
}

impl Subtree {
    /// The logical path of `rel` (for messages).
    pub fn path(&self, rel: &str) -> String {
        match rel {
            "" => self.logical.clone(),
            _ => format!("{}/{rel}", self.logical),
        }
    }

    /// Adds `rel`'s logical path to an error.
    fn named(&self, rel: &str, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.path(rel)))
    }

    /// The directory `rel` (`""`: this one), opened component by component.
    fn dir(&self, rel: &str) -> io::Result<OwnedFd> {
        let mut fd = self.fd.try_clone()?;
        for name in names(rel)? {
            fd = open_dir(&fd, name)?;
        }
        Ok(fd)
    }

    /// `rel`'s directory and last name.
    fn parent<'a>(&self, rel: &'a str) -> io::Result<(OwnedFd, &'a str)> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        names(name)?;
        Ok((self.dir(dir)?, name))
    }

    /// What `rel` is, not following a link; `None`: there is no such name.
    pub fn meta(&self, rel: &str) -> io::Result<Option<Meta>> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e) if is_absent(&e) || e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(None),
            Err(e) => return Err(self.named(rel, e)),
        };
        lstat_at(&dir, name).map_err(|e| self.named(rel, e))
    }

    /// The names in directory `rel`, sorted.
    pub fn list(&self, rel: &str) -> io::Result<Vec<String>> {
        let mut v = self
            .dir(rel)
            .and_then(|fd| entry_names(&fd))
            .map_err(|e| self.named(rel, e))?;
        v.sort();
        Ok(v)
    }

    /// The bytes of regular file `rel`, at most `cap` (more is an error).
    pub fn read(&self, rel: &str, cap: usize) -> io::Result<Vec<u8>> {
        let read = || {
            let (dir, name) = self.parent(rel)?;
            let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
            let f = File::from(openat(&dir, name, flags, 0)?);
            if !f.metadata()?.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not a regular file",
                ));
            }
            let mut buf = Vec::new();
            f.take(cap as u64 + 1).read_to_end(&mut buf)?;
            if buf.len() > cap {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("over {cap} bytes"),
                ));
            }
            Ok(buf)
        };
        read().map_err(|e| self.named(rel, e))
    }

    /// Removes `rel` and everything below it, never following a link; a
    /// name already gone is no error. The directory holding it is synced.
    pub fn remove(&self, rel: &str) -> io::Result<()> {
        let remove = || {
            let (dir, name) = self.parent(rel)?;
            remove_at(&dir, name, 0)?;
            File::from(dir).sync_all()
        };
        remove().map_err(|e| self.named(rel, e))
    }

    /// Makes directory `rel` with permission bits `mode`; one already there
    /// (a directory, not a link) is left as it is.
    pub fn make_dir(&self, rel: &str, mode: u32) -> io::Result<()> {
        let make = || {
            let (dir, name) = self.parent(rel)?;
            let c = cstr(name)?;
            if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
                let e = io::Error::last_os_error();
                return match lstat_at(&dir, name)? {
                    Some(m) if e.raw_os_error() == Some(libc::EEXIST) && m.kind == Kind::Dir => {
                        Ok(())
                    }
                    _ => Err(e),
                };
            }
            // Not through the umask: the mode recorded is the mode made.
            let made = File::from(open_dir(&dir, name)?);
            if unsafe { libc::fchmod(made.as_raw_fd(), mode) } != 0 {
                return Err(io::Error::last_os_error());
            }
            File::from(dir).sync_all()
        };
        make().map_err(|e| self.named(rel, e))
    }

    /// Creates or replaces regular file `rel` with `bytes` and permission
    /// bits `mode`: written to a new temporary file beside it (a leftover
    /// or planted one is unlinked first), synced, renamed over the name.
    pub fn write(&self, rel: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        let write = || {
            let (dir, name) = self.parent(rel)?;
            write_beside(&File::from(dir), name, bytes, mode)
        };
        write().map_err(|e| self.named(rel, e))
    }
}
