//! Issue 25 items 4 and 12: what ships beside the binary for a fleet. The
//! audit unit's sandbox (scored by `systemd-analyze security`) and the step
//! that publishes its textfile into `$HOSTKNOB_TEXTFILE_DIR`; the apply
//! unit's order after other tuning daemons; the Prometheus rules (run by
//! `promtool test rules`) and the Grafana dashboard, each querying only
//! metrics hostknob writes.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::*;

const VM: &str = "fc-haltpoll-2cpu";
const THP: &str = "id: thp-m\ntitle: t\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n\
                   hosts: \"*\"\npersistence: runtime\nwhy: w\n";

fn dist(rel: &str) -> std::path::PathBuf {
    repo().join("dist").join(rel)
}

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The values of `Key=` in a unit, in order.
fn settings(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

fn audit_unit() -> String {
    std::fs::read_to_string(dist("systemd/hostknob-audit.service")).unwrap()
}

#[test]
fn the_audit_unit_is_sandboxed_for_reading_and_scores_at_most_2() {
    let unit = audit_unit();
    for (key, want) in [
        ("ProtectSystem", "strict"),
        ("ProtectKernelTunables", "yes"),
        ("NoNewPrivileges", "yes"),
        ("RestrictAddressFamilies", "AF_UNIX"),
        ("SystemCallArchitectures", "native"),
    ] {
        assert_eq!(settings(&unit, key), [want], "{key}");
    }
    // Reading other users' /proc/PID/environ and fd: these two, nothing else.
    assert_eq!(
        settings(&unit, "CapabilityBoundingSet"),
        ["CAP_DAC_READ_SEARCH CAP_SYS_PTRACE"]
    );
    let filters = settings(&unit, "SystemCallFilter");
    assert!(
        filters.contains(&"@system-service".to_string()),
        "{filters:?}"
    );
    assert!(
        filters
            .iter()
            .any(|f| f.starts_with('~') && f.contains("@privileged") && f.contains("@mount")),
        "{filters:?}"
    );
    // No write path but its own runtime directory, whatever the textfile directory.
    assert!(settings(&unit, "ReadWritePaths").is_empty(), "{unit}");
    assert_eq!(settings(&unit, "RuntimeDirectory"), ["hostknob-audit"]);
    let exec = settings(&unit, "ExecStart");
    assert_eq!(exec.len(), 1);
    assert!(
        exec[0].ends_with(" audit --textfile /run/hostknob-audit"),
        "{exec:?}"
    );

    assert_exposure_at_most_2("hostknob-audit.service");
}

/// `systemd-analyze security --offline=yes` scores the shipped unit at most 2.0.
fn assert_exposure_at_most_2(unit: &str) {
    if !has("systemd-analyze") {
        println!(
            "systemd-analyze not installed (Debian package systemd): the exposure score is not checked"
        );
        return;
    }
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(dist(&format!("systemd/{unit}")))
        .output()
        .unwrap();
    let text = format!("{}{}", out(&o), err(&o));
    let score: f64 = text
        .lines()
        .find_map(|l| l.split(&format!("{unit}: ")).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}"));
    assert!(score <= 2.0, "{unit}: exposure {score}:\n{text}");
}

/// Issue 35 item 6: the boot unit writes only what it must, applies only
/// persistent knobs each on its own, and cannot stall boot on a held lock.
#[test]
fn the_apply_unit_is_sandboxed_bounded_and_applies_persistent_knobs_only() {
    let unit = std::fs::read_to_string(dist("systemd/hostknob-apply.service")).unwrap();
    for (key, want) in [
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/var/lib/hostknob"),
        ("NoNewPrivileges", "yes"),
        ("RestrictAddressFamilies", "AF_UNIX"),
        ("CapabilityBoundingSet", "CAP_SYS_RAWIO"),
        ("TimeoutStartSec", "3min"),
    ] {
        assert_eq!(settings(&unit, key), [want], "{key}");
    }
    let exec = settings(&unit, "ExecStart");
    assert_eq!(exec.len(), 1);
    assert!(
        exec[0].ends_with(" apply --boot --wait --wait-limit 60s"),
        "{exec:?}"
    );
    // The package's README alone must not start it.
    assert!(settings(&unit, "ConditionPathIsDirectory").is_empty());
    assert!(!settings(&unit, "ConditionPathExistsGlob").is_empty());
    // The Ansible role installs the same file.
    let role = repo().join(
        "ansible/ansible_collections/hostknob/hostknob/roles/install/files/hostknob-apply.service",
    );
    assert_eq!(std::fs::read_to_string(role).unwrap(), unit);
    assert_exposure_at_most_2("hostknob-apply.service");
}

/// The `ExecStopPost=+/bin/sh -c '...'` script, with the runtime directory moved to `runtime`.
fn publish_script(runtime: &Path) -> String {
    let unit = audit_unit();
    let line = settings(&unit, "ExecStopPost");
    assert_eq!(line.len(), 1, "{line:?}");
    // `+`: outside the sandbox, the one place the textfile directory is writable.
    let body = line[0].strip_prefix("+/bin/sh -c '").unwrap();
    let body = body.strip_suffix('\'').unwrap();
    // systemd expands `$NAME` itself and turns `$$` into `$`: a bare `$`
    // left for the shell would reach it as an empty string.
    let bare = body.replace("$$", "");
    assert!(!bare.contains('$'), "a `$` systemd would expand: {body}");
    // `%` starts a specifier (`%s`: the user's shell) unless doubled.
    assert!(!body.replace("%%", "").contains('%'), "a specifier: {body}");
    body.replace("$$", "$")
        .replace("%%", "%")
        .replace("/run/hostknob-audit", runtime.to_str().unwrap())
}

fn publish(runtime: &Path, textfile_dir: &Path) -> std::process::Output {
    Command::new("/bin/sh")
        .args(["-c", &publish_script(runtime)])
        .env("HOSTKNOB_TEXTFILE_DIR", textfile_dir)
        .env_remove("SERVICE_RESULT")
        .output()
        .unwrap()
}

/// Issue 47 item 4: a hung audit is killed after TimeoutStartSec; the step
/// after it (systemd sets `$SERVICE_RESULT=timeout`) publishes success 0 and
/// the time, replacing the last green figures. Before, nothing was written
/// and only HostknobAuditStale saw it, after 77 minutes.
#[test]
fn a_hung_audit_is_killed_and_published_as_failed() {
    let unit = audit_unit();
    let limit = settings(&unit, "TimeoutStartSec");
    assert_eq!(limit.len(), 1, "no TimeoutStartSec in\n{unit}");
    let limit = humantime::parse_duration(&limit[0]).unwrap();
    assert!(limit <= std::time::Duration::from_secs(600), "{limit:?}");
    let runtime = tempfile::tempdir().unwrap();
    let textfile = tempfile::tempdir().unwrap();
    std::fs::write(
        textfile.path().join("hostknob.prom"),
        "hostknob_audit_success 1\n",
    )
    .unwrap();
    let o = Command::new("/bin/sh")
        .args(["-c", &publish_script(runtime.path())])
        .env("HOSTKNOB_TEXTFILE_DIR", textfile.path())
        .env("SERVICE_RESULT", "timeout")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let text = std::fs::read_to_string(textfile.path().join("hostknob.prom")).unwrap();
    assert!(text.contains("\nhostknob_audit_success 0\n"), "{text}");
    assert!(text.contains("(timeout)"), "{text}");
    let ts: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("hostknob_audit_timestamp_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - ts).abs() < 60.0, "{ts} vs {now}");
    if has("promtool") {
        let mut c = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}{}", out(&o), err(&o));
    }
}

#[test]
fn the_textfile_directory_of_a_drop_in_gets_the_audits_metrics_whole() {
    let root = corpus_host(VM);
    let m = manifest(&[("thp.yaml", THP)]);
    let runtime = tempfile::tempdir().unwrap();
    let textfile = tempfile::tempdir().unwrap();
    // Nothing written yet (the audit died before writing): nothing published, no failure.
    let o = publish(runtime.path(), textfile.path());
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(std::fs::read_dir(textfile.path()).unwrap().count(), 0);
    // The unit's ExecStart, on a capture.
    let a = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
        "--textfile",
        runtime.path().to_str().unwrap(),
    ]);
    assert_ne!(a.status.code(), Some(1), "{}", err(&a));
    let written = std::fs::read(runtime.path().join("hostknob.prom")).unwrap();
    let o = publish(runtime.path(), textfile.path());
    assert!(o.status.success(), "{}", err(&o));
    let names: Vec<String> = std::fs::read_dir(textfile.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["hostknob.prom"], "no temporary file left");
    let published = textfile.path().join("hostknob.prom");
    assert_eq!(std::fs::read(&published).unwrap(), written);
    // node_exporter runs as its own user: the file must be readable by it.
    let mode = std::fs::metadata(&published).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    // A drop-in naming a directory that does not exist: the unit fails, saying so.
    let o = publish(runtime.path(), &textfile.path().join("missing"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("missing: no such directory"),
        "{}",
        err(&o)
    );
}

