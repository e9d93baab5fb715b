//! Issue 25 items 5 and 12: every audit says when it ran, with which
//! hostknob and against which manifest revision (git commit of a checkout,
//! else a SHA-256 checked here against coreutils' `sha256sum`); the metrics
//! carry success, build and manifest info and the competing managers, and a
//! failed audit replaces the last green figures with `hostknob_audit_success 0`.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::*;

const VM: &str = "fc-haltpoll-2cpu";
const VM_HOST: &str = "vm";
const THP: &str = "id: thp-m\ntitle: t\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n\
                   hosts: \"*\"\npersistence: runtime\nwhy: w\n";

fn run_on(root: &Path, m: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        m.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    hostknob(&all)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}: {}", err(&o));
    out(&o).trim().to_string()
}

/// The documented hash, computed by coreutils rather than by hostknob.
fn sha256sum_of(files: &[(&str, &str)]) -> String {
    let mut sorted = files.to_vec();
    sorted.sort();
    let mut data = Vec::new();
    for (name, text) in sorted {
        data.extend_from_slice(name.as_bytes());
        data.push(0);
        data.extend_from_slice(text.len().to_string().as_bytes());
        data.push(0);
        data.extend_from_slice(text.as_bytes());
    }
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils)");
    c.stdin.take().unwrap().write_all(&data).unwrap();
    let o = c.wait_with_output().unwrap();
    format!("sha256:{}", out(&o).split_whitespace().next().unwrap())
}

#[test]
fn the_audit_says_when_with_which_hostknob_and_which_manifest_revision() {
    let root = corpus_host(VM);
    let more = THP.replace("thp-m", "thp-d").replace("enabled", "defrag");
    let files = [("thp.yaml", THP), ("sub/more.yml", more.as_str())];
    let m = manifest(&files);
    let before = std::time::SystemTime::now();
    let (a, code) = audit_json(&root, m.path(), None);
    assert_ne!(code, 1, "{a}");
    assert_eq!(a["hostknob_version"], env!("CARGO_PKG_VERSION"));
    let at = humantime::parse_rfc3339(a["audited_at"].as_str().unwrap()).unwrap();
    let lag = at.duration_since(before - std::time::Duration::from_secs(2));
    assert!(lag.is_ok_and(|d| d.as_secs() < 600), "{}", a["audited_at"]);
    assert_eq!(a["manifest_revision"], sha256sum_of(&files), "{a:#}");
    // Any edit to a knob file is a new revision; the ledger's directory is not part of it.
    write_files(m.path(), &[("thp.yaml", &THP.replace("why: w", "why: x"))]);
    let (b, _) = audit_json(&root, m.path(), None);
    assert_ne!(a["manifest_revision"], b["manifest_revision"]);
    write_files(m.path(), &[("ledger/other-host.yaml", "")]);
    let (c, _) = audit_json(&root, m.path(), None);
    assert_eq!(b["manifest_revision"], c["manifest_revision"]);
}

#[test]
fn a_manifest_checkout_is_named_by_its_git_commit_read_without_git() {
    let root = corpus_host(VM);
    let m = manifest(&[("thp.yaml", THP)]);
    git(m.path(), &["init", "-q"]);
    git(m.path(), &["add", "."]);
    git(m.path(), &["commit", "-qm", "one"]);
    let head = git(m.path(), &["rev-parse", "HEAD"]);
    let (a, _) = audit_json(&root, m.path(), None);
    assert_eq!(a["manifest_revision"], format!("git:{head}"));
    // Refs packed (as after `git gc`), and a detached HEAD.
    git(m.path(), &["pack-refs", "--all"]);
    assert!(!m.path().join(".git/refs/heads/main").exists());
    let (a, _) = audit_json(&root, m.path(), None);
    assert_eq!(a["manifest_revision"], format!("git:{head}"));
    write_files(m.path(), &[("thp.yaml", &THP.replace("why: w", "why: x"))]);
    git(m.path(), &["commit", "-qam", "two"]);
    let second = git(m.path(), &["rev-parse", "HEAD"]);
    git(m.path(), &["checkout", "-q", &head]);
    let (a, _) = audit_json(&root, m.path(), None);
    assert_eq!(a["manifest_revision"], format!("git:{head}"));
    // A linked worktree: `.git` is a file, the branch ref lives in the common dir.
    let wt = tempfile::tempdir().unwrap();
    let wt_path = wt.path().join("wt");
    git(
        m.path(),
        &["worktree", "add", "-q", wt_path.to_str().unwrap(), "main"],
    );
    assert!(wt_path.join(".git").is_file());
    let (a, _) = audit_json(&root, &wt_path, None);
    assert_eq!(a["manifest_revision"], format!("git:{second}"));
    // A manifest inside a checkout, not one itself (as /etc under etckeeper): the hash.
    let inner = manifest(&[("m/thp.yaml", THP)]);
    git(inner.path(), &["init", "-q"]);
    let (a, _) = audit_json(&root, &inner.path().join("m"), None);
    assert_eq!(a["manifest_revision"], sha256sum_of(&[("thp.yaml", THP)]));
}

