//! Network interfaces with their driver, MTU, IRQs and the IRQs' CPU affinity.
//!
//! An interface's IRQs are the `/proc/interrupts` lines whose action names
//! carry the interface name (`eth0-TxRx-0`) or its device's name
//! (`virtio2-input.0`, `mlx5_comp0@pci:0000:3b:00.0`).

use serde::{Deserialize, Serialize};

use super::Reader;
use crate::cpulist::CpuList;

const NET_DIR: &str = "/sys/class/net";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Interface {
    pub name: String,
    pub driver: Option<String>,
    /// The device directory the interface hangs from (`virtio2`, `0000:3b:00.0`), or `virtual`.
    pub device: Option<String>,
    pub mtu: Option<u32>,
    pub operstate: Option<String>,
    pub speed_mbps: Option<i64>,
    pub tx_queue_len: Option<u32>,
    pub irqs: Vec<Irq>,
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

struct IrqLine {
    irq: u32,
    names: Vec<String>,
    count: u64,
    fired_on: CpuList,
}

pub fn read(ctx: &Reader) -> Vec<Interface> {
    let Some(names) = ctx.dir(NET_DIR) else {
        ctx.not_exposed("network interfaces", NET_DIR);
        return Vec::new();
    };
    let irq_lines = match ctx.text("/proc/interrupts") {
        Some(t) => parse_interrupts(&t),
        None => {
            ctx.not_exposed("interrupts", "/proc/interrupts");
            Vec::new()
        }
    };
    names
        .into_iter()
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
            let irqs = irq_lines
                .iter()
                .filter(|l| {
                    l.names
                        .iter()
                        .any(|n| belongs(n, &name, device.as_deref(), parent.as_deref()))
                })
                .map(|l| Irq {
                    irq: l.irq,
                    name: l.names.join(","),
                    affinity: ctx.cpulist(&format!("/proc/irq/{}/smp_affinity_list", l.irq)),
                    effective_affinity: ctx
                        .cpulist(&format!("/proc/irq/{}/effective_affinity_list", l.irq)),
                    count: Some(l.count),
                    fired_on: Some(l.fired_on.clone()),
                })
                .collect();
            Interface {
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

/// `/proc/interrupts`: a header of CPU columns, then `N: counts... chip hwirq type names`.
fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpus: Vec<u32> = header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut out = Vec::new();
    for line in lines {
        let mut words = line.split_whitespace();
        let Some(irq) = words
            .next()
            .and_then(|w| w.strip_suffix(':')?.parse::<u32>().ok())
        else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        if rest.len() < cpus.len() {
            continue;
        }
        let counts: Vec<u64> = rest[..cpus.len()]
            .iter()
            .map(|c| c.parse().unwrap_or(0))
            .collect();
        // After the counts: the chip, `hwirq-trigger`, then the action names ("a, b").
        let tail = &rest[cpus.len()..];
        let names: Vec<String> = tail
            .iter()
            .skip(2.min(tail.len().saturating_sub(1)))
            .flat_map(|w| w.split(','))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        out.push(IrqLine {
            irq,
            names,
            count: counts.iter().sum(),
            fired_on: cpus
                .iter()
                .zip(&counts)
                .filter(|(_, n)| **n > 0)
                .map(|(c, _)| *c)
                .collect(),
        });
    }
    out
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
        let lines = parse_interrupts(text);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1].count, 120);
        assert_eq!(lines[1].fired_on.to_string(), "0-1");
        assert!(belongs(
            &lines[1].names[0],
            "eth0",
            Some("virtio2"),
            Some("0000:00:03.0")
        ));
        assert!(!belongs(&lines[1].names[0], "eth0", Some("virtio21"), None));
        assert!(belongs(
            &lines[2].names[0],
            "eth1",
            Some("0000:3b:00.1"),
            None
        ));
        assert!(belongs(
            &lines[3].names[0],
            "ens1",
            Some("0000:3b:00.0"),
            None
        ));
    }
}
