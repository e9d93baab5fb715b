//! apply, read back, revert on copies of real hosts: every kind, the plan as
//! a grouped diff, the order of dependent writes, the journal's first value,
//! the ledger.

use std::path::Path;

use crate::support::*;

/// Applies every knob of `docs` on a copy of `host`, checks each is in
/// effect, reverts, and checks the tree is byte-identical to the original.
/// Returns the journal as it was after the apply.
fn apply_then_revert(host: &str, docs: &[(&str, &str)], prepare: &[(&str, &str)]) -> Vec<String> {
    let (_tmp, root) = copy_host(host);
    write_files(&root, prepare);
    let pristine = tree(&root);
    let m = knobs(docs);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    let written = journal_paths(&root);
    assert!(!written.is_empty());
    // Every knob is now in effect: audit sees no drift.
    let (report, _) = audit_json(&root, m.path(), None);
    for (id, _) in docs {
        let k = knob(&report, id);
        assert!(
            ["ok", "unpersisted"].contains(&k["status"].as_str().unwrap()),
            "{id} after apply: {k:#}"
        );
    }
    // A second apply has nothing to do.
    let again = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(again.contains("nothing to write"), "{again}");
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    assert_tree(&pristine, &root, &format!("{host} after revert"));
    assert!(journal(&root).is_empty(), "revert empties the journal");
    written
}

#[test]
fn every_kind_on_adl0_reverts_to_a_byte_identical_tree_governor_before_epp() {
    let journal = apply_then_revert(
        "adl0",
        &[
            // Listed before the governor on purpose: apply orders them. (Under the
            // performance governor intel_pstate takes no other EPP than performance.)
            (
                "epp",
                "persistence: runtime\nkind: cpufreq-epp\ntarget: {cpus: 0-7}\nset: performance\n",
            ),
            (
                "governor",
                "persistence: runtime\nkind: cpufreq-governor\nset: performance\n",
            ),
            (
                "idle",
                "persistence: runtime\nkind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 100}\nset: disabled\n",
            ),
            (
                "resume",
                "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {cpus: 8-15}\nset: n/a\n",
            ),
            (
                "bias",
                "persistence: runtime\nkind: sysfs\ntarget: {path: \"/sys/devices/system/cpu/cpu*/power/energy_perf_bias\"}\nset: 0\n",
            ),
        ],
        &[],
    );
    let last_governor = journal
        .iter()
        .rposition(|p| p.ends_with("/scaling_governor"))
        .unwrap();
    let first_epp = journal
        .iter()
        .position(|p| p.ends_with("/energy_performance_preference"))
        .unwrap();
    assert!(last_governor < first_epp, "{journal:#?}");
    assert_eq!(
        journal
            .iter()
            .filter(|p| p.ends_with("/energy_performance_preference"))
            .count(),
        8
    );
}

#[test]
fn every_kind_on_the_vm_reverts_to_a_byte_identical_tree_drop_in_included() {
    // The menu governor honours the disabled state (haltpoll: not-honoured, in audit_status).
    let journal = apply_then_revert(
        "fc-haltpoll-2cpu",
        &VM_KNOBS,
        &[
            UNIT,
            ("sys/devices/system/cpu/cpuidle/current_governor", "menu\n"),
            (
                "sys/devices/system/cpu/cpuidle/current_governor_ro",
                "menu\n",
            ),
        ],
    );
    assert_eq!(
        journal,
        vec![
            "/sys/devices/system/cpu/cpu0/cpuidle/state1/disable",
            "/sys/devices/system/cpu/cpu1/cpuidle/state1/disable",
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "/proc/sys/vm/swappiness",
            "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
            "/etc/systemd/system/rpc-node.service.d/zz-hostknob-rjem_malloc_conf.conf",
        ]
    );
}

