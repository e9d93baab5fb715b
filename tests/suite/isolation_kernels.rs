//! Issue 31, the kinds' side: isolation as the kernels people run behave.
//! Managed IRQs before 6.12 (a 0644 file whose write answers EIO: the
//! test-only `HOSTKNOB_TEST_WRITE_ERRNO` stands for the kernel's answer,
//! which a captured tree cannot give), IRQ affinity "within" the set,
//! offline CPUs in a set, a thread the kernel will not move, the command
//! line's size limit and its first-wins isolation keys.

use std::path::Path;
use std::process::Output;

use crate::support::*;
use hostknob::cpulist::CpuList;

/// A spr1 copy (320 CPUs; the pepc capture has no `/proc/irq`) given the
/// IRQs of a pre-6.12 host: `(irq, action, smp_affinity_list)`, every file
/// 0644 as `register_irq_proc` made them before v6.12.
fn spr1_with_irqs(irqs: &[(u32, &str, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host("spr1");
    let cpus = 320;
    let mut table: String = (0..cpus).map(|c| format!(" CPU{c}")).collect();
    table.push('\n');
    let zeros: String = (0..cpus).map(|_| " 0").collect();
    let mut files: Vec<(String, String)> = Vec::new();
    for (irq, action, list) in irqs {
        table += &format!("{irq}:{zeros} IR-PCI-MSIX-0000:17:00.0 {irq}-edge      {action}\n");
        files.push((
            format!("proc/irq/{irq}/smp_affinity_list"),
            format!("{list}\n"),
        ));
        let first = list.split(['-', ',']).next().unwrap();
        files.push((
            format!("proc/irq/{irq}/effective_affinity_list"),
            format!("{first}\n"),
        ));
    }
    table += &format!("LOC:{zeros} Local timer interrupts\n");
    files.push(("proc/interrupts".into(), table));
    // 320 bits in 32-bit words, as the kernel prints a mask.
    let mask = ["ffffffff"; 10].join(",");
    files.push(("proc/irq/default_smp_affinity".into(), format!("{mask}\n")));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_files(&root, &refs);
    (tmp, root)
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

fn irq_knob(target: &str, set: &str) -> String {
    format!("persistence: runtime\nkind: irq-affinity\ntarget: {target}\nset: \"{set}\"\n")
}

/// `hostknob ARGS` on `root` with `manifest`, the writes of `errno` paths
/// answered with that errno (`PATH=N;...`).
fn run_refusing(root: &Path, manifest: &Path, args: &[&str], errno: &str) -> Output {
    command(root, manifest, args)
        .env(hostknob::apply::ERRNO_VAR, errno)
        .output()
        .unwrap()
}

const NVME: [(u32, &str, &str); 4] = [
    (24, "nvme0q1", "0-79"),
    (25, "nvme0q2", "80-159"),
    (26, "nvme0q3", "160-239"),
    (27, "nvme0q4", "240-319"),
];

/// Issue 31's "done means": `isolate --count 8`, then `apply` of its
/// irq-affinity knob on a host whose managed NVMe queues keep 0644 files
/// and answer EIO, succeeds, naming the queues left out; revert restores
/// the tree byte for byte.
#[test]
fn isolation_apply_leaves_out_managed_irqs_that_answer_eio_and_names_them() {
    let mut irqs = NVME.to_vec();
    irqs.extend([
        (28, "ens1f0-TxRx-0", "0-319"),
        (29, "ens1f0-TxRx-1", "0-319"),
    ]);
    let (_tmp, root) = spr1_with_irqs(&irqs);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("isolation");
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "spr1",
        "isolate",
        "--count",
        "8",
        "--out",
        dir.to_str().unwrap(),
    ]));
    let pristine = tree(&root);
    let eio: Vec<String> = NVME
        .iter()
        .map(|(i, _, _)| format!("/proc/irq/{i}/smp_affinity_list=5"))
        .collect();
    // As its boot unit runs it at every boot (`ExecStart=hostknob apply --wait`).
    let o = run_refusing(
        &root,
        &dir,
        &["--host", "spr1", "apply", "--wait", "isolate-irq-affinity"],
        &eio.join(";"),
    );
    let text = ok(&o);
    // The movable IRQs went to the housekeeping CPUs (all of them: they had every CPU).
    let hk = read(&root, "proc/irq/28/smp_affinity_list");
    assert_ne!(hk, "0-319", "{text}");
    assert_eq!(read(&root, "proc/irq/29/smp_affinity_list"), hk);
    let hk = CpuList::parse(&hk).unwrap();
    // A queue reaching an isolated CPU was planned, refused and named; one
    // within the housekeeping CPUs needed nothing. None was written.
    let mut named = 0;
    for (irq, action, list) in NVME {
        let within = CpuList::parse(list)
            .unwrap()
            .as_slice()
            .iter()
            .all(|c| hk.contains(*c));
        let line = format!("IRQ {irq} {action}");
        assert_eq!(text.contains(&line), !within, "IRQ {irq} ({list}):\n{text}");
        named += usize::from(!within);
        assert_eq!(
            read(&root, &format!("proc/irq/{irq}/smp_affinity_list")),
            list
        );
    }
    assert!(named > 0, "no queue reached an isolated CPU: {text}");
    assert!(
        text.contains("left out, the kernel refused it") && text.contains("EIO"),
        "{text}"
    );
    // Nothing was written to the refused files: the journal does not list them.
    let journaled = journal_paths(&root);
    assert!(
        !journaled.iter().any(|p| NVME
            .iter()
            .any(|(i, _, _)| p.contains(&format!("/proc/irq/{i}/")))),
        "{journaled:#?}"
    );
    assert_eq!(
        journaled.len(),
        3,
        "two NICs and the default: {journaled:#?}"
    );
    ok(&run(&root, &dir, &["--host", "spr1", "revert", "--all"]));
    assert_tree(&pristine, &root, "spr1 after revert");
}

