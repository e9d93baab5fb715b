//! The fragment `hostknob isolate` writes loads and plans on the host it was
//! planned for (issue 21's "done means"): `isolate --count 8 --out DIR` on a
//! copy of each capture, then `knobs` and `apply --all --dry-run` with DIR as
//! the manifest on that copy, changing nothing.
//!
//! The pepc captures hold `/sys` only: no boot loader, no irqbalance file. On
//! the bare copy the dry run must refuse, naming what it looked for; given
//! what a Debian host has (`tests/corpus/boot/debian-grub`'s `/etc` and
//! `/boot`, Debian's `/etc/default/irqbalance`), every knob must plan. With
//! NICs (the hand-built mlx5 and ice, the virtio VMs) the fragment's rps, xps
//! and NIC queue IRQ knobs are among them.

use crate::support::*;

fn plans_on(host: &str, count: &str) {
    let (_tmp, root) = copy_host(host);
    plans_on_copy(host, &root, count, &[]);
}

/// As `plans_on`, on a prepared copy whose fragment also has `more` knobs.
fn plans_on_copy(host: &str, root: &std::path::Path, count: &str, more: &[&str]) {
    let root = root.to_path_buf();
    let before = tree(&root);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("isolation");
    let r = root.to_str().unwrap();
    ok(&hostknob(&[
        "--root",
        r,
        "--host",
        host,
        "isolate",
        "--count",
        count,
        "--out",
        dir.to_str().unwrap(),
    ]));
    let mut ids = vec![
        "isolate-kernel-cmdline",
        "isolate-irq-affinity",
        "isolate-irqbalance",
        "isolate-workqueue-cpumask",
        "isolate-systemd-cpu-affinity",
        "isolate-thread-affinity",
    ];
    ids.extend(more);
    let written = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(written, ids.len(), "{host}: the fragment's knobs");
    // Loads: every knob is read and validated for this host.
    let o = run(&root, &dir, &["--host", host, "knobs", "--format", "json"]);
    let listed = ok(&o);
    for &id in &ids {
        assert!(listed.contains(id), "{host}: {id} not listed: {listed}");
    }
    // Plans: a dry run of all of them, the state directory inside the copy.
    let state = format!("/{STATE_DIR}");
    let dry_run = || {
        let o = run(
            &root,
            &dir,
            &[
                "--host",
                host,
                "--state-dir",
                &state,
                "apply",
                "--all",
                "--dry-run",
            ],
        );
        let text = format!("{}{}", stdout(&o), stderr(&o));
        (o.status.success(), text)
    };
    let (planned, text) = dry_run();
    assert!(!planned, "{host}: planned without a boot loader:\n{text}");
    assert!(
        text.contains("looked for") && text.contains("nothing was changed"),
        "{host}: the refusal names what it looked for:\n{text}"
    );
    assert_tree(
        &before,
        &root,
        &format!("{host}: a refused dry run changed the copy"),
    );
    give_debian_boot_and_irqbalance(&root);
    let before = tree(&root);
    let (planned, text) = dry_run();
    assert!(planned, "{host}: apply --all --dry-run failed:\n{text}");
    for &id in &ids {
        assert!(text.contains(id), "{host}: {id} not in the plan:\n{text}");
    }
    assert_tree(&before, &root, &format!("{host}: dry run changed the copy"));
    if more.is_empty() {
        return;
    }
    // With NIC knobs: the whole fragment applied, then reverted byte-identical.
    let state = ["--host", host, "--state-dir", &state];
    let o = run(&root, &dir, &[&state[..], &["apply", "--all"]].concat());
    assert!(
        o.status.success(),
        "{host}: apply --all:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    ok(&run(
        &root,
        &dir,
        &[&state[..], &["revert", "--all"]].concat(),
    ));
    assert_tree(&before, &root, &format!("{host}: after revert --all"));
}

const DEBIAN_IRQBALANCE: &str =
    "#IRQBALANCE_ONESHOT=\n#IRQBALANCE_BANNED_CPULIST=\n#OPTIONS=\"\"\n";

/// Debian's GRUB files and irqbalance environment file, into a capture of `/sys`.
fn give_debian_boot_and_irqbalance(root: &std::path::Path) {
    give_debian_grub(root);
    write_files(root, &[("etc/default/irqbalance", DEBIAN_IRQBALANCE)]);
}

#[test]
fn isolate_plan_loads_and_plans_on_gnr0() {
    plans_on("gnr0", "8");
}

#[test]
fn isolate_plan_loads_and_plans_on_spr1() {
    plans_on("spr1", "8");
}

#[test]
fn isolate_plan_loads_and_plans_on_adl0() {
    plans_on("adl0", "10");
}

#[test]
fn isolate_plan_loads_and_plans_on_genoa0() {
    plans_on("genoa0", "8");
}

#[test]
fn isolate_plan_loads_and_plans_on_the_two_cpu_vm() {
    // eth0's queue IRQs are named; the capture has no queues/ for rps.
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    plans_on_copy(
        "fc-haltpoll-2cpu",
        &root,
        "1",
        &["isolate-nic-irq-affinity"],
    );
}

// With NICs (issue 34): the rps, xps and queue IRQ knobs load and plan too.

#[test]
fn isolate_plan_loads_and_plans_on_spr1_with_an_mlx5() {
    let (_tmp, root) = crate::support::nic::host_with("spr1", &crate::support::nic::MLX5);
    let more = ["isolate-rps-ens1f0np0", "isolate-xps-ens1f0np0"];
    plans_on_copy("spr1", &root, "8", &more);
}

#[test]
fn isolate_plan_loads_and_plans_on_adl0_with_an_ice() {
    let (_tmp, root) = crate::support::nic::host_with("adl0", &crate::support::nic::ICE);
    plans_on_copy(
        "adl0",
        &root,
        "10",
        &["isolate-rps-ens2f0", "isolate-xps-ens2f0"],
    );
}

#[test]
fn isolate_plan_loads_and_plans_on_the_virtio_vm_with_its_queue_irqs() {
    let (_tmp, root) = copy_host("fc-virtio-2cpu");
    let more = ["isolate-nic-irq-affinity", "isolate-rps-eth0"];
    plans_on_copy("vm", &root, "1", &more);
}
