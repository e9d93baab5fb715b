//! Live NIC knobs (issue 34), never on this machine's own link: a veth pair
//! with 4 queues each way inside a private network namespace of its own
//! name; `nic-channels` (rx/tx 2), `nic-feature` (gro off), `rps` on
//! rx-0 and `xps` on tx-0 and tx-1 applied there by hostknob run inside it (`ip netns exec`), checked
//! with the real `ethtool` and sysfs, audit `ok`, revert restoring every
//! value. A guard deletes the namespace (and the pair with it) on every
//! path, a panic included.

use std::path::Path;
use std::process::{Command, Output};

use super::support::*;

/// Deletes the namespace when dropped.
pub(super) struct Netns(pub(super) String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

pub(super) fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

pub(super) fn in_ns(ns: &str, cmd: &[&str]) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `ethtool OPT IF` inside the namespace: the value after `key:` under `heading`.
fn ethtool_value(ns: &str, opt: &str, ifname: &str, heading: Option<&str>, key: &str) -> String {
    let text = in_ns(ns, &["ethtool", opt, ifname]);
    let start = heading
        .map(|h| text.find(h).unwrap_or_else(|| panic!("{h} in {text}")))
        .unwrap_or(0);
    text[start..]
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

const KNOBS: &[(&str, &str)] = &[
    (
        "veth-queues",
        "persistence: runtime\nkind: nic-channels\ntarget: {interfaces: hkv0}\nset: {rx: 2, tx: 2}\n",
    ),
    (
        "veth-nogro",
        "persistence: runtime\nkind: nic-feature\ntarget: {interfaces: hkv0}\nset: {gro: off}\n",
    ),
    (
        "veth-rps",
        "persistence: runtime\nkind: rps\ntarget: {interfaces: hkv0, queues: \"0\"}\nset: {cpus: 0-1, flow_cnt: 256}\n",
    ),
    (
        "veth-xps",
        "persistence: runtime\nkind: xps\ntarget: {interfaces: hkv0, queues: 0-1}\nset: {cpus: 0-1, rxqs: \"1\"}\n",
    ),
];

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_nic_knobs_on_a_veth_pair_in_a_private_namespace_apply_audit_and_revert() {
    super::live_allowed().unwrap();
    let ns = Netns(format!("hostknob-test-{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n",
        &ns.0,
        "link",
        "add",
        "hkv0",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "hkv1",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
    ]);
    ip(&["-n", &ns.0, "link", "set", "hkv0", "up"]);
    ip(&["-n", &ns.0, "link", "set", "hkv1", "up"]);
    let q = "/sys/class/net/hkv0/queues/rx-0";
    let tx = "/sys/class/net/hkv0/queues/tx-1";
    let xps = |ns: &str| {
        (
            in_ns(ns, &["cat", &format!("{tx}/xps_cpus")]),
            in_ns(ns, &["cat", &format!("{tx}/xps_rxqs")]),
        )
    };
    let xps_before = xps(&ns.0);
    let before = (
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "RX"),
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "TX"),
        ethtool_value(&ns.0, "-k", "hkv0", None, "generic-receive-offload"),
        in_ns(&ns.0, &["cat", &format!("{q}/rps_cpus")]),
        in_ns(&ns.0, &["cat", &format!("{q}/rps_flow_cnt")]),
    );
    assert_ne!(before.0, "2", "veth starts with every queue: {before:?}");
    let state = tempfile::tempdir().unwrap();
    let m = knobs(KNOBS);
    let hostknob = |args: &[&str]| -> Output {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.0, bin()]);
        isolate(&mut c);
        c.env("HOSTKNOB_MANIFEST", m.path())
            .args([
                "--state-dir",
                state.path().to_str().unwrap(),
                "--host",
                "live",
            ])
            .args(args)
            .output()
            .unwrap()
    };
    let applied = ok(&hostknob(&["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    assert_eq!(
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "RX"),
        "2"
    );
    assert_eq!(
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "TX"),
        "2"
    );
    assert_eq!(
        ethtool_value(&ns.0, "-k", "hkv0", None, "generic-receive-offload"),
        "off"
    );
    assert_eq!(in_ns(&ns.0, &["cat", &format!("{q}/rps_cpus")]).trim(), "3");
    assert_eq!(
        in_ns(&ns.0, &["cat", &format!("{q}/rps_flow_cnt")]).trim(),
        "256"
    );
    // Planned again after the channel change (tx-1 is kept at 2 queues).
    assert_eq!(
        (xps(&ns.0).0.trim(), xps(&ns.0).1.trim()),
        ("3", "2"),
        "xps_cpus and xps_rxqs of tx-1"
    );
    let audit = hostknob(&["audit", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    for (id, _) in KNOBS {
        // In effect; `unpersisted` is audit's word for a runtime-only knob in effect.
        let status = knob(&report, id)["status"].as_str().unwrap().to_string();
        assert!(
            ["ok", "unpersisted"].contains(&status.as_str()),
            "{id}: {report:#}"
        );
    }
    let reverted = ok(&hostknob(&["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    let after = (
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "RX"),
        ethtool_value(&ns.0, "-l", "hkv0", Some("Current"), "TX"),
        ethtool_value(&ns.0, "-k", "hkv0", None, "generic-receive-offload"),
        in_ns(&ns.0, &["cat", &format!("{q}/rps_cpus")]),
        in_ns(&ns.0, &["cat", &format!("{q}/rps_flow_cnt")]),
    );
    assert_eq!(after, before);
    assert_eq!(xps(&ns.0), xps_before);
    let name = ns.0.clone();
    drop(ns);
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&name),
        "namespace {name} is left"
    );
    assert!(Path::new("/sys/class/net/eth0").exists(), "eth0 untouched");
}
