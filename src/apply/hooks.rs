//! Test-only hooks, read from the environment, that let the test suite
//! interrupt an apply between two writes. Read only where
//! [`crate::test_hooks`] is on (the test suite's binary); elsewhere `Hooks`
//! does nothing and no variable is read.
//!
//! - `HOSTKNOB_TEST_WRITE_DELAY_MS=N`: sleep N ms before each write, so that
//!   a test can kill the process (SIGKILL) at random points of an apply.
//! - `HOSTKNOB_TEST_WRITE_GATE=DIR`: before write `i` (from 0), create
//!   `DIR/at-i` and wait until `DIR/go-i` exists, so that a test can change
//!   the tree at an exact point (make the next target unwritable).
//! - `HOSTKNOB_TEST_WRITE_LOG=FILE`: append `path<TAB>value` for every
//!   attribute written (apply, rollback, revert), so a test can check the
//!   order against the kernel's rules, which a captured tree does not enforce.
//! - `HOSTKNOB_TEST_WRITE_ERRNO=PATH=ERRNO[;PATH=ERRNO...]`: a write of that
//!   attribute or thread (the logical path, an errno number) fails with that
//!   error before anything is written, as the kernel answers a managed IRQ
//!   before 6.12 (EIO) or a SCHED_DEADLINE thread (EBUSY), which a captured
//!   tree cannot.
//!
//! `HOSTKNOB_TEST_APPEND_LIMIT` (a full disk for the journal and the ledger)
//! is read by `root::append`.

use std::path::PathBuf;
use std::time::Duration;

pub const DELAY_VAR: &str = "HOSTKNOB_TEST_WRITE_DELAY_MS";
pub const GATE_VAR: &str = "HOSTKNOB_TEST_WRITE_GATE";
pub const LOG_VAR: &str = "HOSTKNOB_TEST_WRITE_LOG";
pub const ERRNO_VAR: &str = "HOSTKNOB_TEST_WRITE_ERRNO";

/// The error the test asked a write of `path` to fail with, if any.
pub fn injected_error(path: &str) -> Option<std::io::Error> {
    let spec = crate::test_hooks::var(ERRNO_VAR)?;
    spec.split(';')
        .filter_map(|one| one.rsplit_once('='))
        .find(|(p, _)| *p == path)
        .and_then(|(_, n)| n.trim().parse().ok())
        .map(std::io::Error::from_raw_os_error)
}

/// Appends one attribute write to the test's log, if it asked for one.
pub fn log_write(path: &str, text: &str) {
    use std::io::Write as _;
    let Some(log) = crate::test_hooks::var_os(LOG_VAR) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{path}\t{}", text.trim());
    }
}

pub struct Hooks {
    delay: Option<Duration>,
    gate: Option<PathBuf>,
}

impl Hooks {
    pub fn from_env() -> Hooks {
        Hooks {
            delay: crate::test_hooks::var(DELAY_VAR)
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
            gate: crate::test_hooks::var_os(GATE_VAR).map(PathBuf::from),
        }
    }

    /// Called by apply before its write number `index`.
    pub fn before_write(&self, index: usize) {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        if let Some(dir) = &self.gate {
            let _ = std::fs::write(dir.join(format!("at-{index}")), b"");
            let go = dir.join(format!("go-{index}"));
            while !go.exists() {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}
