//! Issue 49 item 1: NIC persistence checks that it can work before it
//! writes: udev (systemd's, for a `.link` file) and systemd (for the rule's
//! systemd-run) run on the host, and the device is matched by something that
//! holds when it is re-created (never a random "permanent" address); the
//! rule runs hostknob by absolute path; audit calls no such file `ok` where
//! nothing would apply it. On the hand-built ice NIC in copies of adl0.

use std::path::Path;

use crate::nic_persist::{audit, hk, knob};
use crate::support::nic::{ICE, host_with};
use crate::support::*;

const LINK: (&str, &str) = (
    "nogro",
    "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: ens2f0}\nset: {gro: off}\n",
);
const RULE: (&str, &str) = (
    "steer",
    "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: ens2f0, queues: 0-3}\nset: {cpus: 2-3}\n",
);

/// Takes away what shows udev and systemd run (support::nic adds both).
fn without_udev(root: &Path) {
    std::fs::remove_file(root.join("run/udev/control")).unwrap();
    std::fs::remove_dir(root.join("run/systemd/system")).unwrap();
}

fn sys_net(root: &Path, file: &str) -> std::path::PathBuf {
    let link = std::fs::read_link(root.join("sys/class/net/ens2f0")).unwrap();
    root.join("sys/class/net").join(link).join(file)
}

#[test]
fn nothing_is_written_where_no_udev_runs_and_the_refusal_names_what_instead() {
    let (_t, root) = host_with("adl0", &ICE);
    without_udev(&root);
    let m = knobs(&[LINK, RULE]);
    let before = tree(&root);
    for id in ["nogro", "steer"] {
        let out = hk(&root, m.path(), &["persist", id, "--install"]);
        assert_eq!(out.status.code(), Some(1), "{id}: {}", err(&out));
        let e = err(&out);
        assert!(
            e.contains("would never") && e.contains("no udev runs"),
            "{e}"
        );
        assert!(e.contains("/run/udev/control"), "{e}");
        // systemd is not PID 1 either: no boot unit to offer.
        assert!(e.contains("persistence: runtime"), "{e}");
    }
    assert_tree(&before, &root, "after refused installs");
    // udev's control socket, but not systemd: the rule's systemd-run cannot run.
    std::fs::write(root.join("run/udev/control"), "").unwrap();
    let out = hk(&root, m.path(), &["persist", "steer"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err(&out).contains("systemd-run needs systemd"),
        "{}",
        err(&out)
    );
}

#[test]
fn a_link_file_needs_systemds_udev_not_eudev() {
    let (_t, root) = host_with("adl0", &ICE);
    without_udev(&root);
    write_files(&root, &[("proc/4242/comm", "udevd\n")]);
    let m = knobs(&[LINK]);
    let out = hk(&root, m.path(), &["persist", "nogro"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err(&out).contains("only systemd-udevd applies .link files"),
        "{}",
        err(&out)
    );
    write_files(&root, &[("proc/4242/comm", "systemd-udevd\n")]);
    ok(&hk(&root, m.path(), &["persist", "nogro"]));
}

#[test]
fn audit_never_says_ok_for_a_file_nothing_applies() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[LINK, RULE]);
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    for id in ["nogro", "steer"] {
        ok(&hk(&root, m.path(), &["persist", id, "--install"]));
        assert_eq!(knob(&audit(&root, m.path()), id)["status"], "ok");
    }
    without_udev(&root);
    let report = audit(&root, m.path());
    for id in ["nogro", "steer"] {
        let k = knob(&report, id);
        assert_eq!(k["status"], "unpersisted", "{k:#}");
        let d = k["detail"].to_string();
        assert!(d.contains("never") && d.contains("no udev runs"), "{k:#}");
    }
}

#[test]
fn the_rule_runs_hostknob_by_absolute_path_and_a_bare_name_is_not_ok() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[RULE]);
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    ok(&hk(&root, m.path(), &["persist", "steer", "--install"]));
    let path = root.join("etc/udev/rules.d/90-hostknob-steer.rules");
    let text = std::fs::read_to_string(&path).unwrap();
    let exe = Path::new(bin()).canonicalize().unwrap();
    let exe = exe.to_str().unwrap();
    assert!(
        text.contains(&format!("--quiet {exe} apply --wait")),
        "{text}"
    );
    assert_eq!(knob(&audit(&root, m.path()), "steer")["status"], "ok");
    // The form an older hostknob wrote: udev's PATH lacks ~/.cargo/bin.
    std::fs::write(&path, text.replace(exe, "hostknob")).unwrap();
    let k = knob(&audit(&root, m.path()), "steer").clone();
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(k["detail"].to_string().contains("by name"), "{k:#}");
}

