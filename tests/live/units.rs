//! Live (issue 47 item 1): the apply unit's `ExecStart`, in the network
//! namespace the unit gives it (support/units.rs), writes a `net.core`
//! sysctl that exists only in the host's namespace; revert restores it. The
//! guard writes the value read before the test back on every path.

use std::path::Path;

use super::support::*;
use super::{LIVE, Restore, live_allowed};

const BUSY_POLL: &str = "/proc/sys/net/core/busy_poll";

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_apply_unit_writes_net_core_busy_poll_in_the_hosts_namespace() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live_allowed().unwrap();
    let _guard = Restore::of(BUSY_POLL);
    let now = std::fs::read_to_string(BUSY_POLL)
        .unwrap()
        .trim()
        .to_string();
    let want = if now == "50" { "51" } else { "50" };
    let m = knobs(&[(
        "net-busy-poll",
        &format!(
            "kind: sysctl\ntarget: {{name: net.core.busy_poll}}\nset: {want}\npersistence: sysctl.d\n"
        ),
    )]);
    let sysctl_d = || std::fs::read_dir("/etc/sysctl.d").map(|d| d.count()).ok();
    let before = sysctl_d();
    let runtime = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let unit = unit_text("hostknob-apply.service");
    let o = exec_start_as_the_unit_runs_it(
        &unit,
        m.path(),
        runtime.path(),
        &["--state-dir", state_dir, "--host", "live"],
    )
    .output()
    .unwrap();
    ok(&o);
    assert_eq!(
        std::fs::read_to_string(BUSY_POLL).unwrap().trim(),
        want,
        "{BUSY_POLL} as the kernel reads it back"
    );
    // --boot applies; persisting is `persist`'s: nothing under /etc.
    assert_eq!(sysctl_d(), before);
    ok(&run(
        Path::new("/"),
        m.path(),
        &[
            "--state-dir",
            state_dir,
            "--host",
            "live",
            "revert",
            "--all",
        ],
    ));
    assert_eq!(std::fs::read_to_string(BUSY_POLL).unwrap().trim(), now);
}
