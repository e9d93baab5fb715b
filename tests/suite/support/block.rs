//! Block devices built into copies of corpus hosts (no capture holds
//! `/sys/block`), laid out as Linux 6.18 shows them: `/sys/block/DEV` a link
//! to the device's directory, `queue/` with the request-queue files, `mq/`
//! on blk-mq queues only, `slaves/` of a stacked device-mapper device, which
//! is bio-based and so has no `scheduler`, `nr_requests`, `rq_affinity` or
//! `wbt_lat_usec` (block/blk-sysfs.c, `blk_mq_queue_attr_visible`). The
//! values are those of a 6.18 KVM guest's virtio disk and loop devices, the
//! NVMe ones the kernel's defaults for a drive of 128 KiB MDTS.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

pub struct Disk {
    pub name: &'static str,
    /// The device directory under /sys/devices.
    pub dir: &'static str,
    pub removable: bool,
    pub size: u64,
    /// `None`: bio-based (no `mq/`, none of the blk-mq files).
    pub scheduler: Option<&'static str>,
    pub rotational: bool,
    pub nr_requests: u32,
    pub wbt_lat_usec: u32,
    pub read_ahead_kb: u32,
    pub max_sectors_kb: u32,
    pub max_hw_sectors_kb: u32,
    pub slaves: &'static [&'static str],
}

pub const VDA: Disk = Disk {
    name: "vda",
    dir: "pci0000:00/0000:00:02.0/virtio1/block/vda",
    removable: false,
    size: 536_870_912,
    scheduler: Some("none [mq-deadline] kyber"),
    rotational: true,
    nr_requests: 256,
    wbt_lat_usec: 75000,
    read_ahead_kb: 128,
    max_sectors_kb: 1280,
    max_hw_sectors_kb: 2_147_483_647,
    slaves: &[],
};

pub const NVME: Disk = Disk {
    name: "nvme0n1",
    dir: "pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1",
    removable: false,
    size: 1_875_385_008,
    scheduler: Some("[none] mq-deadline kyber"),
    rotational: false,
    nr_requests: 1023,
    wbt_lat_usec: 2000,
    read_ahead_kb: 128,
    max_sectors_kb: 128,
    max_hw_sectors_kb: 128,
    slaves: &[],
};

/// device-mapper linear on vda: bio-based.
pub const DM: Disk = Disk {
    name: "dm-0",
    dir: "virtual/block/dm-0",
    removable: false,
    size: 536_862_720,
    scheduler: None,
    rotational: true,
    nr_requests: 0,
    wbt_lat_usec: 0,
    read_ahead_kb: 128,
    max_sectors_kb: 1280,
    max_hw_sectors_kb: 2_147_483_647,
    slaves: &["vda"],
};

/// A CD drive: removable, so only chosen by name.
pub const SR: Disk = Disk {
    name: "sr0",
    dir: "pci0000:00/0000:00:01.1/ata2/host1/target1:0:0/1:0:0:0/block/sr0",
    removable: true,
    size: 2_097_151,
    scheduler: Some("[mq-deadline] none"),
    rotational: true,
    nr_requests: 2,
    wbt_lat_usec: 75000,
    read_ahead_kb: 128,
    max_sectors_kb: 120,
    max_hw_sectors_kb: 120,
    slaves: &[],
};

/// vda, nvme0n1, dm-0 on vda and sr0.
pub const DISKS: [Disk; 4] = [VDA, NVME, DM, SR];

pub fn add_disks(root: &Path, disks: &[Disk]) {
    fs::create_dir_all(root.join("sys/block")).unwrap();
    for d in disks {
        let dev = root.join("sys/devices").join(d.dir);
        let q = dev.join("queue");
        fs::create_dir_all(&q).unwrap();
        let flag = |b: bool| if b { "1\n" } else { "0\n" };
        let mut files: Vec<(&str, String)> = vec![
            ("removable", flag(d.removable).into()),
            ("size", format!("{}\n", d.size)),
            ("queue/rotational", flag(d.rotational).into()),
            ("queue/read_ahead_kb", format!("{}\n", d.read_ahead_kb)),
            ("queue/max_sectors_kb", format!("{}\n", d.max_sectors_kb)),
            (
                "queue/max_hw_sectors_kb",
                format!("{}\n", d.max_hw_sectors_kb),
            ),
            ("queue/nomerges", "0\n".into()),
            ("queue/add_random", "0\n".into()),
            ("queue/iostats", "1\n".into()),
        ];
        if let Some(s) = d.scheduler {
            fs::create_dir_all(dev.join("mq/0")).unwrap();
            files.extend([
                ("queue/scheduler", format!("{s}\n")),
                ("queue/nr_requests", format!("{}\n", d.nr_requests)),
                ("queue/rq_affinity", "1\n".into()),
                ("queue/wbt_lat_usec", format!("{}\n", d.wbt_lat_usec)),
            ]);
        }
        for (f, text) in files {
            fs::write(dev.join(f), text).unwrap();
        }
        fs::create_dir_all(dev.join("slaves")).unwrap();
        for s in d.slaves {
            fs::create_dir_all(dev.join("slaves").join(s)).unwrap();
        }
        let up = "../devices/".to_string() + d.dir;
        symlink(up, root.join("sys/block").join(d.name)).unwrap();
    }
}
