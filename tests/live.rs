//! Live and opt-in: on this machine, apply a `cpuidle-state` knob that
//! disables the `haltpoll idle` state on CPU 1, read it back from the real
//! sysfs, revert, and check it is restored; and verify the same knob with a
//! short wakeup probe run, checking the host is restored after it. Runs only with HOSTKNOB_LIVE=1,
//! as root, on a writable /sys that has the state; otherwise it says why it
//! skipped. A guard writes the original value back on every path, a panic
//! included: other work measures on this machine.

#[path = "suite/support/mod.rs"]
mod support;

use std::ffi::CString;
use std::path::{Path, PathBuf};

use support::*;

/// Puts the value read before the test back when dropped, if it changed.
struct Restore {
    path: PathBuf,
    original: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let now = std::fs::read_to_string(&self.path).unwrap_or_default();
        if now.trim() != self.original.trim() {
            let _ = std::fs::write(&self.path, self.original.trim());
            eprintln!(
                "live test guard: restored {} to {}",
                self.path.display(),
                self.original.trim()
            );
        }
    }
}

fn read_only(path: &str) -> bool {
    let c = CString::new(path).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_flag & libc::ST_RDONLY != 0 }
}

/// Why the live test cannot run here, if it cannot; else the `disable` file.
fn live_target() -> Result<PathBuf, String> {
    if std::env::var("HOSTKNOB_LIVE").as_deref() != Ok("1") {
        return Err("HOSTKNOB_LIVE=1 is not set".into());
    }
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    if read_only("/sys") {
        return Err("/sys is read-only".into());
    }
    let dir = Path::new("/sys/devices/system/cpu/cpu1/cpuidle");
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let state = entry.map_err(|e| e.to_string())?.path();
        let name = std::fs::read_to_string(state.join("name")).unwrap_or_default();
        if name.trim() == "haltpoll idle" {
            return Ok(state.join("disable"));
        }
    }
    Err("CPU 1 has no `haltpoll idle` state".into())
}

/// Both tests write the same file: one at a time.
static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

const LIVE_KNOB: (&str, &str) = (
    "live-haltpoll",
    "persistence: runtime\nkind: cpuidle-state\ntarget:\n  cpus: 1\n  states: {names: [haltpoll idle]}\nset: disabled\n\
     verify: {probe: wakeup, expect: p50 lower by at least 20 µs}\n",
);

#[test]
fn live_verify_of_haltpoll_idle_on_cpu1_leaves_the_host_as_found() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let disable = match live_target() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("live test skipped: {why}");
            return;
        }
    };
    let original = std::fs::read_to_string(&disable).unwrap();
    let _guard = Restore {
        path: disable.clone(),
        original: original.clone(),
    };
    let state = tempfile::tempdir().unwrap();
    let m = knobs(&[LIVE_KNOB]);
    let o = run(
        Path::new("/"),
        m.path(),
        &[
            "--state-dir",
            state.path().to_str().unwrap(),
            "--host",
            "live",
            "--format",
            "json",
            "verify",
            "live-haltpoll",
            "--rounds",
            "2",
            "--settle",
            "200ms",
            "--",
            "--samples",
            "40",
            "--gap-us",
            "1000..5000",
            "--sleeper-cpu",
            "1",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    eprintln!("live verify: {}", v["verdict"]);
    assert_eq!(v["restored"], true);
    assert_eq!(
        std::fs::read_to_string(&disable).unwrap().trim(),
        original.trim(),
        "the host is as found"
    );
    assert!(journal_of(state.path()).is_empty());
    assert_eq!(v["analysis"]["applied"]["samples"], 80);
}

#[test]
fn live_apply_disables_haltpoll_idle_on_cpu1_and_revert_restores_it() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let disable = match live_target() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("live test skipped: {why}");
            return;
        }
    };
    let original = std::fs::read_to_string(&disable).unwrap();
    if original.trim() != "0" {
        eprintln!(
            "live test skipped: {} is {} already; nothing to apply",
            disable.display(),
            original.trim()
        );
        return;
    }
    let _guard = Restore {
        path: disable.clone(),
        original: original.clone(),
    };
    let state = tempfile::tempdir().unwrap();
    let m = knobs(&[LIVE_KNOB]);
    let state_dir = state.path().to_str().unwrap();
    let live = |args: &[&str]| {
        let mut all = vec!["--state-dir", state_dir, "--host", "live"];
        all.extend_from_slice(args);
        run(Path::new("/"), m.path(), &all)
    };
    let applied = ok(&live(&["apply", "live-haltpoll"]));
    assert!(applied.contains("wrote and read back 1 file"), "{applied}");
    assert_eq!(std::fs::read_to_string(&disable).unwrap().trim(), "1");
    let j = journal_of(state.path());
    assert_eq!(j.len(), 1);
    assert_eq!(j[0]["path"], disable.to_str().unwrap());
    assert_eq!(j[0]["before"], "0");

    let reverted = ok(&live(&["revert", "--all"]));
    assert!(
        reverted.contains("restored and read back 1 file"),
        "{reverted}"
    );
    assert_eq!(
        std::fs::read_to_string(&disable).unwrap().trim(),
        original.trim()
    );
    assert!(journal_of(state.path()).is_empty());
}

fn journal_of(state: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(state.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
