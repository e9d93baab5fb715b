//! Issue 34, persistence: NIC knobs persisted by a systemd .link file (udev
//! applies it whenever the device appears), NetworkManager's view of the
//! same interface, and what cannot be persisted that way, on the hand-built
//! ice NIC (support/nic.rs) in a copy of adl0.

use std::path::Path;

use crate::support::nic::{ICE, host_with};
use crate::support::*;

const LINK: &str = "etc/systemd/network/50-hostknob-ens2f0.link";

const KNOBS: &[(&str, &str)] = &[
    (
        "queues",
        "persistence: link-file\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n",
    ),
    (
        "moderation",
        "persistence: link-file\nkind: nic-coalesce\ntarget: {interfaces: ens2f0}\nset: {adaptive-rx: off, rx-usecs: 8}\n",
    ),
    (
        "nogro",
        "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: ens2f0}\nset: {gro: off, tso: off}\n",
    ),
];

/// The file `persist queues` writes: every link-file knob on ens2f0, matched
/// by its PCI path (the hand-built NIC's state has no permanent address),
/// the naming policy of systemd's 99-default.link (adl0 has none to copy).
const EXPECTED: &str = "# hostknob persist: queues (nic-channels) for host nichost
# queues
# From the manifest's knobs.yaml; `hostknob persist queues` regenerates this file, `hostknob persist queues --remove` deletes it.
# Every link-file knob on ens2f0: udev applies the first .link file that matches a device, so there is one per interface.
[Match]
Path=pci-0000:17:00.0
Type=ether

[Link]
# The naming policy of systemd's default, which this file shadows for ens2f0.
NamePolicy=keep kernel database onboard slot path
AlternativeNamesPolicy=database onboard slot path
MACAddressPolicy=persistent
# queues (nic-channels)
CombinedChannels=8
# moderation (nic-coalesce)
UseAdaptiveRxCoalesce=no
RxCoalesceSec=8us
# nogro (nic-feature)
GenericReceiveOffload=no
TCPSegmentationOffload=no
TCP6SegmentationOffload=no
";

pub(crate) fn hk(root: &Path, m: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--host", "nichost"];
    all.extend(args);
    run(root, m, &all)
}

pub(crate) fn audit(root: &Path, m: &Path) -> serde_json::Value {
    let out = hk(root, m, &["--format", "json", "audit"]);
    serde_json::from_str(&out_text(&out)).unwrap_or_else(|e| panic!("{e}: {}", err(&out)))
}

fn out_text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn knob<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
}

#[test]
fn a_link_file_holds_every_nic_knob_of_the_interface_byte_exactly_and_audit_names_it() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(KNOBS);
    let printed = ok(&hk(&root, m.path(), &["persist", "queues"]));
    assert_eq!(printed, EXPECTED);
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    let before = audit(&root, m.path());
    let q = knob(&before, "queues");
    assert_eq!(q["status"], "unpersisted", "{q:#}");
    assert!(
        q["detail"]
            .to_string()
            .contains("50-hostknob-ens2f0.link does not exist"),
        "{q:#}"
    );
    ok(&hk(&root, m.path(), &["persist", "queues", "--install"]));
    assert_eq!(std::fs::read_to_string(root.join(LINK)).unwrap(), EXPECTED);
    let after = audit(&root, m.path());
    for id in ["queues", "moderation", "nogro"] {
        let k = knob(&after, id);
        assert_eq!(k["status"], "ok", "{k:#}");
        let by = k["persisted_by"].as_str().unwrap();
        assert!(
            by.starts_with("/etc/systemd/network/50-hostknob-ens2f0.link (systemd.link"),
            "{by}"
        );
    }
    // A value changed by hand in the file is named.
    let changed = EXPECTED.replace("RxCoalesceSec=8us", "RxCoalesceSec=50us");
    std::fs::write(root.join(LINK), changed).unwrap();
    let k = knob(&audit(&root, m.path()), "moderation").clone();
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(
        k["detail"].to_string().contains("lacks RxCoalesceSec=8us"),
        "{k:#}"
    );
    ok(&hk(&root, m.path(), &["persist", "queues", "--remove"]));
    assert!(!root.join(LINK).exists());
    ok(&hk(&root, m.path(), &["revert", "--all"]));
}

#[test]
fn install_then_remove_leaves_the_tree_as_it_was() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(KNOBS);
    let pristine = tree(&root);
    ok(&hk(&root, m.path(), &["persist", "nogro", "--install"]));
    assert_eq!(
        std::fs::read_to_string(root.join(LINK)).unwrap(),
        EXPECTED
            .replace(
                "persist: queues (nic-channels)",
                "persist: nogro (nic-feature)"
            )
            .replace("# queues\n", "# nogro\n")
            .replace("persist queues", "persist nogro")
    );
    ok(&hk(&root, m.path(), &["persist", "nogro", "--remove"]));
    assert_tree(&pristine, &root, "after --install and --remove");
}

