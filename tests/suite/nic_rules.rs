//! Issue 44 items 5, 7, 8: coalescing against adaptive moderation and the
//! drivers' rules, the RPS mask the kernel keeps on a host with isolated
//! CPUs, and ethtool's legacy feature names as ethtool means them; on the
//! hand-built NICs of support/nic.rs in copies of corpus hosts.

use std::fs;
use std::path::Path;

use crate::support::nic::{ICE, MLX5, host_with};
use crate::support::*;

fn runtime(body: &str) -> String {
    format!("persistence: runtime\n{body}")
}

/// Apply of one knob exits 1 saying `says`, and changes nothing.
fn refused(root: &Path, body: &str, says: &str) {
    let pristine = tree(root);
    let m = knobs(&[("k", &runtime(body))]);
    let o = run(root, m.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1), "{body}: {o:?}");
    assert!(err(&o).contains(says), "{body}: {}", err(&o));
    assert_tree(&pristine, root, says);
}

fn state(root: &Path, ifname: &str) -> serde_yaml::Value {
    let p = root.join(format!("hostknob-capture/ethtool/{ifname}.yaml"));
    serde_yaml::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_fixed_coalescing_value_under_adaptive_moderation_is_refused_at_plan_time() {
    let (_t, root) = host_with("adl0", &ICE);
    // ice refuses rx-usecs while adaptive-rx is on (today: "wrote and read
    // back", the capture left at adaptive-rx 1, rx-usecs 8).
    refused(
        &root,
        "kind: nic-coalesce\ntarget: {driver: ice}\nset: {rx-usecs: 8}\n",
        "ens2f0 rx-usecs 8 is a fixed value while adaptive-rx stays on: ice refuses the write \
         (EINVAL: drivers/net/ethernet/intel/ice/ice_ethtool.c `ice_set_rc_coalesce`",
    );
    // A knob that turns adaptive on keeps it on too.
    refused(
        &root,
        "kind: nic-coalesce\ntarget: {driver: ice}\nset: {adaptive-tx: on, tx-frames: 16}\n",
        "tx-frames 16 is a fixed value while adaptive-tx stays on",
    );
    // ITR granularity and maximum (ICE_ITR_GRAN_US, ICE_ITR_MAX).
    refused(
        &root,
        "kind: nic-coalesce\ntarget: {driver: ice}\nset: {adaptive-rx: off, rx-usecs: 7}\n",
        "rx-usecs 7: ice sets the hardware in steps of 2 µs, so it would run 6 while reading \
         back 7; give 6 or 8",
    );
    refused(
        &root,
        "kind: nic-coalesce\ntarget: {driver: ice}\nset: {adaptive-tx: off, tx-usecs: 8162}\n",
        "tx-usecs 8162 is above 8160, the most ice takes",
    );
    // rx-usecs-high (INTRL) needs both modes off on ice.
    refused(
        &root,
        "kind: nic-coalesce\ntarget: {driver: ice}\nset: {adaptive-rx: off, rx-usecs-high: 20}\n",
        "rx-usecs-high 20 is a fixed value while adaptive-tx stays on",
    );
    let (_t2, mlx) = host_with("spr1", &MLX5);
    refused(
        &mlx,
        "kind: nic-coalesce\ntarget: {driver: mlx5_core}\nset: {tx-usecs: 8}\n",
        "mlx5_core takes it and reads it back, but adaptive moderation sets the hardware",
    );
}

#[test]
fn adaptive_off_is_written_first_and_revert_restores_the_nic_byte_identical() {
    let (_t, root) = host_with("adl0", &ICE);
    let pristine = tree(&root);
    let m = knobs(&[(
        "moderation",
        &runtime(
            "kind: nic-coalesce\ntarget: {driver: ice}\nset: {rx-usecs: 8, adaptive-rx: off, tx-usecs: 16, adaptive-tx: off}\n",
        ),
    )]);
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    let paths: Vec<String> = journal_paths(&root)
        .into_iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    let at = |n: &str| paths.iter().position(|p| p == n).unwrap();
    assert!(at("adaptive-rx") < at("rx-usecs"), "{paths:?}");
    assert!(at("adaptive-tx") < at("tx-usecs"), "{paths:?}");
    let s = state(&root, ICE.ifname);
    assert_eq!(s["coalesce"]["adaptive-rx"], 0);
    assert_eq!(s["coalesce"]["rx-usecs"], 8);
    assert_eq!(s["coalesce"]["tx-usecs"], 16);
    let (report, code) = audit_json(&root, m.path(), None);
    assert_ne!(code, 2, "{report:#}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "ice after revert");
    // An earlier knob of the same apply turning adaptive-rx off is enough.
    let m = knobs(&[
        (
            "a-dim-off",
            &runtime("kind: nic-coalesce\ntarget: {driver: ice}\nset: {adaptive-rx: off}\n"),
        ),
        (
            "b-usecs",
            &runtime("kind: nic-coalesce\ntarget: {driver: ice}\nset: {rx-usecs: 8}\n"),
        ),
    ]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    assert_eq!(state(&root, ICE.ifname)["coalesce"]["rx-usecs"], 8);
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "ice after the two knobs' revert");
}

/// adl0 (16 CPUs, Linux 7.0) booted with nohz_full and domain isolation.
fn isolated_adl0(
    cmdline_extra: &str,
    version: Option<&str>,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = host_with("adl0", &ICE);
    let p = root.join("proc/cmdline");
    let line = fs::read_to_string(&p).unwrap();
    fs::write(&p, format!("{} {cmdline_extra}\n", line.trim_end())).unwrap();
    if let Some(v) = version {
        fs::write(root.join("proc/version"), v).unwrap();
    }
    (t, root)
}

fn rps_cpus(root: &Path, q: u32) -> String {
    let nic = format!("sys/class/net/{}/queues/rx-{q}/rps_cpus", ICE.ifname);
    fs::read_to_string(root.join(nic))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn rps_on_isolated_cpus_plans_and_audits_the_mask_the_kernel_keeps() {
    let (_t, root) = isolated_adl0("nohz_full=4-7 isolcpus=domain,managed_irq,12-13", None);
    let pristine = tree(&root);
    let m = knobs(&[(
        "steer",
        &runtime("kind: rps\ntarget: {interfaces: ens2f0, queues: 0-1}\nset: {cpus: all}\n"),
    )]);
    let planned = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(
        planned.contains(
            "the kernel keeps 0-3,8-11,14-15 and drops isolated CPUs 4-7,12-13 \
                          (nohz_full=4-7 and isolcpus=domain,managed_irq,12-13 on the running \
                          command line; net/core/net-sysfs.c store_rps_map"
        ),
        "{planned}"
    );
    // CPUs 0-3, 8-11, 14-15.
    assert_eq!(rps_cpus(&root, 0), "cf0f");
    assert_eq!(rps_cpus(&root, 1), "cf0f");
    let (report, code) = audit_json(&root, m.path(), None);
    let status = knob(&report, "steer")["status"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ["ok", "unpersisted"].contains(&status.as_str()),
        "{report:#}"
    );
    assert_ne!(code, 2, "no drift: {report:#}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "rps after revert");
    // Only isolated CPUs: the kernel refuses the mask (EINVAL).
    refused(
        &root,
        "kind: rps\ntarget: {interfaces: ens2f0}\nset: {cpus: 4-7}\n",
        "rps cpus 4-7 are all isolated (nohz_full=4-7",
    );
}

#[test]
fn rps_keeps_every_cpu_where_the_kernel_does() {
    // managed_irq alone leaves the domain and workqueue masks whole.
    let (_t, root) = isolated_adl0("isolcpus=managed_irq,4-7", None);
    let m = knobs(&[(
        "steer",
        &runtime("kind: rps\ntarget: {interfaces: ens2f0, queues: \"0\"}\nset: {cpus: all}\n"),
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    assert_eq!(rps_cpus(&root, 0), "ffff");
    // Before Linux 5.9 store_rps_map kept isolated CPUs.
    let (_t2, old) = isolated_adl0(
        "nohz_full=4-7",
        Some("Linux version 5.4.0-150-generic (b@h) #1 SMP\n"),
    );
    ok(&run(&old, m.path(), &["apply", "--all"]));
    assert_eq!(rps_cpus(&old, 0), "ffff");
}

/// The ice copy with every TSO feature a 6.18 kernel has, one of them fixed.
fn ice_with_tso_features() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = host_with("adl0", &ICE);
    let p = root.join(format!("hostknob-capture/ethtool/{}.yaml", ICE.ifname));
    let mut s: hostknob::ethtool::State =
        serde_yaml::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    let f = s.features.as_mut().unwrap();
    f.insert("tx-tcp-ecn-segmentation".into(), "off [fixed]".into());
    f.insert("tx-tcp-mangleid-segmentation".into(), "on".into());
    f.insert("tx-tcp-accecn-segmentation".into(), "on".into());
    f.insert("tx-scatter-gather".into(), "on".into());
    fs::write(&p, hostknob::ethtool::to_text(&s)).unwrap();
    (t, root)
}

#[test]
fn tso_covers_every_tx_tcp_segmentation_feature_the_nic_can_change() {
    let (_t, root) = ice_with_tso_features();
    let pristine = tree(&root);
    let m = knobs(&[(
        "notso",
        &runtime("kind: nic-feature\ntarget: {driver: ice}\nset: {tso: off}\n"),
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let mut written: Vec<String> = journal_paths(&root)
        .into_iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "tx-tcp-accecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp-segmentation",
            "tx-tcp6-segmentation"
        ],
        "every tx-tcp*-segmentation but the fixed ECN one"
    );
    let f = &state(&root, ICE.ifname)["features"];
    for n in written {
        assert_eq!(f[n.as_str()], "off", "{n}");
    }
    assert_eq!(f["tx-tcp-ecn-segmentation"], "off [fixed]");
    assert_eq!(f["tx-scatter-gather"], "on");
    let (report, code) = audit_json(&root, m.path(), None);
    assert_ne!(code, 2, "{report:#}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "features after revert");
}

#[test]
fn legacy_names_come_from_ethtools_table_and_overlaps_or_absent_features_are_refused() {
    let (_t, root) = ice_with_tso_features();
    refused(
        &root,
        "kind: nic-feature\ntarget: {driver: ice}\nset: {rxvlan: off}\n",
        "ens2f0 has no feature rxvlan covers (rx-vlan-hw-parse) on ice",
    );
    refused(
        &root,
        "kind: nic-feature\ntarget: {driver: ice}\nset: {tso: off, tx-tcp6-segmentation: on}\n",
        "tx-tcp6-segmentation is given twice: tso covers it (tx-tcp*-segmentation)",
    );
    // The long names ethtool -k prints are the same entries.
    let m = knobs(&[(
        "sg",
        &runtime(
            "kind: nic-feature\ntarget: {driver: ice}\nset: {scatter-gather: off, rx-checksumming: off}\n",
        ),
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let f = &state(&root, ICE.ifname)["features"];
    assert_eq!(f["tx-scatter-gather"], "off");
    assert_eq!(f["rx-checksum"], "off");
}