#[test]
fn the_plan_is_a_diff_grouped_over_cpus_and_a_dry_run_changes_nothing() {
    let host = corpus_host("spr1");
    let before = snapshot(&host);
    let m = knobs(&[(
        "deep",
        "persistence: runtime\nkind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 200}\nset: disabled\n",
    )]);
    let text = ok(&run(&host, m.path(), &["apply", "deep", "--dry-run"]));
    let header = "/sys/devices/system/cpu/cpu0-319/cpuidle/state3/disable\t(C6, 320 files)";
    assert!(
        text.contains(&format!(
            "--- {header}\n+++ {header}\n@@ -1 +1 @@\n-0\n+1\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("dry run: 320 files would be written; nothing was changed"),
        "{text}"
    );
    assert!(
        text.contains("runtime only: lost at the next boot"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&run(
        &host,
        m.path(),
        &["apply", "deep", "--dry-run", "--format", "json"],
    )))
    .unwrap();
    let g = &json["knobs"][0]["changes"][0];
    assert_eq!(
        g["path"],
        "/sys/devices/system/cpu/cpu*/cpuidle/state3/disable"
    );
    assert_eq!(
        (g["files"].as_u64(), g["cpus"].as_str()),
        (Some(320), Some("0-319"))
    );
    assert_eq!(
        (g["before"].as_str(), g["after"].as_str()),
        (Some("0"), Some("1"))
    );
    assert_eq!(json["dry_run"], true);
    assert_eq!(
        snapshot(&host),
        before,
        "a dry run writes nothing, not even a lock"
    );
    assert!(nothing_recorded(&host, m.path()));
}

#[test]
fn the_ledger_records_grouped_changes_and_audit_tells_a_reboot_undid_them() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&VM_KNOBS[..1]);
    // Without sudo, the ledger names the uid and its name as the system's
    // user database gives it (`id`, a dynamically linked peer: the release
    // binary is static-pie, and must still read /etc/passwd through NSS).
    ok(&command(&root, m.path(), &["apply", "idle"])
        .env_remove("SUDO_USER")
        .output()
        .unwrap());
    // `id -un` fails for a uid without a name (a container's arbitrary
    // uid); hostknob then gives the uid alone.
    let id = |flag: &str| {
        let o = std::process::Command::new("id").arg(flag).output().unwrap();
        o.status
            .success()
            .then(|| String::from_utf8(o.stdout).unwrap().trim().to_string())
    };
    let uid = id("-u").unwrap();
    let user = match id("-un") {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    };
    let ledger = ledger_file(&root);
    let text = std::fs::read_to_string(&ledger).unwrap();
    let entries: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let e = &entries[0];
    assert_eq!(e["action"], "applied");
    assert_eq!(e["host"], "vm");
    assert_eq!(e["knob"], "idle");
    assert_eq!(e["persistence"], "runtime");
    assert_eq!(e["hostknob"], env!("CARGO_PKG_VERSION"));
    assert_eq!(e["user"].as_str(), Some(user.as_str()));
    let c = &e["changes"][0];
    assert_eq!(
        c["path"],
        "/sys/devices/system/cpu/cpu*/cpuidle/state1/disable"
    );
    assert_eq!(
        (
            c["cpus"].as_str(),
            c["before"].as_str(),
            c["after"].as_str()
        ),
        (Some("0-1"), Some("0"), Some("1"))
    );

    // A reboot: the kernel forgets the runtime write, and boots after the apply.
    for cpu in 0..2 {
        std::fs::write(
            root.join(format!(
                "sys/devices/system/cpu/cpu{cpu}/cpuidle/state1/disable"
            )),
            "0\n",
        )
        .unwrap();
    }
    let stat = std::fs::read_to_string(root.join("proc/stat")).unwrap();
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let stat: String = stat
        .lines()
        .map(|l| {
            if l.starts_with("btime ") {
                format!("btime {later}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(root.join("proc/stat"), stat).unwrap();
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "idle");
    assert_eq!(
        (k["status"].as_str(), code),
        (Some("lost-on-reboot"), 2),
        "{k:#}"
    );
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("back to 0, its value before the apply"),
        "{k:#}"
    );

    // Revert appends; it never rewrites what is there.
    ok(&run(&root, m.path(), &["revert", "idle"]));
    let after = std::fs::read_to_string(&ledger).unwrap();
    assert!(after.starts_with(&text), "append-only");
    let entries: serde_yaml::Value = serde_yaml::from_str(&after).unwrap();
    assert_eq!(entries[1]["action"], "reverted");
    assert_eq!(entries[1]["changes"][0]["cpus"], "0-1");
}

#[test]
fn revert_keeps_the_first_value_before_and_reverts_one_knob_alone() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let pristine = tree(&root);
    let swappiness = root.join("proc/sys/vm/swappiness");
    let m = knobs(&VM_KNOBS[..3]);
    ok(&run(&root, m.path(), &["apply", "thp", "swappiness"]));
    // Another apply of a changed knob: the journal keeps the value from before the first.
    let m2 = knobs(&[(
        "swappiness",
        "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 30\n",
    )]);
    ok(&run(&root, m2.path(), &["apply", "swappiness"]));
    assert_eq!(std::fs::read_to_string(&swappiness).unwrap(), "30");
    let j = journal(&root);
    assert_eq!(j.len(), 2, "{j:#?}");
    assert_eq!(j[0]["before"], "madvise");
    assert_eq!(j[0]["found"], "always [madvise] never\n");
    assert_eq!(
        (j[1]["before"].as_str(), j[1]["found"].as_str()),
        (Some("60"), Some("60\n"))
    );

    let text = ok(&run(&root, m.path(), &["revert", "swappiness"]));
    assert!(text.contains("restored and read back 1 file\n"), "{text}");
    assert_eq!(std::fs::read_to_string(&swappiness).unwrap(), "60\n");
    assert_eq!(
        journal_paths(&root),
        vec!["/sys/kernel/mm/transparent_hugepage/enabled"]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("sys/kernel/mm/transparent_hugepage/enabled")).unwrap(),
        "never"
    );
    let none = ok(&run(&root, m.path(), &["revert", "swappiness"]));
    assert!(none.contains("nothing to revert"), "{none}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert --all");
}

