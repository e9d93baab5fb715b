//! Issue 44 items 1 and 9: every channel count of a knob in one request
//! (combined to separate rx/tx channels on a hand-built bnxt_en NIC in a
//! spr1 copy), refusals with today's values, and the per-queue values a
//! channel change resets written again (revert, rollback).

use std::path::Path;

use crate::support::nic::{BNXT, ICE, host_with};
use crate::support::*;

/// The queue directories of one direction, sorted.
fn queue_dirs(root: &Path, ifname: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root.join(format!("sys/class/net/{ifname}/queues")))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Runs `args` with the test write log; returns its channel writes.
fn channel_writes(root: &Path, manifest: &Path, args: &[&str]) -> Vec<String> {
    let log = tempfile::NamedTempFile::new().unwrap();
    let o = command(root, manifest, args)
        .env(hostknob::apply::LOG_VAR, log.path())
        .output()
        .unwrap();
    ok(&o);
    std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .filter(|l| l.contains("/channels/"))
        .map(str::to_string)
        .collect()
}

/// Audit finds knob `id` in effect (`unpersisted`: runtime only, in effect).
fn assert_in_effect(report: &serde_json::Value, id: &str) {
    let status = knob(report, id)["status"].as_str().unwrap().to_string();
    assert!(
        ["ok", "unpersisted"].contains(&status.as_str()),
        "{id}: {report:#}"
    );
}

const SPLIT: &str = "persistence: runtime\nkind: nic-channels\ntarget: {driver: bnxt_en}\nset: {combined: 0, rx: 4, tx: 4}\n";

#[test]
fn combined_to_separate_channels_is_one_request_and_reverts_byte_identical() {
    let (_t, root) = host_with("spr1", &BNXT);
    let pristine = tree(&root);
    let m = knobs(&[("split", SPLIT)]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(plan.contains("resets the link"), "{plan}");
    let wrote = channel_writes(&root, m.path(), &["apply", "--all"]);
    assert_eq!(
        wrote,
        vec![format!(
            "ethtool:{}/channels/combined,rx,tx\tcombined 0, rx 4, tx 4",
            BNXT.ifname
        )],
        "one request"
    );
    let want = |p: &str| (0..4).map(|q| format!("{p}{q}")).collect::<Vec<_>>();
    assert_eq!(queue_dirs(&root, BNXT.ifname, "rx-"), want("rx-"));
    assert_eq!(queue_dirs(&root, BNXT.ifname, "tx-"), want("tx-"));
    let new =
        std::fs::read_to_string(root.join("sys/class/net/ens4f0np0/queues/rx-3/rps_flow_cnt"));
    assert_eq!(new.unwrap(), "0\n");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, "split");
    let back = channel_writes(&root, m.path(), &["revert", "--all"]);
    assert_eq!(back.len(), 1, "revert in one request: {back:?}");
    assert!(back[0].ends_with("\tcombined 8, rx 0, tx 0"), "{back:?}");
    assert_tree(&pristine, &root, "bnxt after revert");
}

