//! Issue 46 items 1 and 2: the `block` kind on a VM copy with block devices
//! built in (support/block.rs), and bounds (`at-least`, `at-most`) on
//! sysctl, sysfs and block: apply, read back, audit, revert, the kernel's
//! rules and the refusals naming file, line and field.

use std::path::Path;

use crate::support::block::{DISKS, add_disks};
use crate::support::*;

fn vm_with_disks() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    add_disks(&root, &DISKS);
    (tmp, root)
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

fn status<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    knob(report, id)["status"].as_str().unwrap()
}

/// In effect: `ok`, or `unpersisted` for a runtime knob (docs/persistence.md).
fn in_effect(report: &serde_json::Value, id: &str) -> bool {
    ["ok", "unpersisted"].contains(&status(report, id))
}

#[test]
fn block_settings_apply_read_back_audit_and_revert_byte_identical_scheduler_first() {
    let (_tmp, root) = vm_with_disks();
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "vd-queue",
            "persistence: runtime\nkind: block\ntarget: {transport: vd}\n\
             set: {nr_requests: 128, scheduler: kyber, read_ahead_kb: {at-least: 4096}}\n",
        ),
        (
            "no-merges",
            "persistence: runtime\nkind: block\ntarget: {all: true}\nset: {nomerges: 2}\n",
        ),
        (
            "ssd-rq",
            "persistence: runtime\nkind: block\ntarget: {rotational: false}\nset: {rq_affinity: 2}\n",
        ),
    ]);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    let q = "/sys/block/vda/queue";
    assert_eq!(read(&root, &format!("{q}/scheduler")), "kyber");
    assert_eq!(read(&root, &format!("{q}/nr_requests")), "128");
    assert_eq!(read(&root, &format!("{q}/read_ahead_kb")), "4096");
    // Every disk but the removable sr0; dm-0 is bio-based but has nomerges.
    for dev in ["vda", "nvme0n1", "dm-0"] {
        assert_eq!(
            read(&root, &format!("/sys/block/{dev}/queue/nomerges")),
            "2",
            "{dev}"
        );
    }
    assert_eq!(read(&root, "/sys/block/sr0/queue/nomerges"), "0");
    // rotational: false is nvme0n1 only.
    assert_eq!(read(&root, "/sys/block/nvme0n1/queue/rq_affinity"), "2");
    assert_eq!(read(&root, &format!("{q}/rq_affinity")), "1");
    // The scheduler resets nr_requests: it is written first.
    let paths = journal_paths(&root);
    let at = |f: &str| {
        paths
            .iter()
            .position(|p| p.ends_with(f))
            .unwrap_or_else(|| panic!("{f}: {paths:?}"))
    };
    assert!(
        at("vda/queue/scheduler") < at("vda/queue/nr_requests"),
        "{paths:?}"
    );
    let (report, _) = audit_json(&root, m.path(), None);
    for id in ["vd-queue", "no-merges", "ssd-rq"] {
        assert!(in_effect(&report, id), "{id}: {report:#}");
    }
    let again = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(again.contains("nothing to write"), "{again}");
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn a_scheduler_change_rewrites_nr_requests_even_when_it_already_reads_the_value() {
    let (_tmp, root) = vm_with_disks();
    // vda reads nr_requests 256 now; kyber would set its own default.
    let m = knobs(&[(
        "vd",
        "persistence: runtime\nkind: block\ntarget: {name: vda}\nset: {scheduler: kyber, nr_requests: 256}\n",
    )]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(plan.contains("nr_requests"), "{plan}");
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let paths = journal_paths(&root);
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(
        paths[0].ends_with("scheduler") && paths[1].ends_with("nr_requests"),
        "{paths:?}"
    );
}

#[test]
fn bio_based_and_unmatched_devices_are_not_applicable_with_the_reason() {
    let (_tmp, root) = vm_with_disks();
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "dm-sched",
            "persistence: runtime\nkind: block\ntarget: {transport: dm}\nset: {scheduler: none}\n",
        ),
        (
            "no-mmc",
            "persistence: runtime\nkind: block\ntarget: {transport: mmc}\nset: {read_ahead_kb: 512}\n",
        ),
    ]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(status(&report, "dm-sched"), "not-applicable", "{report:#}");
    let text = report.to_string();
    assert!(text.contains("dm-0 is bio-based"), "{text}");
    assert!(text.contains("stacked on vda"), "{text}");
    assert!(
        text.contains("no block device here is chosen by transport mmc"),
        "{text}"
    );
    let out = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(out.contains("not applicable here"), "{out}");
    assert_tree(&pristine, &root, "nothing applicable, nothing written");
}

