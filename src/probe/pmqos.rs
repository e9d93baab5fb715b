//! Holding the system-wide PM QoS CPU latency limit (`/dev/cpu_dma_latency`)
//! for the length of a run.
//!
//! The kernel keeps a request only while the file is open, so the hold cannot
//! outlive the process: closing the file (drop, panic, Ctrl-C, kill) removes it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::root::Root;

use crate::inventory::PM_QOS_DEVICE as DEVICE;
pub use crate::inventory::read_cpu_dma_latency as read_aggregate;

/// A PM QoS request held open; dropped, it is withdrawn.
pub struct Hold {
    _file: File,
    pub requested_us: u32,
    /// The limit in force, read back after the write.
    pub effective_us: i64,
}

/// What a run reports about PM QoS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PmQosSetting {
    /// `--pmqos-us`, or null when not held (C-state exits are then measured).
    pub held_us: Option<u32>,
    /// The system-wide limit read back while held (the fact, not the request).
    pub effective_us: Option<i64>,
}

impl PmQosSetting {
    pub fn of(hold: &Option<Hold>) -> PmQosSetting {
        PmQosSetting {
            held_us: hold.as_ref().map(|h| h.requested_us),
            effective_us: hold.as_ref().map(|h| h.effective_us),
        }
    }
}

/// Holds the limit at `us` until the returned value is dropped.
pub fn hold(root: &Root, us: u32) -> Result<Hold> {
    let flag = format!("--pmqos-us {us}");
    if us > i32::MAX as u32 {
        bail!("{flag}: larger than the kernel accepts ({})", i32::MAX);
    }
    // Resolved (and so confined) by the root seam, then reopened for writing
    // through its descriptor: the same file, never a path outside the root.
    let resolved = root
        .open_read(DEVICE)
        .with_context(|| format!("{flag}: cannot open {DEVICE} (it needs root)"))?;
    let mut file = OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{}", resolved.as_raw_fd()))
        .with_context(|| format!("{flag}: cannot open {DEVICE} for writing (it needs root)"))?;
    drop(resolved);
    file.write_all(&(us as i32).to_ne_bytes())
        .with_context(|| format!("{flag}: cannot write {DEVICE}"))?;
    let effective_us =
        read_aggregate(root).with_context(|| format!("{flag}: cannot read back {DEVICE}"))?;
    if effective_us > i64::from(us) {
        bail!("{flag}: the request did not take effect ({DEVICE} reads {effective_us} µs)");
    }
    Ok(Hold {
        _file: file,
        requested_us: us,
        effective_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_writes_the_value_and_reads_it_back_under_the_root() {
        // A regular file stands in for the device under a test root: the real
        // host's PM QoS is never touched.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        let dev = dir.path().join("dev/cpu_dma_latency");
        std::fs::write(&dev, 2_000_000_000i32.to_ne_bytes()).unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(read_aggregate(&root), Some(2_000_000_000));
        let h = hold(&root, 7).unwrap();
        assert_eq!((h.requested_us, h.effective_us), (7, 7));
        assert_eq!(std::fs::read(&dev).unwrap(), 7i32.to_ne_bytes());
        let s = PmQosSetting::of(&Some(h));
        assert_eq!((s.held_us, s.effective_us), (Some(7), Some(7)));
    }

    #[test]
    fn a_missing_device_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let e = format!("{:#}", hold(&root, 0).err().unwrap());
        assert!(
            e.starts_with("--pmqos-us 0: cannot open /dev/cpu_dma_latency"),
            "{e}"
        );
        assert_eq!(read_aggregate(&root), None);
    }
}
