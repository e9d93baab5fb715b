//! `persist`: the artifacts by mechanism, checked by the real tools that read
//! them (systemd-tmpfiles, sysctl), installed under the root, and seen by audit.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The knobs of [`VM_KNOBS`] that attribute files hold, persisted by tmpfiles.d.
fn tmpfiles_knobs() -> Vec<(&'static str, String)> {
    VM_KNOBS[..4]
        .iter()
        .map(|(id, body)| {
            (
                *id,
                body.replace("persistence: runtime", "persistence: tmpfiles"),
            )
        })
        .collect()
}

fn as_refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(i, b)| (*i, b.as_str())).collect()
}

/// Only the kernel's files: what a boot-time tool and apply must agree on.
fn kernel_files(root: &Path) -> Tree {
    tree(root)
        .into_iter()
        .filter(|(p, _)| p.starts_with("sys") || p.starts_with("proc"))
        .collect()
}

fn tmpfiles() -> &'static str {
    let tool = "systemd-tmpfiles";
    assert!(
        Command::new(tool).arg("--version").output().is_ok(),
        "{tool} is needed (Debian package systemd; .ci/run installs it)"
    );
    tool
}

#[test]
fn systemd_tmpfiles_applies_the_generated_lines_as_apply_does() {
    let knobs_v = tmpfiles_knobs();
    let m = knobs(&as_refs(&knobs_v));
    let (_a, applied) = vm();
    ok(&run(&applied, m.path(), &["apply", "--all"]));

    let (_b, booted) = vm();
    for (id, _) in &knobs_v {
        let printed = ok(&run(&booted, m.path(), &["persist", id]));
        assert!(printed.contains("\nw /"), "{id}: {printed}");
        let text = ok(&run(&booted, m.path(), &["persist", id, "--install"]));
        assert!(
            text.contains(&format!(
                "{id}: installed /etc/tmpfiles.d/hostknob-20-{id}.conf"
            )),
            "{text}"
        );
        let file = booted.join(format!("etc/tmpfiles.d/hostknob-20-{id}.conf"));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            printed,
            "stdout is the file"
        );
        // A kernel attribute takes each write as its whole new value; the
        // plain files of a capture do so only when emptied first (tmpfiles,
        // rightly for sysfs, writes without truncating).
        for line in printed.lines().filter(|l| l.starts_with("w ")) {
            let path = line.split_whitespace().nth(1).unwrap();
            std::fs::write(booted.join(path.trim_start_matches('/')), "").unwrap();
        }
        // What the boot does: systemd-tmpfiles --create, confined to the copy.
        let o = Command::new(tmpfiles())
            .arg(format!("--root={}", booted.display()))
            .arg("--create")
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{id}: {}", err(&o));
        assert_eq!(err(&o), "", "{id}: systemd-tmpfiles accepts every line");
    }
    let idle =
        std::fs::read_to_string(booted.join("etc/tmpfiles.d/hostknob-20-idle.conf")).unwrap();
    assert!(
        idle.ends_with(
            "w /sys/devices/system/cpu/cpu0/cpuidle/state1/disable - - - - 1\n\
             w /sys/devices/system/cpu/cpu1/cpuidle/state1/disable - - - - 1\n"
        ),
        "{idle}"
    );
    assert_same(
        &kernel_files(&applied),
        &kernel_files(&booted),
        "systemd-tmpfiles against apply",
    );

    let (report, code) = audit_json(&booted, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    for (id, _) in &knobs_v {
        let k = knob(&report, id);
        assert_eq!(k["status"], "ok", "{k:#}");
    }
    assert_eq!(
        knob(&report, "idle")["persisted_by"],
        "/etc/tmpfiles.d/hostknob-20-idle.conf (2 lines)"
    );
    // Applied but not persisted: unpersisted on the other copy.
    let (report, _) = audit_json(&applied, m.path(), None);
    assert_eq!(knob(&report, "idle")["status"], "unpersisted");
}

