//! Network interfaces with their driver, MTU, IRQs and the IRQs' CPU
//! affinity; their ethtool state (channels, coalescing, rings, offloads:
//! `crate::ethtool`), per-queue RPS/XPS, and the stack's busy-poll and RFS
//! sysctls.
//!
//! An interface's IRQs are the `/proc/interrupts` lines whose action names
//! carry the interface name (`eth0-TxRx-0`) or its device's name
//! (`virtio2-input.0`, `mlx5_comp0@pci:0000:3b:00.0`).

use serde::{Deserialize, Serialize};

use super::Reader;
use super::irq;
use crate::cpulist::CpuList;

const NET_DIR: &str = "/sys/class/net";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Interface {
    pub name: String,
    pub driver: Option<String>,
    /// The device directory the interface hangs from (`virtio2`, `0000:3b:00.0`), or `virtual`.
    pub device: Option<String>,
    /// The MAC address (`address`), what a systemd .link file and the udev
    /// rule of persistence match: names change, the address does not.
    #[serde(default)]
    pub address: Option<String>,
    pub mtu: Option<u32>,
    pub operstate: Option<String>,
    pub speed_mbps: Option<i64>,
    pub tx_queue_len: Option<u32>,
    pub irqs: Vec<Irq>,
    /// `physical`, `virtual` (no device: veth, bridge, ifb) or `loopback`.
    #[serde(default)]
    pub kind: Option<String>,
    /// The device's NUMA node; `null` when the device does not say (or says -1).
    #[serde(default)]
    pub numa_node: Option<u32>,
    /// `ethtool -i/-l/-c/-g/-k`; `null` in a capture that holds none.
    #[serde(default)]
    pub ethtool: Option<crate::ethtool::State>,
    /// `queues/rx-N`; `null` where the tree holds no `queues` directory (every
    /// live device has one, so a capture without it did not record them).
    #[serde(default)]
    pub rx_queues: Option<Vec<RxQueue>>,
    #[serde(default)]
    pub tx_queues: Option<Vec<TxQueue>>,
}

/// `queues/rx-N`: receive packet steering (RPS) and its flow table (RFS).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RxQueue {
    pub queue: u32,
    /// `rps_cpus` as a CPU list (empty: RPS off).
    pub rps_cpus: Option<CpuList>,
    pub rps_flow_cnt: Option<u32>,
}

/// `queues/tx-N`: transmit packet steering (XPS), by CPUs or by receive queues.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct TxQueue {
    pub queue: u32,
    /// `null` where the file is absent (a single-queue device).
    pub xps_cpus: Option<CpuList>,
    pub xps_rxqs: Option<CpuList>,
}

/// The stack's sysctls for busy polling and RFS (Documentation/admin-guide/sysctl/net.rst).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct NetCore {
    /// `net.core.busy_poll`, µs (0: off).
    pub busy_poll_us: Option<u32>,
    /// `net.core.busy_read`, µs (0: off).
    pub busy_read_us: Option<u32>,
    /// `net.core.rps_sock_flow_entries` (0: RFS off).
    pub rps_sock_flow_entries: Option<u32>,
}

pub fn read_core(ctx: &Reader) -> NetCore {
    NetCore {
        busy_poll_us: ctx.parse("/proc/sys/net/core/busy_poll"),
        busy_read_us: ctx.parse("/proc/sys/net/core/busy_read"),
        rps_sock_flow_entries: ctx.parse("/proc/sys/net/core/rps_sock_flow_entries"),
    }
}

/// Its queues, from `queues/rx-N` and `queues/tx-N`, in queue order.
fn queues(ctx: &Reader, d: &str) -> (Option<Vec<RxQueue>>, Option<Vec<TxQueue>>) {
    let Some(names) = ctx.dir(&format!("{d}/queues")) else {
        return (None, None);
    };
    let mask = |p: String| ctx.text(&p).and_then(|t| CpuList::parse_mask(&t).ok());
    let rx = super::numbered(&names, "rx-")
        .into_iter()
        .map(|q| RxQueue {
            queue: q,
            rps_cpus: mask(format!("{d}/queues/rx-{q}/rps_cpus")),
            rps_flow_cnt: ctx.parse(&format!("{d}/queues/rx-{q}/rps_flow_cnt")),
        })
        .collect();
    let tx = super::numbered(&names, "tx-")
        .into_iter()
        .map(|q| TxQueue {
            queue: q,
            xps_cpus: mask(format!("{d}/queues/tx-{q}/xps_cpus")),
            xps_rxqs: mask(format!("{d}/queues/tx-{q}/xps_rxqs")),
        })
        .collect();
    (Some(rx), Some(tx))
}

