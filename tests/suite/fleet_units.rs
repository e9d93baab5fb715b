//! Issue 47 item 1: the units run hostknob in the host's network namespace.
//! `PrivateNetwork=yes` gave them a namespace of their own, where the global
//! `net.core` sysctls do not exist (net/core/sysctl_net_core.c registers
//! `netdev_rss_key`, `busy_poll`, `netdev_budget`, ... for init_net only) and
//! per-namespace ones are a throwaway copy. These tests run each unit's
//! `ExecStart` in the namespace the unit gives it (support/units.rs) on this
//! host's real /proc/sys, read-only: audit, and apply `--dry-run`. The live
//! suite (tests/live/units.rs) applies for real and restores.

use std::process::Command;

use crate::support::*;

const UNITS: [&str; 2] = ["hostknob-audit.service", "hostknob-apply.service"];
const BUSY_POLL: &str = "/proc/sys/net/core/busy_poll";

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `systemd-analyze security --offline=yes UNIT`'s overall exposure.
fn exposure(unit: &str) -> Option<f64> {
    if !has("systemd-analyze") {
        eprintln!("systemd-analyze not installed (Debian package systemd): {unit} is not scored");
        return None;
    }
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(repo().join("dist/systemd").join(unit))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let score = text
        .lines()
        .find_map(|l| l.split(&format!("{unit}: ")).nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok());
    Some(score.unwrap_or_else(|| panic!("no overall exposure for {unit}:\n{text}")))
}

#[test]
fn the_units_share_the_hosts_network_namespace_without_ip_and_score_at_most_2() {
    for name in UNITS {
        let unit = unit_text(name);
        assert!(
            unit_settings(&unit, "PrivateNetwork")
                .iter()
                .all(|v| !["yes", "true", "1", "on"].contains(&v.as_str())),
            "{name} sets PrivateNetwork: net.core sysctls do not exist there"
        );
        // Sockets are restricted instead: no IP, netlink or packet socket.
        let families = unit_settings(&unit, "RestrictAddressFamilies");
        assert_eq!(families, ["AF_UNIX"], "{name}");
        assert_eq!(unit_settings(&unit, "IPAddressDeny"), ["any"], "{name}");
        if let Some(score) = exposure(name) {
            assert!(score <= 2.0, "{name}: exposure {score}");
        }
    }
    // The Ansible role installs the same files.
    for name in UNITS {
        let role = repo()
            .join("ansible/ansible_collections/hostknob/hostknob/roles/install/files")
            .join(name);
        assert_eq!(std::fs::read_to_string(role).unwrap(), unit_text(name));
    }
}

/// A `net.core.busy_poll` knob, persisted (so `apply --boot` takes it), set
/// to a value the host does not hold.
fn busy_poll_manifest() -> Option<(tempfile::TempDir, String, String)> {
    let Ok(now) = std::fs::read_to_string(BUSY_POLL) else {
        eprintln!("{BUSY_POLL} is not in this test's network namespace: not checked");
        return None;
    };
    let now = now.trim().to_string();
    let want = if now == "50" { "51" } else { "50" }.to_string();
    let m = knobs(&[(
        "net-busy-poll",
        &format!(
            "kind: sysctl\ntarget: {{name: net.core.busy_poll}}\nset: {want}\npersistence: sysctl.d\n"
        ),
    )]);
    Some((m, now, want))
}

/// The unit's `ExecStart` on this host as the unit runs it, with `extra`
/// and a runtime and a state directory of its own (returned, still alive).
fn run_unit(
    name: &str,
    m: &std::path::Path,
    extra: &[&str],
) -> (std::process::Output, tempfile::TempDir, tempfile::TempDir) {
    let runtime = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut args = extra.to_vec();
    args.extend([
        "--state-dir",
        state.path().to_str().unwrap(),
        "--host",
        "live",
    ]);
    let o = exec_start_as_the_unit_runs_it(&unit_text(name), m, runtime.path(), &args)
        .output()
        .unwrap();
    (o, runtime, state)
}

