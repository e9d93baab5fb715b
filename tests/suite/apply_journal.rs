//! Issue 20 items 4, 5, 17 and 25 (parts): revert never writes over what
//! someone else changed, entries from another boot are stale, knobs that
//! share a file each have their own entry, a full revert leaves no state,
//! and a full state directory does not block revert.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

const GOV: (&str, &str) = (
    "gov",
    "persistence: runtime\nkind: cpufreq-governor\nset: performance\n",
);
const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn state(root: &Path) -> PathBuf {
    root.join(STATE_DIR)
}

fn policy(root: &Path, n: usize) -> PathBuf {
    root.join(format!(
        "sys/devices/system/cpu/cpufreq/policy{n}/scaling_governor"
    ))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// Item 4: `apply` the governor on spr1, one policy set to schedutil by
/// hand (what tuned does): revert leaves it alone, names it and who runs,
/// exits 1 and keeps it journaled; `--force` restores it. Item 17: then no
/// journal and no lock stay behind.
#[test]
fn revert_leaves_a_governor_changed_by_hand_alone_on_spr1_and_force_restores_it() {
    let (_t, root) = copy_host("spr1");
    let pristine = tree(&root);
    let m = knobs(&[GOV]);
    let found = read(&policy(&root, 10));
    ok(&run(&root, m.path(), &["apply", "gov"]));
    let written = journal(&root);
    assert!(written.iter().all(|e| {
        e["written"] == "performance"
            && e["seen"]
                .as_str()
                .is_some_and(|s| s.trim() == "performance")
    }));
    std::fs::write(policy(&root, 10), "schedutil\n").unwrap();
    // tuned is running in the tree: it is named as the likely writer.
    write_files(&root, &[("proc/4242/comm", "tuned\n")]);
    let o = run(&root, m.path(), &["revert", "--all"]);
    assert_eq!(code(&o), Some(1), "{}\n{}", out(&o), err(&o));
    let e = err(&o);
    assert!(
        e.contains("policy10/scaling_governor no longer holds what hostknob wrote")
            && e.contains("\"schedutil\"")
            && e.contains("tuned is running (PID 4242)")
            && e.contains("--force"),
        "{e}"
    );
    assert_eq!(read(&policy(&root, 10)), "schedutil", "left alone");
    assert_eq!(read(&policy(&root, 11)), found, "the others restored");
    assert_eq!(journal_paths(&root).len(), 1, "it stays journaled");
    // JSON says the same.
    let o = run(&root, m.path(), &["--format", "json", "revert", "--all"]);
    assert_eq!(code(&o), Some(1));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["left_alone"][0]["now"], "schedutil", "{v:#}");
    assert_eq!(v["left_alone"][0]["wrote"], "performance", "{v:#}");
    let o = run(&root, m.path(), &["revert", "--all", "--force"]);
    ok(&o);
    std::fs::remove_dir_all(root.join("proc/4242")).unwrap();
    assert_tree(&pristine, &root, "spr1 after revert --force");
    let left: Vec<_> = std::fs::read_dir(state(&root))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    // The ledger is history and stays; the journal and its lock are gone.
    assert_eq!(
        left,
        ["ledger.yaml"],
        "a full revert leaves only the ledger: {left:?}"
    );
}