#[test]
fn install_is_recorded_once_audit_names_a_file_that_disagrees_and_remove_deletes_it() {
    let (_tmp, root) = vm();
    let knobs_v = tmpfiles_knobs();
    let m = knobs(&as_refs(&knobs_v[..1]));
    ok(&run(&root, m.path(), &["apply", "idle"]));
    let (r, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&r, "idle")["status"], "unpersisted");
    ok(&run(&root, m.path(), &["persist", "idle", "--install"]));
    let again = ok(&run(&root, m.path(), &["persist", "idle", "--install"]));
    assert!(again.contains("idle: unchanged"), "{again}");
    let ledger = ledger_text(&root);
    assert_eq!(ledger.matches("action: persisted").count(), 1, "{ledger}");
    let (r, code) = audit_json(&root, m.path(), None);
    assert_eq!((knob(&r, "idle")["status"].as_str(), code), (Some("ok"), 0));

    // The manifest changes its mind; the installed file still says the old value.
    ok(&run(&root, m.path(), &["revert", "idle"]));
    let enabled = knobs(&[(
        "idle",
        "persistence: tmpfiles\nkind: cpuidle-state\ntarget:\n  states: {names: [haltpoll idle]}\nset: enabled\n",
    )]);
    let (r, _) = audit_json(&root, enabled.path(), None);
    let k = knob(&r, "idle");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    let detail = k["detail"].as_str().unwrap();
    assert!(
        detail.contains("/etc/tmpfiles.d/hostknob-20-idle.conf:5 writes \"1\" to /sys/devices/system/cpu/cpu0/cpuidle/state1/disable, not \"0\""),
        "{detail}"
    );

    let text = ok(&run(&root, m.path(), &["persist", "idle", "--remove"]));
    assert!(
        text.contains("idle: removed /etc/tmpfiles.d/hostknob-20-idle.conf"),
        "{text}"
    );
    assert!(!root.join("etc/tmpfiles.d/hostknob-20-idle.conf").exists());
    let ledger = ledger_text(&root);
    assert!(ledger.contains("action: unpersisted"), "{ledger}");
}

#[test]
fn several_knobs_are_persisted_in_one_command_as_apply_takes_them() {
    let (_tmp, root) = vm();
    let knobs_v = tmpfiles_knobs();
    let m = knobs(&as_refs(&knobs_v[..2]));
    ok(&run(&root, m.path(), &["apply", "idle", "thp"]));
    // An unknown knob among them: refused before anything is written.
    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "idle", "nope", "--install"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("nope"), "{}", err(&o));
    assert_eq!(tree(&root), before, "a refused persist changed the tree");
    // Printed: one JSON document per knob, in the order given.
    let printed = ok(&run(
        &root,
        m.path(),
        &["persist", "thp", "idle", "--format", "json"],
    ));
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&printed)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d["knob"].as_str().unwrap()).collect();
    assert_eq!(ids, ["thp", "idle"], "{printed}");
    let text = ok(&run(
        &root,
        m.path(),
        &["persist", "idle", "thp", "--install"],
    ));
    assert!(
        text.contains("idle: installed") && text.contains("thp: installed"),
        "{text}"
    );
    assert_eq!(ledger_text(&root).matches("action: persisted").count(), 2);
    let (r, code) = audit_json(&root, m.path(), None);
    assert_eq!(
        (
            knob(&r, "idle")["status"].as_str(),
            knob(&r, "thp")["status"].as_str(),
            code
        ),
        (Some("ok"), Some("ok"), 0)
    );
    let text = ok(&run(
        &root,
        m.path(),
        &["persist", "idle", "thp", "--remove"],
    ));
    assert!(
        text.contains("idle: removed") && text.contains("thp: removed"),
        "{text}"
    );
}

#[test]
fn the_sysctl_d_file_is_accepted_by_sysctl_and_read_by_audit() {
    let (_tmp, root) = vm();
    let m = knobs(&[(
        "swappiness",
        "persistence: sysctl.d\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
    )]);
    let text = ok(&run(&root, m.path(), &["persist", "swappiness"]));
    assert!(text.ends_with("\nvm.swappiness = 10\n"), "{text}");
    // The real tool parses it and checks the name exists, without writing (--dry-run).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("90-hostknob-swappiness.conf");
    std::fs::write(&file, &text).unwrap();
    let sysctl = |f: &Path| {
        Command::new("sysctl")
            .arg("--dry-run")
            .arg("-p")
            .arg(f)
            .output()
            .expect("sysctl (Debian package procps; .ci/run installs it)")
    };
    let o = sysctl(&file);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        (out(&o).as_str(), err(&o).as_str()),
        ("vm.swappiness = 10\n", "")
    );
    // The same tool does complain about what it cannot read or set: the checks above mean something.
    std::fs::write(&file, format!("{text}not a setting\n")).unwrap();
    assert!(err(&sysctl(&file)).contains("invalid syntax"));
    std::fs::write(&file, format!("{text}vm.hostknob_no_such_setting = 1\n")).unwrap();
    assert!(!sysctl(&file).status.success());

    ok(&run(
        &root,
        m.path(),
        &["persist", "swappiness", "--install"],
    ));
    ok(&run(&root, m.path(), &["apply", "swappiness"]));
    let (r, code) = audit_json(&root, m.path(), None);
    let k = knob(&r, "swappiness");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
    assert_eq!(
        k["persisted_by"],
        "/etc/sysctl.d/90-hostknob-swappiness.conf:4"
    );
}

