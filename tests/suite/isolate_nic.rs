//! `hostknob isolate` and the NIC (issue 34 item 5): per physical interface
//! with queues, `rps` and `xps` knobs whose masks are the housekeeping CPUs;
//! the NIC queue interrupts named in a knob of their own (the generic
//! irq-affinity knob excludes them); virtual interfaces left alone; managed
//! queue interrupts left to `isolcpus=managed_irq`. On the hand-built mlx5
//! and ice trees and the VM capture `fc-virtio-2cpu`, the proposal applies
//! under `--root` and reverts byte-identical.

use std::collections::BTreeMap;
use std::path::Path;

use hostknob::cpulist::CpuList;

use crate::support::nic::{ICE, MLX5, Nic, host_with};
use crate::support::*;

/// `isolate --count COUNT --out DIR` on `root`: (the plan's JSON, the knobs by id, DIR).
fn isolate_into(
    root: &Path,
    host: &str,
    count: &str,
) -> (
    serde_json::Value,
    BTreeMap<String, serde_yaml::Value>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let r = root.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "--root", r, "--host", host, "isolate", "--count", count, "--out", d,
    ];
    let mut json = args.to_vec();
    json.extend(["--force", "--format", "json"]);
    let plan = json_of(&hostknob(&json));
    let mut knobs = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        knobs.insert(v["id"].as_str().unwrap().to_string(), v);
    }
    (plan, knobs, dir)
}

fn cpus(v: &serde_yaml::Value) -> CpuList {
    CpuList::parse(v.as_str().unwrap()).unwrap()
}

fn disjoint(a: &CpuList, b: &CpuList) -> bool {
    a.as_slice().iter().all(|c| !b.contains(*c))
}

/// Applies `ids` of the fragment in `dir` on `root` as host `host`.
fn apply_ids(root: &Path, dir: &Path, host: &str, ids: &[&str]) -> String {
    let mut args = vec!["--host", host, "apply"];
    args.extend(ids);
    ok(&run(root, dir, &args))
}

fn revert_all(root: &Path, dir: &Path, host: &str) {
    ok(&run(root, dir, &["--host", host, "revert", "--all"]));
}

/// A hand-built multi-queue NIC: rps and xps knobs on every queue, masks of
/// the housekeeping CPUs, written under --root and reverted byte-identical.
fn rps_and_xps_round_trip(host: &str, nic: &Nic, count: &str) {
    let (_t, root) = host_with(host, nic);
    let pristine = tree(&root);
    let (plan, knobs, dir) = isolate_into(&root, host, count);
    let iso = CpuList::parse(plan["isolated"].as_str().unwrap()).unwrap();
    let hk = CpuList::parse(plan["housekeeping"].as_str().unwrap()).unwrap();
    let (rps, xps) = (
        format!("isolate-rps-{}", nic.ifname),
        format!("isolate-xps-{}", nic.ifname),
    );
    for (id, kind) in [(&rps, "rps"), (&xps, "xps")] {
        let k = knobs
            .get(id.as_str())
            .unwrap_or_else(|| panic!("{host}: no {id}: {knobs:?}"));
        assert_eq!(k["kind"].as_str(), Some(kind));
        assert_eq!(k["target"]["interfaces"].as_str(), Some(nic.ifname));
        let set = cpus(&k["set"]["cpus"]);
        assert_eq!(set, hk, "{host} {id}: the housekeeping CPUs");
        assert!(
            disjoint(&set, &iso),
            "{host} {id}: {set} meets isolated {iso}"
        );
    }
    // No queue interrupts in a tree without /proc/interrupts: no NIC irq knob.
    assert!(!knobs.contains_key("isolate-nic-irq-affinity"), "{host}");
    let reasons = plan["reasons"].to_string();
    assert!(
        reasons.contains(&format!(
            "NIC {}: RPS on {} rx queues; XPS on {} tx queues",
            nic.ifname, nic.queues, nic.queues
        )),
        "{reasons}"
    );
    apply_ids(&root, dir.path(), host, &[&rps, &xps]);
    let q = root.join(format!("sys/class/net/{}/queues", nic.ifname));
    for n in 0..nic.queues {
        for file in [format!("rx-{n}/rps_cpus"), format!("tx-{n}/xps_cpus")] {
            let mask = std::fs::read_to_string(q.join(&file)).unwrap();
            let written = CpuList::parse_mask(mask.trim()).unwrap();
            assert_eq!(written, hk, "{host} {file}: {mask}");
        }
    }
    revert_all(&root, dir.path(), host);
    assert_tree(
        &pristine,
        &root,
        &format!("{host}: after revert of the NIC knobs"),
    );
}

#[test]
fn isolate_proposes_rps_and_xps_off_the_isolated_cpus_on_mlx5_and_they_round_trip() {
    rps_and_xps_round_trip("spr1", &MLX5, "8");
}

#[test]
fn isolate_proposes_rps_and_xps_off_the_isolated_cpus_on_ice_and_they_round_trip() {
    rps_and_xps_round_trip("adl0", &ICE, "10");
}

