//! Housekeeping placement (issue 21 item 4): `workqueue-cpumask` and
//! `systemd-cpu-affinity` on copies of real captures, applied, audited,
//! persisted and reverted byte for byte.
//!
//! The captures predate these kinds and hold no `/sys/devices/virtual/workqueue`,
//! no `/proc/1` and no systemd configuration: each test adds those files to
//! its copy as the capture's own machine (the 2-vCPU VM, Linux 6.18, systemd
//! 252) shows them, which the opt-in live test checks against the kernel.

use std::path::Path;
use std::process::Command;

use crate::support::*;

const WQ: &str = "sys/devices/virtual/workqueue";

/// The VM's workqueue directory as its kernel shows it: the global mask, the
/// requested and isolated masks, two unbound WQ_SYSFS workqueues and (added)
/// a bound one, which has `per_cpu` and no `cpumask`.
fn vm_workqueues(root: &Path) {
    write_files(
        root,
        &[
            ("sys/devices/virtual/workqueue/cpumask", "3\n"),
            ("sys/devices/virtual/workqueue/cpumask_requested", "3\n"),
            ("sys/devices/virtual/workqueue/cpumask_isolated", "0\n"),
            ("sys/devices/virtual/workqueue/writeback/cpumask", "3\n"),
            ("sys/devices/virtual/workqueue/writeback/nice", "0\n"),
            (
                "sys/devices/virtual/workqueue/blkcg_punt_bio/cpumask",
                "3\n",
            ),
            ("sys/devices/virtual/workqueue/events_bound/per_cpu", "1\n"),
        ],
    );
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

const WQ_GLOBAL: (&str, &str) = (
    "wq",
    "persistence: runtime\nkind: workqueue-cpumask\nset: 0\n",
);
const WQ_EACH: (&str, &str) = (
    "wq-each",
    "persistence: boot\nkind: workqueue-cpumask\ntarget: {workqueues: [\"*\"]}\nset: \"0\"\n",
);

#[test]
fn workqueue_cpumask_writes_the_hex_mask_reads_back_a_cpu_list_and_reverts_byte_identical() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    vm_workqueues(&root);
    let pristine = tree(&root);
    let m = knobs(&[WQ_GLOBAL, WQ_EACH]);

    let (before, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 2, "{before:#}");
    let k = knob(&before, "wq");
    assert_eq!(k["status"], "drift", "{k:#}");
    assert_eq!(
        k["current"][0]["value"], "0-1",
        "the mask 3 as a CPU list: {k:#}"
    );

    let dry = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    // The plan's diff in CPU lists (issue 49 item 5), the file's hex masks in its label.
    assert!(dry.contains("-0-1\n+0\n"), "{dry}");
    assert!(dry.contains("the file holds hex masks 3 -> 1"), "{dry}");
    assert!(
        dry.contains("events_bound is a per-CPU (bound) workqueue"),
        "{dry}"
    );
    assert_same(&pristine, &tree(&root), "a dry run");

    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back 3 files"), "{applied}");
    for f in ["cpumask", "writeback/cpumask", "blkcg_punt_bio/cpumask"] {
        assert_eq!(read(&root, &format!("{WQ}/{f}")).trim(), "1", "{f}");
    }
    assert!(!root.join(WQ).join("events_bound/cpumask").exists());
    let (after, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "{after:#}");
    assert_eq!(knob(&after, "wq")["status"], "unpersisted");
    assert_eq!(knob(&after, "wq")["current"][0]["value"], "0");
    let again = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(again.contains("nothing to write"), "{again}");

    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(
        reverted.contains("restored and read back 3 files"),
        "{reverted}"
    );
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn workqueue_cpumask_on_512_cpus_writes_32_bit_words_and_reads_the_kernels_padding() {
    let (_tmp, root) = copy_host("gnr0");
    // nr_cpu_ids 512: the kernel prints 16 words, most significant first.
    let all = vec!["ffffffff"; 16].join(",") + "\n";
    write_files(&root, &[("sys/devices/virtual/workqueue/cpumask", &all)]);
    let m = knobs(&[(
        "wq",
        "persistence: runtime\nkind: workqueue-cpumask\nset: 0-3,256,511\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "wq"]));
    assert_eq!(
        read(&root, &format!("{WQ}/cpumask")),
        "80000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001,\
         00000000,00000000,00000000,00000000,00000000,00000000,00000000,0000000f"
    );
    // The same CPUs as the kernel pads them read as in effect.
    let padded = "80000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001,\
                  00000000,00000000,00000000,00000000,00000000,00000000,00000000,0000000f\n";
    write_files(&root, &[("sys/devices/virtual/workqueue/cpumask", padded)]);
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(knob(&report, "wq")["current"][0]["value"], "0-3,256,511");
    ok(&run(&root, m.path(), &["revert", "wq"]));
    // In a tree the file gets its bytes as found back.
    assert_eq!(read(&root, &format!("{WQ}/cpumask")), all);
}

#[test]
fn workqueue_cpumask_refuses_cpus_the_host_does_not_have_and_changes_nothing() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    vm_workqueues(&root);
    let pristine = tree(&root);
    let m = knobs(&[(
        "wq",
        "persistence: runtime\nkind: workqueue-cpumask\nset: 0-3\n",
    )]);
    let o = run(&root, m.path(), &["apply", "--all"]);
    let e = refused(&o, &["CPUs 2-3 are not possible on this host", "EOVERFLOW"]);
    assert!(e.contains("/sys/devices/virtual/workqueue/cpumask"), "{e}");
    assert_same(&pristine, &tree(&root), "a refused apply");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "wq")["status"], "unsupported");
}

#[test]
fn workqueue_cpumask_is_not_applicable_without_the_directory_or_a_match() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[WQ_GLOBAL]);
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0);
    let k = knob(&report, "wq");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("no /sys/devices/virtual/workqueue/cpumask")
    );

    vm_workqueues(&root);
    let m = knobs(&[(
        "nvme",
        "persistence: runtime\nkind: workqueue-cpumask\ntarget: {workqueues: [\"nvme*\"]}\nset: 0\n",
    )]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "nvme");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    let d = k["detail"].as_str().unwrap();
    assert!(
        d.contains("these have a cpumask: blkcg_punt_bio, writeback"),
        "{d}"
    );
}

