//! Issue 35 item 6: what `hostknob-apply.service` runs at boot. `apply
//! --boot` applies only knobs that persist, each on its own (one knob the
//! kernel refuses is named and the others stand), and `--wait-limit` bounds
//! the wait for a held lock so a boot unit cannot stall boot.

use std::path::Path;

use crate::support::*;

const THP_DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";

const BOOT_KNOBS: [(&str, &str); 4] = [
    (
        "swappiness",
        "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
    ),
    (
        "thp",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    ),
    (
        "defrag",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: defrag}\nset: always\n",
    ),
    (
        "poll",
        "persistence: tmpfiles\nkind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_ns}\nset: 200000\n",
    ),
];

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn apply_boot_applies_each_persistent_knob_on_its_own_and_names_the_one_that_failed() {
    let (_tmp, root) = vm();
    let m = knobs(&BOOT_KNOBS);
    let swappiness = read(&root, "proc/sys/vm/swappiness");
    let defrag = read(&root, THP_DEFRAG);
    // The kernel refuses the defrag write (EINVAL): that knob alone rolls back.
    let o = command(&root, m.path(), &["apply", "--boot", "--format", "json"])
        .env(hostknob::apply::ERRNO_VAR, format!("{THP_DEFRAG}=22"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", out(&o), err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let applied: Vec<&str> = v["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(applied, ["thp", "poll"], "{v:#}");
    assert_eq!(v["failed"][0]["id"], "defrag", "{v:#}");
    assert_eq!(v["failed"].as_array().unwrap().len(), 1);
    assert_eq!(v["not_at_boot"][0]["id"], "swappiness", "{v:#}");
    assert!(
        err(&o).contains("defrag") && err(&o).contains("the other knobs were applied"),
        "{}",
        err(&o)
    );
    // The others stand; the refused one and the runtime one are as they were.
    assert_eq!(
        read(&root, "sys/kernel/mm/transparent_hugepage/enabled"),
        "never"
    );
    assert_eq!(
        read(&root, "sys/module/haltpoll/parameters/guest_halt_poll_ns"),
        "200000"
    );
    assert_eq!(read(&root, THP_DEFRAG), defrag);
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), swappiness);

    // A boot with nothing refused: exit 0, and the text names what it left out.
    let o = run(&root, m.path(), &["apply", "--boot"]);
    let text = ok(&o);
    assert!(
        text.contains("swappiness: not applied at boot: persistence: runtime"),
        "{text}"
    );
    assert!(text.contains(&format!("--- {THP_DEFRAG}")), "{text}");
}

#[test]
fn a_bounded_wait_for_a_held_lock_gives_up_changing_nothing() {
    let (_tmp, root) = vm();
    let m = knobs(&BOOT_KNOBS);
    let gate = tempfile::tempdir().unwrap();
    // The first apply holds the lock, stopped before its first write.
    let first = gated(&root, m.path(), &["apply", "thp"], gate.path());
    wait_for(&gate.path().join("at-0"));
    let before = journal(&root);
    let o = run(
        &root,
        m.path(),
        &["apply", "--boot", "--wait", "--wait-limit", "300ms"],
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{}", out(&o), err(&o));
    let e = err(&o);
    assert!(
        e.contains(&format!(
            "another hostknob (pid {}) still holds",
            first.id()
        )) && e.contains("after --wait-limit 300ms"),
        "{e}"
    );
    assert_eq!(journal(&root), before, "nothing was journaled");
    assert_eq!(
        read(&root, "sys/module/haltpoll/parameters/guest_halt_poll_ns"),
        "0"
    );
    open_gate(gate.path(), 1);
    ok(&first.wait_with_output().unwrap());
    // --wait-limit means nothing without --wait.
    let o = run(&root, m.path(), &["apply", "thp", "--wait-limit", "1s"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("--wait"), "{}", err(&o));
}