#[test]
fn the_drop_in_is_the_allocator_knobs_persistence() {
    let (_tmp, root) = vm();
    let m = knobs(&VM_KNOBS[4..]);
    let o = run(&root, m.path(), &["persist", "jemalloc"]);
    let text = ok(&o);
    assert!(
        text.contains("[Service]\nEnvironment=\"_RJEM_MALLOC_CONF=background_thread:true\"\n"),
        "{text}"
    );
    assert!(err(&o).contains("systemctl daemon-reload"), "{}", err(&o));
    assert!(
        err(&o).contains("systemctl restart rpc-node.service"),
        "{}",
        err(&o)
    );
    ok(&run(&root, m.path(), &["persist", "jemalloc", "--install"]));
    let path = root.join("etc/systemd/system/rpc-node.service.d/zz-hostknob-rjem_malloc_conf.conf");
    assert_eq!(std::fs::read_to_string(path).unwrap(), text);
    let (r, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&r, "jemalloc")["status"], "ok", "{r:#}");
}

#[test]
fn kernel_arguments_are_printed_with_their_commands_and_never_written() {
    let (_tmp, root) = vm();
    let m = knobs(&[(
        "thp",
        "persistence: cmdline\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    )]);
    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "thp"]);
    assert_eq!(ok(&o), "transparent_hugepage=madvise\n");
    let e = err(&o);
    assert!(
        e.contains("grubby --update-kernel=ALL --args=\"transparent_hugepage=madvise\""),
        "{e}"
    );
    assert!(
        e.contains("GRUB_CMDLINE_LINUX") && e.contains("update-grub"),
        "{e}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&run(
        &root,
        m.path(),
        &["persist", "thp", "--format", "json"],
    )))
    .unwrap();
    assert_eq!(json["mechanism"], "cmdline");
    assert!(json["path"].is_null());
    refused(
        &run(&root, m.path(), &["persist", "thp", "--install"]),
        &["never writes the boot loader"],
    );
    assert_tree(&before, &root, "cmdline");
}

#[test]
fn revert_of_a_persisted_knob_names_the_file_and_persisted_removes_it() {
    // Issue 11: `revert --all` said nothing of an installed tmpfiles.d file,
    // which brings the change back at the next boot.
    let (_t, root) = vm();
    let m = knobs(&[(
        "thp-never",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    )]);
    ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "thp-never"],
    ));
    let o = ok(&run(
        &root,
        m.path(),
        &[
            "--host",
            "vm",
            "--format",
            "json",
            "persist",
            "thp-never",
            "--install",
        ],
    ));
    let path = serde_json::from_str::<serde_json::Value>(&o).unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    let file = root.join(path.trim_start_matches('/'));
    assert!(file.exists(), "{}", file.display());
    let o = run(&root, m.path(), &["--host", "vm", "revert", "--all"]);
    ok(&o);
    let e = err(&o);
    assert!(
        e.contains(&format!("thp-never is persisted by {path}"))
            && e.contains(" persist thp-never --remove`"),
        "{e}"
    );
    assert!(file.exists(), "revert alone leaves the file");
    let o = run(
        &root,
        m.path(),
        &["--host", "vm", "revert", "--all", "--persisted"],
    );
    ok(&o);
    assert!(!file.exists(), "--persisted removes it: {}", err(&o));
    let o = run(&root, m.path(), &["--host", "vm", "revert", "--all"]);
    assert!(!err(&o).contains("is persisted by"), "{}", err(&o));
}