#[test]
fn workqueue_cpumask_tmpfiles_lines_write_what_apply_writes() {
    let body = "persistence: tmpfiles\nkind: workqueue-cpumask\ntarget: {workqueues: [writeback]}\nset: 1\n";
    let m = knobs(&[("wq", body)]);
    let (_a, applied) = copy_host("fc-haltpoll-2cpu");
    vm_workqueues(&applied);
    ok(&run(&applied, m.path(), &["apply", "--all"]));

    let (_b, booted) = copy_host("fc-haltpoll-2cpu");
    vm_workqueues(&booted);
    let text = ok(&run(&booted, m.path(), &["persist", "wq", "--install"]));
    assert!(
        text.contains("installed /etc/tmpfiles.d/hostknob-20-wq.conf"),
        "{text}"
    );
    let file = booted.join("etc/tmpfiles.d/hostknob-20-wq.conf");
    let conf = std::fs::read_to_string(&file).unwrap();
    assert!(
        conf.contains("\nw /sys/devices/virtual/workqueue/writeback/cpumask - - - - 2\n"),
        "{conf}"
    );
    let o = Command::new("systemd-tmpfiles")
        .arg(format!("--root={}", booted.display()))
        .arg("--create")
        .arg(&file)
        .output()
        .expect("systemd-tmpfiles (Debian package systemd; .ci/run installs it)");
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        read(&booted, &format!("{WQ}/writeback/cpumask")).trim(),
        read(&applied, &format!("{WQ}/writeback/cpumask")).trim()
    );
    let (report, code) = audit_json(&booted, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    let k = knob(&report, "wq");
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .contains("hostknob-20-wq.conf:5"),
        "{k:#}"
    );
}