#[test]
fn networkmanager_managing_the_nic_gets_the_nmcli_command_and_a_clash_is_named() {
    let (_t, root) = host_with("adl0", &ICE);
    let conn = root.join("etc/NetworkManager/system-connections/uplink.nmconnection");
    std::fs::create_dir_all(conn.parent().unwrap()).unwrap();
    std::fs::write(
        &conn,
        "[connection]\nid=uplink\ntype=ethernet\ninterface-name=ens2f0\n\n[ethtool]\nfeature-gro=true\n",
    )
    .unwrap();
    let m = knobs(&KNOBS[2..]);
    let out = hk(&root, m.path(), &["persist", "nogro"]);
    let said = err(&out);
    assert!(
        said.contains(
            "nmcli connection modify uplink ethtool.feature-gro off ethtool.feature-tx-tcp-segmentation off"
        ),
        "{said}"
    );
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    ok(&hk(&root, m.path(), &["persist", "nogro", "--install"]));
    let k = knob(&audit(&root, m.path()), "nogro").clone();
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .to_string()
            .contains("uplink.nmconnection:7: NetworkManager's connection uplink sets feature-gro=true, not false"),
        "{k:#}"
    );
    // Agreeing, NetworkManager's file is named beside the .link file.
    std::fs::write(
        &conn,
        "[connection]\nid=uplink\ntype=ethernet\ninterface-name=ens2f0\n\n[ethtool]\nfeature-gro=false\n",
    )
    .unwrap();
    let k = knob(&audit(&root, m.path()), "nogro").clone();
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(
        k["persisted_by"].to_string().contains("NetworkManager's"),
        "{k:#}"
    );
}

#[test]
fn what_a_link_file_cannot_hold_is_refused_naming_the_persistence_line() {
    // The VM's virtio_net has rx-gro-list (off, changeable); systemd.link has no setting for it.
    let (_t, root) = copy_host("fc-virtio-2cpu");
    let m = knobs(&[(
        "gro-list",
        "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: eth0}\nset: {rx-gro-list: on}\n",
    )]);
    let pristine = tree(&root);
    let out = hk(&root, m.path(), &["persist", "gro-list", "--install"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    let said = err(&out);
    assert!(
        said.contains("knobs.yaml:")
            && said.contains(
                "persistence: gro-list: features rx-gro-list has no systemd.link setting"
            ),
        "{said}"
    );
    assert_tree(&pristine, &root, "after a refused persist");
    // The kinds that are not NIC settings refuse link-file when loaded.
    let m = knobs(&[(
        "steer",
        "persistence: link-file\nkind: rps\ntarget: {interfaces: eth0}\nset: {cpus: 0-1}\n",
    )]);
    let out = hk(&root, m.path(), &["knobs"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(err(&out).contains("persistence"), "{}", err(&out));
}

#[test]
fn rps_is_reapplied_by_a_udev_rule_whenever_the_nic_appears() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "steer",
        "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
    )]);
    let pristine = tree(&root);
    let dir = m.path().canonicalize().unwrap();
    let expected = format!(
        "# hostknob persist: steer (rps) for host nichost\n# steer\n\
         # From the manifest's knobs.yaml; `hostknob persist steer` regenerates this file, \
         `hostknob persist steer --remove` deletes it.\n\
         # ens2f0\nACTION==\"add\", SUBSYSTEM==\"net\", KERNELS==\"0000:17:00.0\", \
         RUN+=\"/usr/bin/systemd-run --no-block --collect --quiet {} apply --wait \
         --manifest {} steer\"\n",
        // By absolute path: udev's PATH holds only the system directories.
        std::path::Path::new(bin())
            .canonicalize()
            .unwrap()
            .display(),
        dir.display()
    );
    assert_eq!(ok(&hk(&root, m.path(), &["persist", "steer"])), expected);
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    let k = knob(&audit(&root, m.path()), "steer").clone();
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    ok(&hk(&root, m.path(), &["persist", "steer", "--install"]));
    let rule = root.join("etc/udev/rules.d/90-hostknob-steer.rules");
    assert_eq!(std::fs::read_to_string(&rule).unwrap(), expected);
    let k = knob(&audit(&root, m.path()), "steer").clone();
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .starts_with("/etc/udev/rules.d/90-hostknob-steer.rules (udev applies"),
        "{k:#}"
    );
    // A rule that applies the knob from another manifest does not count.
    let other = expected.replace(&dir.display().to_string(), "/etc/hostknob/manifest");
    std::fs::write(&rule, other).unwrap();
    let k = knob(&audit(&root, m.path()), "steer").clone();
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .to_string()
            .contains("does not apply steer from the manifest"),
        "{k:#}"
    );
    ok(&hk(&root, m.path(), &["persist", "steer", "--remove"]));
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "after revert and --remove");
}

#[test]
fn apply_names_the_persist_command_once_where_the_reason_already_gives_it() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "steer",
        "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
    )]);
    let o = hk(&root, m.path(), &["apply", "--all", "--dry-run"]);
    let text = format!("{}{}", out_text(&o), err(&o));
    let line = text
        .lines()
        .find(|l| l.contains("not persistent yet"))
        .unwrap_or_else(|| panic!("no persistence caveat: {text}"));
    assert_eq!(
        line.matches(" persist steer --install`").count(),
        1,
        "{line}"
    );
}

#[test]
fn help_teaches_nic_inventory_and_nic_persistence_with_examples() {
    // Help is wrapped to a width: compare with the white space folded.
    let fold = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let inventory = fold(ok(&hostknob(&["inventory", "--help"])));
    for needle in [
        "hostknob inventory network",
        "channels and rings as current/maximum",
        "not supported by DRIVER",
    ] {
        assert!(inventory.contains(needle), "{needle}: {inventory}");
    }
    let persist = fold(ok(&hostknob(&["persist", "--help"])));
    for needle in [
        "persistence: link-file",
        "50-hostknob-IF.link",
        "nmcli connection modify",
        "persistence: udev-reapply",
        "sudo hostknob persist ens1f0-queues --install",
    ] {
        assert!(persist.contains(needle), "{needle}: {persist}");
    }
}