#[test]
fn apply_at_boot_runs_after_the_tuning_daemons_it_would_race() {
    let unit = std::fs::read_to_string(dist("systemd/hostknob-apply.service")).unwrap();
    let after: BTreeSet<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("After="))
        .flat_map(str::split_whitespace)
        .collect();
    for d in [
        "tuned.service",
        "power-profiles-daemon.service",
        "tlp.service",
    ] {
        assert!(after.contains(d), "{d} not in After= of\n{unit}");
    }
    if !has("systemd-analyze") {
        println!(
            "systemd-analyze not installed (Debian package systemd): the units are not verified"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for u in [
        "hostknob-apply.service",
        "hostknob-audit.service",
        "hostknob-audit.timer",
    ] {
        let text = std::fs::read_to_string(dist(&format!("systemd/{u}"))).unwrap();
        std::fs::write(dir.path().join(u), text.replace("/usr/bin/hostknob", bin())).unwrap();
    }
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args([
            "./hostknob-apply.service",
            "./hostknob-audit.service",
            "./hostknob-audit.timer",
        ])
        .current_dir(dir.path())
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
        .output()
        .unwrap();
    let said = err(&o);
    let about_ours: Vec<&str> = said.lines().filter(|l| l.contains("hostknob")).collect();
    assert!(o.status.success() && about_ours.is_empty(), "{said}");
}

/// Every metric family hostknob writes: a clean audit of a host with
/// competing managers, and a failed one.
fn emitted() -> BTreeSet<String> {
    let (_t, root) = copy_host(VM);
    write_files(
        &root,
        &[
            (
                "etc/systemd/system/multi-user.target.wants/tuned.service",
                "[Unit]\n",
            ),
            ("etc/tuned/active_profile", "latency-performance\n"),
        ],
    );
    let m = manifest(&[("thp.yaml", THP)]);
    let mut text = String::new();
    for manifest in [m.path().to_path_buf(), m.path().join("missing")] {
        let o = hostknob(&[
            "--root",
            root.to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
            "audit",
            "--format",
            "prometheus",
        ]);
        text.push_str(&out(&o));
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        m.path().join("missing").to_str().unwrap(),
        "audit",
        "--textfile",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    text.push_str(&std::fs::read_to_string(tmp.path().join("hostknob.prom")).unwrap());
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

fn queried(exprs: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for e in exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("hostknob_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    names
}

fn strings_under(v: &serde_json::Value, key: &str, into: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(s) if k == key => into.push(s.clone()),
                    _ => strings_under(x, key, into),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, into)),
        _ => {}
    }
}

#[test]
fn the_rules_and_the_dashboard_query_only_metrics_hostknob_writes() {
    let have = emitted();
    for must in [
        "hostknob_audit_success",
        "hostknob_build_info",
        "hostknob_manifest_info",
        "hostknob_competing_manager",
        "hostknob_audit_timestamp_seconds",
    ] {
        assert!(have.contains(must), "{must} not written: {have:?}");
    }
    let board: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist("grafana/hostknob.json")).unwrap())
            .expect("dist/grafana/hostknob.json is JSON");
    assert!(board["panels"].as_array().is_some_and(|p| p.len() >= 5));
    let mut exprs = Vec::new();
    strings_under(&board, "expr", &mut exprs);
    strings_under(&board, "definition", &mut exprs);
    let on_board = queried(&exprs);
    assert!(on_board.len() >= 8, "{on_board:?}");
    let unknown: Vec<_> = on_board.difference(&have).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries {unknown:?}, not written by hostknob"
    );

    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(dist("prometheus/hostknob.rules.yml")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = rules["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["expr"].as_str().unwrap().to_string())
        .collect();
    let in_rules = queried(&exprs);
    let unknown: Vec<_> = in_rules.difference(&have).collect();
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("node_textfile_scrape_error")),
        "no rule on node_exporter's textfile errors"
    );
    assert!(
        unknown.is_empty(),
        "the rules query {unknown:?}, not written by hostknob"
    );
    for needed in [
        "hostknob_knob_status",
        "hostknob_audit_success",
        "hostknob_audit_timestamp_seconds",
    ] {
        assert!(in_rules.contains(needed), "{needed}: {in_rules:?}");
    }
}