#[test]
fn isolate_on_the_virtio_capture_names_the_queue_irqs_steers_eth0_and_leaves_virtual_ones() {
    let (_t, root) = copy_host("fc-virtio-2cpu");
    let pristine = tree(&root);
    let (plan, knobs, dir) = isolate_into(&root, "vm", "1");
    assert_eq!(plan["housekeeping"], "0");
    // eth0 (virtio_net) has one queue each way: RPS, and no XPS file to write.
    let rps = &knobs["isolate-rps-eth0"];
    assert_eq!(rps["set"]["cpus"].as_str(), Some("0"));
    assert!(!knobs.contains_key("isolate-xps-eth0"), "{knobs:?}");
    let reasons = plan["reasons"].to_string();
    assert!(reasons.contains("no XPS (one tx queue"), "{reasons}");
    // lo and the ifb devices: no knob, and the plan says why.
    for v in ["lo", "ifb0", "ifb1"] {
        assert!(
            !knobs.keys().any(|id| id.ends_with(&format!("-{v}"))),
            "{v}"
        );
    }
    assert!(
        reasons.contains("virtual interfaces ifb0 ifb1 lo get no RPS/XPS masks"),
        "{reasons}"
    );
    // The queue interrupts named by action, and left out of the generic knob.
    let named = ["virtio2-input.*", "virtio2-output.*"];
    let nic_irq = &knobs["isolate-nic-irq-affinity"];
    let actions: Vec<&str> = nic_irq["target"]["actions"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(actions, named);
    let all = &knobs["isolate-irq-affinity"]["target"];
    assert_eq!(all["all"].as_bool(), Some(true));
    let excluded: Vec<&str> = all["exclude"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(excluded, named);
    let applied = apply_ids(
        &root,
        dir.path(),
        "vm",
        &[
            "isolate-rps-eth0",
            "isolate-nic-irq-affinity",
            "isolate-irq-affinity",
        ],
    );
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(
        read("sys/class/net/eth0/queues/rx-0/rps_cpus").trim(),
        "1",
        "CPU 0's mask"
    );
    for irq in [37, 38, 39] {
        assert_eq!(
            read(&format!("proc/irq/{irq}/smp_affinity_list")).trim(),
            "0",
            "IRQ {irq}"
        );
    }
    assert!(applied.contains("IRQ 37 virtio2-config"), "{applied}");
    let paths = journal_paths(&root);
    let by = |file: &str| paths.iter().filter(|p| p.as_str() == file).count();
    assert_eq!(
        by("/proc/irq/38/smp_affinity_list"),
        1,
        "one knob writes each queue IRQ: {paths:?}"
    );
    revert_all(&root, dir.path(), "vm");
    assert_tree(
        &pristine,
        &root,
        "fc-virtio-2cpu: after revert of the NIC knobs",
    );
}

#[test]
fn isolate_leaves_a_managed_nic_queue_irq_to_isolcpus_managed_irq() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, root) = copy_host("fc-virtio-2cpu");
    // Since 6.12 a managed IRQ's smp_affinity_list has no write bit.
    let file = root.join("proc/irq/38/smp_affinity_list");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let (plan, knobs, _dir) = isolate_into(&root, "vm", "1");
    let actions = knobs["isolate-nic-irq-affinity"]["target"]["actions"].clone();
    assert_eq!(
        serde_yaml::to_string(&actions).unwrap(),
        "- virtio2-output.*\n"
    );
    let reasons = plan["reasons"].to_string();
    assert!(
        reasons.contains("managed queue interrupts virtio2-input.0 left to isolcpus=managed_irq"),
        "{reasons}"
    );
    let caveats = serde_yaml::to_string(&knobs["isolate-nic-irq-affinity"]["caveats"]).unwrap();
    assert!(
        caveats.contains("managed, so left out") && caveats.contains("virtio2-input.0"),
        "{caveats}"
    );
}

/// Issue 50 item 10: interfaces whose names slug alike (`ens2.f0`,
/// `ens2_f0`) get knobs of distinct ids, each written once; an interface
/// named `e*` (a valid name, and a glob) is matched literally, so its knob
/// writes its own queues and no other interface's.
#[test]
fn isolate_ids_stay_unique_and_names_match_literally() {
    use crate::support::nic::add;
    let names = ["ens2.f0", "ens2_f0", "e*"];
    let (_t, root) = copy_host("adl0");
    for (i, name) in names.iter().enumerate() {
        let pci: &'static str = Box::leak(format!("0000:{:02x}:00.0", 0x20 + i).into_boxed_str());
        let mac: &'static str = Box::leak(format!("b4:96:91:17:00:{i:02x}").into_boxed_str());
        add(
            &root,
            &Nic {
                ifname: name,
                pci,
                mac,
                ..ICE
            },
        );
    }
    let (_plan, knobs, dir) = isolate_into(&root, "adl0", "10");
    let rps: Vec<&String> = knobs
        .keys()
        .filter(|k| k.starts_with("isolate-rps-"))
        .collect();
    assert_eq!(
        rps.len(),
        names.len(),
        "one rps knob per interface: {rps:?}"
    );
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, knobs.len(), "one file per knob id");
    let id_of = |name: &str| {
        knobs
            .iter()
            .find(|(id, k)| {
                id.starts_with("isolate-rps-")
                    && glob::Pattern::new(k["target"]["interfaces"].as_str().unwrap())
                        .unwrap()
                        .matches(name)
            })
            .map(|(id, _)| id.clone())
            .unwrap()
    };
    // `e*`'s knob, applied, changes e*'s queues and leaves the others'.
    let star = id_of("e*");
    let before = |n: &str| tree(&root.join(format!("sys/class/net/{n}/queues/")));
    let others = (before("ens2.f0"), before("ens2_f0"));
    apply_ids(&root, dir.path(), "adl0", &[&star]);
    assert_eq!(
        others,
        (before("ens2.f0"), before("ens2_f0")),
        "{star} wrote another NIC"
    );
    let mask = std::fs::read_to_string(root.join("sys/class/net/e*/queues/rx-0/rps_cpus")).unwrap();
    assert_ne!(
        mask.trim().trim_start_matches(['0', ',']),
        "",
        "{star} left e*'s rx-0 empty"
    );
    revert_all(&root, dir.path(), "adl0");
}
