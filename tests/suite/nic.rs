//! Issue 34: NICs. `inventory network` on this VM against the real
//! `ethtool` (read only: eth0 is never changed), the capture's ethtool
//! state files, and apply/revert of every NIC kind on hand-built
//! multi-queue NICs (support/nic.rs) in copies of corpus hosts: byte-identical
//! reverts, refusals at plan time from the reported maxima.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::support::nic::{ICE, MLX5, host_with};
use crate::support::*;

fn inventory_nic(root: Option<&Path>, ifname: &str) -> serde_json::Value {
    let mut args = vec![];
    let r;
    if let Some(root) = root {
        r = root.to_str().unwrap().to_string();
        args.extend(["--root", r.as_str()]);
    }
    args.extend(["inventory", "network", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&hostknob(&args))).unwrap();
    v["network"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == ifname)
        .unwrap_or_else(|| panic!("no {ifname} in {v:#}"))
        .clone()
}

/// `ethtool OPT eth0` run here.
fn ethtool_live(opt: &str) -> String {
    let out = Command::new("ethtool")
        .args([opt, "eth0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool {opt} eth0: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `ethtool OPT eth0` as stored beside a capture: the text after its
/// `$ ethtool OPT eth0` line, up to the next such line.
fn ethtool_stored(text: &str, opt: &str) -> String {
    let head = format!("$ ethtool {opt} eth0\n");
    let start = text.find(&head).unwrap_or_else(|| panic!("no {head:?}")) + head.len();
    let rest = &text[start..];
    rest[..rest.find("$ ethtool ").unwrap_or(rest.len())].to_string()
}

/// ethtool's output as `key: value` lines (sections' headings dropped).
fn lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// The value ethtool printed under `key` after `heading` (`Pre-set maximums`).
fn after(lines: &[(String, String)], heading: &str, key: &str) -> String {
    let start = lines.iter().position(|(k, _)| k == heading).unwrap();
    lines[start..]
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {key} after {heading}"))
}

fn num_or_na(v: &serde_json::Value) -> String {
    match v.as_u64().unwrap() {
        0 => "n/a".into(),
        n => n.to_string(),
    }
}

#[test]
fn eth0_agrees_with_ethtool_field_by_field() {
    if !Path::new("/sys/class/net/eth0").exists()
        || Command::new("ethtool").arg("--version").output().is_err()
    {
        eprintln!("no eth0 or no ethtool here: nothing to compare");
        return;
    }
    let nic = inventory_nic(None, "eth0");
    agrees_with_ethtool(&nic, Path::new("/"), |opt| lines(&ethtool_live(opt)));
}

#[test]
fn the_committed_vm_capture_agrees_with_the_ethtool_output_stored_beside_it() {
    let host = corpus_host("fc-virtio-2cpu");
    let stored = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hosts/fc-virtio-2cpu.ethtool.txt"),
    )
    .unwrap();
    assert!(host.join("hostknob-capture/ethtool/eth0.yaml").is_file());
    let nic = inventory_nic(Some(&host), "eth0");
    assert_eq!(nic["ethtool"]["driver"], "virtio_net");
    agrees_with_ethtool(&nic, &host, |opt| lines(&ethtool_stored(&stored, opt)));
}

/// `inventory network`'s view of eth0 against ethtool's output (`ethtool`
/// gives it per option), field by field; the queues from `root`'s sysfs.
fn agrees_with_ethtool(
    nic: &serde_json::Value,
    root: &Path,
    ethtool: impl Fn(&str) -> Vec<(String, String)>,
) {
    let e = &nic["ethtool"];
    // -i
    let info: BTreeMap<_, _> = ethtool("-i").into_iter().collect();
    for (ours, theirs) in [
        ("driver", "driver"),
        ("version", "version"),
        ("firmware-version", "firmware-version"),
        ("bus-info", "bus-info"),
    ] {
        assert_eq!(e[ours].as_str().unwrap(), info[theirs], "{ours}");
    }
    // -l and -g: maximum then current, per type (ethtool prints 0 as n/a).
    let l = ethtool("-l");
    for (key, ours) in [
        ("RX", "rx"),
        ("TX", "tx"),
        ("Other", "other"),
        ("Combined", "combined"),
    ] {
        let c = &e["channels"][ours];
        assert_eq!(
            after(&l, "Pre-set maximums", key),
            num_or_na(&c["max"]),
            "max {key}"
        );
        assert_eq!(
            after(&l, "Current hardware settings", key),
            num_or_na(&c["current"]),
            "{key}"
        );
    }
    let g = ethtool("-g");
    for (key, ours) in [
        ("RX", "rx"),
        ("RX Mini", "rx-mini"),
        ("RX Jumbo", "rx-jumbo"),
        ("TX", "tx"),
    ] {
        let r = &e["rings"][ours];
        assert_eq!(
            after(&g, "Pre-set maximums", key),
            num_or_na(&r["max"]),
            "ring max {key}"
        );
        assert_eq!(
            after(&g, "Current hardware settings", key),
            num_or_na(&r["current"]),
            "ring {key}"
        );
    }
    // -c: every field ethtool shows as a number (the rest the driver does not support).
    let c = ethtool("-c");
    let mut compared = 0;
    for (k, v) in &c {
        if let Ok(n) = v.parse::<u64>() {
            assert_eq!(e["coalesce"][k.as_str()].as_u64(), Some(n), "coalesce {k}");
            compared += 1;
        }
    }
    assert!(compared >= 2, "ethtool -c showed no numbers: {c:?}");
    let adaptive = c
        .iter()
        .find(|(k, _)| k == "Adaptive RX")
        .unwrap()
        .1
        .clone();
    let rx_on = e["coalesce"]["adaptive-rx"].as_u64().unwrap() != 0;
    assert!(
        adaptive.starts_with(if rx_on { "on" } else { "off" }),
        "{adaptive}"
    );
    // -k: every feature by the kernel's name, in ethtool's words.
    let k = ethtool("-k");
    let features = e["features"].as_object().unwrap();
    let mut same = 0;
    for (name, word) in &k {
        if let Some(ours) = features.get(name.as_str()) {
            assert_eq!(ours.as_str().unwrap(), word, "feature {name}");
            same += 1;
        }
    }
    // ethtool's legacy names are the kernel's single features.
    let legacy: BTreeMap<_, _> = k.iter().cloned().collect();
    assert_eq!(features["rx-gro"], legacy["generic-receive-offload"]);
    assert_eq!(features["rx-lro"], legacy["large-receive-offload"]);
    assert_eq!(
        features["tx-generic-segmentation"],
        legacy["generic-segmentation-offload"]
    );
    assert!(same > 20, "only {same} features compared");
    // The queues and their steering, from sysfs.
    let queues = root.join("sys/class/net/eth0/queues");
    let rx = std::fs::read_dir(&queues)
        .unwrap()
        .filter(|d| {
            d.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("rx-")
        })
        .count();
    assert_eq!(nic["rx_queues"].as_array().unwrap().len(), rx);
    let flows = std::fs::read_to_string(queues.join("rx-0/rps_flow_cnt")).unwrap();
    assert_eq!(
        nic["rx_queues"][0]["rps_flow_cnt"]
            .as_u64()
            .unwrap()
            .to_string(),
        flows.trim()
    );
    assert_eq!(nic["kind"], "physical");
    let root = (root != Path::new("/")).then_some(root);
    let lo = inventory_nic(root, "lo");
    assert_eq!(lo["kind"], "loopback");
}

#[test]
fn a_capture_holds_each_interfaces_ethtool_state_and_reads_it_back() {
    if !Path::new("/sys/class/net/eth0").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    ok(&hostknob(&["capture", "--out", out.to_str().unwrap()]));
    let file = out.join("hostknob-capture/ethtool/eth0.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("driver:"), "{text}");
    let live = inventory_nic(None, "eth0");
    let captured = inventory_nic(Some(&out), "eth0");
    assert_eq!(captured["ethtool"], live["ethtool"]);
    // ETHTOOL_GPERMADDR as `ethtool -P` shows it (all zero: none), stored.
    let shown = std::process::Command::new("ethtool")
        .args(["-P", "eth0"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(o) = shown {
        let text = String::from_utf8_lossy(&o.stdout);
        let perm = text.trim().strip_prefix("Permanent address: ").unwrap();
        let stored = &captured["ethtool"]["permanent-address"];
        if perm == "00:00:00:00:00:00" {
            assert!(stored.is_null(), "{stored}");
        } else {
            assert_eq!(stored, perm);
        }
    }
    assert_eq!(captured["rx_queues"], live["rx_queues"]);
    // The MAC persistence matches, as the kernel shows it.
    let mac = std::fs::read_to_string("/sys/class/net/eth0/address").unwrap();
    assert_eq!(live["address"], mac.trim());
    assert_eq!(captured["address"], live["address"]);
}

#[test]
fn a_capture_stores_each_interfaces_mac_address_which_persistence_matches() {
    let (_t, root) = copy_host("fc-virtio-2cpu");
    crate::support::nic::with_udev(&root);
    let r = root.to_str().unwrap();
    let m = knobs(&[(
        "nogro",
        "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: eth0}\nset: {gro: off}\n",
    )]);
    let persist = |root: &Path| run(root, m.path(), &["--host", "vm", "persist", "nogro"]);
    // The committed capture was made before capture stored `address`: the
    // .link file matches the device, by its PCI path, not its current MAC.
    let matched = "[Match]\nPath=pci-0000:00:03.0\nType=ether\n";
    let printed = ok(&persist(&root));
    assert!(printed.contains(matched), "{printed}");
    let mac = "52:54:00:12:34:56";
    let dev = "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0";
    write_files(&root, &[(&format!("{dev}/address"), &format!("{mac}\n"))]);
    assert_eq!(inventory_nic(Some(&root), "eth0")["address"], mac);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    ok(&hostknob(&[
        "--root",
        r,
        "capture",
        "--out",
        out.to_str().unwrap(),
    ]));
    let stored = std::fs::read_to_string(out.join("sys/class/net/eth0/address")).unwrap();
    assert_eq!(stored, format!("{mac}\n"));
    assert_eq!(inventory_nic(Some(&out), "eth0")["address"], mac);
    crate::support::nic::with_udev(&out);
    let printed = ok(&persist(&out));
    assert!(printed.contains(matched), "{printed}");
    assert!(!printed.contains(&format!("MACAddress={mac}")), "{printed}");
}

#[test]
fn the_hand_built_mlx5_shows_63_channels_and_its_queues() {
    let (_t, root) = host_with("spr1", &MLX5);
    let nic = inventory_nic(Some(&root), MLX5.ifname);
    assert_eq!(nic["driver"], "mlx5_core");
    assert_eq!(nic["kind"], "physical");
    assert_eq!(nic["numa_node"], 0);
    assert_eq!(nic["ethtool"]["channels"]["combined"]["max"], 63);
    assert_eq!(nic["rx_queues"].as_array().unwrap().len(), 63);
    assert_eq!(nic["rx_queues"][62]["rps_cpus"], "");
    let table = ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "network",
    ]));
    assert!(table.contains("combined 63/63"), "{table}");
    assert!(table.contains("adaptive rx on tx on"), "{table}");
}

/// Audit finds every knob of `ids` in effect; `unpersisted` is its word for
/// a runtime-only knob in effect.
fn assert_in_effect(report: &serde_json::Value, ids: &[&str]) {
    for id in ids {
        let status = knob(report, id)["status"].as_str().unwrap().to_string();
        assert!(
            ["ok", "unpersisted"].contains(&status.as_str()),
            "{id}: {report:#}"
        );
    }
}

/// Apply of `knobs` (each runtime) exits 1 saying `says`, and changes nothing.
fn assert_refused(root: &Path, pristine: &Tree, bodies: &[(&str, &str)], says: &str) {
    let runtime: Vec<(&str, String)> = bodies
        .iter()
        .map(|(id, b)| match b.starts_with("persistence:") {
            true => (*id, b.to_string()),
            false => (*id, format!("persistence: runtime\n{b}")),
        })
        .collect();
    let refs: Vec<(&str, &str)> = runtime.iter().map(|(i, b)| (*i, b.as_str())).collect();
    let m = knobs(&refs);
    let o = run(root, m.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1), "{bodies:?}: {o:?}");
    assert!(err(&o).contains(says), "{bodies:?}: {}", err(&o));
    assert_tree(pristine, root, says);
}

const ICE_KNOBS: &[(&str, &str)] = &[
    (
        "queues",
        "persistence: runtime\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n",
    ),
    (
        "moderation",
        "persistence: runtime\nkind: nic-coalesce\ntarget: {interfaces: ens2f*}\nset: {adaptive-rx: off, rx-usecs: 0}\n",
    ),
    (
        "rings",
        "persistence: runtime\nkind: nic-ring\ntarget: {pci: \"0000:17:00.0\"}\nset: {rx: 4096, tx: 512}\n",
    ),
    (
        "nogro",
        "persistence: runtime\nkind: nic-feature\ntarget: {physical: true, driver: ice}\nset: {gro: off}\n",
    ),
    (
        "steer",
        "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3, flow_cnt: 4096}\n",
    ),
];

#[test]
fn every_nic_kind_applies_reads_back_and_reverts_byte_identical_on_ice() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    let m = knobs(ICE_KNOBS);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    // Channels first: they make the queues the per-queue kinds write.
    let paths = journal_paths(&root);
    assert_eq!(
        paths[0],
        format!("ethtool:{}/channels/combined", ICE.ifname),
        "{paths:?}"
    );
    let nic = inventory_nic(Some(&root), ICE.ifname);
    let e = &nic["ethtool"];
    assert_eq!(e["channels"]["combined"]["current"], 8);
    assert_eq!(e["coalesce"]["adaptive-rx"], 0);
    assert_eq!(e["rings"]["rx"]["current"], 4096);
    assert_eq!(e["rings"]["tx"]["current"], 512);
    assert_eq!(e["features"]["rx-gro"], "off");
    assert_eq!(nic["rx_queues"][3]["rps_cpus"], "2-3");
    assert_eq!(nic["rx_queues"][3]["rps_flow_cnt"], 4096);
    assert_eq!(nic["rx_queues"][4]["rps_cpus"], "");
    let (report, code) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, &ICE_KNOBS.iter().map(|k| k.0).collect::<Vec<_>>());
    assert_ne!(code, 2, "no drift");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "ice after revert");
}

