//! The shipped systemd units as they run hostknob, without systemd as PID 1:
//! their settings, and their `ExecStart` in the network namespace the unit
//! gives it (`unshare --net` for `PrivateNetwork=yes`, the host's otherwise).
//! Only the namespace is reproduced; the other sandbox settings are checked
//! on the unit's text and scored by `systemd-analyze security`.

use std::path::Path;
use std::process::Command;

use super::run::{bin, isolate, repo};

pub fn unit_text(name: &str) -> String {
    std::fs::read_to_string(repo().join("dist/systemd").join(name)).unwrap()
}

/// The values of `Key=` in a unit, in order.
pub fn unit_settings(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

/// The unit's `ExecStart` (hostknob's arguments), with the manifest, the
/// runtime directory and the binary replaced, and `extra` appended, run in
/// the network namespace the unit sets up. Not started.
pub fn exec_start_as_the_unit_runs_it(
    unit: &str,
    manifest: &Path,
    runtime: &Path,
    extra: &[&str],
) -> Command {
    let exec = unit_settings(unit, "ExecStart");
    assert_eq!(exec.len(), 1, "{unit}");
    let mut words = exec[0].split_whitespace();
    assert_eq!(words.next(), Some("/usr/bin/hostknob"), "{unit}");
    let args: Vec<String> = words
        .map(|w| match w {
            "/etc/hostknob/manifest" => manifest.display().to_string(),
            "/run/hostknob-audit" => runtime.display().to_string(),
            w => w.to_string(),
        })
        .collect();
    let private = unit_settings(unit, "PrivateNetwork")
        .last()
        .is_some_and(|v| ["yes", "true", "1", "on"].contains(&v.as_str()));
    let mut c = if private {
        let mut c = Command::new("unshare");
        // A new network namespace needs CAP_SYS_ADMIN; unprivileged, a user
        // namespace gives it (the sysctls it sees are the same).
        if unsafe { libc::geteuid() } != 0 {
            c.args(["--user", "--map-root-user"]);
        }
        c.args(["--net", "--"]).arg(bin());
        c
    } else {
        Command::new(bin())
    };
    c.args(&args).args(extra);
    isolate(&mut c);
    c
}