/// PID 1's status as the VM's kernel prints it (the lines audit reads).
fn pid1(root: &Path, cpus: &str) {
    let mask = if cpus == "0" { "1" } else { "3" };
    write_files(
        root,
        &[
            ("proc/1/comm", "systemd\n"),
            (
                "proc/1/status",
                &format!(
                    "Name:\tsystemd\nState:\tS (sleeping)\nPid:\t1\nPPid:\t0\n\
                     Cpus_allowed:\t{mask}\nCpus_allowed_list:\t{cpus}\n\
                     Mems_allowed:\t00000001\nMems_allowed_list:\t0\n"
                ),
            ),
        ],
    );
}

const SYS_DROPIN: &str = "etc/systemd/system.conf.d/hostknob-sys-aff.conf";

#[test]
fn system_cpu_affinity_is_pending_until_pid_1_runs_on_the_cpus_then_ok_and_reverts() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    pid1(&root, "0-1");
    // The main file already assigns CPUs: ours must reset them, not add to them.
    write_files(
        &root,
        &[(
            "etc/systemd/system.conf",
            "[Manager]\n#LogLevel=info\nCPUAffinity=1\n",
        )],
    );
    let pristine = tree(&root);
    let m = knobs(&[(
        "sys-aff",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\nset: 0\n",
    )]);
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 2);
    let k = knob(&report, "sys-aff");
    assert_eq!(k["status"], "drift", "{k:#}");

    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("systemctl daemon-reexec"), "{applied}");
    assert_eq!(
        read(&root, SYS_DROPIN),
        "# Written by hostknob (knob sys-aff): where PID 1 and every process it starts run.\n\
         # The empty assignment resets CPUs set before this file; the next line sets ours.\n\
         [Manager]\nCPUAffinity=\nCPUAffinity=0\n"
    );
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "pending-reboot exits like unpersisted: {report:#}");
    let k = knob(&report, "sys-aff");
    assert_eq!(k["status"], "pending-reboot", "{k:#}");
    let d = k["detail"].as_str().unwrap();
    for needle in [
        "configured at /etc/systemd/system.conf.d/hostknob-sys-aff.conf:5 (CPUAffinity=0)",
        "/proc/1/status reads 0-1",
        "systemctl daemon-reexec",
    ] {
        assert!(d.contains(needle), "{needle:?} in {d}");
    }
    assert_eq!(report["summary"]["pending-reboot"], 1);

    // PID 1 re-executed: it runs on CPU 0 now.
    pid1(&root, "0");
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0);
    assert_eq!(knob(&report, "sys-aff")["status"], "ok", "{report:#}");

    pid1(&root, "0-1");
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(
        reverted.contains("restored and read back 1 file"),
        "{reverted}"
    );
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn a_drop_in_that_was_there_comes_back_byte_for_byte() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    pid1(&root, "0-1");
    // Someone's earlier file under our name, without a final newline.
    write_files(&root, &[(SYS_DROPIN, "[Manager]\r\nCPUAffinity=1  # old")]);
    let pristine = tree(&root);
    let m = knobs(&[(
        "sys-aff",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\nset: 0\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(read(&root, SYS_DROPIN).ends_with("CPUAffinity=0\n"));
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert");
    assert_eq!(read(&root, SYS_DROPIN), "[Manager]\r\nCPUAffinity=1  # old");
}

/// rpc-node.service installed and running as PID 412 in its own cgroup.
fn rpc_node(root: &Path, cpus: &str) {
    write_files(
        root,
        &[
            (
                "etc/systemd/system/rpc-node.service",
                "[Unit]\nDescription=rpc\n[Service]\nExecStart=/usr/bin/rpc-node\n",
            ),
            ("proc/412/comm", "rpc-node\n"),
            ("proc/412/cgroup", "0::/system.slice/rpc-node.service\n"),
            (
                "proc/412/status",
                &format!("Name:\trpc-node\nCpus_allowed_list:\t{cpus}\n"),
            ),
            (
                "sys/fs/cgroup/system.slice/rpc-node.service/cpuset.cpus.effective",
                &format!("{cpus}\n"),
            ),
        ],
    );
}

#[test]
fn unit_affinity_reads_the_processes_or_the_cgroup_and_is_pending_until_a_restart() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    rpc_node(&root, "0-1");
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "rpc-aff",
            "persistence: systemd-dropin\nkind: systemd-cpu-affinity\ntarget: {units: [rpc-node.service]}\nset: 1\n",
        ),
        (
            "rpc-cpuset",
            "persistence: systemd-dropin\nkind: systemd-cpu-affinity\ntarget: {units: [rpc-node.service], property: AllowedCPUs}\nset: 1\n",
        ),
    ]);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(
        applied.contains("systemctl daemon-reload && systemctl restart rpc-node.service"),
        "{applied}"
    );
    let dir = "etc/systemd/system/rpc-node.service.d";
    assert!(
        read(&root, &format!("{dir}/hostknob-rpc-aff.conf"))
            .contains("[Service]\nCPUAffinity=\nCPUAffinity=1\n")
    );
    assert!(
        read(&root, &format!("{dir}/hostknob-rpc-cpuset.conf"))
            .contains("[Service]\nAllowedCPUs=\nAllowedCPUs=1\n")
    );
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    let aff = knob(&report, "rpc-aff");
    assert_eq!(aff["status"], "pending-reboot", "{aff:#}");
    assert!(
        aff["detail"]
            .as_str()
            .unwrap()
            .contains("/proc/412/status reads 0-1"),
        "{aff:#}"
    );
    let cpuset = knob(&report, "rpc-cpuset");
    assert_eq!(cpuset["status"], "pending-reboot", "{cpuset:#}");
    assert!(
        cpuset["detail"].as_str().unwrap().contains(
            "/sys/fs/cgroup/system.slice/rpc-node.service/cpuset.cpus.effective reads 0-1"
        ),
        "{cpuset:#}"
    );
    // Restarted: the process and its cgroup run on CPU 1.
    rpc_node(&root, "1");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "rpc-aff")["status"], "ok", "{report:#}");
    assert_eq!(knob(&report, "rpc-cpuset")["status"], "ok", "{report:#}");
    rpc_node(&root, "0-1");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn a_later_drop_in_that_overrides_ours_fails_the_read_back_and_nothing_stays_changed() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    rpc_node(&root, "0-1");
    write_files(
        &root,
        &[(
            "etc/systemd/system/rpc-node.service.d/zz-pin.conf",
            "[Service]\nAllowedCPUs=0\n",
        )],
    );
    let pristine = tree(&root);
    let m = knobs(&[(
        "rpc-cpuset",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\ntarget: {units: [rpc-node.service], property: AllowedCPUs}\nset: 1\n",
    )]);
    let o = run(&root, m.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("zz-pin.conf:2 overrides"), "{e}");
    assert_tree(&pristine, &root, "after the rolled-back apply");
}