#[test]
fn a_journal_naming_ethtool_values_by_the_old_pseudo_path_still_reverts() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    let m = knobs(&ICE_KNOBS[..1]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    // An ethtool value is named by its locator, never a /sys path.
    let file = root.join(STATE_DIR).join("journal.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let new = format!("\"ethtool:{}/", ICE.ifname);
    assert!(text.contains(&new), "{text}");
    assert!(!text.contains("@ethtool"), "{text}");
    // Journals written before the locator hold /sys/class/net/IF@ethtool/...
    let old = format!("\"/sys/class/net/{}@ethtool/", ICE.ifname);
    std::fs::write(&file, text.replace(&new, &old)).unwrap();
    let paths = journal_paths(&root);
    assert!(
        paths
            .iter()
            .any(|p| p.contains("@ethtool/channels/combined")),
        "{paths:?}"
    );
    // Audit and a second apply take the old line as the same slot.
    let (report, _) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, &["queues"]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(reverted.contains("combined"), "{reverted}");
    assert_tree(&pristine, &root, "ice after revert of an old-form journal");
}

#[test]
fn values_above_the_reported_maxima_and_fixed_features_are_refused_at_plan_time() {
    let (_t, root) = host_with("spr1", &MLX5);
    let pristine = tree(&root);
    for (body, says) in [
        (
            "kind: nic-channels\ntarget: {driver: mlx5_core}\nset: {combined: 64}\n",
            "combined 64 is above the maximum 63 mlx5_core reports (ethtool -l ens1f0np0)",
        ),
        (
            "kind: nic-channels\ntarget: {interfaces: ens1f0np0}\nset: {rx: 4}\n",
            "rx 4 is above the maximum 0",
        ),
        (
            "kind: nic-ring\ntarget: {interfaces: ens1*}\nset: {rx: 8193}\n",
            "rx 8193 is above the maximum 8192",
        ),
    ] {
        assert_refused(&root, &pristine, &[("k", body)], says);
    }
    let (_t2, ice) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "k",
        "persistence: runtime\nkind: nic-feature\ntarget: {driver: ice}\nset: {lro: on}\n",
    )]);
    let o = run(&ice, m.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("rx-lro is fixed off by ice"),
        "{}",
        err(&o)
    );
}

