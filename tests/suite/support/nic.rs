//! Multi-queue NICs built into copies of corpus hosts, as the kernel lays
//! them out in sysfs (`/sys/class/net/IF` a link to the PCI device's
//! `net/IF`, `device/driver` a link to the driver, `queues/rx-N`), with
//! the ethtool state file a capture holds (`hostknob-capture/ethtool/IF.yaml`,
//! src/ethtool). The values are the drivers' documented defaults: see
//! tests/corpus/README.md, "Hand-built NICs".

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

/// One NIC to build.
pub struct Nic {
    pub ifname: &'static str,
    /// Its MAC address (`address`), what a systemd .link file matches.
    pub mac: &'static str,
    pub driver: &'static str,
    pub pci: &'static str,
    pub numa_node: u32,
    pub queues: u32,
    /// CPUs of the host, for the width of the masks the kernel prints.
    pub cpus: u32,
    pub state: &'static str,
}

/// mlx5 (ConnectX-6 Dx): 63 channels, the driver's maximum on a host with
/// at least 63 CPUs (mlx5e_get_max_num_channels); rings 1024 of 8192;
/// adaptive moderation (DIM) on for rx and tx; no LRO, no HW GRO by default.
pub const MLX5_STATE: &str = "driver: mlx5_core
version: 6.8.0
firmware-version: 22.39.1002 (MT_0000000359)
bus-info: 0000:3b:00.0
channels:
  rx:
    current: 0
    max: 0
  tx:
    current: 0
    max: 0
  other:
    current: 0
    max: 0
  combined:
    current: 63
    max: 63
coalesce:
  adaptive-rx: 1
  adaptive-tx: 1
  pkt-rate-high: 0
  pkt-rate-low: 0
  rx-frame-high: 0
  rx-frame-low: 0
  rx-frames: 128
  rx-frames-irq: 0
  rx-usecs: 8
  rx-usecs-high: 0
  rx-usecs-irq: 0
  rx-usecs-low: 0
  sample-interval: 0
  stats-block-usecs: 0
  tx-frame-high: 0
  tx-frame-low: 0
  tx-frames: 32
  tx-frames-irq: 0
  tx-usecs: 16
  tx-usecs-high: 0
  tx-usecs-irq: 0
  tx-usecs-low: 0
rings:
  rx:
    current: 1024
    max: 8192
  rx-mini:
    current: 0
    max: 0
  rx-jumbo:
    current: 0
    max: 0
  tx:
    current: 1024
    max: 8192
features:
  rx-checksum: 'on'
  rx-gro: 'on'
  rx-gro-hw: 'off'
  rx-lro: 'off'
  rx-ntuple-filter: 'off'
  tx-generic-segmentation: 'on'
  tx-tcp-segmentation: 'on'
  tx-tcp6-segmentation: 'on'
";

/// ice (E810): adaptive moderation on for rx and tx, 50 µs
/// (ICE_DFLT_RX_ITR/ICE_DFLT_TX_ITR), rings 2048 of 8160, 16 of 64
/// combined channels; LRO and HW GRO fixed off.
pub const ICE_STATE: &str = "driver: ice
version: 6.8.0
firmware-version: 4.40 0x8001c967 1.3534.0
bus-info: 0000:17:00.0
channels:
  rx:
    current: 0
    max: 64
  tx:
    current: 0
    max: 64
  other:
    current: 1
    max: 1
  combined:
    current: 16
    max: 64
coalesce:
  adaptive-rx: 1
  adaptive-tx: 1
  pkt-rate-high: 0
  pkt-rate-low: 0
  rx-frame-high: 0
  rx-frame-low: 0
  rx-frames: 0
  rx-frames-irq: 0
  rx-usecs: 50
  rx-usecs-high: 0
  rx-usecs-irq: 0
  rx-usecs-low: 0
  sample-interval: 0
  stats-block-usecs: 0
  tx-frame-high: 0
  tx-frame-low: 0
  tx-frames: 0
  tx-frames-irq: 0
  tx-usecs: 50
  tx-usecs-high: 0
  tx-usecs-irq: 0
  tx-usecs-low: 0
rings:
  rx:
    current: 2048
    max: 8160
  rx-mini:
    current: 0
    max: 0
  rx-jumbo:
    current: 0
    max: 0
  tx:
    current: 2048
    max: 8160
features:
  rx-checksum: 'on'
  rx-gro: 'on'
  rx-gro-hw: off [fixed]
  rx-lro: off [fixed]
  tx-generic-segmentation: 'on'
  tx-tcp-segmentation: 'on'
  tx-tcp6-segmentation: 'on'
";