#[test]
fn the_dashboard_aggregates_so_5000_hosts_stay_readable() {
    // Issue 35 item 5: panels drew one line per host and filtered on a host
    // label the metrics no longer carry.
    let board: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist("grafana/hostknob.json")).unwrap())
            .unwrap();
    let mut exprs = Vec::new();
    strings_under(&board["panels"], "expr", &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for e in &exprs {
        assert!(
            ["count", "sum", "max", "quantile", "topk", "sort_desc"]
                .iter()
                .any(|a| e.starts_with(&format!("{a}(")) || e.starts_with(&format!("{a} by"))),
            "a panel plots per-host series: {e}"
        );
        assert!(!e.contains("host=~"), "no host label to filter on: {e}");
    }
    let mut var = Vec::new();
    strings_under(&board["templating"], "definition", &mut var);
    assert_eq!(
        var,
        ["label_values(hostknob_audit_timestamp_seconds, instance)"]
    );
}

#[test]
fn the_alert_rules_pass_their_promtool_tests() {
    if !has("promtool") {
        println!(
            "promtool not installed (Debian package prometheus; .ci/run installs it): the alert rules are not tested"
        );
        return;
    }
    let o = Command::new("promtool")
        .args(["test", "rules", "hostknob.rules.test.yml"])
        .current_dir(dist("prometheus"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("SUCCESS"), "{}", out(&o));
    let o = Command::new("promtool")
        .args(["check", "rules", "hostknob.rules.yml"])
        .current_dir(dist("prometheus"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", out(&o), err(&o));
}

#[test]
fn the_audit_unit_waits_for_a_knob_file_and_the_readme_names_the_ledgers_home() {
    // Issue 35 item 9: the package's README made the directory condition
    // true, so the unit failed until knobs arrived; the README said the
    // ledger was written into the manifest directory.
    let unit = audit_unit();
    assert!(
        settings(&unit, "ConditionPathIsDirectory").is_empty(),
        "{unit}"
    );
    let globs = settings(&unit, "ConditionPathExistsGlob");
    assert_eq!(
        globs,
        [
            "|/etc/hostknob/manifest/*.yaml",
            "|/etc/hostknob/manifest/*.yml"
        ]
    );
    // The globs as the shell (and systemd, fnmatch) reads them: a directory
    // holding only the README matches neither; one knob file matches.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(dist("etc/manifest-README"), dir.path().join("README")).unwrap();
    let matches = || {
        let script: Vec<String> = globs
            .iter()
            .map(|g| {
                let g = g
                    .trim_start_matches('|')
                    .replace("/etc/hostknob/manifest", "$D");
                format!("for f in {g}; do [ -e \"$f\" ] && echo \"$f\"; done")
            })
            .collect();
        let o = Command::new("sh")
            .arg("-c")
            .arg(script.join("; "))
            .env("D", dir.path())
            .output()
            .unwrap();
        out(&o).lines().count()
    };
    assert_eq!(matches(), 0);
    std::fs::write(dir.path().join("thp.yaml"), THP).unwrap();
    assert_eq!(matches(), 1);
    let readme = std::fs::read_to_string(dist("etc/manifest-README")).unwrap();
    assert!(readme.contains("/var/lib/hostknob/ledger.yaml"), "{readme}");
    assert!(!readme.contains("is written here"), "{readme}");
    // The role installs the same unit.
    assert_eq!(
        std::fs::read_to_string(repo().join(
            "ansible/ansible_collections/hostknob/hostknob/roles/install/files/hostknob-audit.service"
        ))
        .unwrap(),
        unit
    );
}