#[test]
fn mlx5_channels_and_every_queues_rps_round_trip_byte_identical() {
    let (_t, root) = host_with("spr1", &MLX5);
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "ch",
            "persistence: runtime\nkind: nic-channels\ntarget: {physical: true, driver: mlx5_core}\nset: {combined: 16}\n",
        ),
        (
            "rps",
            "persistence: runtime\nkind: rps\ntarget: {driver: mlx5_core}\nset: {cpus: 0-31}\n",
        ),
    ]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let queues = root.join("sys/class/net/ens1f0np0/queues");
    let q = std::fs::read_to_string(queues.join("rx-15/rps_cpus")).unwrap();
    assert_eq!(q, "ffffffff", "the mask in the kernel's words");
    // 16 channels leave 16 queues each way: the kernel removes the rest.
    assert!(!queues.join("rx-16").exists() && !queues.join("tx-16").exists());
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "mlx5 after revert");
}

#[test]
fn verify_of_a_nic_knob_without_a_peer_says_the_probe_cannot_exercise_the_nic() {
    let (_tmp, root) = copy_host("fc-virtio-2cpu");
    let pristine = tree(&root);
    for probe in ["rpc", "wakeup"] {
        let body = format!(
            "persistence: runtime\nkind: nic-feature\ntarget: {{interfaces: eth0}}\n\
             set: {{gro: off}}\nverify: {{probe: {probe}, expect: [{{metric: p50, change: lower, by: 5 µs}}]}}\n"
        );
        let m = knobs(&[("eth0-gro-off", &body)]);
        let report = short_verify(&root, m.path(), "eth0-gro-off");
        let warnings = report["warnings"].to_string();
        assert!(
            warnings.contains(&format!("the {probe} probe"))
                && warnings.contains("cannot exercise the NIC")
                && warnings.contains("--connect HOST:PORT"),
            "{probe}: {warnings}"
        );
        let words = report["verdict_words"].as_str().unwrap();
        assert!(
            !words.starts_with("no detectable effect"),
            "{probe}: {words}"
        );
        for e in report["expectations"].as_array().unwrap() {
            assert_ne!(e["outcome"], "not-met", "{probe}: {e:#}");
        }
        assert_eq!(report["restored"], true);
        assert_tree(&pristine, &root, "after verify");
    }
}

