//! Ctrl-C during a probe. SIGINT, SIGTERM and SIGHUP set the cancel flag;
//! a thread sleeping through a long idle gap must notice at once, so the
//! probes' sleeping threads register here and the handler sends each one
//! SIGURG (whose handler does nothing): their `clock_nanosleep` returns
//! EINTR, they see the flag and stop. Handlers are installed without
//! SA_RESTART. The sleeps are the same `clock_nanosleep` calls as before, so
//! a probe's timing does not change.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};

/// Threads that sleep in a probe, by kernel thread id (0: a free slot).
static SLEEPERS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];
/// The signal that stopped the run (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

fn gettid() -> i32 {
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Async-signal-safe: atomics and raw system calls only.
extern "C" fn on_stop(sig: libc::c_int) {
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    super::cancel();
    wake_sleepers();
}

extern "C" fn on_wake(_: libc::c_int) {}

/// Wakes every registered sleeping thread but this one (async-signal-safe).
pub fn wake_sleepers() {
    let (pid, me) = (unsafe { libc::getpid() }, gettid());
    for slot in &SLEEPERS {
        let tid = slot.load(Ordering::SeqCst);
        if tid != 0 && tid != me {
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGURG) };
        }
    }
}

/// Installs the handlers: SIGINT, SIGTERM and SIGHUP cancel the run.
pub fn install() -> Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = |h| SigAction::new(SigHandler::Handler(h), SaFlags::empty(), SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        unsafe { sigaction(sig, &action(on_stop)) }
            .with_context(|| format!("installing a {sig} handler"))?;
    }
    unsafe { sigaction(Signal::SIGURG, &action(on_wake)) }
        .context("installing a SIGURG handler")?;
    Ok(())
}

/// The signal that cancelled the run, if one did.
pub fn signal() -> Option<i32> {
    Some(SIGNAL.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// The calling thread, registered as one that sleeps until dropped.
pub struct Sleeper(Option<usize>);

/// Registers the calling thread (when all slots are taken it is not, and
/// only the flag checked between sleeps stops it).
pub fn register() -> Sleeper {
    let tid = gettid();
    let slot = SLEEPERS.iter().position(|s| {
        s.compare_exchange(0, tid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    Sleeper(slot)
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            SLEEPERS[i].store(0, Ordering::SeqCst);
        }
    }
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

fn nanosleep(flags: libc::c_int, ts: &libc::timespec, rem: *mut libc::timespec) -> i32 {
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, flags, ts, rem) }
}

/// Sleeps until CLOCK_MONOTONIC reads `deadline_ns`; stops with
/// "interrupted" when the run is cancelled.
pub fn sleep_until(deadline_ns: u64) -> Result<()> {
    let ts = timespec(deadline_ns);
    loop {
        super::check_cancelled()?;
        match nanosleep(libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) {
            0 => return Ok(()),
            libc::EINTR => continue,
            e => {
                return Err(std::io::Error::from_raw_os_error(e)).context("clock_nanosleep failed");
            }
        }
    }
}

/// Sleeps `d` as `std::thread::sleep` does; stops with "interrupted" when
/// the run is cancelled.
pub fn sleep(d: Duration) -> Result<()> {
    let mut ts = timespec(d.as_nanos() as u64);
    loop {
        super::check_cancelled()?;
        let mut rem = timespec(0);
        match nanosleep(0, &ts, &mut rem) {
            0 => return Ok(()),
            libc::EINTR => ts = rem,
            e => {
                return Err(std::io::Error::from_raw_os_error(e)).context("clock_nanosleep failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_last_as_long_as_asked() {
        let t = std::time::Instant::now();
        sleep(Duration::from_millis(30)).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(30));
        let deadline = super::super::now_ns() + 20_000_000;
        sleep_until(deadline).unwrap();
        assert!(super::super::now_ns() >= deadline);
    }

    #[test]
    fn a_registration_frees_its_slot() {
        let me = gettid();
        {
            let _s = register();
            assert!(SLEEPERS.iter().any(|s| s.load(Ordering::SeqCst) == me));
        }
        assert!(!SLEEPERS.iter().any(|s| s.load(Ordering::SeqCst) == me));
    }
}
