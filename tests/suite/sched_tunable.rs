//! `sched-tunable` (issue 46 item 4) on copies of the VM capture given the
//! debugfs files kernel/sched/debug.c makes (the capture holds no debugfs),
//! under the kernel releases whose names differ: applied, read back and
//! reverted byte for byte; a name the kernel lacks not-applicable with the
//! reason; and tuned's `[scheduler]` lines imported as tuned writes them on
//! the capture's kernel (item 3's `group.` rules too).

use std::path::Path;

use crate::support::*;

/// The debugfs files of a 2-CPU 6.18 kernel at their defaults
/// (kernel/sched/fair.c: base slice 0.7 ms times 1 + ilog2(2), log scaling).
const DEBUGFS_6_18: [(&str, &str); 4] = [
    ("sys/kernel/debug/sched/base_slice_ns", "1400000\n"),
    ("sys/kernel/debug/sched/migration_cost_ns", "500000\n"),
    ("sys/kernel/debug/sched/nr_migrate", "32\n"),
    ("sys/kernel/debug/sched/tunable_scaling", "1\n"),
];

fn tunable(name: &str, value: &str) -> String {
    format!("persistence: runtime\nkind: sched-tunable\ntarget: {{name: {name}}}\nset: {value}\n")
}

#[test]
fn sched_tunable_applies_and_reverts_in_debugfs() {
    let (_tmp, root) = vm();
    write_files(&root, &DEBUGFS_6_18);
    let file = root.join("sys/kernel/debug/sched/migration_cost_ns");
    let m = knobs(&[
        ("migration", &tunable("migration_cost_ns", "5000000")),
        ("latency", &tunable("latency_ns", "6000000")),
        ("slice", &tunable("base_slice_ns", "3000000")),
    ]);
    let plan = ok(&run(&root, m.path(), &["apply", "migration", "--dry-run"]));
    assert!(
        plan.contains("/sys/kernel/debug/sched/migration_cost_ns"),
        "{plan}"
    );
    assert!(plan.contains("\n-500000\n+5000000\n"), "{plan}");
    assert!(
        !plan.contains("update_sysctl"),
        "migration_cost_ns is not scaled: {plan}"
    );
    // base_slice_ns is set again from its boot value on CPU hotplug: said.
    let plan = ok(&run(&root, m.path(), &["apply", "slice", "--dry-run"]));
    assert!(plan.contains("\n-1400000\n+3000000\n"), "{plan}");
    assert!(
        plan.contains(
            "`update_sysctl` from `rq_online_fair`/`rq_offline_fair` undoes a debugfs write"
        ),
        "{plan}"
    );
    ok(&run(&root, m.path(), &["apply", "migration"]));
    assert_eq!(read_file(&file), "5000000");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(
        knob(&report, "migration")["status"],
        "unpersisted",
        "{report:#}"
    );
    // 6.18: EEVDF removed latency_ns.
    let l = knob(&report, "latency");
    assert_eq!(l["status"], "not-applicable", "{l:#}");
    assert!(
        l["detail"]
            .as_str()
            .unwrap()
            .contains("removed with EEVDF in 6.6"),
        "{l:#}"
    );
    ok(&run(&root, m.path(), &["revert", "migration"]));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "500000\n",
        "as found, byte for byte"
    );
}

