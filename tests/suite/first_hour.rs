//! Issue 38: what tripped a newcomer. A knob the kernel will ignore is said
//! before the write (dry run, apply's summary, its JSON), and `knobs` shows
//! verify's `not-honoured` finding in its verified column.

use std::path::Path;

use crate::support::*;

const IDLE_OFF: (&str, &str) = (
    "idle-off",
    "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: all, states: {names: [haltpoll idle]}}\nset: disabled\n",
);

fn set_governor(root: &Path, gov: &str) {
    for f in ["current_governor", "current_governor_ro"] {
        std::fs::write(
            root.join("sys/devices/system/cpu/cpuidle").join(f),
            format!("{gov}\n"),
        )
        .unwrap();
    }
}

#[test]
fn a_dry_run_says_the_haltpoll_governor_ignores_per_state_disable_before_any_write() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[IDLE_OFF]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "idle-off", "--dry-run"],
    );
    let text = ok(&o);
    assert!(
        text.contains("NOT HONOURED") && text.contains("ignores per-state disable"),
        "{text}"
    );
    // Said beside the knob's diff, before the summary line, and again in it.
    let at = text.find("NOT HONOURED").unwrap();
    assert!(at < text.find("dry run:").unwrap(), "{text}");
    assert!(
        text.contains("warning: idle-off: would be written but not honoured"),
        "{text}"
    );
    assert_tree(&before, &root, "a dry run");
    // The JSON carries it, with the kernel source.
    let v = json_of(&run(
        &root,
        m.path(),
        &[
            "--host",
            "vm",
            "--format",
            "json",
            "apply",
            "idle-off",
            "--dry-run",
        ],
    ));
    let why = v["knobs"][0]["not_honoured"].as_str().unwrap();
    assert!(why.contains("haltpoll.c"), "{why}");
    // The apply itself writes (the kernel takes the value) and says it again.
    let text = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "idle-off"],
    ));
    assert!(
        text.contains("warning: idle-off: written but not honoured"),
        "{text}"
    );
    // Under `menu`, which honours per-state disable: no warning.
    let (_t2, root2) = copy_host("fc-haltpoll-2cpu");
    set_governor(&root2, "menu");
    let text = ok(&run(
        &root2,
        m.path(),
        &["--host", "vm", "apply", "idle-off", "--dry-run"],
    ));
    assert!(!text.contains("NOT HONOURED"), "{text}");
}

#[test]
fn a_resume_limit_the_haltpoll_governor_would_ignore_is_said_at_plan_time() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    // A halt state slower than the limit (the capture's exits in 1 µs, which
    // any limit of 1 µs or more allows anyway).
    for cpu in 0..2 {
        std::fs::write(
            root.join(format!(
                "sys/devices/system/cpu/cpu{cpu}/cpuidle/state1/latency"
            )),
            "100\n",
        )
        .unwrap();
    }
    let manifest_of = |set: &str| {
        knobs(&[(
            "resume",
            &format!(
                "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {{cpus: all}}\nset: \"{set}\"\n"
            ),
        )])
    };
    let m = manifest_of("20");
    let text = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "resume", "--dry-run"],
    ));
    assert!(
        text.contains("NOT HONOURED") && text.contains("honours only a zero latency request"),
        "{text}"
    );
    assert!(text.contains("(100 µs)"), "{text}");
    // Applied, audit agrees with what the plan said.
    ok(&run(&root, m.path(), &["--host", "vm", "apply", "resume"]));
    let (r, code) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(
        (knob(&r, "resume")["status"].as_str(), code),
        (Some("not-honoured"), 2),
        "{r:#}"
    );
    // `n/a` is the zero request haltpoll honours (it polls): no warning.
    let (_t2, root2) = copy_host("fc-haltpoll-2cpu");
    let m = manifest_of("n/a");
    let text = ok(&run(
        &root2,
        m.path(),
        &["--host", "vm", "apply", "resume", "--dry-run"],
    ));
    assert!(!text.contains("NOT HONOURED"), "{text}");
}

#[test]
fn knobs_shows_not_honoured_evidence_in_its_verified_column() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[IDLE_OFF_CPU1]);
    // A real verify under the copy: the counters never move, so the idle
    // check is `not-checked`; on the live VM it finds the state entered and
    // records `not-honoured`, which is what the ledger says here.
    let v = short_verify(&root, m.path(), "idle-off-cpu1");
    assert_eq!(v["honoured"]["status"], "not-checked", "{}", v["honoured"]);
    let ledger = ledger_file(&root);
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(text.matches("status: not-checked").count(), 1, "{text}");
    std::fs::write(
        &ledger,
        text.replace("status: not-checked", "status: not-honoured"),
    )
    .unwrap();
    let o = run(&root, m.path(), &["--host", "vm", "knobs"]);
    let table = out(&o);
    let row = table
        .lines()
        .find(|l| l.contains("idle-off-cpu1"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("not-honoured ("), "{row}");
    assert!(!row.contains("inconclusive"), "{row}");
}

#[test]
fn doc_check_does_not_depend_on_how_the_manifest_path_is_spelled() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    copy_tree(&repo().join("manifest"), &w.join("manifest"));
    std::fs::create_dir(w.join("hosts")).unwrap();
    let root = corpus_host("fc-haltpoll-2cpu");
    let doc = |manifest: &str, check: bool| {
        let mut c = hostknob_command(&["--root", root.to_str().unwrap(), "--host", "vm"]);
        c.args(["--manifest", manifest, "doc"]);
        if check {
            c.arg("--check");
        }
        c.args(["--out", "hosts/vm.md"]).current_dir(w);
        c.output().unwrap()
    };
    ok(&doc("manifest", false));
    let text = std::fs::read_to_string(w.join("hosts/vm.md")).unwrap();
    // Named from the document's directory, as a reader of hosts/ finds it.
    assert!(text.contains("the manifest is `../manifest`"), "{text}");
    let abs = w.join("manifest");
    for spelled in [abs.to_str().unwrap(), "./manifest/", "hosts/../manifest"] {
        let o = doc(spelled, true);
        assert_eq!(
            o.status.code(),
            Some(0),
            "--manifest {spelled}: {}",
            out(&o)
        );
    }
}

