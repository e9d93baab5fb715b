//! Issue 47 items 2 and 3: one knob never blinds the audit, and a file that
//! cannot be read is never `absent`. A knob whose sysctl this host lacks is
//! its own `not-applicable` verdict (named on stderr with file and line,
//! exit 1), and the rest of the host is audited and exported with
//! `hostknob_audit_success 1`. A knob file the audit may not read (mode 000,
//! audited as `nobody`), a FIFO, or a link loop is `unreadable` for every
//! kind below, never drift "absent, should be ...".

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::support::*;

#[test]
fn a_missing_sysctl_is_its_knobs_verdict_and_the_rest_is_exported() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[
        (
            "busy-poll",
            "kind: sysctl\ntarget: {name: net.core.busy_poll}\nset: 50\npersistence: runtime\n",
        ),
        (
            "thp-m",
            "kind: thp\ntarget: {setting: enabled}\nset: madvise\npersistence: runtime\n",
        ),
    ]);
    std::fs::remove_file(root.join("proc/sys/net/core/busy_poll")).ok();
    let textfile = tempfile::tempdir().unwrap();
    let t = textfile.path().to_str().unwrap();
    let o = run(
        &root,
        m.path(),
        &["audit", "--textfile", t, "--format", "json"],
    );
    // An error (exit 1), named with its file and line, but not a blind one.
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    // The knob's `target:` line.
    let want = format!(
        "{}:6: target.name: no sysctl net.core.busy_poll on this host",
        m.path().join("knobs.yaml").display()
    );
    assert!(err(&o).contains(&want), "{}", err(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let k = knob(&report, "busy-poll");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("no sysctl net.core.busy_poll"),
        "{k:#}"
    );
    let thp = knob(&report, "thp-m");
    assert!(["ok", "drift", "unpersisted"].contains(&thp["status"].as_str().unwrap()));
    let prom = std::fs::read_to_string(textfile.path().join("hostknob.prom")).unwrap();
    assert!(prom.contains("\nhostknob_audit_success 1\n"), "{prom}");
    assert!(prom.contains("\nhostknob_audit_exit_code 1\n"), "{prom}");
    for id in ["busy-poll", "thp-m"] {
        assert!(
            prom.contains(&format!("hostknob_knob_status{{knob=\"{id}\"")),
            "{id} not exported:\n{prom}"
        );
    }
}

/// A knob per kind and the file of the copy its verdict reads.
const KINDS: &[(&str, &str, &str)] = &[
    (
        "governor",
        "kind: cpufreq-governor\ntarget: {cpus: \"0\"}\nset: performance\npersistence: runtime\n",
        "sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
    ),
    (
        "idle",
        "kind: cpuidle-state\ntarget:\n  cpus: \"0\"\n  states: {names: [C1E]}\nset: disabled\npersistence: runtime\n",
        "sys/devices/system/cpu/cpu0/cpuidle/state1/disable",
    ),
    (
        "swappiness",
        "kind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\npersistence: runtime\n",
        "proc/sys/vm/swappiness",
    ),
    (
        "thp",
        "kind: thp\ntarget: {setting: enabled}\nset: madvise\npersistence: runtime\n",
        "sys/kernel/mm/transparent_hugepage/enabled",
    ),
    (
        "attr",
        "kind: sysfs\ntarget: {path: /sys/kernel/mm/transparent_hugepage/defrag}\nset: never\npersistence: runtime\n",
        "sys/kernel/mm/transparent_hugepage/defrag",
    ),
];

fn adl0() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = copy_host("adl0");
    write_files(
        &root,
        &[
            ("proc/sys/vm/swappiness", "60\n"),
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            ),
            (
                "sys/kernel/mm/transparent_hugepage/defrag",
                "always defer defer+madvise [madvise] never\n",
            ),
        ],
    );
    (t, root)
}

/// audit --format json of one knob, as `nobody` when `unprivileged` and root.
fn audit_one(root: &Path, m: &Path, id: &str, unprivileged: bool) -> (serde_json::Value, i32) {
    let mut c = command(root, m, &["audit", id, "--format", "json"]);
    if unprivileged && unsafe { libc::geteuid() } == 0 {
        c.uid(65534).gid(65534);
    }
    let o = c.output().unwrap();
    let report = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{id}: {e}\n{}{}", out(&o), err(&o)));
    (report, o.status.code().unwrap_or(-1))
}

fn assert_unreadable(report: &serde_json::Value, code: i32, id: &str, how: &str) {
    assert!(report["knobs"].is_array(), "{id} ({how}): {report:#}");
    let k = knob(report, id);
    let detail = k["detail"].as_str().unwrap();
    assert_eq!(k["status"], "unreadable", "{id} ({how}): {k:#}");
    assert!(!detail.contains("absent"), "{id} ({how}): {detail}");
    assert_eq!(code, 1, "{id} ({how})");
}

#[test]
fn a_knob_file_the_audit_may_not_read_is_unreadable_for_every_kind() {
    let (tmp, root) = adl0();
    let m = knobs(&KINDS.iter().map(|(i, b, _)| (*i, *b)).collect::<Vec<_>>());
    for p in [tmp.path(), m.path()] {
        Command::new("chmod")
            .arg("-R")
            .arg("a+rX")
            .arg(p)
            .status()
            .unwrap();
    }
    for (id, _, file) in KINDS {
        let f = root.join(file);
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
        let (report, code) = audit_one(&root, m.path(), id, true);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        if unsafe { libc::geteuid() } == 0 || !f.exists() {
            assert_unreadable(&report, code, id, "mode 000");
            let detail = knob(&report, id)["detail"].as_str().unwrap().to_string();
            assert!(detail.contains("permission denied"), "{id}: {detail}");
        }
    }
}

#[test]
fn a_fifo_or_a_link_loop_is_refused_never_absent() {
    let (_t, root) = adl0();
    let m = knobs(&KINDS.iter().map(|(i, b, _)| (*i, *b)).collect::<Vec<_>>());
    for (id, _, file) in KINDS {
        let f = root.join(file);
        let saved = std::fs::read(&f).unwrap();
        std::fs::remove_file(&f).unwrap();
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (report, code) = audit_one(&root, m.path(), id, false);
        assert_unreadable(&report, code, id, "FIFO");
        std::fs::remove_file(&f).unwrap();
        // A link the open refuses to follow (ELOOP). A link out of the root
        // cannot leave it: the root seam resolves it inside the tree
        // (openat2 RESOLVE_IN_ROOT), as the host would see the tree.
        std::os::unix::fs::symlink(f.file_name().unwrap(), &f).unwrap();
        let (report, code) = audit_one(&root, m.path(), id, false);
        assert_unreadable(&report, code, id, "link loop");
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, saved).unwrap();
    }
}