/// EPERM is the same answer (a chip that cannot move its IRQ); any other
/// error still rolls the whole apply back.
#[test]
fn an_irq_write_answered_eperm_is_left_out_and_another_error_rolls_back() {
    let (_tmp, root) = spr1_with_irqs(&[(24, "nvme0q1", "0-79"), (28, "ens1f0-TxRx-0", "0-319")]);
    let m = knobs(&[("home", &irq_knob("{all: true}", "0-3"))]);
    let o = run_refusing(
        &root,
        m.path(),
        &["apply", "--all"],
        "/proc/irq/24/smp_affinity_list=1",
    );
    let text = ok(&o);
    assert!(
        text.contains("IRQ 24 nvme0q1") && text.contains("EPERM"),
        "{text}"
    );
    assert_eq!(read(&root, "proc/irq/28/smp_affinity_list"), "0-3");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    let pristine = tree(&root);
    // ENOSPC (no free vector) is no managed IRQ: the apply fails and restores.
    let o = run_refusing(
        &root,
        m.path(),
        &["apply", "--all"],
        "/proc/irq/24/smp_affinity_list=28",
    );
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err(&o).contains("no free interrupt vector"), "{}", err(&o));
    assert_tree(&pristine, &root, "after a rolled-back apply");
}

/// Where the kernel has the IRQ debugfs, a managed IRQ is known before any
/// write: left out of the plan and named, its 0644 file untouched.
#[test]
fn a_managed_irq_the_irq_debugfs_names_is_left_out_of_the_plan() {
    let (_tmp, root) = spr1_with_irqs(&[(24, "nvme0q1", "0-79"), (28, "ens1f0-TxRx-0", "0-319")]);
    write_files(
        &root,
        &[(
            "sys/kernel/debug/irq/irqs/24",
            "handler:  handle_edge_irq\ndstate:   0x3540a200\n            IRQD_ACTIVATED\n            IRQD_IRQ_STARTED\n            IRQD_AFFINITY_MANAGED\n",
        )],
    );
    let m = knobs(&[("home", &irq_knob("{all: true}", "0-3"))]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(!plan.contains("/proc/irq/24/smp_affinity_list"), "{plan}");
    assert!(plan.contains("/proc/irq/28/smp_affinity_list"), "{plan}");
    assert!(
        plan.contains("IRQ 24 nvme0q1") && plan.contains("isolcpus=managed_irq"),
        "{plan}"
    );
}

/// An IRQ within the set is where the knob wants it (the kernel narrows a
/// new IRQ to its device's node after `irqaffinity=`): audit says so, and
/// apply narrows the others to their affinity within the set, not the set.
#[test]
fn irq_affinity_within_the_set_is_in_effect_and_apply_keeps_node_locality() {
    let (_tmp, root) = spr1_with_irqs(&[
        (30, "mlx5_comp0@pci:0000:17:00.0", "0-39"),
        (31, "mlx5_comp1@pci:0000:17:00.0", "40-119"),
        (32, "mlx5_comp2@pci:0000:17:00.0", "100-119"),
    ]);
    let m = knobs(&[("node0", &irq_knob("{actions: [\"mlx5_comp*\"]}", "0-79"))]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(
        !plan.contains("/proc/irq/30/"),
        "within the set: no write\n{plan}"
    );
    ok(&run(&root, m.path(), &["apply", "--all"]));
    assert_eq!(read(&root, "proc/irq/30/smp_affinity_list"), "0-39");
    assert_eq!(read(&root, "proc/irq/31/smp_affinity_list"), "40-79");
    assert_eq!(read(&root, "proc/irq/32/smp_affinity_list"), "0-79");
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "node0");
    assert_eq!(
        k["status"], "unpersisted",
        "in effect (a runtime knob): {k:#}"
    );
}

/// A set with offline CPUs is taken when one of its CPUs is online (the
/// kernel needs one; with none it is refused: `irq_affinity.rs`).
#[test]
fn an_irq_set_with_offline_cpus_is_taken_when_one_is_online() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[("wide", &irq_knob("{actions: [\"virtio2-*\"]}", "1-3"))]);
    let text = ok(&run(&root, m.path(), &["apply", "wide"]));
    assert!(
        text.contains("CPUs 2-3 of the set are not online"),
        "{text}"
    );
    for irq in [37, 38, 39] {
        assert_eq!(
            read(&root, &format!("proc/irq/{irq}/smp_affinity_list")),
            "1"
        );
    }
}