/// `loopback` (ARPHRD_LOOPBACK, include/uapi/linux/if_arp.h), `virtual` or `physical`.
fn kind_of(ctx: &Reader, d: &str, device: Option<&str>) -> Option<String> {
    if ctx.text(&format!("{d}/type")).as_deref() == Some("772") {
        return Some("loopback".into());
    }
    device.map(|dev| {
        if dev == "virtual" {
            "virtual"
        } else {
            "physical"
        }
        .to_string()
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Irq {
    pub irq: u32,
    pub name: String,
    pub affinity: Option<CpuList>,
    pub effective_affinity: Option<CpuList>,
    /// Interrupts so far, all CPUs (a live counter).
    pub count: Option<u64>,
    /// CPUs that have taken at least one (a live counter).
    pub fired_on: Option<CpuList>,
}

pub fn read(ctx: &Reader) -> Vec<Interface> {
    let Some(names) = ctx.dir(NET_DIR) else {
        ctx.not_exposed("network interfaces", NET_DIR);
        return Vec::new();
    };
    let table = match ctx.text("/proc/interrupts") {
        Some(t) => irq::parse(&t),
        None => {
            ctx.not_exposed("interrupts", "/proc/interrupts");
            irq::Interrupts::default()
        }
    };
    names
        .into_iter()
        .filter(|name| match crate::name::check_ifname(name) {
            Ok(()) => true,
            Err(e) => {
                ctx.warn(format!("{NET_DIR}: {e}; left out"));
                false
            }
        })
        .map(|name| {
            let d = format!("{NET_DIR}/{name}");
            let resolved = ctx.root.resolve(&d).ok();
            let device = resolved.as_deref().map(|p| {
                if p.starts_with("/sys/devices/virtual/") {
                    "virtual".to_string()
                } else {
                    // /sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0 -> virtio2
                    p.rsplit('/').nth(2).unwrap_or("").to_string()
                }
            });
            let driver = ctx
                .root
                .read_link(&format!("{d}/device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
            let parent = resolved
                .as_deref()
                .and_then(|p| p.rsplit('/').nth(3))
                .map(str::to_string);
            let irqs = table
                .rows
                .iter()
                .filter(|l| {
                    l.actions
                        .iter()
                        .any(|n| belongs(n, &name, device.as_deref(), parent.as_deref()))
                })
                .map(|l| Irq {
                    irq: l.irq,
                    name: l.actions.join(","),
                    affinity: ctx.cpulist(&format!("/proc/irq/{}/smp_affinity_list", l.irq)),
                    effective_affinity: ctx
                        .cpulist(&format!("/proc/irq/{}/effective_affinity_list", l.irq)),
                    count: Some(irq::Interrupts::total(l)),
                    fired_on: Some(table.fired_on(l)),
                })
                .collect();
            let (rx_queues, tx_queues) = queues(ctx, &d);
            let ethtool = match crate::ethtool::read(ctx.root, &name) {
                Ok(s) => s,
                Err(e) => {
                    ctx.warn(e);
                    None
                }
            };
            Interface {
                kind: kind_of(ctx, &d, device.as_deref()),
                numa_node: ctx
                    .text(&format!("{d}/device/numa_node"))
                    .and_then(|t| t.parse().ok()),
                ethtool,
                rx_queues,
                tx_queues,
                address: ctx.text(&format!("{d}/address")),
                mtu: ctx.parse(&format!("{d}/mtu")),
                operstate: ctx.text(&format!("{d}/operstate")),
                speed_mbps: ctx
                    .text(&format!("{d}/speed"))
                    .and_then(|s| s.parse().ok())
                    .filter(|s: &i64| *s >= 0),
                tx_queue_len: ctx.parse(&format!("{d}/tx_queue_len")),
                name,
                driver,
                device,
                irqs,
            }
        })
        .collect()
}

fn belongs(action: &str, ifname: &str, device: Option<&str>, parent: Option<&str>) -> bool {
    let owned_by = |owner: &str| {
        !owner.is_empty()
            && owner != "virtual"
            && (action == owner
                || action
                    .strip_prefix(owner)
                    .is_some_and(|rest| rest.starts_with('-'))
                || action
                    .strip_suffix(owner)
                    .is_some_and(|head| head.ends_with('@') || head.ends_with("@pci:")))
    };
    owned_by(ifname)
        || device.is_some_and(owned_by)
        || parent.is_some_and(|p| p.contains(':') && owned_by(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_are_attributed_to_their_interface() {
        let text = "           CPU0       CPU1\n\
                    24:          0          0  PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n\
                    25:        100         20  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
                    30:          5          0  IR-PCI-MSI 1048576-edge      eth1-TxRx-0\n\
                    31:          5          0  IR-PCI-MSI 1048576-edge      mlx5_comp0@pci:0000:3b:00.0\n\
                    NMI:         0          0   Non-maskable interrupts\n";
        let table = irq::parse(text);
        let lines = &table.rows;
        assert_eq!(lines.len(), 4);
        assert_eq!(irq::Interrupts::total(&lines[1]), 120);
        assert_eq!(table.fired_on(&lines[1]).to_string(), "0-1");
        assert!(belongs(
            &lines[1].actions[0],
            "eth0",
            Some("virtio2"),
            Some("0000:00:03.0")
        ));
        assert!(!belongs(
            &lines[1].actions[0],
            "eth0",
            Some("virtio21"),
            None
        ));
        assert!(belongs(
            &lines[2].actions[0],
            "eth1",
            Some("0000:3b:00.1"),
            None
        ));
        assert!(belongs(
            &lines[3].actions[0],
            "ens1",
            Some("0000:3b:00.0"),
            None
        ));
    }
}
