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
//! from what is present), so a sync cut short and run again ends with the
//! same directories; a capture whose driver keeps queues beyond its
//! channels (traffic classes) is brought to the counts too.
//!
//! In a tree they are worked on without following a link
//! ([`crate::root::Subtree`]), after a check that refuses, naming it, any
//! name below `queues` that is not a queue directory (`rx-N`, `tx-N`), a
//! directory in one, or a regular file of its own. A channel change
//! journals them all as found ([`Snapshot`]): the values of a removed queue
//! exist nowhere else, and revert (or a rollback) puts every directory and
//! file back byte for byte, however far the sync got before a failure or a
//! kill.

use std::collections::{HashMap, HashSet};
use std::io;

use serde::{Deserialize, Serialize};

use super::Channels;
use crate::root::{Kind, Root, Subtree, is_absent, numbered};

/// Queue directories of one direction of `ifname`: `rx-` or `tx-`.
pub const RX: &str = "rx-";
pub const TX: &str = "tx-";

/// The most one queue file may hold: a sysfs attribute is at most a page
/// (64 KiB on arm64).
const FILE_CAP: usize = 64 << 10;
/// The most text one interface's queues may hold: 256 queues of a
/// 4,096-CPU host's masks are about 1 MB, and the journal holds it.
const TEXT_CAP: usize = 8 << 20;
/// Names below `queues`: `tx-0/byte_queue_limits/limit` is three deep.
const MAX_DEPTH: usize = 4;
const MAX_NAMES: usize = 1 << 16;
/// The permission bits a remade file or directory keeps: no set-id bits,
/// no write for group and other (as a whole file replaced, root::write).
const KEEP_MODE: u32 = 0o755;

/// One directory or file below an interface's `queues`, as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Below `queues`: `rx-0`, `rx-0/rps_cpus`.
    pub path: String,
    /// Its permission bits.
    pub mode: u32,
    /// A file's exact text; `None`: a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Every directory and file below an interface's `queues`, parents first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Snapshot(pub Vec<Node>);

fn refused(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// `rel` below `queues`, as a path in the interface's directory.
fn at(rel: &str) -> String {
    match rel {
        "" => "queues".to_string(),
        _ => format!("queues/{rel}"),
    }
}

fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_string(),
        _ => format!("{dir}/{name}"),
    }
}

/// A queue directory's name as the kernel makes it (`rx-%u`, `tx-%u`,
/// net/core/net-sysfs.c): `rx-03` or `rx-+3` is not one.
fn queue_name(name: &str) -> bool {
    [RX, TX].iter().any(|p| {
        name.strip_prefix(p)
            .and_then(|n| n.parse::<u32>().ok().filter(|q| q.to_string() == n))
            .is_some()
    })
}

