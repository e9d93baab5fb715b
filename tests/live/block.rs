//! Live block devices and bounds (issue 46 items 1 and 2): the `block` kind
//! on a loop device this test attaches over a file in a temporary directory
//! (never the machine's own disks; detached on every path, a panic
//! included), and `at-least` on `net.core.somaxconn`, a guard writing the
//! value found back on every path.

use std::path::Path;
use std::process::Command;

use super::support::*;

/// A loop device over a file of its own; detached when dropped.
struct Loop {
    dev: String,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn attach() -> Result<Loop, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk.img");
        std::fs::File::create(&file)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&file)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup -f --show: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(Loop { dev, _dir: dir })
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn queue(&self, file: &str) -> String {
        std::fs::read_to_string(format!("/sys/block/{}/queue/{file}", self.name()))
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let ok = Command::new("losetup")
            .args(["-d", &self.dev])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("live block test: could not detach {}", self.dev);
        }
    }
}

fn bracketed(text: &str) -> String {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or("")
        .to_string()
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_block_scheduler_read_ahead_and_nr_requests_on_a_loop_device_apply_audit_and_revert() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let lo = match Loop::attach() {
        Ok(l) => l,
        Err(why) => {
            eprintln!("live test skipped: no loop device to make ({why})");
            return;
        }
    };
    let dev = lo.name().to_string();
    let sched_text = lo.queue("scheduler");
    let found = (
        bracketed(&sched_text),
        lo.queue("read_ahead_kb"),
        lo.queue("nr_requests"),
    );
    // Another scheduler the device offers; none offered but one: skipped.
    let Some(other) = sched_text
        .split_whitespace()
        .map(|w| w.trim_matches(['[', ']']))
        .find(|w| *w != found.0)
        .map(String::from)
    else {
        eprintln!("live test skipped: {dev} offers one scheduler only ({sched_text})");
        return;
    };
    let ra: u64 = found.1.parse::<u64>().unwrap() + 512;
    let nr = if found.2 == "64" { "32" } else { "64" };
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap();
    let m = knobs(&[(
        "live-loop",
        &format!(
            "persistence: runtime\nkind: block\ntarget: {{name: {dev}}}\n\
             set: {{scheduler: {other}, read_ahead_kb: {{at-least: {ra}}}, nr_requests: {nr}}}\n"
        ),
    )]);
    let root = Path::new("/");
    let applied = ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "apply", "live-loop"],
    ));
    assert_eq!(bracketed(&lo.queue("scheduler")), other, "{applied}");
    assert_eq!(lo.queue("read_ahead_kb"), ra.to_string());
    assert_eq!(
        lo.queue("nr_requests"),
        nr,
        "written after the scheduler, which resets it"
    );
    let (report, _) = audit_json(root, m.path(), None);
    assert_eq!(
        knob(&report, "live-loop")["status"],
        "unpersisted",
        "{report:#}"
    );
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "revert", "live-loop"],
    ));
    let now = (
        bracketed(&lo.queue("scheduler")),
        lo.queue("read_ahead_kb"),
        lo.queue("nr_requests"),
    );
    assert_eq!(now, found, "{dev} restored");
    eprintln!("live block {dev}: {found:?} -> ({other}, {ra}, {nr}) -> {now:?}");
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_at_least_on_somaxconn_writes_only_above_the_value_and_reverts_to_it() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let path = "/proc/sys/net/core/somaxconn";
    let _guard = super::Restore::of(path);
    let read = || std::fs::read_to_string(path).unwrap().trim().to_string();
    let found: i64 = read().parse().unwrap();
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap();
    let root = Path::new("/");
    let knob_at = |n: i64| {
        knobs(&[(
            "live-backlog",
            &format!(
                "persistence: runtime\nkind: sysctl\ntarget: {{name: net.core.somaxconn}}\nset: {{at-least: {n}}}\n"
            ),
        )])
    };
    let below = knob_at(found - 1);
    let out = ok(&run(
        root,
        below.path(),
        &["--state-dir", st, "apply", "live-backlog"],
    ));
    assert!(out.contains("already in effect"), "{out}");
    assert_eq!(
        read(),
        found.to_string(),
        "a bound below the value writes nothing"
    );
    let above = knob_at(found + 1024);
    ok(&run(
        root,
        above.path(),
        &["--state-dir", st, "apply", "live-backlog"],
    ));
    assert_eq!(read(), (found + 1024).to_string());
    let (report, _) = audit_json(root, above.path(), None);
    assert_eq!(
        knob(&report, "live-backlog")["status"],
        "unpersisted",
        "in effect: {report:#}"
    );
    ok(&run(
        root,
        above.path(),
        &["--state-dir", st, "revert", "live-backlog"],
    ));
    assert_eq!(read(), found.to_string(), "reverted to the value found");
    eprintln!("live somaxconn: {found} -> {} -> {}", found + 1024, read());
}
