//! Issue 21: the `irq-affinity` and `irqbalance` kinds on copies of the VM
//! capture (fc-haltpoll-2cpu: virtio IRQs 24-43 in /proc/interrupts and
//! /proc/irq): IRQs chosen by action name, network device or `all`, managed
//! and per-CPU ones left out and named, read back, reverted byte-identical;
//! irqbalance's banned list in its environment file; audit naming
//! irqbalance and whether its banned list covers the knob; verify saying
//! what its probe cannot see.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::*;

/// On the live VM the kernel creates the managed virtio-blk queue's
/// (`virtio1-req.0`, IRQ 36) `smp_affinity_list` without its write bit
/// (kernel/irq/proc.c, register_irq_proc); the capture copied it as 0644.
fn vm_as_live() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    let f = root.join("proc/irq/36/smp_affinity_list");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    (tmp, root)
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

fn irq_knob(target: &str, set: &str) -> String {
    format!("persistence: runtime\nkind: irq-affinity\ntarget: {target}\nset: \"{set}\"\n")
}

const VIRTIO: [u32; 15] = [28, 29, 30, 31, 32, 33, 34, 35, 37, 38, 39, 40, 41, 42, 43];

#[test]
fn virtio_irqs_move_to_cpu0_read_back_and_revert_byte_identical_managed_left_out() {
    let (_tmp, root) = vm_as_live();
    let pristine = tree(&root);
    let m = knobs(&[(
        "virtio-home",
        &irq_knob("{actions: [\"virtio*\"], default: true}", "0"),
    )]);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    for irq in VIRTIO {
        assert_eq!(
            read(&root, &format!("proc/irq/{irq}/smp_affinity_list")).trim(),
            "0",
            "IRQ {irq}"
        );
    }
    // The managed queue and the IRQs no pattern names are untouched.
    for irq in [24, 25, 26, 36] {
        assert_eq!(
            read(&root, &format!("proc/irq/{irq}/smp_affinity_list")),
            "0-1\n",
            "IRQ {irq}"
        );
    }
    assert_eq!(read(&root, "proc/irq/default_smp_affinity").trim(), "1");
    let journaled = journal_paths(&root);
    assert_eq!(journaled.len(), VIRTIO.len() + 1, "{journaled:#?}");
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "virtio-home");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    let notes = k["notes"].to_string();
    assert!(
        notes.contains("IRQ 36 virtio1-req.0") && notes.contains("isolcpus=managed_irq"),
        "{notes}"
    );
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    assert_tree(&pristine, &root, "the VM after revert");
}

#[test]
fn all_takes_every_movable_device_irq_and_names_the_per_cpu_ones() {
    let (_tmp, root) = vm_as_live();
    let m = knobs(&[("everything-home", &irq_knob("{all: true}", "0"))]);
    let out = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    // One diff for the IRQs that change alike (36, managed, left out).
    assert!(
        out.contains("/proc/irq/{24-26,28-35,37-43}/smp_affinity_list\t(18 files)"),
        "{out}"
    );
    let v = json_of(&run(
        &root,
        m.path(),
        &["--format", "json", "apply", "--all", "--dry-run"],
    ));
    let paths = v["knobs"][0]["changes"].to_string();
    for irq in [24, 25, 26, 28, 43] {
        assert!(
            paths.contains(&format!("/proc/irq/{irq}/smp_affinity_list")),
            "IRQ {irq}: {paths}"
        );
    }
    assert!(!paths.contains("/proc/irq/36/smp_affinity_list"), "{paths}");
    let (report, _) = audit_json(&root, m.path(), None);
    let notes = knob(&report, "everything-home")["notes"].to_string();
    assert!(
        notes.contains("per-CPU interrupts") && notes.contains("LOC") && notes.contains("NMI"),
        "{notes}"
    );
    assert_eq!(read(&root, "proc/irq/24/smp_affinity_list"), "0-1\n");
}

