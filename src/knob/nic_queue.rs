//! What the per-queue NIC kinds (`rps`, `xps`) share: which receive or
//! transmit queues a knob targets, the queues an apply's channel writes
//! will leave, and the CPU-set words of their files.

use crate::schema::Persistence;

use serde::Deserialize;

use super::nic::{NET_DIR, NicSel, NicTargetDoc};
use super::{FieldError, HostCtx, KindName, Target, WriteMode};
use crate::cpulist::CpuList;
use crate::ethtool::{self, Field, Section};

/// `target:` of the per-queue kinds (`rps`, `xps`): interfaces as
/// [`NicTargetDoc`], and queue numbers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueTargetDoc {
    interfaces: Option<String>,
    driver: Option<String>,
    pci: Option<String>,
    physical: Option<bool>,
    /// Queue numbers (`0-3`); every queue when absent.
    queues: Option<String>,
}

/// The checked form of [`QueueTargetDoc`].
#[derive(Debug)]
pub struct QueueSel {
    pub sel: NicSel,
    pub queues: Option<CpuList>,
}

impl QueueSel {
    pub fn new(doc: Option<QueueTargetDoc>) -> Result<QueueSel, FieldError> {
        let Some(t) = doc else {
            return Ok(QueueSel {
                sel: NicSel::new(None)?,
                queues: None,
            });
        };
        let queues = match &t.queues {
            Some(q) => Some(CpuList::parse(q).map_err(|e| {
                FieldError::new("target.queues", format!("{q:?} is not a queue list ({e})"))
            })?),
            None => None,
        };
        let doc = NicTargetDoc {
            interfaces: t.interfaces,
            driver: t.driver,
            pci: t.pci,
            physical: t.physical,
        };
        Ok(QueueSel {
            sel: NicSel::new(Some(doc))?,
            queues,
        })
    }

    /// `ens2f0 rx queues 0-3`, `driver ice every tx queue`.
    pub fn summary(&self, dir: &str) -> String {
        match &self.queues {
            Some(q) => format!("{} {dir} queues {q}", self.sel.summary()),
            None => format!("{} every {dir} queue", self.sel.summary()),
        }
    }

    /// The queues of `ifname` it selects (`prefix` `rx-` or `tx-`) as the
    /// interface will have them after the `nic-channels` writes planned
    /// before, or why not: a queue it names that the interface lacks.
    pub fn queues(&self, host: &HostCtx, ifname: &str, prefix: &str) -> Result<Vec<u32>, String> {
        let (have, pending) = queues_after(host, ifname, prefix);
        let Some(want) = &self.queues else {
            return Ok(have);
        };
        let missing: Vec<u32> = want
            .as_slice()
            .iter()
            .copied()
            .filter(|q| !have.contains(q))
            .collect();
        if !missing.is_empty() {
            let word = prefix.trim_end_matches('-');
            let list = |l: Vec<u32>| match l.is_empty() {
                true => "none".to_string(),
                false => l.into_iter().collect::<CpuList>().to_string(),
            };
            let when = if pending {
                " after this apply's nic-channels change"
            } else {
                ""
            };
            return Err(format!(
                "{ifname} has no {word} queue {} (it has {}{when}: /sys/class/net/{ifname}/queues)",
                list(missing),
                list(have)
            ));
        }
        Ok(want.as_slice().to_vec())
    }
}

/// `ifname`'s queues of one direction after the `nic-channels` writes
/// planned so far (`HostCtx::assume_written`), and whether such a write
/// changes them ([`ethtool::queues`]).
pub fn queues_after(host: &HostCtx, ifname: &str, prefix: &str) -> (Vec<u32>, bool) {
    let have = queue_numbers(host, ifname, prefix);
    let under = Field::new(ifname, Section::Channels, "").path();
    let requests: Vec<Vec<(String, u32)>> = host
        .assumed_under(&under)
        .into_iter()
        .filter_map(|(path, v)| ethtool::channels::parse(&Field::parse(&path)?.name, &v).ok())
        .collect();
    let Some(from) = requests
        .first()
        .and_then(|_| ethtool::read(host.root, ifname).ok().flatten())
        .and_then(|s| s.channels)
    else {
        return (have, false);
    };
    let to = requests
        .iter()
        .fold(from, |c, r| ethtool::channels::with(&c, r));
    // The kernel's queues follow the counts (ethtool::queues::Queues::sync).
    let after: Vec<u32> = (0..ethtool::queues::queue_count(prefix, &to)).collect();
    let changed = after != have;
    (after, changed)
}

/// A queue's file that a `nic-channels` write of this apply makes: written
/// once it exists, right after that write (`apply::requeue`).
pub fn made_by_channels(host: &HostCtx, path: &str) -> bool {
    let dir = path.rsplit_once('/').map_or(path, |(d, _)| d);
    !host.root.exists(dir)
}

/// The target of a file [`made_by_channels`].
pub fn after_channels(path: String, desired: &str) -> Target {
    let why = format!(
        "{path} is made by this apply's nic-channels change: planned and written right after it"
    );
    Target::absent(path, None, desired, why)
}