fn read_file(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn each_kernel_release_has_its_names_and_places() {
    // 6.1: before EEVDF, in debugfs.
    let (_tmp, root) = vm();
    write_files(
        &root,
        &[
            ("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n"),
            ("sys/kernel/debug/sched/min_granularity_ns", "3000000\n"),
        ],
    );
    let m = knobs(&[
        ("gran", &tunable("min_granularity_ns", "10000000")),
        ("slice", &tunable("base_slice_ns", "3000000")),
    ]);
    let plan = ok(&run(&root, m.path(), &["apply", "gran", "--dry-run"]));
    assert!(
        plan.contains("/sys/kernel/debug/sched/min_granularity_ns"),
        "{plan}"
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let s = knob(&report, "slice");
    assert_eq!(s["status"], "not-applicable", "{s:#}");
    assert!(
        s["detail"]
            .as_str()
            .unwrap()
            .contains("the name since 6.6 (EEVDF) of min_granularity_ns"),
        "{s:#}"
    );

    // 5.10: a sysctl with its own range.
    let (_tmp, root) = vm();
    write_files(
        &root,
        &[
            ("proc/sys/kernel/osrelease", "5.10.0-28-amd64\n"),
            ("proc/sys/kernel/sched_min_granularity_ns", "3000000\n"),
        ],
    );
    let m = knobs(&[
        ("gran", &tunable("min_granularity_ns", "10000000")),
        ("tiny", &tunable("min_granularity_ns", "50000")),
    ]);
    ok(&run(&root, m.path(), &["apply", "gran"]));
    assert_eq!(
        read_file(&root.join("proc/sys/kernel/sched_min_granularity_ns")),
        "10000000"
    );
    let o = run(&root, m.path(), &["apply", "tiny", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        err(&o).contains("50000 is outside 100000..1000000000"),
        "{}",
        err(&o)
    );
}

#[test]
fn a_capture_without_debugfs_says_so() {
    let (_tmp, root) = vm();
    let m = knobs(&[("migration", &tunable("migration_cost_ns", "5000000"))]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "migration");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("debugfs is not mounted here"),
        "{k:#}"
    );
}

/// A VM copy with Debian's tuned profiles, `isolated_cores` given.
fn vm_with_tuned() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = vm();
    let dest = root.join("usr/lib/tuned");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg("/usr/lib/tuned")
        .arg(&dest)
        .status()
        .unwrap();
    assert!(st.success());
    write_files(
        &root,
        &[
            ("etc/tuned/realtime-variables.conf", "isolated_cores=1\n"),
            (
                "etc/tuned/realtime-virtual-guest-variables.conf",
                "isolated_cores=1\n",
            ),
        ],
    );
    (tmp, root)
}

fn import(root: &Path, profile: &str, out: &Path) -> String {
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        profile,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A YAML scalar as text, quoted or not.
fn text(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
    }
}

fn imported(dir: &Path, id: &str) -> serde_yaml::Value {
    let p = dir.join(format!("{id}.yaml"));
    serde_yaml::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[test]
fn tuned_scheduler_lines_import_as_tuned_writes_them_on_the_capture_kernel() {
    if !Path::new("/usr/lib/tuned/mssql/tuned.conf").exists() {
        println!("skipped: Debian's tuned profiles absent (/usr/lib/tuned)");
        return;
    }
    let (_tmp, root) = vm_with_tuned();
    write_files(&root, &DEBUGFS_6_18);
    // Not the default tuned sets, so the plan has a write.
    write_files(
        &root,
        &[("sys/kernel/debug/sched/migration_cost_ns", "250000\n")],
    );
    let out = tempfile::tempdir().unwrap();
    import(&root, "mssql", out.path());
    let k = imported(out.path(), "tuned-mssql-scheduler-sched-migration-cost-ns");
    assert_eq!(k["kind"], "sched-tunable");
    assert_eq!(k["target"]["name"], "migration_cost_ns");
    assert_eq!(text(&k["set"]), "500000");
    let not = std::fs::read_to_string(out.path().join("NOT-IMPORTED.md")).unwrap();
    for (opt, why) in [
        (
            "sched_min_granularity_ns",
            "renamed base_slice_ns with EEVDF in 6.6",
        ),
        ("sched_latency_ns", "removed with EEVDF in 6.6"),
        ("sched_wakeup_granularity_ns", "removed with EEVDF in 6.6"),
    ] {
        assert!(
            not.lines()
                .any(|l| l.contains(opt) && l.contains(why) && l.contains("6.18.44")),
            "{opt}: {not}"
        );
    }
    // The imported knob plans on the copy.
    let plan = ok(&run(
        &root,
        out.path(),
        &[
            "apply",
            "tuned-mssql-scheduler-sched-migration-cost-ns",
            "--dry-run",
        ],
    ));
    assert!(
        plan.contains("/sys/kernel/debug/sched/migration_cost_ns"),
        "{plan}"
    );
    assert!(plan.contains("\n-250000\n+500000\n"), "{plan}");

    // A 6.1 kernel: min_granularity_ns still exists, in debugfs.
    write_files(&root, &[("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")]);
    let out = tempfile::tempdir().unwrap();
    import(&root, "mssql", out.path());
    let k = imported(out.path(), "tuned-mssql-scheduler-sched-min-granularity-ns");
    assert_eq!(k["target"]["name"], "min_granularity_ns");
    assert_eq!(text(&k["set"]), "15000000");
}

#[test]
fn tuned_group_rules_import_as_thread_policies_the_last_rule_winning() {
    if !Path::new("/usr/lib/tuned/realtime-virtual-guest/tuned.conf").exists() {
        println!("skipped: Debian's tuned profiles absent (/usr/lib/tuned)");
        return;
    }
    let (_tmp, root) = vm_with_tuned();
    let out = tempfile::tempdir().unwrap();
    import(&root, "realtime-virtual-guest", out.path());
    let k = imported(
        out.path(),
        "tuned-realtime-virtual-guest-scheduler-group-ksoftirqd",
    );
    assert_eq!(k["kind"], "thread-policy");
    assert_eq!(k["set"]["policy"], "fifo");
    assert_eq!(k["set"]["priority"], 2);
    assert_eq!(k["target"]["include"][0], "^ksoftirqd");
    // `^\[ktimers` also matches ktimersoftd, which a later rule gives priority 3.
    let t = imported(
        out.path(),
        "tuned-realtime-virtual-guest-scheduler-group-ktimers",
    );
    let excl: Vec<&str> = t["target"]["exclude"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(excl.contains(&"^ktimersoftd"), "{t:?}");
    let r = imported(
        out.path(),
        "tuned-realtime-virtual-guest-scheduler-group-ktimersoftd",
    );
    assert_eq!(r["set"]["priority"], 3);
    assert!(
        r["target"].get("exclude").is_none(),
        "the last rule excludes nothing: {r:?}"
    );
    let imported_md = std::fs::read_to_string(out.path().join("IMPORTED.md")).unwrap();
    assert!(imported_md.contains("group.rcuc"), "{imported_md}");
}