#[test]
fn a_unit_that_is_not_here_is_not_applicable() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[(
        "rpc-aff",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\ntarget: {units: [rpc-node.service]}\nset: 1\n",
    )]);
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0);
    let k = knob(&report, "rpc-aff");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("no unit rpc-node.service")
    );
}

#[test]
fn without_pid_1_in_the_tree_the_drop_in_is_judged_and_what_runs_is_named_unknown() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[(
        "sys-aff",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\nset: 0\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    let k = knob(&report, "sys-aff");
    assert_eq!(k["status"], "ok", "{k:#}");
    let unknown = k["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["paths"][0] == "/proc/1/status")
        .unwrap_or_else(|| panic!("{k:#}"));
    assert_eq!(unknown["status"], "not-applicable");
    assert!(
        unknown["detail"]
            .as_str()
            .unwrap()
            .contains("what runs now is unknown")
    );
}

#[test]
fn a_workqueue_knob_persisted_by_a_boot_unit_is_ok_once_installed() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    vm_workqueues(&root);
    let m = knobs(&[WQ_EACH]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(
        knob(&report, "wq-each")["status"],
        "unpersisted",
        "{report:#}"
    );
    let text = ok(&run(&root, m.path(), &["persist", "wq-each", "--install"]));
    assert!(
        text.contains("systemctl enable hostknob-boot@wq-each.service"),
        "{text}"
    );
    // What `systemctl enable` does.
    let unit = "hostknob-boot@wq-each.service";
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{unit}"), wants.join(unit)).unwrap();
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0);
    let k = knob(&report, "wq-each");
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .contains("hostknob-boot@wq-each.service"),
        "{k:#}"
    );
}