/// The numbers of `ifname`'s queues of one direction (`rx-`, `tx-`).
pub fn queue_numbers(host: &HostCtx, ifname: &str, prefix: &str) -> Vec<u32> {
    let listed = host
        .root
        .read_dir(&format!("{NET_DIR}/{ifname}/queues"))
        .unwrap_or_default();
    crate::inventory::numbered(&listed, prefix)
}

/// How the per-queue kinds (rps, xps) persist: tmpfiles.d writes at boot
/// only; the queues' files are made again with the device, which the udev
/// rule follows.
pub const QUEUE_PERSISTENCE: &[Persistence] = &[
    Persistence::Runtime,
    Persistence::UdevReapply,
    Persistence::Tmpfiles,
];

/// CPUs the host can never have, in an rps or xps mask: the kernel parses
/// the mask over its CPU bits and refuses more (net/core/net-sysfs.c,
/// `store_rps_map` and `xps_cpus_store`: `bitmap_parse` over
/// `nr_cpumask_bits`, EOVERFLOW). A bad value, not a state of the host,
/// so a manifest error naming the line.
pub fn beyond_possible(host: &HostCtx, cpus: &CpuList, kind: KindName) -> Result<(), FieldError> {
    let file = "/sys/devices/system/cpu/possible";
    let Some(possible) = host.text(file).and_then(|t| CpuList::parse(&t).ok()) else {
        return Ok(());
    };
    let beyond: Vec<u32> = cpus
        .as_slice()
        .iter()
        .copied()
        .filter(|c| !possible.contains(*c))
        .collect();
    if beyond.is_empty() {
        return Ok(());
    }
    let store = match kind {
        KindName::Xps => "xps_cpus_store",
        _ => "store_rps_map",
    };
    Err(FieldError::new(
        "set.cpus",
        format!(
            "CPUs {} are beyond this host's possible CPUs {possible} ({file}): the kernel \
             refuses the {kind} mask ({store} in net/core/net-sysfs.c)",
            CpuList::new(beyond)
        ),
    ))
}

/// A refusal of CPUs that are not online: the kernel builds the RPS and
/// XPS maps from online CPUs only (net/core/net-sysfs.c `store_rps_map`:
/// `cpu_online_mask`; net/core/dev.c `__netif_set_xps_queue`: `online_mask`)
/// and refuses bits past the possible CPUs (`bitmap_parse`: EOVERFLOW).
pub fn offline_cpus(host: &HostCtx, cpus: Option<&super::CpuSel>, desired: &str) -> Option<Target> {
    let Some(super::CpuSel::List(l)) = cpus else {
        return None;
    };
    let (_, missing) = super::CpuSel::List(l.clone()).split(host.online());
    (!missing.is_empty()).then(|| Target {
        blocker: Some(super::Blocker::Unsupported(format!(
            "CPUs {missing} are not online on this host (the kernel maps online CPUs only)"
        ))),
        ..Target::absent(NET_DIR.into(), None, desired, String::new())
    })
}

/// A refused target on the queues of `ifname`.
pub fn queue_refusal(ifname: &str, desired: &str, why: String) -> Target {
    Target {
        blocker: Some(super::Blocker::Unsupported(why)),
        ..Target::absent(
            format!("{NET_DIR}/{ifname}/queues"),
            None,
            desired,
            String::new(),
        )
    }
}

/// A CPU or queue list in a mask's words: the list, or `none`.
pub fn list_words(l: &CpuList) -> String {
    if l.is_empty() {
        "none".into()
    } else {
        l.to_string()
    }
}

/// A mask as the kernel prints it, in the knob's words: a list or `none`.
pub fn mask_words(raw: &str) -> String {
    match super::workqueue::mask_cpus(raw) {
        Some(l) => list_words(&l),
        None => raw.trim().to_string(),
    }
}

/// One per-queue sysfs file as a target: `words` turns what the kernel
/// prints into the knob's words; `absent` says why a missing file cannot be
/// written.
pub fn queue_file(
    read: std::io::Result<Option<String>>,
    path: String,
    want: &str,
    write: String,
    words: impl Fn(&str) -> String,
    absent: Option<super::Blocker>,
) -> Target {
    match read {
        Ok(Some(raw)) => {
            let current = words(&raw);
            Target {
                path,
                cpus: None,
                label: None,
                in_effect: current == want,
                current: Some(current),
                desired: want.to_string(),
                write: Some(write),
                restore: Some(raw),
                mode: WriteMode::Attribute,
                blocker: None,
            }
        }
        Ok(None) => Target {
            blocker: absent,
            ..Target::absent(path, None, want, String::new())
        },
        Err(e) => Target::unreadable(path, None, want, &e.to_string()),
    }
}

/// `set.cpus` of the per-queue kinds: a CPU list, `all` or `none`.
pub fn cpus_set(text: Option<&str>) -> Result<Option<super::CpuSel>, FieldError> {
    Ok(match text.map(str::trim) {
        None => None,
        Some("none") => Some(super::CpuSel::List(CpuList::default())),
        Some(t) => Some(super::CpuSel::parse("set.cpus", t)?),
    })
}
