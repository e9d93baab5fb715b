//! The test suite's switches (`HOSTKNOB_TEST_*`, `HOSTKNOB_NO_OPENAT2`):
//! off in the shipped binaries, which never call [`enable`], so they read
//! none of these variables. The suite runs `examples/hostknob-test-hooks.rs`,
//! the same `main` with this switch turned on first. A runtime switch rather
//! than a Cargo feature, so that the library is compiled once for the tests
//! and the release build (CI's time), and what ships is what was tested.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns the switches on for this process (the test binary's first call).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether the switches are on: in the test binary, and in unit tests.
pub fn enabled() -> bool {
    cfg!(test) || ENABLED.load(Ordering::Relaxed)
}

/// A switch's value, only where the switches are on.
pub fn var(name: &str) -> Option<String> {
    enabled().then(|| std::env::var(name).ok()).flatten()
}

/// A switch's value as given (paths), only where the switches are on.
pub fn var_os(name: &str) -> Option<OsString> {
    enabled().then(|| std::env::var_os(name)).flatten()
}
