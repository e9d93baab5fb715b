//! The sleeper/waker handoff: what a sleeper thread blocks on (a futex word,
//! an eventfd, a pipe) and how the waker wakes it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::now_ns;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// FUTEX_WAIT / FUTEX_WAKE on a private futex word.
    Futex,
    /// A blocking read(2) of an eventfd; the waker writes 1.
    Eventfd,
    /// A blocking read(2) of one byte from a pipe.
    Pipe,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::Futex => "futex",
            Mechanism::Eventfd => "eventfd",
            Mechanism::Pipe => "pipe",
        })
    }
}

/// The blocking primitive the sleeper waits on.
pub(super) struct Channel {
    mechanism: Mechanism,
    word: AtomicU32,
    fds: Option<(OwnedFd, OwnedFd)>,
}

impl Channel {
    pub(super) fn new(mechanism: Mechanism, nonblocking: bool) -> io::Result<Channel> {
        let nb = if nonblocking { libc::O_NONBLOCK } else { 0 };
        let fds = match mechanism {
            Mechanism::Futex => None,
            Mechanism::Eventfd => {
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | nb) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                Some((fd.try_clone()?, fd))
            }
            Mechanism::Pipe => {
                let mut p = [0i32; 2];
                if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | nb) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                unsafe { Some((OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1]))) }
            }
        };
        Ok(Channel {
            mechanism,
            word: AtomicU32::new(0),
            fds,
        })
    }

    pub(super) fn wake(&self) -> io::Result<()> {
        match self.mechanism {
            Mechanism::Futex => {
                self.word.store(1, Ordering::Release);
                futex_wake(&self.word);
                Ok(())
            }
            Mechanism::Eventfd => write_all(self.write_fd(), &1u64.to_ne_bytes()),
            Mechanism::Pipe => write_all(self.write_fd(), b"w"),
        }
    }

    /// Blocks until a wake is posted, and consumes it.
    pub(super) fn wait(&self) -> io::Result<()> {
        match self.mechanism {
            Mechanism::Futex => loop {
                if self.word.swap(0, Ordering::Acquire) != 0 {
                    return Ok(());
                }
                futex_wait(&self.word, 0, None)?;
            },
            Mechanism::Eventfd => read_some(self.read_fd(), &mut [0u8; 8]),
            Mechanism::Pipe => read_some(self.read_fd(), &mut [0u8; 1]),
        }
    }

    /// Takes back a wake nobody waited for (non-blocking channels only).
    pub(super) fn drain(&self) {
        match self.mechanism {
            Mechanism::Futex => self.word.store(0, Ordering::Relaxed),
            _ => {
                let _ = read_some(self.read_fd(), &mut [0u8; 8]);
            }
        }
    }

    pub(super) fn read_fd(&self) -> i32 {
        self.fds.as_ref().map_or(-1, |f| f.0.as_raw_fd())
    }
    pub(super) fn write_fd(&self) -> i32 {
        self.fds.as_ref().map_or(-1, |f| f.1.as_raw_fd())
    }
}

pub(super) fn write_all(fd: i32, buf: &[u8]) -> io::Result<()> {
    loop {
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if n < 0 && e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(super) fn read_some(fd: i32, buf: &mut [u8]) -> io::Result<()> {
    loop {
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sleeps while `word == expected`; returns on a wake, a spurious wake-up or
/// the timeout (the caller re-checks the word).
pub(super) fn futex_wait(
    word: &AtomicU32,
    expected: u32,
    timeout: Option<Duration>,
) -> io::Result<()> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ETIMEDOUT) => {}
            _ => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn futex_wake(word: &AtomicU32) {
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

/// Waits until `word >= target`, at most `limit`.
pub(super) fn wait_for(
    word: &AtomicU32,
    target: u32,
    limit: Duration,
    failed: &AtomicBool,
) -> Result<()> {
    let deadline = now_ns() + limit.as_nanos() as u64;
    loop {
        let v = word.load(Ordering::Acquire);
        if v >= target {
            return Ok(());
        }
        if failed.load(Ordering::Acquire) {
            bail!("the sleeper thread stopped");
        }
        let now = now_ns();
        if now >= deadline {
            bail!("the sleeper did not answer within {} ms", limit.as_millis());
        }
        futex_wait(
            word,
            v,
            Some(Duration::from_nanos((deadline - now).min(100_000_000))),
        )?;
    }
}