#[test]
fn a_scheduler_the_device_does_not_offer_and_max_sectors_above_hw_are_refused_at_file_line_field() {
    let (_tmp, root) = vm_with_disks();
    for (case, file, line, field, fragment) in [
        (
            "block-scheduler-not-offered",
            "block.yaml",
            7,
            "set.scheduler",
            "vda offers none, mq-deadline, kyber (/sys/block/vda/queue/scheduler), not bfq",
        ),
        (
            "block-max-sectors-above-hw",
            "block.yaml",
            7,
            "set.max_sectors_kb",
            "256 is above nvme0n1's max_hw_sectors_kb 128",
        ),
    ] {
        let before = tree(&root);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/bad-manifests")
            .join(case);
        for command in ["audit", "apply"] {
            let mut args = vec![
                "--root",
                root.to_str().unwrap(),
                "--manifest",
                dir.to_str().unwrap(),
                command,
            ];
            if command == "apply" {
                args.push("--all");
            }
            let out = hostknob(&args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{case} {command}: {err}");
            let want = format!("{}:{line}: {field}: ", dir.join(file).display());
            assert!(err.contains(&want), "{case} {command}: {want:?} in {err}");
            assert!(
                err.contains(fragment),
                "{case} {command}: {fragment:?} in {err}"
            );
        }
        assert_tree(&before, &root, case);
    }
}

#[test]
fn an_at_least_bound_writes_only_below_it_audits_ok_and_reverts_what_it_wrote() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    // The capture keeps only the sysctls inventory reads: this one as Linux 5.4+ boots with it.
    write_files(&root, &[("proc/sys/net/core/somaxconn", "4096\n")]);
    let pristine = tree(&root);
    let path = "/proc/sys/net/core/somaxconn";
    let found: i64 = read(&root, path).parse().unwrap();
    let body = |n: i64| {
        format!(
            "persistence: runtime\nkind: sysctl\ntarget: {{name: net.core.somaxconn}}\nset: {{at-least: {n}}}\n"
        )
    };
    // Below the value: satisfied, nothing written.
    let below = knobs(&[("backlog", &body(found - 1))]);
    let out = ok(&run(&root, below.path(), &["apply", "--all"]));
    assert!(out.contains("already in effect"), "{out}");
    assert!(journal(&root).is_empty());
    let (report, _) = audit_json(&root, below.path(), None);
    assert!(in_effect(&report, "backlog"), "{report:#}");
    assert_tree(&pristine, &root, "a satisfied bound writes nothing");
    // Above it: the bound is written, audited ok, reverted to the value found.
    let above = knobs(&[("backlog", &body(found + 1000))]);
    let (report, _) = audit_json(&root, above.path(), None);
    assert_eq!(status(&report, "backlog"), "drift", "{report:#}");
    assert!(
        report
            .to_string()
            .contains(&format!("should be at least {}", found + 1000)),
        "{report:#}"
    );
    ok(&run(&root, above.path(), &["apply", "--all"]));
    assert_eq!(read(&root, path), (found + 1000).to_string());
    let (report, _) = audit_json(&root, above.path(), None);
    assert!(in_effect(&report, "backlog"), "{report:#}");
    ok(&run(&root, above.path(), &["revert", "--all"]));
    assert_eq!(read(&root, path), found.to_string());
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn at_most_on_sysfs_and_block_and_a_bound_kept_by_a_boot_unit_only() {
    let (_tmp, root) = vm_with_disks();
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "ra-cap",
            "persistence: boot\nkind: block\ntarget: {name: \"nvme*\"}\nset: {read_ahead_kb: {at-most: 64}}\n",
        ),
        (
            "ra-floor",
            "persistence: runtime\nkind: sysfs\ntarget: {path: /sys/block/vda/queue/read_ahead_kb}\nset: {at-least: 16}\n",
        ),
    ]);
    let out = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(out.contains("ra-floor: already in effect"), "{out}");
    assert_eq!(read(&root, "/sys/block/nvme0n1/queue/read_ahead_kb"), "64");
    assert_eq!(read(&root, "/sys/block/vda/queue/read_ahead_kb"), "128");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert");
    // A fixed line at boot would lower a host that boots above the bound.
    let tmpfiles = knobs(&[(
        "floor",
        "persistence: sysctl.d\nkind: sysctl\ntarget: {name: net.core.somaxconn}\nset: {at-least: 8}\n",
    )]);
    let err = stderr(&run(&root, tmpfiles.path(), &["knobs"]));
    assert!(
        err.contains(
            ":5: persistence: sysctl.d cannot hold a sysctl knob; use one of: runtime, boot"
        ),
        "{err}"
    );
}