#[test]
fn xps_by_cpu_and_by_rx_queue_applies_audits_and_reverts_byte_identical() {
    for (host, nic, cpus) in [("adl0", &ICE, "0-3"), ("spr1", &MLX5, "0-31,64")] {
        let (_t, root) = host_with(host, nic);
        let pristine = tree(&root);
        let by_cpu = format!(
            "persistence: runtime\nkind: xps\ntarget: {{driver: {}, queues: 0-7}}\nset: {{cpus: \"{cpus}\"}}\n",
            nic.driver
        );
        let m = knobs(&[
            ("xcpu", by_cpu.as_str()),
            (
                "xrxq",
                "persistence: runtime\nkind: xps\ntarget: {physical: true, queues: \"8-9\"}\nset: {rxqs: 8-9}\n",
            ),
        ]);
        let q = root.join(format!("sys/class/net/{}/queues", nic.ifname));
        let read = |p: &str| std::fs::read_to_string(q.join(p)).unwrap();
        let untouched = read("tx-8/xps_cpus");
        let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
        assert!(applied.contains("wrote and read back"), "{applied}");
        let want = if cpus == "0-3" {
            "f"
        } else {
            "1,00000000,ffffffff"
        };
        assert_eq!(read("tx-7/xps_cpus"), want, "the kernel's mask");
        assert_eq!(read("tx-9/xps_rxqs"), "300", "rx queues 8 and 9");
        assert_eq!(
            read("tx-8/xps_cpus"),
            untouched,
            "tx-8 is not in the CPU knob"
        );
        let (report, _) = audit_json(&root, m.path(), None);
        assert_in_effect(&report, &["xcpu", "xrxq"]);
        ok(&run(&root, m.path(), &["revert", "--all"]));
        assert_tree(&pristine, &root, &format!("{host} xps after revert"));
    }
}

