//! The kernel's rule for channels and queues, as data: a channel count
//! change adds or removes `queues/rx-N` and `tx-N` (and the queue IRQs).
//! Combined channels carry an rx and a tx queue each, rx-only and tx-only
//! channels one of theirs (Documentation/networking/ethtool-netlink.rst,
//! CHANNELS_GET; the driver calls `netif_set_real_num_rx_queues` and
//! `netif_set_real_num_tx_queues`: drivers/net/veth.c `veth_set_channels`,
//! ice `ice_vsi_recfg_qs`, mlx5 `mlx5e_set_channels`), and net/core/net-sysfs.c
//! (`net_rx_queue_update_kobjects`, `netdev_queue_update_kobjects`) removes
//! the directories past the new count and makes the new ones.
//!
//! hostknob counts by difference (queues now plus the change in channels),
//! so a driver with extra queues of its own (XDP, traffic classes) keeps them.

use std::io;

use super::Channels;
use crate::root::{Root, numbered};

/// Queue directories of one direction of `ifname`: `rx-` or `tx-`.
pub const RX: &str = "rx-";
pub const TX: &str = "tx-";

/// How many more (or fewer) queues of `prefix` channels `to` give than `from`.
pub fn change(prefix: &str, from: &Channels, to: &Channels) -> i64 {
    let n = |c: &Channels| {
        let own = if prefix == RX {
            c.rx.current
        } else {
            c.tx.current
        };
        i64::from(c.combined.current) + i64::from(own)
    };
    n(to) - n(from)
}

/// The queue numbers `ifname` has after a change of `delta` from `have`.
pub fn after(have: &[u32], delta: i64) -> Vec<u32> {
    let n = (have.len() as i64 + delta).max(0) as u32;
    (0..n).collect()
}

fn queue_dir(ifname: &str) -> String {
    format!("/sys/class/net/{ifname}/queues")
}

/// In a captured tree, does what the kernel does when the channels change
/// from `from` to `to`: removes the queue directories past the new count
/// and makes the new ones with the files of queue 0 at a new queue's
/// values (empty `rps_cpus`, `xps_cpus`, `xps_rxqs` masks, `rps_flow_cnt`
/// 0; other files as queue 0 holds them, per-device defaults such as
/// `byte_queue_limits`).
pub fn sync_tree(root: &Root, ifname: &str, from: &Channels, to: &Channels) -> io::Result<()> {
    let dir = queue_dir(ifname);
    let listed = root.read_dir(&dir).unwrap_or_default();
    for prefix in [RX, TX] {
        let have = numbered(&listed, prefix);
        let want = after(&have, change(prefix, from, to));
        for q in have.iter().filter(|q| !want.contains(q)) {
            remove_tree(root, &format!("{dir}/{prefix}{q}"))?;
        }
        let Some(first) = have.first() else { continue };
        let template = format!("{dir}/{prefix}{first}");
        for q in want.iter().filter(|q| !have.contains(q)) {
            copy_fresh(root, &template, &format!("{dir}/{prefix}{q}"))?;
        }
    }
    Ok(())
}

fn remove_tree(root: &Root, path: &str) -> io::Result<()> {
    for name in root.read_dir(path)? {
        let p = format!("{path}/{name}");
        if root.is_dir(&p) {
            remove_tree(root, &p)?;
        } else {
            root.remove_file(&p)?;
        }
    }
    root.remove_empty_dir(path).map(drop)
}

/// A new queue's value of a file queue 0 holds as `text`.
fn fresh_value(name: &str, text: &str) -> String {
    match name {
        "rps_cpus" | "xps_cpus" | "xps_rxqs" => text
            .chars()
            .map(|c| if c.is_ascii_hexdigit() { '0' } else { c })
            .collect(),
        "rps_flow_cnt" => "0\n".into(),
        _ => text.to_string(),
    }
}

fn copy_fresh(root: &Root, from: &str, to: &str) -> io::Result<()> {
    for name in root.read_dir(from)? {
        let (src, dst) = (format!("{from}/{name}"), format!("{to}/{name}"));
        if root.is_dir(&src) {
            copy_fresh(root, &src, &dst)?;
        } else {
            let text = root.read_string(&src)?;
            root.replace_file(&dst, fresh_value(&name, &text).as_bytes())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_channels_count_for_both_directions() {
        let mut from = Channels::default();
        from.combined.current = 16;
        let mut to = from.clone();
        to.combined.current = 8;
        to.rx.current = 2;
        assert_eq!(change(RX, &from, &to), -6);
        assert_eq!(change(TX, &from, &to), -8);
        assert_eq!(after(&[0, 1, 2], 2), vec![0, 1, 2, 3, 4]);
        assert_eq!(fresh_value("xps_cpus", "ff,00000001\n"), "00,00000000\n");
        assert_eq!(fresh_value("rps_flow_cnt", "4096\n"), "0\n");
    }
}