/// The interface's directory (`/sys/class/net/IF`, a link to the
/// device's), as a [`Subtree`]; `None`: the tree has none.
fn interface(root: &Root, ifname: &str) -> io::Result<Option<Subtree>> {
    match root.subtree(&format!("/sys/class/net/{ifname}")) {
        Ok(nic) => Ok(Some(nic)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An interface's queue directories in a tree, checked and read.
pub struct Queues {
    nic: Subtree,
    found: Snapshot,
}

impl Queues {
    /// `ifname`'s queues, every name below them checked (see the module
    /// comment): a refusal names the path. `None`: no `queues` directory.
    pub fn open(root: &Root, ifname: &str) -> io::Result<Option<Queues>> {
        let Some(nic) = interface(root, ifname)? else {
            return Ok(None);
        };
        match nic.meta("queues")? {
            None => return Ok(None),
            Some(m) if m.kind == Kind::Dir => {}
            Some(m) => return Err(not_plain(&nic, "", m.kind)),
        }
        let mut found = Snapshot::default();
        scan(&nic, "", &mut found, &mut 0)?;
        Ok(Some(Queues { nic, found }))
    }

    pub fn snapshot(self) -> Snapshot {
        self.found
    }

    /// Does what the kernel does when the channels become `to`: removes the
    /// queue directories past the new count and makes the missing ones (and
    /// the missing files of a queue left half made) with the files of the
    /// lowest queue at a new queue's values (empty `rps_cpus`, `xps_cpus`,
    /// `xps_rxqs` masks, `rps_flow_cnt` 0; other files as that queue holds
    /// them, per-device defaults such as `byte_queue_limits`).
    pub fn sync(&self, to: &Channels) -> io::Result<()> {
        let nodes = &self.found.0;
        let top: Vec<String> = nodes
            .iter()
            .filter(|n| !n.path.contains('/'))
            .map(|n| n.path.clone())
            .collect();
        let present: HashSet<&str> = nodes.iter().map(|n| n.path.as_str()).collect();
        for prefix in [RX, TX] {
            let have = numbered(&top, prefix);
            let want = queue_count(prefix, to);
            // From the top down, so a queue set cut short stays 0..k.
            for q in have.iter().rev().filter(|&&q| q >= want) {
                self.nic.remove(&at(&format!("{prefix}{q}")))?;
            }
            let Some(first) = have.first().filter(|&&q| q < want) else {
                continue;
            };
            let template = format!("{prefix}{first}");
            let inside = format!("{template}/");
            let mode = |n: Option<&Node>| n.map_or(0o755, |n| n.mode) & KEEP_MODE;
            for q in (0..want).filter(|q| q != first) {
                let name = format!("{prefix}{q}");
                if !present.contains(name.as_str()) {
                    let t = nodes.iter().find(|n| n.path == template);
                    self.nic.make_dir(&at(&name), mode(t))?;
                }
                for n in nodes.iter().filter(|n| n.path.starts_with(&inside)) {
                    let rel = join(&name, &n.path[inside.len()..]);
                    if present.contains(rel.as_str()) {
                        continue;
                    }
                    match &n.text {
                        None => self.nic.make_dir(&at(&rel), mode(Some(n)))?,
                        Some(text) => {
                            let base = rel.rsplit('/').next().unwrap_or_default();
                            let fresh = fresh_value(base, text);
                            self.nic.write(&at(&rel), fresh.as_bytes(), mode(Some(n)))?
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Why the name at `rel` (below `queues`) is refused, by its kind.
fn not_plain(nic: &Subtree, rel: &str, kind: Kind) -> io::Error {
    let what = match kind {
        Kind::Link => "a symbolic link",
        Kind::Other => "a FIFO, socket or device node",
        Kind::File => "a file",
        Kind::Dir => "a directory",
    };
    let want = match rel.matches('/').count() {
        _ if rel.is_empty() => "the directory of the interface's queues",
        0 => "a queue directory",
        _ => "a directory or a regular file",
    };
    refused(format!(
        "{} is {what}, where the kernel makes {want}: hostknob does not change a NIC's \
         queues through it (a link is never followed, a FIFO never read)",
        nic.path(&at(rel))
    ))
}

/// Appends every name below `queues/dir` to `out`, checked; `text` counts
/// the bytes read.
fn scan(nic: &Subtree, dir: &str, out: &mut Snapshot, text: &mut usize) -> io::Result<()> {
    let depth = if dir.is_empty() {
        0
    } else {
        dir.matches('/').count() + 1
    };
    for name in nic.list(&at(dir))? {
        let rel = join(dir, &name);
        let shown = || nic.path(&at(&rel));
        if depth == 0 && !queue_name(&name) {
            return Err(refused(format!(
                "{}: not a queue directory the kernel makes (rx-N, tx-N)",
                shown()
            )));
        }
        if depth >= MAX_DEPTH || out.0.len() >= MAX_NAMES {
            return Err(refused(format!(
                "{}: deeper than {MAX_DEPTH} or more than {MAX_NAMES} names below queues",
                shown()
            )));
        }
        let meta = nic.meta(&at(&rel))?.ok_or_else(|| {
            refused(format!(
                "{}: listed but gone (a name that is not UTF-8?)",
                shown()
            ))
        })?;
        match meta.kind {
            Kind::Dir => {
                out.0.push(Node {
                    path: rel.clone(),
                    mode: meta.mode,
                    text: None,
                });
                scan(nic, &rel, out, text)?;
            }
            Kind::File if depth > 0 && meta.links > 1 => {
                return Err(refused(format!(
                    "{} has {} hard links: removing or rewriting it would leave the other \
                     names behind",
                    shown(),
                    meta.links
                )));
            }
            Kind::File if depth > 0 => {
                let bytes = nic.read(&at(&rel), FILE_CAP)?;
                let t = String::from_utf8(bytes)
                    .map_err(|_| refused(format!("{}: not UTF-8 text", shown())))?;
                *text += t.len();
                if *text > TEXT_CAP {
                    return Err(refused(format!(
                        "{}: the queues hold more than {TEXT_CAP} bytes",
                        shown()
                    )));
                }
                out.0.push(Node {
                    path: rel,
                    mode: meta.mode,
                    text: Some(t),
                });
            }
            kind => return Err(not_plain(nic, &rel, kind)),
        }
    }
    Ok(())
}

/// `ifname`'s queues as found, checked ([`Queues::open`]): what a channel
/// change journals in a tree. `None`: it has no `queues` directory.
pub fn snapshot(root: &Root, ifname: &str) -> io::Result<Option<Snapshot>> {
    Ok(Queues::open(root, ifname)?.map(Queues::snapshot))
}

/// Puts `ifname`'s queues back as `want` holds them, byte for byte: a name
/// that is not in it (or of another kind) is removed, never followed; a
/// directory or file missing is made, a file that differs rewritten. Run
/// again after a kill, it finishes the job.
pub fn restore(root: &Root, ifname: &str, want: &Snapshot) -> io::Result<()> {
    let nic = interface(root, ifname)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("/sys/class/net/{ifname}: no such interface in the tree"),
        )
    })?;
    match nic.meta("queues")? {
        Some(m) if m.kind == Kind::Dir => {}
        Some(_) => nic.remove("queues")?,
        None => {}
    }
    nic.make_dir("queues", 0o755)?;
    let wanted: HashMap<&str, &Node> = want.0.iter().map(|n| (n.path.as_str(), n)).collect();
    prune(&nic, "", &wanted)?;
    for n in &want.0 {
        let here = at(&n.path);
        let now = nic.meta(&here)?.map(|m| m.kind);
        match &n.text {
            None if now == Some(Kind::Dir) => {}
            None => nic.make_dir(&here, n.mode & KEEP_MODE)?,
            Some(text) => {
                let same = now == Some(Kind::File)
                    && nic.read(&here, FILE_CAP).ok().as_deref() == Some(text.as_bytes());
                if !same {
                    nic.write(&here, text.as_bytes(), n.mode & KEEP_MODE)?;
                }
            }
        }
    }
    Ok(())
}

/// Removes every name below `queues/dir` that `wanted` does not hold as
/// what it is now.
fn prune(nic: &Subtree, dir: &str, wanted: &HashMap<&str, &Node>) -> io::Result<()> {
    for name in nic.list(&at(dir))? {
        let rel = join(dir, &name);
        let Some(m) = nic.meta(&at(&rel))? else {
            continue;
        };
        match wanted.get(rel.as_str()).map(|n| n.text.is_none()) {
            Some(true) if m.kind == Kind::Dir => prune(nic, &rel, wanted)?,
            Some(false) if m.kind == Kind::File => {}
            _ => nic.remove(&at(&rel))?,
        }
    }
    Ok(())
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
    fn only_the_kernels_queue_names_are_queues() {
        assert!(queue_name("rx-0") && queue_name("tx-63"));
        assert!(!queue_name("rx-03") && !queue_name("rx-+3") && !queue_name("rx-"));
        assert!(!queue_name("foo") && !queue_name("rx-1x"));
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