#[test]
fn xps_is_refused_at_plan_time_for_missing_queues_offline_cpus_and_devices_without_xps() {
    let (_t, root) = host_with("adl0", &ICE);
    let q = root.join("sys/class/net/ens2f0/queues");
    // A device without XPS (one tx queue, or no CONFIG_XPS): the kernel has no file.
    std::fs::remove_file(q.join("tx-15/xps_cpus")).unwrap();
    let pristine = tree(&root);
    for (body, says) in [
        (
            "target: {interfaces: ens2f0, queues: 8-16}\nset: {cpus: 0-1}",
            "ens2f0 has no tx queue 16 (it has 0-15",
        ),
        (
            "target: {driver: ice}\nset: {cpus: 0-99}",
            "CPUs 16-99 are not online on this host",
        ),
        (
            "target: {driver: ice, queues: \"0\"}\nset: {rxqs: 0-16}",
            "ens2f0 has no rx queue 16 for xps_rxqs (it has 16)",
        ),
        (
            "target: {driver: ice, queues: 14-15}\nset: {cpus: 0-1}",
            "ens2f0 has no xps_cpus: XPS needs a device with more than one tx queue",
        ),
    ] {
        let body = format!("kind: xps\n{body}\n");
        assert_refused(&root, &pristine, &[("k", &body)], says);
    }
}