/// The knob file `id` of an import's output directory.
fn imported(dir: &Path, id: &str) -> serde_yaml::Value {
    let text = std::fs::read_to_string(dir.join(format!("{id}.yaml")))
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    serde_yaml::from_str(&text).unwrap()
}

#[test]
fn tuned_disk_readahead_elevator_and_greater_than_lines_import_as_block_knobs_and_bounds() {
    let (_tmp, root) = vm_with_disks();
    let from = tempfile::tempdir().unwrap();
    // throughput-performance's lines, and the [disk] options tuned 2.20 has.
    write_files(
        from.path(),
        &[(
            "disks/tuned.conf",
            "[main]\nsummary=test\n[disk]\nreadahead=>4096\nelevator=kyber\napm=128\nspindown=6\n\
             readahead_multiply=2\nscheduler_quantum=8\n[sysctl]\nnet.core.somaxconn=>2048\n\
             kernel.pid_max=>lots\n",
        )],
    );
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("m");
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        "disks",
        "--from",
        from.path().to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&o);
    let ra = imported(&dir, "tuned-disks-disk-readahead");
    assert_eq!(ra["kind"], "block");
    assert_eq!(ra["target"]["all"], true);
    assert_eq!(ra["set"]["read_ahead_kb"]["at-least"], "4096");
    assert_eq!(ra["persistence"], "boot");
    let el = imported(&dir, "tuned-disks-disk-elevator");
    assert_eq!(el["set"]["scheduler"], "kyber");
    let so = imported(&dir, "tuned-disks-sysctl-net-core-somaxconn");
    assert_eq!(so["set"]["at-least"], "2048");
    assert_eq!(so["persistence"], "boot");
    let not = std::fs::read_to_string(dir.join("NOT-IMPORTED.md")).unwrap();
    for (line, why) in [
        ("apm", "hdparm -B"),
        ("spindown", "hdparm -S"),
        ("readahead_multiply", "a multiple of the readahead"),
        ("scheduler_quantum", "CFQ, removed"),
        ("kernel.pid_max", "not one, writes `>lots` as it stands"),
    ] {
        let row = not
            .lines()
            // By the option's own cell: apm's reason names spindown too.
            .find(|r| r.contains(&format!("| `{line}` |")))
            .unwrap_or_else(|| panic!("{line}: {not}"));
        assert!(row.contains(why), "{line}: {row}");
    }
    // The imported knobs load and apply on the copy: every disk gets the
    // readahead floor, vda (mq-deadline) and nvme0n1 (none) kyber.
    let pristine = tree(&root);
    let applied = ok(&run(
        &root,
        &dir,
        &[
            "apply",
            "tuned-disks-disk-readahead",
            "tuned-disks-disk-elevator",
        ],
    ));
    assert!(applied.contains("wrote and read back"), "{applied}");
    for dev in ["vda", "nvme0n1", "dm-0"] {
        assert_eq!(
            read(&root, &format!("/sys/block/{dev}/queue/read_ahead_kb")),
            "4096",
            "{dev}"
        );
    }
    assert_eq!(read(&root, "/sys/block/nvme0n1/queue/scheduler"), "kyber");
    ok(&run(&root, &dir, &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert");
}