#[test]
fn a_random_permanent_address_is_never_the_match_key() {
    let (_t, root) = host_with("adl0", &ICE);
    // A VF driver copies its random address into the permanent one.
    let state = root.join("hostknob-capture/ethtool/ens2f0.yaml");
    let mut s: hostknob::ethtool::State =
        serde_yaml::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    s.permanent_address = Some("b4:96:91:17:00:00".into());
    std::fs::write(&state, hostknob::ethtool::to_text(&s)).unwrap();
    let m = knobs(&[LINK]);
    let printed = ok(&hk(&root, m.path(), &["persist", "nogro"]));
    assert!(
        printed.contains("PermanentMACAddress=b4:96:91:17:00:00"),
        "{printed}"
    );
    std::fs::write(sys_net(&root, "addr_assign_type"), "1\n").unwrap();
    let printed = ok(&hk(&root, m.path(), &["persist", "nogro"]));
    assert!(!printed.contains("PermanentMACAddress"), "{printed}");
    assert!(printed.contains("Path=pci-0000:17:00.0"), "{printed}");
}

/// A veth-like device in the tree: no PCI function, a random MAC.
fn virtual_nic(root: &Path, name_assign_type: &str) {
    let dev = "sys/devices/virtual/net/vh0";
    let mut files = vec![
        (format!("{dev}/address"), "9a:6a:a2:58:19:0c\n".to_string()),
        (format!("{dev}/addr_len"), "6\n".into()),
        (format!("{dev}/addr_assign_type"), "1\n".into()),
        (
            format!("{dev}/name_assign_type"),
            format!("{name_assign_type}\n"),
        ),
        (format!("{dev}/type"), "1\n".into()),
        (format!("{dev}/ifindex"), "9\n".into()),
        (format!("{dev}/queues/rx-0/rps_cpus"), "0\n".into()),
        (format!("{dev}/queues/rx-0/rps_flow_cnt"), "0\n".into()),
    ];
    files.push((format!("{dev}/uevent"), "INTERFACE=vh0\nIFINDEX=9\n".into()));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_files(root, &refs);
    let link = root.join("sys/class/net/vh0");
    if !link.exists() {
        std::os::unix::fs::symlink("../../devices/virtual/net/vh0", link).unwrap();
    }
}

#[test]
fn a_virtual_nic_with_a_random_mac_is_matched_by_its_given_name_or_refused() {
    let (_t, root) = host_with("adl0", &ICE);
    let m = knobs(&[(
        "vsteer",
        "persistence: udev-reapply\nkind: rps\ntarget: {interfaces: vh0}\nset: {cpus: 1}\n",
    )]);
    // Named by the kernel (eth%d, name_assign_type 1): nothing holds.
    virtual_nic(&root, "1");
    let before = tree(&root);
    let out = hk(&root, m.path(), &["persist", "vsteer", "--install"]);
    assert_eq!(out.status.code(), Some(1), "{}", ok(&out));
    let e = err(&out);
    assert!(
        e.contains("addr_assign_type 1") && e.contains("random"),
        "{e}"
    );
    assert!(
        e.contains("ip link add NAME") && e.contains("PCI path"),
        "{e}"
    );
    assert_tree(&before, &root, "after a refused install");
    // Named by its creator (name_assign_type 3): matched by that name.
    virtual_nic(&root, "3");
    let rule = ok(&hk(&root, m.path(), &["persist", "vsteer"]));
    assert!(rule.contains("KERNEL==\"vh0\""), "{rule}");
    assert!(!rule.contains("9a:6a:a2:58:19:0c"), "{rule}");
}

/// The first hour, round 4, item 2: where no udev runs, apply's caveat for
/// an rps knob with `persistence: udev-reapply` advised `persist --install`,
/// which persist then refuses. The caveat and audit now say the rule would
/// never run, and advise no install.
#[test]
fn where_no_udev_runs_apply_and_audit_advise_no_install_persist_would_refuse() {
    let (_t, root) = host_with("adl0", &ICE);
    without_udev(&root);
    let m = knobs(&[RULE]);
    let out = hk(&root, m.path(), &["apply", "steer"]);
    ok(&out);
    let said = format!("{}{}", crate::support::out(&out), err(&out));
    assert!(said.contains("would never run here"), "{said}");
    assert!(!said.contains("--install"), "{said}");
    let report = audit(&root, m.path());
    let k = knob(&report, "steer");
    let d = k["detail"].to_string();
    assert!(
        d.contains("would never run here") && !d.contains("--install"),
        "{k:#}"
    );
}

/// A first-hour mistake, `set: "1"` for an rps knob, was refused with
/// "expected struct RpsSet": the error now shows the form.
#[test]
fn an_rps_value_given_as_a_bare_list_is_refused_showing_the_mapping() {
    let m = knobs(&[(
        "bare",
        "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0}\nset: \"1\"\n",
    )]);
    let (_t, root) = host_with("adl0", &ICE);
    let out = hk(&root, m.path(), &["knobs"]);
    assert_eq!(out.status.code(), Some(1));
    let e = err(&out);
    assert!(e.contains("knobs.yaml") && e.contains("set:"), "{e}");
    assert!(e.contains("{cpus: 2-3}") && !e.contains("RpsSet"), "{e}");
}