#[test]
fn irq_diffs_are_grouped_and_revert_says_where_an_interrupt_still_is() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    // The managed virtio-blk queue, read-only as on the live VM.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("proc/irq/36/smp_affinity_list"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    // IRQ 28 starts on CPU 1 alone, where the kernel delivers it.
    write_files(
        &root,
        &[
            ("proc/irq/28/smp_affinity_list", "1\n"),
            ("proc/irq/28/effective_affinity_list", "1\n"),
        ],
    );
    let m = knobs(&[(
        "virtio-home",
        "persistence: runtime\nkind: irq-affinity\ntarget: {actions: [\"virtio*\"]}\nset: \"0\"\n",
    )]);
    let plan = ok(&run(
        &root,
        m.path(),
        &["apply", "virtio-home", "--dry-run"],
    ));
    assert!(
        plan.contains("/proc/irq/{29-35,37-43}/smp_affinity_list\t(14 files)"),
        "{plan}"
    );
    // IRQ 28 changes from another value: its own diff, with its label.
    assert!(
        plan.contains("/proc/irq/28/smp_affinity_list\t(IRQ 28"),
        "{plan}"
    );
    // The JSON keeps one group per IRQ.
    let v = json_of(&run(
        &root,
        m.path(),
        &["--format", "json", "apply", "virtio-home", "--dry-run"],
    ));
    assert_eq!(
        v["knobs"][0]["changes"].as_array().unwrap().len(),
        15,
        "{v}"
    );
    ok(&run(&root, m.path(), &["apply", "virtio-home"]));
    // The kernel moved IRQ 28 to CPU 0 when it next fired.
    write_files(&root, &[("proc/irq/28/effective_affinity_list", "0\n")]);
    let text = ok(&run(&root, m.path(), &["revert", "virtio-home"]));
    assert_eq!(
        std::fs::read_to_string(root.join("proc/irq/28/smp_affinity_list")).unwrap(),
        "1\n"
    );
    assert!(
        text.contains("/proc/irq/28: effective affinity still 0 (restored 1)"),
        "{text}"
    );
    // IRQs whose effective CPU lies within their restored list: nothing to say.
    assert!(!text.contains("/proc/irq/29: effective"), "{text}");
    // Audit after the revert says the same (issue 38 item 9), not only apply.
    let audit = out(&run(&root, m.path(), &["audit", "virtio-home"]));
    assert!(
        audit.contains("effective affinity still 0, outside its list 1"),
        "{audit}"
    );
    assert_eq!(
        audit.matches("effective affinity still").count(),
        1,
        "{audit}"
    );
}

#[test]
fn audit_and_knobs_say_why_a_named_knob_is_not_for_this_host() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "k.yaml",
        "id: thp-rpc\ntitle: t\nwhy: w\nhosts: [rpc-ap-*]\npersistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    )]);
    let args = |cmd: &str| run(&host, m.path(), &["--host", "vm", cmd, "thp-rpc"]);
    for cmd in ["audit", "knobs"] {
        let o = args(cmd);
        let text = out(&o);
        assert!(
            text.contains("Not for this host (vm):")
                && text.contains("thp-rpc (thp): hosts: rpc-ap-*"),
            "{cmd}: {text}"
        );
        assert!(text.contains("k.yaml:1"), "{cmd}: {text}");
    }
    let (r, code) = audit_json(&host, m.path(), Some("vm"));
    assert_eq!(code, 0);
    // Not named: counted, not listed.
    assert!(r["for_other_hosts"].is_null(), "{r:#}");
    // `knobs --all-hosts` lists every knob for other hosts, with its hosts.
    let v = json_of(&run(
        &host,
        m.path(),
        &["--host", "vm", "--format", "json", "knobs", "--all-hosts"],
    ));
    assert_eq!(v["for_other_hosts"][0]["id"], "thp-rpc", "{v}");
    assert_eq!(v["for_other_hosts"][0]["hosts"], "rpc-ap-*", "{v}");
    let text = ok(&run(
        &host,
        m.path(),
        &["--host", "vm", "knobs", "--all-hosts"],
    ));
    assert!(text.contains("thp-rpc (thp): hosts: rpc-ap-*"), "{text}");
}

#[test]
fn a_misspelt_kind_or_field_names_the_nearest_spelling() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "k.yaml",
        "id: k\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: cpuidle-stat\ntarget: {cpus: all}\nset: disabled\n",
    )]);
    let e = err(&run(&host, m.path(), &["knobs"]));
    assert!(e.contains("did you mean \"cpuidle-state\"?"), "{e}");
    let m = manifest(&[(
        "k.yaml",
        "id: k\ntitle: t\nwhy: w\nhosts: \"*\"\npersistance: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    )]);
    let e = err(&run(&host, m.path(), &["knobs"]));
    assert!(
        e.contains("k.yaml:5") && e.contains("did you mean \"persistence\"?"),
        "{e}"
    );
    let m = manifest(&[(
        "k.yaml",
        "id: k\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: cpuidle-state\ntarget: {cpus: all, states: {name: [C1]}}\nset: disabled\n",
    )]);
    let e = err(&run(&host, m.path(), &["knobs"]));
    assert!(e.contains("did you mean \"names\"?"), "{e}");
}
