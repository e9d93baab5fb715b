//! The NIC settings of `inventory network`: ethtool state, queues with
//! their RPS/XPS masks, and the stack's busy-poll and RFS sysctls.

use super::{facts, grid, opt};
use crate::cpulist::CpuList;
use crate::ethtool::{Pair, State, feature_on};
use crate::inventory::{Interface, Inventory};

/// The offloads that change latency, by the kernel's feature names
/// (`ethtool -k` shows GRO as `generic-receive-offload` = `rx-gro`).
pub const LATENCY_FEATURES: [(&str, &str); 6] = [
    ("gro", "rx-gro"),
    ("rx-gro-hw", "rx-gro-hw"),
    ("lro", "rx-lro"),
    ("gso", "tx-generic-segmentation"),
    ("tso", "tx-tcp-segmentation"),
    ("tso6", "tx-tcp6-segmentation"),
];

fn unsupported(s: &State) -> String {
    format!(
        "not supported by {}",
        s.driver
            .as_deref()
            .filter(|d| !d.is_empty())
            .unwrap_or("the driver")
    )
}

fn pair(p: Pair) -> String {
    format!("{}/{}", p.current, p.max)
}

fn channels(s: &State) -> String {
    let Some(c) = &s.channels else {
        return unsupported(s);
    };
    let mut parts = Vec::new();
    for (name, p) in [
        ("combined", c.combined),
        ("rx", c.rx),
        ("tx", c.tx),
        ("other", c.other),
    ] {
        if p.max > 0 || p.current > 0 {
            parts.push(format!("{name} {}", pair(p)));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("\n")
    }
}

fn rings(s: &State) -> String {
    match &s.rings {
        Some(r) => format!("rx {}\ntx {}", pair(r.rx), pair(r.tx)),
        None => unsupported(s),
    }
}

fn coalesce(s: &State) -> String {
    let Some(c) = &s.coalesce else {
        return unsupported(s);
    };
    let v = |k: &str| c.get(k).copied().unwrap_or(0);
    let onoff = |k: &str| if v(k) != 0 { "on" } else { "off" };
    format!(
        "rx {} µs/{} frames\ntx {} µs/{} frames\nadaptive rx {} tx {}",
        v("rx-usecs"),
        v("rx-frames"),
        v("tx-usecs"),
        v("tx-frames"),
        onoff("adaptive-rx"),
        onoff("adaptive-tx")
    )
}

fn offloads(s: &State) -> String {
    let Some(f) = &s.features else {
        return unsupported(s);
    };
    LATENCY_FEATURES
        .iter()
        .filter_map(|(short, name)| {
            let w = f.get(*name)?;
            let fixed = if w.contains("[fixed]") {
                " (fixed)"
            } else {
                ""
            };
            Some(format!(
                "{short} {}{fixed}",
                if feature_on(w) { "on" } else { "off" }
            ))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Queues that agree, as `rx 0-3: 0-7`.
fn masks<'a>(kind: &str, q: impl Iterator<Item = (u32, Option<&'a CpuList>)>) -> Vec<String> {
    let groups = crate::cpulist::group(q.map(|(n, m)| {
        let text = match m {
            Some(l) if l.is_empty() => "off".to_string(),
            Some(l) => l.to_string(),
            None => "-".to_string(),
        };
        (n, text)
    }));
    groups
        .into_iter()
        .map(|g| format!("{kind} {}: {}", g.cpus, g.value))
        .collect()
}

fn steering(n: &Interface) -> String {
    let mut lines = masks(
        "rps",
        n.rx_queues
            .iter()
            .flatten()
            .map(|q| (q.queue, q.rps_cpus.as_ref())),
    );
    let flows: u64 = n
        .rx_queues
        .iter()
        .flatten()
        .filter_map(|q| q.rps_flow_cnt)
        .map(u64::from)
        .sum();
    if flows > 0 {
        lines.push(format!("rfs flows {flows}"));
    }
    lines.extend(masks(
        "xps",
        n.tx_queues
            .iter()
            .flatten()
            .map(|q| (q.queue, q.xps_cpus.as_ref())),
    ));
    if lines.is_empty() {
        "-".into()
    } else {
        lines.join("\n")
    }
}

fn row(n: &Interface) -> Vec<String> {
    let kind = opt(&n.kind);
    let Some(s) = &n.ethtool else {
        let none = "not captured".to_string();
        return vec![
            n.name.clone(),
            kind,
            none.clone(),
            none.clone(),
            none.clone(),
            none.clone(),
            none,
            steering(n),
        ];
    };
    let driver = match (&s.driver, &s.firmware_version) {
        (Some(d), Some(fw)) if !fw.is_empty() => format!("{d}\nfw {fw}"),
        (Some(d), _) => d.clone(),
        _ => "-".into(),
    };
    let node = n
        .numa_node
        .map(|x| format!("\nnode {x}"))
        .unwrap_or_default();
    let speed = n
        .speed_mbps
        .map(|x| format!("\n{x} Mb/s"))
        .unwrap_or_default();
    vec![
        n.name.clone(),
        format!("{kind}{node}{speed}"),
        driver,
        channels(s),
        rings(s),
        coalesce(s),
        offloads(s),
        steering(n),
    ]
}

pub fn nic_settings(inv: &Inventory) -> String {
    let rows = inv.network.iter().map(row).collect();
    let mut out = grid(
        "NIC settings (ethtool; channels and rings current/max)",
        &[
            "interface",
            "kind",
            "driver",
            "channels",
            "rings",
            "coalescing",
            "offloads",
            "steering",
        ],
        rows,
    );
    if let Some(c) = &inv.net_core {
        out += &facts(
            "Busy polling and flow steering (net.core)",
            &[
                (
                    "net.core.busy_poll".into(),
                    format!("{} µs", opt(&c.busy_poll_us)),
                ),
                (
                    "net.core.busy_read".into(),
                    format!("{} µs", opt(&c.busy_read_us)),
                ),
                (
                    "net.core.rps_sock_flow_entries".into(),
                    opt(&c.rps_sock_flow_entries),
                ),
            ],
        );
    }
    out
}
