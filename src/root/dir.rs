//! Directory handles: many reads beneath one open directory.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use super::read::{READ_CAP, read_checked};
use super::resolve::{
    guarded_open, nodev_not_vouched, not_vouched, open_beneath_same_mount, openat, openat2,
    openat2_refused, refuse_shared, writes,
};
use super::{Access, Root};

impl Root {
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
            None => match self.nodev_file(logical, flags) {
                Some(opened) => {
                    return Ok(DirHandle {
                        root: self,
                        fd: opened?,
                        logical: logical.to_string(),
                        kernel: false,
                        nodev: true,
                    });
                }
                None => (self.open_raw(logical, flags, 0)?, false),
            },
        };
        Ok(DirHandle {
            root: self,
            fd,
            logical: logical.to_string(),
            kernel,
            nodev: false,
        })
    }
}

/// An open directory inside the root; names are looked up beneath it only.
pub struct DirHandle<'r> {
    pub(super) root: &'r Root,
    pub(super) fd: OwnedFd,
    pub(super) logical: String,
    /// A directory on the live sysfs or procfs mount: see
    /// [`DirHandle::kernel_file`].
    pub(super) kernel: bool,
    /// A directory in a tree's nodev view: see [`DirHandle::nodev_file`].
    pub(super) nodev: bool,
}

impl<'r> DirHandle<'r> {
    /// Opens `rel` (a name or a relative path such as `state3/disable`)
    /// beneath this directory; a symlink leading out of it is resolved within
    /// the root instead, the long way.
    fn open_at(&self, rel: &str, flags: i32) -> io::Result<OwnedFd> {
        if self.root.is_live() {
            let fd = openat(&self.fd, rel, flags, 0)?;
            if writes(flags) {
                refuse_shared(&fd, &format!("{}/{}", self.logical, rel))?;
            }
            return Ok(fd);
        }
        let logical = || format!("{}/{}", self.logical, rel);
        guarded_open(&logical, flags, 0, |flags, _| {
            let the_long_way = || self.root.open_raw(&logical(), flags, 0);
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
        })
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
        if self.root.asks() {
            self.root.ask(&format!("{}/{}", self.logical, rel))?;
        }
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let direct = self
            .kernel_file(rel, flags)
            .or_else(|| self.nodev_file(rel, flags));
        let (fd, trusted) = match direct {
            Some(opened) => (opened, true),
            None => (self.open_at(rel, flags), !self.root.is_live()),
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
    pub(super) fn kernel_file(&self, rel: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        if !self.kernel || rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        match open_beneath_same_mount(&self.fd, rel, flags) {
            Err(e) if not_vouched(&e) => None,
            r => Some(r),
        }
    }

    /// `rel` opened beneath a directory of a tree's nodev view, on the same
    /// mount: one system call where [`guarded_open`]'s check costs five,
    /// since no device node opens there. `None`: open it the checked way.
    fn nodev_file(&self, rel: &str, flags: i32) -> Option<io::Result<OwnedFd>> {
        if !self.nodev || self.root.walk.load(Ordering::Relaxed) {
            return None;
        }
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_MAGICLINKS;
        match openat2(&self.fd, rel, flags, 0, resolve) {
            Err(e) if nodev_not_vouched(&e) => None,
            r => Some(r),
        }
    }

    pub fn exists(&self, rel: &str) -> bool {
        if self.root.asks() && self.root.ask(&format!("{}/{}", self.logical, rel)).is_err() {
            return false;
        }
        self.open_at(rel, libc::O_PATH).is_ok()
    }

    pub fn read_string(&self, name: &str) -> io::Result<String> {
        String::from_utf8(self.read(name)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    }

    pub fn logical(&self) -> &str {
        &self.logical
    }

    pub fn root(&self) -> &'r Root {
        self.root
    }
}