/// bnxt_en (BCM57414): rx-only and tx-only channels as well as combined
/// ones (bnxt_get_channels: max_rx, max_tx, max_combined), 8 combined by
/// default (netif_get_num_default_rss_queues); the rest as mlx5 above.
pub const BNXT_STATE: &str = "driver: bnxt_en
version: 6.8.0
firmware-version: 227.0.131.0/pkg 227.1.111.0
bus-info: 0000:4b:00.0
channels:
  rx:
    current: 0
    max: 16
  tx:
    current: 0
    max: 16
  other:
    current: 0
    max: 0
  combined:
    current: 8
    max: 16
";
/// A mask of no CPUs as the kernel prints it for `cpus` CPUs.
fn empty_mask(cpus: u32) -> String {
    vec!["00000000"; cpus.div_ceil(32) as usize].join(",")
}

/// Builds `nic` into the tree at `root`.
/// What shows udev runs on a host, which the corpus captures do not record
/// (no `/run`): udevd's control socket (a plain file stands for it in a
/// tree) and systemd as PID 1 (`/run/systemd/system`, sd_booted(3)), which
/// `.link` files and the udev rule's `systemd-run` need.
pub fn with_udev(root: &Path) {
    fs::create_dir_all(root.join("run/udev")).unwrap();
    fs::write(root.join("run/udev/control"), "").unwrap();
    fs::create_dir_all(root.join("run/systemd/system")).unwrap();
}

pub fn add(root: &Path, nic: &Nic) {
    with_udev(root);
    let bridge = format!("{}:00.0", &nic.pci[..7]);
    let dev_rel = format!("sys/devices/pci{}/{bridge}/{}", &nic.pci[..7], nic.pci);
    let dev = root.join(&dev_rel);
    let net = dev.join("net").join(nic.ifname);
    let w = |p: &Path, t: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, t).unwrap();
    };
    w(&dev.join("numa_node"), &format!("{}\n", nic.numa_node));
    let drv = root.join("sys/bus/pci/drivers").join(nic.driver);
    fs::create_dir_all(&drv).unwrap();
    symlink(
        format!("../../../../bus/pci/drivers/{}", nic.driver),
        dev.join("driver"),
    )
    .unwrap();
    for (f, v) in [
        ("address", nic.mac),
        ("mtu", "1500"),
        ("operstate", "up"),
        ("speed", "100000"),
        ("tx_queue_len", "1000"),
        ("type", "1"),
    ] {
        w(&net.join(f), &format!("{v}\n"));
    }
    symlink("../..", net.join("device")).unwrap();
    let mask = format!("{}\n", empty_mask(nic.cpus));
    for q in 0..nic.queues {
        w(&net.join(format!("queues/rx-{q}/rps_cpus")), &mask);
        w(&net.join(format!("queues/rx-{q}/rps_flow_cnt")), "0\n");
        w(&net.join(format!("queues/tx-{q}/xps_cpus")), &mask);
        w(&net.join(format!("queues/tx-{q}/xps_rxqs")), "0\n");
    }
    let class = root.join("sys/class/net");
    fs::create_dir_all(&class).unwrap();
    symlink(
        format!(
            "../../devices/pci{}/{bridge}/{}/net/{}",
            &nic.pci[..7],
            nic.pci,
            nic.ifname
        ),
        class.join(nic.ifname),
    )
    .unwrap();
    // Written as hostknob writes a state file, so a rewrite is byte-identical.
    let state: hostknob::ethtool::State = serde_yaml::from_str(nic.state).unwrap();
    w(
        &root.join(format!("hostknob-capture/ethtool/{}.yaml", nic.ifname)),
        &hostknob::ethtool::to_text(&state),
    );
}

/// A copy of `host` with `nic` built in.
pub fn host_with(host: &str, nic: &Nic) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = super::corpus::copy_host(host);
    add(&root, nic);
    (tmp, root)
}

pub const MLX5: Nic = Nic {
    ifname: "ens1f0np0",
    mac: "b8:ce:f6:3b:00:00",
    driver: "mlx5_core",
    pci: "0000:3b:00.0",
    numa_node: 0,
    queues: 63,
    cpus: 320,
    state: MLX5_STATE,
};

pub const ICE: Nic = Nic {
    ifname: "ens2f0",
    mac: "b4:96:91:17:00:00",
    driver: "ice",
    pci: "0000:17:00.0",
    numa_node: 0,
    queues: 16,
    cpus: 24,
    state: ICE_STATE,
};

pub const BNXT: Nic = Nic {
    ifname: "ens4f0np0",
    mac: "00:0a:f7:4b:00:00",
    driver: "bnxt_en",
    pci: "0000:4b:00.0",
    numa_node: 0,
    queues: 8,
    cpus: 320,
    state: BNXT_STATE,
};