/// Item 4: entries from another boot are stale: dropped and said, not
/// written; an old journal (without written, seen, boot) still reverts.
#[test]
fn entries_from_another_boot_are_stale_and_old_journals_still_revert() {
    let (_t, root) = copy_host("spr1");
    write_files(&root, &[(BOOT_ID, "boot-one\n")]);
    let m = knobs(&[GOV]);
    ok(&run(&root, m.path(), &["apply", "gov"]));
    assert!(journal(&root).iter().all(|e| e["boot"] == "boot-one"));
    // A reboot whose boot re-applied the knob (its persistence): the files
    // hold ours, so revert restores them although the entries are stale.
    let found = found_values(&root);
    assert!(!found.is_empty());
    write_files(&root, &[(BOOT_ID, "boot-two\n")]);
    let o = run(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    assert!(!err(&o).contains("stale"), "{}", err(&o));
    for (rel, was) in &found {
        assert_eq!(
            read(&root.join(rel)).trim(),
            was.trim(),
            "{rel}: re-applied at boot, restored"
        );
    }
    assert!(journal(&root).is_empty());
    // A reboot that reset the values to the ones found: stale, not written.
    write_files(&root, &[(BOOT_ID, "boot-one\n")]);
    ok(&run(&root, m.path(), &["apply", "gov"]));
    let applied = tree(&root);
    let reset = found_values(&root);
    for (rel, found) in &reset {
        std::fs::write(root.join(rel), found).unwrap();
    }
    let after_reboot = tree(&root);
    assert_ne!(after_reboot, applied);
    write_files(&root, &[(BOOT_ID, "boot-two\n")]);
    let o = run(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    assert!(
        err(&o).contains("gov: stale:") && err(&o).contains("another boot (boot-one)"),
        "{}",
        err(&o)
    );
    write_files(&root, &[(BOOT_ID, "boot-one\n")]);
    assert_tree(
        &after_reboot,
        &root,
        "stale entries holding their value as found are not written",
    );
    assert!(journal(&root).is_empty());

    // An old journal: the same entries without the new fields.
    let (_t, root) = copy_host("spr1");
    let pristine = tree(&root);
    ok(&run(&root, m.path(), &["apply", "gov"]));
    let j = state(&root).join("journal.jsonl");
    let old: String = journal(&root)
        .into_iter()
        .map(|mut e| {
            for f in ["written", "seen", "boot"] {
                e.as_object_mut().unwrap().remove(f);
            }
            format!("{e}\n")
        })
        .collect();
    std::fs::write(&j, old).unwrap();
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "an old journal reverts");
}

/// Review: knob B applied after A sets the file back to its value as found;
/// reverting A alone must not drop A's entry (B's `before` is A's value, so a
/// later revert of B would leave the host at A's value).
#[test]
fn reverting_an_earlier_knob_alone_leaves_a_later_knobs_file_alone() {
    let (_t, root) = vm();
    let pristine = tree(&root);
    let swap = root.join("proc/sys/vm/swappiness");
    let found = read(&swap);
    assert_ne!(found, "10");
    let back = format!(
        "persistence: runtime\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: {found}\nverify: {{probe: wakeup}}\n"
    );
    let m = knobs(&[SWAP_A, ("swap-back", back.as_str())]);
    ok(&run(&root, m.path(), &["apply", "swap-a"]));
    ok(&run(&root, m.path(), &["apply", "swap-back"]));
    assert_eq!(read(&swap), found);
    let o = run(&root, m.path(), &["revert", "swap-a"]);
    assert_eq!(code(&o), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("changed by knob swap-back, applied after swap-a"),
        "{}",
        err(&o)
    );
    assert_eq!(journal_paths(&root).len(), 2, "swap-a keeps its entry");
    ok(&run(&root, m.path(), &["revert", "swap-back"]));
    assert_eq!(read(&swap), "10", "swap-a's value, as before swap-back");
    ok(&run(&root, m.path(), &["revert", "swap-a"]));
    assert_tree(&pristine, &root, "one at a time, the later first");
}

/// Each journaled file (relative to the root) with its value as found.
fn found_values(root: &Path) -> Vec<(String, String)> {
    journal(root)
        .iter()
        .map(|e| {
            let rel = e["path"].as_str().unwrap().trim_start_matches('/');
            (rel.to_string(), e["found"].as_str().unwrap().to_string())
        })
        .collect()
}

const SWAP_A: (&str, &str) = (
    "swap-a",
    "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\nverify: {probe: wakeup}\n",
);
const SWAP_B: (&str, &str) = (
    "swap-b",
    "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 20\nverify: {probe: wakeup}\n",
);

/// Item 5: two knobs on one file, applied one after the other, each have
/// their own entry; reverting the first alone leaves the second's value
/// (naming it); verify of the first is refused; revert --all restores in
/// reverse order of the applies.
#[test]
fn knobs_sharing_a_file_each_keep_their_entry_and_revert_newest_first() {
    let (_t, root) = vm();
    let pristine = tree(&root);
    let m = knobs(&[SWAP_A, SWAP_B]);
    let swap = root.join("proc/sys/vm/swappiness");
    let found = read(&swap);
    ok(&run(&root, m.path(), &["apply", "swap-a"]));
    ok(&run(&root, m.path(), &["apply", "swap-b"]));
    let j = journal(&root);
    assert_eq!(j.len(), 2, "{j:#?}");
    assert_eq!(
        (j[0]["knob"].as_str(), j[0]["before"].as_str()),
        (Some("swap-a"), Some(found.as_str()))
    );
    assert_eq!(
        (j[1]["knob"].as_str(), j[1]["before"].as_str()),
        (Some("swap-b"), Some("10"))
    );
    let o = run(&root, m.path(), &["--host", "vm", "verify", "swap-a"]);
    assert_eq!(code(&o), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("shares files with swap-b") && err(&o).contains(" revert swap-b` first"),
        "{}",
        err(&o)
    );
    let o = run(&root, m.path(), &["revert", "swap-a"]);
    assert_eq!(code(&o), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("changed by knob swap-b, applied after swap-a"),
        "{}",
        err(&o)
    );
    assert_eq!(read(&swap), "20");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "both reverted, newest first");
    assert!(!state(&root).join("journal.jsonl").exists());
    assert!(!state(&root).join("lock").exists());
    // One at a time: the later first, then the earlier.
    ok(&run(&root, m.path(), &["apply", "swap-a"]));
    ok(&run(&root, m.path(), &["apply", "swap-b"]));
    ok(&run(&root, m.path(), &["revert", "swap-b"]));
    assert_eq!(read(&swap), "10");
    assert_eq!(journal_paths(&root).len(), 1, "swap-a stays journaled");
    assert!(
        state(&root).join("lock").exists(),
        "state stays while journaled"
    );
    ok(&run(&root, m.path(), &["revert", "swap-a"]));
    assert_tree(&pristine, &root, "one at a time");
}