#[test]
fn metrics_carry_success_build_and_manifest_info_and_a_failure_replaces_them() {
    let root = corpus_host(VM);
    let m = manifest(&[("thp.yaml", THP)]);
    let text = tempfile::tempdir().unwrap();
    let t = text.path().to_str().unwrap();
    let o = run_on(&root, m.path(), &["audit", "--textfile", t]);
    assert_ne!(o.status.code(), Some(1), "{}", err(&o));
    let prom = std::fs::read_to_string(text.path().join("hostknob.prom")).unwrap();
    let rev = sha256sum_of(&[("thp.yaml", THP)]);
    for line in [
        "hostknob_audit_success 1".to_string(),
        format!(
            "hostknob_build_info{{host=\"{VM_HOST}\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
        format!("hostknob_manifest_info{{revision=\"{rev}\"}} 1"),
    ] {
        assert!(prom.lines().any(|l| l == line), "{line} not in\n{prom}");
    }
    assert!(prom.contains("# TYPE hostknob_audit_success gauge"));
    assert!(prom.contains("hostknob_knob_status{"));
    // A knob file the loader refuses: exit 1, and the textfile no longer holds the green figures.
    write_files(m.path(), &[("bad.yaml", "id: [\n")]);
    let o = run_on(&root, m.path(), &["audit", "--textfile", t]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let after = std::fs::read_to_string(text.path().join("hostknob.prom")).unwrap();
    assert!(
        after.lines().any(|l| l == "hostknob_audit_success 0"),
        "{after}"
    );
    assert!(after.contains("hostknob_build_info{"), "{after}");
    // Which review failed: the revision of the files as they are now.
    assert!(after.contains("hostknob_manifest_info{"), "{after}");
    assert!(!after.contains(&rev), "{after}");
    assert!(!after.contains("hostknob_knob_status"), "{after}");
    assert!(!after.contains("hostknob_audit_failing"), "{after}");
}

#[test]
fn an_unreadable_knob_is_an_audit_error_in_the_metrics() {
    // Issue 35 item 4: audit exited 1 while the textfile said success 1, so
    // no rule fired.
    let (_t, root) = copy_host(VM);
    std::fs::write(
        root.join("sys/kernel/mm/transparent_hugepage/enabled"),
        b"always [madv\xffise] never\n",
    )
    .unwrap();
    let m = manifest(&[("thp.yaml", THP)]);
    let text = tempfile::tempdir().unwrap();
    let o = run_on(
        &root,
        m.path(),
        &["audit", "--textfile", text.path().to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let prom = std::fs::read_to_string(text.path().join("hostknob.prom")).unwrap();
    // Issue 47 item 2: success means the audit ran (every other knob is
    // exported); the error is in the exit code, hostknob_audit_error and the
    // knob's own status (HostknobKnobUnreadable).
    for line in [
        "hostknob_audit_success 1",
        "hostknob_audit_error 1",
        "hostknob_audit_exit_code 1",
        "hostknob_knob_status{knob=\"thp-m\",kind=\"thp\",status=\"unreadable\"} 1",
    ] {
        assert!(prom.lines().any(|l| l == line), "{line} not in\n{prom}");
    }
}

/// tuned with a profile, power-profiles-daemon's state, saptune's applied notes.
fn managed_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host(VM);
    let wants = "etc/systemd/system/multi-user.target.wants";
    write_files(
        &root,
        &[
            (&format!("{wants}/tuned.service") as &str, "[Unit]\n"),
            ("etc/tuned/active_profile", "throughput-performance\n"),
            (
                &format!("{wants}/power-profiles-daemon.service"),
                "[Unit]\n",
            ),
            (
                "var/lib/power-profiles-daemon/state.ini",
                "[State]\nDriver=amd_pstate\nProfile=performance\n",
            ),
            ("run/saptune/saved_state/1980196", "x\n"),
            ("run/saptune/saved_state/2578899", "x\n"),
            (
                "etc/sysconfig/saptune",
                "TUNE_FOR_SOLUTIONS=\"HANA\"\nTUNE_FOR_NOTES=\"\"\n",
            ),
        ],
    );
    (tmp, root)
}

#[test]
fn competing_managers_are_in_the_audit_and_the_metrics() {
    let (_t, root) = managed_copy();
    let m = manifest(&[("thp.yaml", THP)]);
    let (a, _) = audit_json(&root, m.path(), None);
    let found: Vec<(String, String)> = a["competing_managers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["profile"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "power-profiles-daemon".to_string(),
                "performance".to_string()
            ),
            ("saptune".into(), "solutions HANA".into()),
            ("tuned".into(), "throughput-performance".into()),
        ],
        "{a:#}"
    );
    let sap = &a["competing_managers"][1]["evidence"];
    assert!(sap.as_str().unwrap().contains("1980196, 2578899"), "{sap}");
    let o = run_on(&root, m.path(), &["audit", "--format", "prometheus"]);
    let p = out(&o);
    assert!(
        p.contains(
            "hostknob_competing_manager{manager=\"tuned\",profile=\"throughput-performance\"} 1"
        ),
        "{p}"
    );
    assert_eq!(p.matches("hostknob_competing_manager{").count(), 3, "{p}");
    // The plain capture has none: no series at all.
    let (a, _) = audit_json(&corpus_host(VM), m.path(), None);
    assert_eq!(a["competing_managers"], serde_json::json!([]));
}