/// `/proc/PID/task/TID/affinity@START` of a captured thread directory.
fn thread_path(dir: &Path) -> String {
    let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    let tid = dir.file_name().unwrap().to_str().unwrap();
    let pid = dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    format!("/proc/{pid}/task/{tid}/affinity@{}", fields[19])
}

/// A thread the kernel will not move (EBUSY: SCHED_DEADLINE) is named and
/// left where it runs; the other threads move, and the summary counts
/// threads as threads.
#[test]
fn a_thread_the_kernel_will_not_move_is_named_and_the_others_move() {
    let (_tmp, root) = vm();
    let dl = Sleeper::start("hk-deadline");
    let dl_dirs = dl.capture_into(&root);
    let other = Sleeper::start("hk-worker");
    let other_dirs = other.capture_into(&root);
    let before = allowed_in(&dl_dirs[0].join("status"));
    let m = knobs(&[(
        "threads",
        "persistence: runtime\nkind: thread-affinity\ntarget: {include: ['^hk-(deadline|worker)$']}\nset: 1\n",
    )]);
    let o = run_refusing(
        &root,
        m.path(),
        &["apply", "threads"],
        &format!("{}=16", thread_path(&dl_dirs[0])),
    );
    let text = ok(&o);
    assert!(
        text.contains("EBUSY") && text.contains("SCHED_DEADLINE"),
        "{text}"
    );
    assert!(text.contains(&format!("pid {}", dl.pid())), "{text}");
    assert!(text.contains("wrote and read back 1 thread\n"), "{text}");
    assert_eq!(allowed_in(&dl_dirs[0].join("status")), before);
    assert_eq!(allowed_in(&other_dirs[0].join("status")), "1");
}

/// A private copy of a boot tree of `tests/corpus/boot/`.
fn boot_tree(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &repo().join("tests/corpus/boot").join(name),
        &tmp.path().join(name),
    );
    let root = tmp.path().join(name);
    (tmp, root)
}

const ENTRIES: [&str; 2] = [
    "boot/loader/entries/8f3c9a1d2e4b4c6f9a0b1c2d3e4f5a6b-6.10.12-200.fc40.x86_64.conf",
    "boot/loader/entries/8f3c9a1d2e4b4c6f9a0b1c2d3e4f5a6b-6.11.4-301.fc41.x86_64.conf",
];

fn cmdline_knob(add: &[&str]) -> String {
    let words: Vec<String> = add.iter().map(|w| format!("\"{w}\"")).collect();
    format!(
        "kind: kernel-cmdline\npersistence: cmdline\nset:\n  add: [{}]\n",
        words.join(", ")
    )
}