/// Item 25: a state directory with no space left does not stop revert
/// (the lock's pid is not needed, the journal is removed, not rewritten).
/// A tmpfs in a private mount namespace; skipped (said) where mounts are not allowed.
#[test]
fn revert_works_when_the_state_directory_is_full() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to mount a tmpfs");
        return;
    }
    let (_t, root) = vm();
    let m = knobs(&VM_KNOBS);
    std::fs::create_dir_all(state(&root)).unwrap();
    let before = tree(&root);
    let script = format!(
        "set -e; mount -t tmpfs -o size=1m tmpfs {sd}; \
         {bin} --root {root} --manifest {m} apply thp swappiness >/dev/null && echo applied; \
         cat /dev/zero > {sd}/filler 2>/dev/null || true; \
         {bin} --root {root} --manifest {m} revert --all && echo reverted; \
         ls -A {sd}; echo --; cat {sd}/ledger.yaml; exit 0",
        sd = state(&root).display(),
        bin = bin(),
        root = root.display(),
        m = m.path().display()
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    isolate(&mut c);
    let o = c.output().unwrap();
    if err(&o).contains("mount:") || err(&o).contains("unshare:") {
        eprintln!("skipped: {}", err(&o));
        return;
    }
    assert!(
        out(&o).contains("applied") && out(&o).contains("reverted"),
        "{}\n{}",
        out(&o),
        err(&o)
    );
    // The filler and the ledger (written by apply) are left: no journal, no lock.
    let stdout = out(&o);
    let left: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "reverted")
        .skip(1)
        .take_while(|l| *l != "--")
        .collect();
    assert_eq!(left, ["filler", "ledger.yaml"], "{stdout}");
    // The revert's ledger entry fit in the ledger's last page, or the
    // revert said it could not record it.
    let ledger = stdout.split("\n--\n").nth(1).unwrap_or_default();
    assert!(
        ledger.contains("action: reverted")
            || err(&o).contains("restored, but not recorded in the ledger"),
        "{stdout}\n{}",
        err(&o)
    );
    assert_tree(&before, &root, "reverted on a full state directory");
}

