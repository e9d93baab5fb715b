//! Issue 44 item 8, live: ethtool's legacy `tso` as ethtool means it. Two
//! veth pairs in a private network namespace of their own name: `tso: off`
//! by hostknob on the first, `ethtool -K ... tso off` on the second, and
//! `ethtool -k` of both compared feature by feature; revert restores every
//! feature of the first. The namespace (and the pairs with it) is deleted on
//! every path, a panic included.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use super::nic::{Netns, in_ns, ip};
use super::support::*;

/// `ethtool -k IF` as feature name -> its words; `[fixed]` kept.
fn features(ns: &str, ifname: &str) -> BTreeMap<String, String> {
    in_ns(ns, &["ethtool", "-k", ifname])
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

fn veth(ns: &str, a: &str, b: &str) {
    ip(&[
        "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b,
    ]);
    ip(&["-n", ns, "link", "set", a, "up"]);
    ip(&["-n", ns, "link", "set", b, "up"]);
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_tso_off_turns_off_every_tcp_segmentation_feature_as_ethtool_does_and_revert_restores_each()
{
    super::live_allowed().unwrap();
    let ns = Netns(format!("hostknob-tso-{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    veth(&ns.0, "hka0", "hka1");
    veth(&ns.0, "hkb0", "hkb1");
    let before = features(&ns.0, "hka0");
    assert_eq!(before, features(&ns.0, "hkb0"), "two fresh veths alike");
    let tcp: Vec<&String> = before
        .keys()
        .filter(|k| k.starts_with("tx-tcp") && k.ends_with("-segmentation"))
        .collect();
    for k in [
        "tx-tcp-segmentation",
        "tx-tcp6-segmentation",
        "tx-tcp-ecn-segmentation",
    ] {
        assert!(
            before.get(k).is_some_and(|w| w == "on"),
            "veth has {k} on: {before:?}"
        );
    }
    let state = tempfile::tempdir().unwrap();
    let m = knobs(&[(
        "notso",
        "persistence: runtime\nkind: nic-feature\ntarget: {interfaces: hka0}\nset: {tso: off}\n",
    )]);
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
    in_ns(&ns.0, &["ethtool", "-K", "hkb0", "tso", "off"]);
    let ours = features(&ns.0, "hka0");
    let theirs = features(&ns.0, "hkb0");
    for (k, w) in &theirs {
        assert_eq!(
            ours.get(k),
            Some(w),
            "{k}: hostknob's hka0 against ethtool's hkb0"
        );
    }
    assert_eq!(ours.len(), theirs.len());
    for k in &tcp {
        let w = &ours[k.as_str()];
        assert!(w.starts_with("off") || w.contains("[fixed]"), "{k}: {w}");
    }
    let audit = hostknob(&["audit", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let status = knob(&report, "notso")["status"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ["ok", "unpersisted"].contains(&status.as_str()),
        "{report:#}"
    );
    let reverted = ok(&hostknob(&["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    assert_eq!(
        features(&ns.0, "hka0"),
        before,
        "revert restores each feature"
    );
    let name = ns.0.clone();
    drop(ns);
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&name),
        "namespace {name} is left"
    );
    assert!(Path::new("/sys/class/net/eth0").exists(), "eth0 untouched");
}