#[test]
fn knobs_already_in_effect_or_absent_here_write_nothing() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "madvise",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
        ),
        (
            "c6",
            "persistence: runtime\nkind: cpuidle-state\ntarget:\n  states: {names: [C6]}\nset: disabled\n",
        ),
    ]);
    let text = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(
        text.contains("madvise: already in effect; nothing to write"),
        "{text}"
    );
    assert!(
        text.contains("c6: not applicable here; nothing to write"),
        "{text}"
    );
    assert!(text.contains("no idle state named C6 here"), "{text}");
    assert!(
        nothing_recorded(&root, m.path()),
        "nothing done, nothing recorded"
    );
    assert!(journal(&root).is_empty());
    assert_tree(&pristine, &root, "nothing to write");
}

/// The revert restores a plain file's exact bytes, so this must hold on a
/// capture; on a kernel attribute it writes the value in the kernel's words.
#[test]
fn the_journal_records_exact_contents_and_restore_words() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    write_files(&root, &[UNIT]);
    let m = knobs(&VM_KNOBS);
    ok(&run(&root, m.path(), &["apply", "jemalloc", "thp"]));
    let j = journal(&root);
    let dropin = j.iter().find(|e| e["mode"] == "file").unwrap();
    assert!(dropin["before"].is_null(), "the drop-in did not exist");
    assert_eq!(
        dropin["created_dirs"],
        serde_json::json!(["/etc/systemd/system/rpc-node.service.d"])
    );
    let thp = j.iter().find(|e| e["knob"] == "thp").unwrap();
    assert_eq!(thp["mode"], "attribute");
    assert!(
        Path::new(&root)
            .join("etc/systemd/system/rpc-node.service.d/zz-hostknob-rjem_malloc_conf.conf")
            .is_file()
    );
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(!root.join("etc/systemd/system/rpc-node.service.d").exists());
}