#[test]
fn channel_counts_are_judged_with_todays_values_of_the_fields_left_alone() {
    let (_t, root) = host_with("spr1", &BNXT);
    let m = knobs(&[("split", SPLIT)]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let split = tree(&root);
    // rx and tx are 4 now: combined 0 alone is fine (and in effect).
    let alone = knobs(&[(
        "c0",
        "persistence: runtime\nkind: nic-channels\ntarget: {driver: bnxt_en}\nset: {combined: 0}\n",
    )]);
    let o = run(&root, alone.path(), &["apply", "--all", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // Combined is 0 now: rx 0 leaves no receive channel, refused at plan time.
    let no_rx = knobs(&[(
        "r0",
        "persistence: runtime\nkind: nic-channels\ntarget: {driver: bnxt_en}\nset: {rx: 0}\n",
    )]);
    let o = run(&root, no_rx.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e = err(&o);
    assert!(
        e.contains("ens4f0np0 channels rx 0 with today's combined 0, tx 4")
            && e.contains("no receive channel")
            && e.contains("ethtool_set_channels"),
        "{e}"
    );
    assert_tree(&split, &root, "refused: nothing changed");
    // The knob alone decides it: a manifest error naming the field.
    let both = knobs(&[(
        "bad",
        "persistence: runtime\nkind: nic-channels\ntarget: {driver: bnxt_en}\nset: {combined: 0, tx: 0}\n",
    )]);
    let o = run(&root, both.path(), &["apply", "--all"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        err(&o).contains("set.tx") && err(&o).contains("knobs.yaml:"),
        "{}",
        err(&o)
    );
    assert_tree(&split, &root, "manifest error: nothing changed");
}

const STEER_ALL: &str =
    "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0}\nset: {cpus: 2-3}\n";
const SHRINK: &str =
    "persistence: runtime\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n";

#[test]
fn reverting_a_channel_change_writes_again_the_per_queue_values_it_reset() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    let q = root.join("sys/class/net/ens2f0/queues");
    let read = |p: &str| std::fs::read_to_string(q.join(p)).unwrap();
    let m = knobs(&[("steer", STEER_ALL), ("shrink", SHRINK)]);
    ok(&run(&root, m.path(), &["apply", "steer"]));
    assert_eq!(read("rx-12/rps_cpus"), "c");
    ok(&run(&root, m.path(), &["apply", "shrink"]));
    assert!(!q.join("rx-12").exists());
    // The queues come back empty, as the kernel makes them; steer owns them.
    ok(&run(&root, m.path(), &["revert", "shrink"]));
    assert_eq!(
        read("rx-12/rps_cpus"),
        "c",
        "written again after the channels"
    );
    assert_eq!(read("rx-3/rps_cpus"), "c");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, "steer");
    ok(&run(&root, m.path(), &["revert", "steer"]));
    assert_tree(&pristine, &root, "ice after both reverts");
    // revert --all of both: steer's files of the removed queues wait for them.
    ok(&run(&root, m.path(), &["apply", "steer"]));
    ok(&run(&root, m.path(), &["apply", "shrink"]));
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "ice after revert --all");
}

#[test]
fn a_rollback_of_a_channel_change_writes_again_the_per_queue_values_it_reset() {
    let (_t, root) = host_with("adl0", &ICE);
    let q = root.join("sys/class/net/ens2f0/queues");
    let m = knobs(&[
        ("steer", STEER_ALL),
        ("shrink", SHRINK),
        (
            "rings",
            "persistence: runtime\nkind: nic-ring\ntarget: {driver: ice}\nset: {rx: 4096}\n",
        ),
    ]);
    ok(&run(&root, m.path(), &["apply", "steer"]));
    let steered = tree(&root);
    // The ring write after the channel write fails: both are rolled back.
    let o = command(&root, m.path(), &["apply", "shrink", "rings"])
        .env(hostknob::apply::ERRNO_VAR, "ethtool:ens2f0/rings/rx=22")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(err(&o).contains("rings/rx"), "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(q.join("rx-12/rps_cpus")).unwrap(),
        "c"
    );
    assert_tree(&steered, &root, "rolled back to steer applied");
}

/// The VM copy with an ice NIC of 16 channels whose queue IRQs are 41 and
/// 42 (`device/msi_irqs`), and a knob moving them to CPU 1.
fn ice_with_queue_irqs() -> (tempfile::TempDir, std::path::PathBuf, tempfile::TempDir) {
    let (t, root) = host_with(
        "fc-haltpoll-2cpu",
        &crate::support::nic::Nic { cpus: 2, ..ICE },
    );
    for irq in [41, 42] {
        write_files(
            &root,
            &[(
                &format!("sys/devices/pci0000:17/0000:17:00.0/0000:17:00.0/msi_irqs/{irq}"),
                "msix\n",
            )],
        );
    }
    let m = knobs(&[
        (
            "irqs",
            "persistence: runtime\nkind: irq-affinity\ntarget: {netdev: [ens2f0]}\nset: \"1\"\n",
        ),
        ("shrink", SHRINK),
        (
            "steer",
            "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0}\nset: {cpus: 1}\n",
        ),
    ]);
    (t, root, m)
}

#[test]
fn a_channel_change_writes_again_the_queue_irq_affinities_the_driver_reset() {
    let (_t, root, m) = ice_with_queue_irqs();
    let affinity = |irq: u32| {
        std::fs::read_to_string(root.join(format!("proc/irq/{irq}/smp_affinity_list")))
            .unwrap()
            .trim()
            .to_string()
    };
    // The driver requests its queue IRQs anew at its own affinity: as here.
    let driver_resets = || {
        for irq in [41, 42] {
            write_files(
                &root,
                &[(&format!("proc/irq/{irq}/smp_affinity_list"), "0-1\n")],
            );
        }
    };
    ok(&run(&root, m.path(), &["apply", "irqs"]));
    assert_eq!((affinity(41), affinity(42)), ("1".into(), "1".into()));
    // An apply with no channel change leaves another writer's value alone.
    driver_resets();
    ok(&run(&root, m.path(), &["apply", "steer"]));
    assert_eq!(
        affinity(41),
        "0-1",
        "no channel change, nothing written again"
    );
    // The apply path: a channel change writes again the IRQs hostknob owns.
    let applied = ok(&run(&root, m.path(), &["apply", "shrink"]));
    assert_eq!(
        (affinity(41), affinity(42)),
        ("1".into(), "1".into()),
        "written again after the channel change: {applied}"
    );
    let (report, _) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, "irqs");
    // The revert path: the channels go back, the driver resets again.
    driver_resets();
    ok(&run(&root, m.path(), &["revert", "shrink"]));
    assert_eq!((affinity(41), affinity(42)), ("1".into(), "1".into()));
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_eq!((affinity(41), affinity(42)), ("0-1".into(), "0-1".into()));
}

#[test]
fn a_ring_or_channel_plan_says_once_that_the_link_resets() {
    let (_t, root, m) = ice_with_queue_irqs();
    let rings = knobs(&[(
        "rings",
        "persistence: runtime\nkind: nic-ring\ntarget: {driver: ice}\nset: {rx: 4096, tx: 4096}\n",
    )]);
    for (manifest, id, section) in [
        (rings.path(), "rings", "rings"),
        (m.path(), "shrink", "channels"),
    ] {
        let plan = ok(&run(&root, manifest, &["apply", id, "--dry-run"]));
        let line = format!("changing {section} resets the link on most drivers");
        assert_eq!(plan.matches(&line).count(), 1, "{plan}");
        assert!(plan.contains("traffic stops briefly"), "{plan}");
    }
    // A knob of neither says nothing of the link.
    let plan = ok(&run(&root, m.path(), &["apply", "steer", "--dry-run"]));
    assert!(!plan.contains("resets the link"), "{plan}");
}