#[test]
fn only_managed_irqs_matched_is_unsupported_and_apply_changes_nothing() {
    let (_tmp, root) = vm_as_live();
    let pristine = tree(&root);
    let m = knobs(&[("blk-home", &irq_knob("{actions: [\"virtio1-req*\"]}", "0"))]);
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "blk-home");
    assert_eq!(k["status"], "unsupported", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("isolcpus=managed_irq"),
        "{k:#}"
    );
    assert_eq!(code, 2);
    let out = run(&root, m.path(), &["apply", "--all"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(err(&out).contains("EIO"), "{}", err(&out));
    assert_tree(&pristine, &root, "after a refused apply");
}

#[test]
fn a_set_with_no_cpu_online_is_refused_before_any_write() {
    let (_tmp, root) = vm_as_live();
    let pristine = tree(&root);
    let m = knobs(&[("wide", &irq_knob("{actions: [\"virtio2-*\"]}", "2-3"))]);
    let out = run(&root, m.path(), &["apply", "--all"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(
        err(&out).contains("no CPU of 2-3 is online"),
        "{}",
        err(&out)
    );
    assert_tree(&pristine, &root, "after a refused apply");
}

#[test]
fn a_network_device_is_targeted_by_its_msi_vectors() {
    let (_tmp, root) = vm_as_live();
    // The live VM lists eth0's vectors on its PCI function (virtio2's
    // parent): /sys/devices/pci0000:00/0000:00:03.0/msi_irqs/{37,38,39};
    // the capture did not copy that directory.
    for irq in ["37", "38", "39"] {
        write_files(
            &root,
            &[(
                &format!("sys/devices/pci0000:00/0000:00:03.0/msi_irqs/{irq}"),
                "msix\n",
            )],
        );
    }
    let m = knobs(&[
        ("eth0-home", &irq_knob("{netdev: [eth0]}", "1")),
        ("ghost-home", &irq_knob("{netdev: [eth9]}", "1")),
    ]);
    let out = ok(&run(&root, m.path(), &["apply", "eth0-home"]));
    assert!(out.contains("wrote and read back"), "{out}");
    let mut written = journal_paths(&root);
    written.sort();
    assert_eq!(
        written,
        (37..=39)
            .map(|i| format!("/proc/irq/{i}/smp_affinity_list"))
            .collect::<Vec<_>>()
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let ghost = knob(&report, "ghost-home");
    assert_eq!(ghost["status"], "not-applicable", "{ghost:#}");
    assert!(
        ghost["detail"]
            .as_str()
            .unwrap()
            .contains("no network device eth9")
    );
}

const DEBIAN_DEFAULT: &str = "# irqbalance is a daemon process that distributes interrupts across\n\
# CPUS on SMP systems.  The default is to rebalance once every 10\n\
# seconds.  This is the environment file that is specified to systemd via the\n\
# EnvironmentFile key in the service unit file (or via whatever method the init\n\
# system you're using has).\n\
#\n\
#IRQBALANCE_ONESHOT=\n\
#IRQBALANCE_BANNED_CPULIST=\n\
#OPTIONS=\"\"\n";

fn irqbalance_knob(set: &str) -> String {
    format!("persistence: runtime\nkind: irqbalance\nset: \"{set}\"\n")
}

#[test]
fn irqbalance_banned_list_is_written_read_back_and_reverted_byte_identical() {
    let (_tmp, root) = vm_as_live();
    write_files(&root, &[("etc/default/irqbalance", DEBIAN_DEFAULT)]);
    let pristine = tree(&root);
    let m = knobs(&[("ban-1", &irqbalance_knob("1"))]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "ban-1")["status"], "drift");
    let out = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(out.contains("restart irqbalance"), "{out}");
    // Its file is the configuration: no "lost at the next boot", no empty
    // `persistence:` to set.
    assert!(out.contains("survives a reboot as it is"), "{out}");
    assert!(!out.contains("lost at the next boot"), "{out}");
    assert_eq!(
        read(&root, "etc/default/irqbalance"),
        format!("{DEBIAN_DEFAULT}IRQBALANCE_BANNED_CPULIST=\"1\"\n")
    );
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "ban-1");
    assert_eq!(
        k["status"], "ok",
        "the file is what irqbalance reads at start: {k:#}"
    );
    assert_eq!(k["current"][0]["value"], "1", "{k:#}");
    assert_eq!(code, 0);
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert");
}

#[test]
fn irqbalance_uses_sysconfig_where_that_is_the_file_and_is_unsupported_without_either() {
    let (_tmp, root) = vm_as_live();
    let m = knobs(&[("ban-1", &irqbalance_knob("1"))]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "ban-1");
    assert_eq!(k["status"], "unsupported", "{k:#}");
    let detail = k["detail"].as_str().unwrap();
    assert!(
        detail.contains("/etc/default/irqbalance") && detail.contains("/etc/sysconfig/irqbalance"),
        "{detail}"
    );
    let sysconfig = "IRQBALANCE_ONESHOT=\nIRQBALANCE_BANNED_CPULIST=0\nIRQBALANCE_ARGS=\n";
    write_files(&root, &[("etc/sysconfig/irqbalance", sysconfig)]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    assert_eq!(
        read(&root, "etc/sysconfig/irqbalance"),
        "IRQBALANCE_ONESHOT=\nIRQBALANCE_BANNED_CPULIST=\"1\"\nIRQBALANCE_ARGS=\n"
    );
    assert!(!root.join("etc/default/irqbalance").exists());
}

/// irqbalance reads a non-empty IRQBALANCE_BANNED_CPUS first and then ignores
/// the list: the knob would audit `ok` while irqbalance bans other CPUs.
#[test]
fn irqbalance_with_a_banned_cpus_mask_is_refused_naming_the_line() {
    let (_tmp, root) = vm_as_live();
    let m = knobs(&[("ban-1", &irqbalance_knob("1"))]);
    let file = "IRQBALANCE_ONESHOT=\nIRQBALANCE_BANNED_CPUS=f0\nIRQBALANCE_BANNED_CPULIST=\"1\"\n";
    write_files(&root, &[("etc/sysconfig/irqbalance", file)]);
    let pristine = tree(&root);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "ban-1");
    assert_eq!(
        k["status"], "unsupported",
        "in the file, ignored by irqbalance: {k:#}"
    );
    let detail = k["detail"].as_str().unwrap();
    assert!(
        detail.contains("/etc/sysconfig/irqbalance:2")
            && detail.contains("IRQBALANCE_BANNED_CPUS=f0"),
        "{detail}"
    );
    let o = run(&root, m.path(), &["apply", "--all"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert_tree(&pristine, &root, "a refused apply");
    // An empty mask is no mask: the list counts.
    let file = "IRQBALANCE_BANNED_CPUS=\nIRQBALANCE_BANNED_CPULIST=\"1\"\n";
    write_files(&root, &[("etc/sysconfig/irqbalance", file)]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "ban-1")["status"], "ok");
}

#[test]
fn audit_names_irqbalance_and_whether_its_banned_list_covers_the_knob() {
    let (_tmp, root) = vm_as_live();
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/lib/systemd/system/irqbalance.service",
        wants.join("irqbalance.service"),
    )
    .unwrap();
    write_files(&root, &[("etc/default/irqbalance", DEBIAN_DEFAULT)]);
    let m = knobs(&[("virtio-home", &irq_knob("{actions: [\"virtio2-*\"]}", "0"))]);
    let evidence = |root: &Path| {
        let (report, _) = audit_json(root, m.path(), None);
        let k = knob(&report, "virtio-home").clone();
        let managers = k["managers"].as_array().unwrap().clone();
        let ib = managers
            .iter()
            .find(|x| x["name"] == "irqbalance")
            .unwrap_or_else(|| panic!("{k:#}"));
        ib["evidence"].as_str().unwrap().to_string()
    };
    let e = evidence(&root);
    assert!(
        e.contains("enabled (/etc/systemd/system/multi-user.target.wants/irqbalance.service)"),
        "{e}"
    );
    assert!(e.contains("does not cover CPUs 1"), "{e}");
    write_files(
        &root,
        &[(
            "etc/default/irqbalance",
            &format!("{DEBIAN_DEFAULT}IRQBALANCE_BANNED_CPULIST=1\n"),
        )],
    );
    let e = evidence(&root);
    assert!(
        e.contains("covers the CPUs this knob keeps IRQs off (1;"),
        "{e}"
    );
    assert!(e.contains("/etc/default/irqbalance:10"), "{e}");
}

#[test]
fn a_boot_unit_persists_the_knob_re_resolving_irqs_by_name() {
    let (_tmp, root) = vm_as_live();
    let body =
        "persistence: boot\nkind: irq-affinity\ntarget: {actions: [\"virtio2-*\"]}\nset: \"0\"\n";
    let m = knobs(&[("virtio-home", body)]);
    let out = ok(&run(&root, m.path(), &["persist", "virtio-home"]));
    assert!(out.contains("apply --wait"), "{out}");
}

#[test]
fn verify_with_a_probe_that_cannot_see_interrupts_says_so_and_is_not_a_failure() {
    let (_tmp, root) = vm_as_live();
    let body = "persistence: runtime\nkind: irq-affinity\ntarget: {actions: [\"virtio2-*\"]}\nset: \"0\"\n\
                verify: {probe: wakeup, expect: [{metric: p50, change: lower, by: 50 µs}]}\n";
    let m = knobs(&[("virtio-home", body)]);
    let pristine = tree(&root);
    let report = short_verify(&root, m.path(), "virtio-home");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("no device interrupt") && warnings.contains("not a failure of the knob"),
        "{warnings}"
    );
    // A 50 µs drop cannot be met by a probe that cannot see the knob: the
    // expectation is inconclusive, never not-met (exit 2).
    for e in report["expectations"].as_array().unwrap() {
        assert_ne!(e["outcome"], "not-met", "{e:#}");
    }
    assert_eq!(report["restored"], true);
    assert_tree(&pristine, &root, "after verify");
}