#[test]
fn a_plan_that_grows_channels_writes_the_new_queues_in_the_same_apply() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    // Listed before the channels: the per-queue kinds still plan after them.
    let m = knobs(&[
        (
            "steer",
            "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0, queues: 20-31}\nset: {cpus: 2-3}\n",
        ),
        (
            "send",
            "persistence: runtime\nkind: xps\ntarget: {driver: ice}\nset: {cpus: 0-3}\n",
        ),
        (
            "grow",
            "persistence: runtime\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 32}\n",
        ),
    ]);
    let dry = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(
        dry.contains("made by this apply's nic-channels change"),
        "{dry}"
    );
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    let q = root.join("sys/class/net/ens2f0/queues");
    let read = |p: &str| std::fs::read_to_string(q.join(p)).unwrap();
    assert_eq!(read("rx-31/rps_cpus"), "c");
    assert_eq!(
        read("rx-19/rps_cpus"),
        "00000000\n",
        "not a queue of the knob"
    );
    assert_eq!(read("tx-31/xps_cpus"), "f");
    assert_eq!(read("tx-0/xps_cpus"), "f");
    assert!(!q.join("rx-32").exists());
    let nic = inventory_nic(Some(&root), ICE.ifname);
    assert_eq!(nic["rx_queues"].as_array().unwrap().len(), 32);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_in_effect(&report, &["steer", "send", "grow"]);
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "ice grown to 32 channels, after revert");
}

#[test]
fn a_queue_the_channel_change_would_remove_is_refused_at_plan_time() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    const KNOBS: &[(&str, &str)] = &[
        (
            "shrink",
            "persistence: runtime\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n",
        ),
        (
            "steer",
            "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-11}\nset: {cpus: 2-3}\n",
        ),
    ];
    let says = "ens2f0 has no rx queue 8-11 (it has 0-7 after this apply's nic-channels change";
    assert_refused(&root, &pristine, KNOBS, says);
}

#[test]
fn a_hostile_interface_name_is_refused_naming_the_file_and_field_and_changes_nothing() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    for name in ["../x", "a/b", "abcdefghijklmnop"] {
        for kind in ["nic-channels", "rps"] {
            let set = if kind == "rps" {
                "{cpus: 0-1}"
            } else {
                "{combined: 8}"
            };
            let body = format!(
                "persistence: runtime\nkind: {kind}\ntarget: {{interfaces: \"{name}\"}}\nset: {set}\n"
            );
            let m = knobs(&[("k", &body)]);
            let o = run(&root, m.path(), &["apply", "--all"]);
            assert_ne!(o.status.code(), Some(0), "{name}: {o:?}");
            let e = err(&o);
            assert!(
                e.contains("knobs.yaml:") && e.contains("target.interfaces") && e.contains(name),
                "{name} {kind}: {e}"
            );
            assert_tree(&pristine, &root, name);
        }
    }
}

/// Issue 49 item 5: the dry-run diff of an `rps` knob shows CPU lists, as
/// audit does, and labels the hex masks the file holds.
#[test]
fn an_rps_diff_shows_cpu_lists_and_labels_the_masks() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "steer",
        "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0}\nset: {cpus: 1}\n",
    )]);
    let dry = ok(&run(&root, m.path(), &["apply", "steer", "--dry-run"]));
    let lines: Vec<&str> = dry.lines().collect();
    assert!(lines.contains(&"-none") && lines.contains(&"+1"), "{dry}");
    assert!(!lines.contains(&"+2"), "the mask's bytes as a value: {dry}");
    assert!(
        dry.contains("CPU lists; the file holds hex masks 00000000 -> 2"),
        "{dry}"
    );
}