/// A line over x86's `COMMAND_LINE_SIZE` is refused at plan time, naming
/// the entry and the length: the kernel would cut it silently.
#[test]
fn a_command_line_the_kernel_would_cut_is_refused_naming_the_file_and_its_length() {
    let (_tmp, root) = boot_tree("fedora-bls");
    let before = tree(&root);
    let long: Vec<String> = (0..1400).step_by(2).map(|c| c.to_string()).collect();
    let word = format!("nohz_full={}", long.join(","));
    let m = knobs(&[("iso", &cmdline_knob(&[&word]))]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    let e = refused(
        &o,
        &[
            ENTRIES[0],
            "characters",
            "2047",
            "COMMAND_LINE_SIZE",
            "arch/x86/include/asm/setup.h",
        ],
    );
    assert!(e.contains("1-4 not 1,2,3,4"), "{e}");
    assert_tree(&before, &root, "a refused over-long command line");
    // Within the limit it plans.
    let m = knobs(&[("iso", &cmdline_knob(&["nohz_full=0-698"]))]);
    ok(&run(&root, m.path(), &["apply", "iso", "--dry-run"]));
}

/// The Fedora BLS tree with `$tuned_params` in every entry's options and
/// tuned's masks in GRUB's environment block, as RHEL's tuned leaves them.
fn bls_with_tuned_params(running: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = boot_tree("fedora-bls");
    for e in ENTRIES {
        let text = std::fs::read_to_string(root.join(e)).unwrap();
        let text = text.replace("rhgb quiet", "rhgb quiet $tuned_params");
        std::fs::write(root.join(e), text).unwrap();
    }
    let env = "# GRUB Environment Block\ntuned_params=isolcpus=managed_irq,5-6 nohz_full=5-6\ntuned_initrd=\n";
    let pad = "#".repeat(1024 - env.len());
    write_files(
        &root,
        &[
            ("boot/grub2/grubenv", &format!("{env}{pad}")),
            (
                "proc/cmdline",
                &format!(
                    "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.11.4-301.fc41.x86_64 ro rhgb quiet {running}\n"
                ),
            ),
        ],
    );
    (tmp, root)
}

/// The kernel keeps the first `isolcpus=`/`nohz_full=` mask: a second,
/// different one after `$tuned_params` is refused naming the first, and
/// a running line with both is `drift`, not `ok`.
#[test]
fn a_second_different_isolation_mask_is_refused_naming_the_first_and_audit_judges_the_first() {
    let (_tmp, root) = bls_with_tuned_params(
        "isolcpus=managed_irq,5-6 nohz_full=5-6 isolcpus=managed_irq,2-3 nohz_full=2-3",
    );
    let before = tree(&root);
    let m = knobs(&[(
        "iso",
        &cmdline_knob(&["isolcpus=managed_irq,2-3", "nohz_full=2-3"]),
    )]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "iso");
    assert_eq!(k["status"], "drift", "the kernel runs with 5-6: {k:#}");
    let o = run(&root, m.path(), &["apply", "iso"]);
    refused(
        &o,
        &[
            "isolcpus=managed_irq,5-6",
            "$tuned_params",
            "grubenv",
            "housekeeping_setup",
        ],
    );
    assert_tree(&before, &root, "a refused second mask");
}

/// CPU lists and `isolcpus=` flags compare as sets: the running
/// `isolcpus=domain,managed_irq,2,3 nohz_full=2,3` is the knob's
/// `isolcpus=managed_irq,domain,2-3 nohz_full=2-3`, so audit says `ok`
/// once the entries carry it, instead of `pending-reboot` forever.
#[test]
fn isolation_masks_compare_as_sets_so_pending_reboot_clears() {
    let (_tmp, root) = boot_tree("fedora-bls");
    write_files(
        &root,
        &[(
            "proc/cmdline",
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro quiet isolcpus=domain,managed_irq,2,3 nohz_full=2,3\n",
        )],
    );
    let m = knobs(&[(
        "iso",
        &cmdline_knob(&["isolcpus=managed_irq,domain,2-3", "nohz_full=2-3"]),
    )]);
    ok(&run(&root, m.path(), &["apply", "iso"]));
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "iso");
    assert_eq!(k["status"], "ok", "{k:#}");
}

/// `systemd.cpu_affinity=` on the kernel command line overrides system.conf
/// for PID 1: with a drop-in of another value, audit says so (`drift`,
/// naming the parameter) instead of `pending-reboot` forever.
#[test]
fn systemd_cpu_affinity_on_the_kernel_command_line_overrides_the_drop_in_and_audit_says_so() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &root,
        &[
            ("proc/1/comm", "systemd\n"),
            (
                "proc/1/status",
                "Name:\tsystemd\nPid:\t1\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n",
            ),
            (
                "proc/cmdline",
                "BOOT_IMAGE=/vmlinuz ro quiet systemd.cpu_affinity=0-1\n",
            ),
        ],
    );
    let m = knobs(&[(
        "sys-aff",
        "persistence: systemd-dropin\nkind: systemd-cpu-affinity\nset: 0\n",
    )]);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("systemctl daemon-reload"), "{applied}");
    assert!(applied.contains("systemd.cpu_affinity=0-1"), "{applied}");
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "sys-aff");
    assert_eq!(k["status"], "drift", "{k:#}");
    assert!(k.to_string().contains("overrides"), "{k:#}");
}
