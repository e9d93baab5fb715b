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
//! A tree's queues follow the channel counts (target counts, not changes
//! from what is present), so a sync cut short and run again, or run again
//! by revert, ends with the same directories; a capture whose driver keeps
//! queues beyond its channels (traffic classes) is brought to the counts too.

use std::io;

use super::Channels;
use crate::root::{Root, numbered};

/// Queue directories of one direction of `ifname`: `rx-` or `tx-`.
pub const RX: &str = "rx-";
pub const TX: &str = "tx-";

fn queue_dir(ifname: &str) -> String {
    format!("/sys/class/net/{ifname}/queues")
}

/// In a captured tree, does what the kernel does when the channels become
/// `to`: removes the queue directories past the new count and makes the
/// missing ones (and the missing files of a queue left half made) with the
/// files of the lowest queue at a new queue's values (empty `rps_cpus`,
/// `xps_cpus`, `xps_rxqs` masks, `rps_flow_cnt` 0; other files as that
/// queue holds them, per-device defaults such as `byte_queue_limits`).
pub fn sync_tree(root: &Root, ifname: &str, to: &Channels) -> io::Result<()> {
    let dir = queue_dir(ifname);
    let listed = root.read_dir(&dir).unwrap_or_default();
    for prefix in [RX, TX] {
        let have = numbered(&listed, prefix);
        let want = queue_count(prefix, to);
        // From the top down, so a queue set cut short stays 0..k.
        for q in have.iter().rev().filter(|&&q| q >= want) {
            remove_tree(root, &format!("{dir}/{prefix}{q}"))?;
        }
        let Some(first) = have.first().filter(|&&q| q < want) else {
            continue;
        };
        let template = format!("{dir}/{prefix}{first}");
        for q in (0..want).filter(|q| q != first) {
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
        } else if !root.exists(&dst) {
            let text = root.read_string(&src)?;
            root.replace_file(&dst, fresh_value(&name, &text).as_bytes())?;
        }
    }
    Ok(())
}

/// How many queues of `prefix` (`rx-`, `tx-`) channels `c` give: combined
/// channels carry one of each, rx-only and tx-only channels one of theirs.
pub fn queue_count(prefix: &str, c: &Channels) -> u32 {
    let own = if prefix == RX {
        c.rx.current
    } else {
        c.tx.current
    };
    c.combined.current + own
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_queue_starts_with_empty_masks() {
        assert_eq!(fresh_value("xps_cpus", "ff,00000001\n"), "00,00000000\n");
        assert_eq!(fresh_value("rps_flow_cnt", "4096\n"), "0\n");
    }

    #[test]
    fn combined_channels_give_a_queue_of_each_kind() {
        let p = |current| crate::ethtool::Pair { current, max: 64 };
        let c = Channels {
            rx: p(3),
            tx: p(0),
            other: p(0),
            combined: p(2),
        };
        assert_eq!(queue_count(RX, &c), 5);
        assert_eq!(queue_count(TX, &c), 2);
    }
}
