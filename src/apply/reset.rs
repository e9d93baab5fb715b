//! What a channel change resets, written again. Drivers that rebuild their
//! queues for a channel change reset per-queue values: ice rebuilds every
//! ring (`ice_vsi_recfg_qs`, then `ice_cfg_xps_tx_ring` sets its own XPS
//! map), mlx5 sets its default XPS masks again (`mlx5e_num_channels_changed`
//! -> `mlx5e_set_default_xps_cpumasks`), queues removed and made again start
//! empty (net/core/net-sysfs.c `rx_queue_release` frees the RPS map), and
//! the queue IRQs are requested anew at the driver's affinity. So after
//! every channel change (apply, its rollback, revert) each per-queue file
//! and queue IRQ affinity hostknob owns on that interface is read, and
//! written again where it no longer holds its value.

use super::write::{self, Put};
use crate::journal::Entry;
use crate::knob::{WriteMode, rules};
use crate::root::Root;

/// The interfaces whose channels the `paths` change, in order.
pub fn channel_nics<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = paths
        .filter(|p| rules::is_channels(p))
        .filter_map(|p| Some(crate::ethtool::Field::parse(p)?.ifname))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A per-queue file of `ifname`, or the affinity of one of its device's
/// IRQs (`device/msi_irqs/N`): what a channel change resets.
fn reset_with(root: &Root, ifname: &str, path: &str) -> bool {
    if path.starts_with(&format!("/sys/class/net/{ifname}/queues/")) {
        return true;
    }
    let irq = path
        .strip_prefix("/proc/irq/")
        .and_then(|r| r.split_once('/'))
        .filter(|(n, f)| n.parse::<u32>().is_ok() && f.starts_with("smp_affinity"));
    irq.is_some_and(|(n, _)| root.exists(&format!("/sys/class/net/{ifname}/device/msi_irqs/{n}")))
}

/// Whether a channel change of one of `nics` resets `path`.
pub fn resets(root: &Root, nics: &[String], path: &str) -> bool {
    nics.iter().any(|n| reset_with(root, n, path))
}

/// After a channel change of `nics`: every file of `applied` (entries of
/// knobs still applied: they hold what hostknob wrote) and of `restored`
/// (entries just put back: they hold what they held before) that the
/// change reset is written again and read back. A file gone with its queue
/// is left (the queue is gone). Returns why each write again failed.
pub fn rewrite(
    root: &Root,
    nics: &[String],
    applied: &[&Entry],
    restored: &[&Entry],
) -> Vec<String> {
    let ours = |e: &&&Entry| e.mode == WriteMode::Attribute && resets(root, nics, &e.path);
    let mut failed = Vec::new();
    for e in applied.iter().filter(ours) {
        let (Some(wrote), Some(holds)) = (
            e.written.as_deref(),
            e.seen.as_deref().or(e.written.as_deref()),
        ) else {
            continue;
        };
        if !differs(root, &e.path, holds) {
            continue;
        }
        let read_back = || write::holds(root, &e.path, Some(holds), true);
        if let Err(f) = write::put(root, &e.path, Put::Attribute(wrote), read_back) {
            failed.push(format!("after the channel change: {}", f.why));
        }
    }
    for e in restored.iter().filter(ours) {
        let Some(found) = e.found.as_deref() else {
            continue;
        };
        if differs(root, &e.path, found)
            && let Err(f) = write::restore(root, e)
        {
            failed.push(format!("after the channel change: {}", f.why));
        }
    }
    failed
}

/// Whether `path` exists and no longer holds `want` (trimmed).
fn differs(root: &Root, path: &str, want: &str) -> bool {
    match write::content(root, path) {
        Ok(Some(now)) => now.trim() != want.trim(),
        _ => false,
    }
}