/// Item 25: `revert --all --persisted` removes a persistence file although
/// the journal holds nothing for the knob and the knob no longer plans here
/// (its file is gone from the tree), and says so.
#[test]
fn revert_persisted_removes_the_file_with_nothing_journaled() {
    let (_t, root) = vm();
    let m = knobs(&[(
        "thp",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: defrag}\nset: never\n",
    )]);
    ok(&run(&root, m.path(), &["persist", "thp", "--install"]));
    // Named by its write phase (hostknob-NN-thp.conf).
    let conf = std::fs::read_dir(root.join("etc/tmpfiles.d"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-thp.conf"))
        .expect("persist --install wrote the knob's tmpfiles file");
    assert!(conf.is_file());
    std::fs::remove_file(root.join("sys/kernel/mm/transparent_hugepage/defrag")).unwrap();
    let o = run(&root, m.path(), &["revert", "--all", "--persisted"]);
    ok(&o);
    assert!(!conf.exists(), "{}", err(&o));
    assert!(
        err(&o).contains("thp: nothing in the journal to restore; removed its persistence file"),
        "{}",
        err(&o)
    );
}

/// Review: a knob whose old-style file name (`hostknob-10-gov.conf`) is
/// another knob's file named by phase: `revert --persisted` of the first
/// must not remove the second's file (it is found by name, then by header).
#[test]
fn revert_persisted_never_removes_another_knobs_file_of_the_same_name() {
    let (_t, root) = copy_host("spr1");
    let m = knobs(&[
        (
            "gov",
            "persistence: tmpfiles\nkind: cpufreq-governor\nset: performance\n",
        ),
        (
            "10-gov",
            "persistence: tmpfiles\nkind: thp\ntarget: {setting: defrag}\nset: never\n",
        ),
    ]);
    ok(&run(&root, m.path(), &["persist", "gov", "--install"]));
    let gov_file = root.join("etc/tmpfiles.d/hostknob-10-gov.conf");
    assert!(gov_file.is_file(), "the governor's phase-1 file");
    let o = run(&root, m.path(), &["revert", "10-gov", "--persisted"]);
    ok(&o);
    assert!(gov_file.is_file(), "gov's file stays: {}", err(&o));
    assert!(!err(&o).contains("hostknob-10-gov.conf"), "{}", err(&o));
}

/// Issue 49 item 10: a fully reverted host keeps no lock and no record of
/// installed files, also after `revert --all --persisted` removed a
/// persistence file (the removal took the lock again).
#[test]
fn a_fully_reverted_host_keeps_no_lock_after_revert_persisted() {
    let (_t, root) = vm();
    let m = knobs(&[(
        "thp",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: defrag}\nset: never\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "thp"]));
    ok(&run(&root, m.path(), &["persist", "thp", "--install"]));
    let o = run(&root, m.path(), &["revert", "--all", "--persisted"]);
    ok(&o);
    let sd = root.join(STATE_DIR);
    let left: Vec<String> = std::fs::read_dir(&sd)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "ledger.yaml" && !n.starts_with("ledger-"))
        .collect();
    assert!(left.is_empty(), "state left behind: {left:?}\n{}", err(&o));
}