#[test]
fn a_net_core_knob_is_audited_as_the_audit_unit_runs_it() {
    let Some((m, now, want)) = busy_poll_manifest() else {
        return;
    };
    let (o, runtime, _state) = run_unit("hostknob-audit.service", m.path(), &["--format", "json"]);
    // Drift (exit 2) is the finding; exit 1 was "no sysctl net.core.busy_poll".
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let prom = std::fs::read_to_string(runtime.path().join("hostknob.prom")).unwrap();
    assert!(prom.contains("\nhostknob_audit_success 1\n"), "{prom}");
    assert!(
        prom.contains(
            "hostknob_knob_status{knob=\"net-busy-poll\",kind=\"sysctl\",status=\"drift\"} 1"
        ),
        "{prom}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let k = knob(&report, "net-busy-poll");
    assert_eq!(k["detail"], format!("is {now}, should be {want}"), "{k:#}");
    assert_eq!(std::fs::read_to_string(BUSY_POLL).unwrap().trim(), now);
}

#[test]
fn a_net_core_knob_is_planned_as_the_apply_unit_runs_it() {
    let Some((m, now, want)) = busy_poll_manifest() else {
        return;
    };
    let (o, _runtime, state) = run_unit("hostknob-apply.service", m.path(), &["--dry-run"]);
    let text = ok(&o);
    assert!(text.contains(BUSY_POLL) && text.contains(&want), "{text}");
    // --dry-run wrote nothing.
    assert_eq!(std::fs::read_to_string(BUSY_POLL).unwrap().trim(), now);
    assert!(std::fs::read_dir(state.path()).unwrap().next().is_none());
}

/// Issue 47 item 9: the boot unit starts after what it meets at boot
/// (irqbalance's first placement, tuned, what runs before networking), not
/// after the deprecated systemd-udev-settle.service; a broken manifest at
/// boot fails the unit naming file and line, and nothing waits on it.
#[test]
fn the_units_are_ordered_against_what_they_meet_at_boot() {
    let after = |unit: &str| -> Vec<String> {
        unit_settings(unit, "After")
            .iter()
            .flat_map(|l| l.split_whitespace().map(str::to_string))
            .collect()
    };
    let apply = unit_text("hostknob-apply.service");
    let audit = unit_text("hostknob-audit.service");
    for d in ["irqbalance.service", "tuned.service", "network-pre.target"] {
        assert!(after(&apply).iter().any(|a| a == d), "{d}:\n{apply}");
    }
    assert!(
        after(&audit).iter().any(|a| a == "hostknob-apply.service"),
        "{audit}"
    );
    for (name, unit) in [("apply", &apply), ("audit", &audit)] {
        assert!(
            !after(unit)
                .iter()
                .any(|a| a == "systemd-udev-settle.service"),
            "{name}: systemd-udev-settle.service is deprecated"
        );
        // Nothing at boot requires it or waits for it but multi-user.target.
        assert!(unit_settings(unit, "RequiredBy").is_empty(), "{name}");
        assert!(
            unit_settings(unit, "Before")
                .iter()
                .all(|b| b == "multi-user.target"),
            "{name}"
        );
        assert_eq!(unit_settings(unit, "TimeoutStartSec").len(), 1, "{name}");
    }
    // A broken manifest: the unit's command fails naming file and line.
    let m = tempfile::tempdir().unwrap();
    std::fs::write(
        m.path().join("bad.yaml"),
        "id: x\ntitle: t\nkind: sysctl\ntarget: {name: vm.swappiness\nset: 1\n",
    )
    .unwrap();
    let (o, _runtime, _state) = run_unit("hostknob-apply.service", m.path(), &["--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let want = format!("{}:", m.path().join("bad.yaml").display());
    assert!(err(&o).contains(&want), "{}", err(&o));
}
