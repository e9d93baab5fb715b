//! The NIC part of the fragment: per physical interface with queues, RPS
//! and XPS masks of the housekeeping CPUs (so received packets are
//! processed, and sends mapped, off the isolated ones), and its queue
//! interrupts named in a knob of their own. Virtual interfaces get none:
//! lo, veth and bridges have no interrupt, and their packets are processed
//! on the sending CPU (`netif_rx` onto that CPU's backlog), so a mask there
//! would move the workload's own traffic off its CPU for an IPI per batch.

use serde_yaml::Value;

use super::spec::{Spec, list, map};
use crate::cpulist::CpuList;
use crate::inventory::Interface;
use crate::knob::irq_affinity::{Unmovable, unmovable};
use crate::knob::rules::irq::{is_nic_queue, queue_glob};
use crate::manifest::slug;
use crate::root::Root;

/// One physical interface as the fragment sees it.
#[derive(Clone, Debug)]
pub struct Nic {
    pub name: String,
    /// Receive queues with `rps_cpus` (every queue has it under CONFIG_RPS).
    pub rx_queues: usize,
    /// Transmit queues with `xps_cpus` (the kernel shows it on a multi-queue device only).
    pub xps_queues: usize,
    pub tx_queues: usize,
    /// Its queue interrupts' action names: movable, managed, without an affinity file.
    pub irqs: Vec<String>,
    pub managed: Vec<String>,
    pub no_file: Vec<String>,
}

/// The host's interfaces: the physical ones, and the names of the others.
#[derive(Clone, Debug, Default)]
pub struct Nics {
    pub physical: Vec<Nic>,
    pub virtual_names: Vec<String>,
}

impl Nics {
    /// From inventory's network section; `root` says which IRQs can move.
    pub fn read(interfaces: &[Interface], root: &Root) -> Nics {
        let mut out = Nics::default();
        for i in interfaces {
            if i.kind.as_deref() != Some("physical") {
                out.virtual_names.push(i.name.clone());
                continue;
            }
            let rx = i.rx_queues.as_deref().unwrap_or_default();
            let tx = i.tx_queues.as_deref().unwrap_or_default();
            let mut nic = Nic {
                name: i.name.clone(),
                rx_queues: rx.iter().filter(|q| q.rps_cpus.is_some()).count(),
                xps_queues: tx.iter().filter(|q| q.xps_cpus.is_some()).count(),
                tx_queues: tx.len(),
                irqs: vec![],
                managed: vec![],
                no_file: vec![],
            };
            for irq in &i.irqs {
                for action in irq.name.split(',').filter(|a| is_nic_queue(a)) {
                    match unmovable(root, irq.irq) {
                        None => nic.irqs.push(action.to_string()),
                        Some(Unmovable::ReadOnly) => nic.managed.push(action.to_string()),
                        Some(Unmovable::NoFile) => nic.no_file.push(action.to_string()),
                    }
                }
            }
            out.physical.push(nic);
        }
        out
    }

    /// The globs of the movable queue interrupts, one per vector set.
    pub fn irq_globs(&self) -> Vec<String> {
        let mut globs: Vec<String> = self
            .physical
            .iter()
            .flat_map(|n| n.irqs.iter().map(|a| queue_glob(a)))
            .collect();
        globs.sort();
        globs.dedup();
        globs
    }

    /// What the fragment does with each interface, for the plan's reasons.
    pub fn reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.physical {
            let mut did = Vec::new();
            if n.rx_queues > 0 {
                did.push(format!("RPS on {}", queues(n.rx_queues, "rx")));
            }
            match (n.xps_queues, n.tx_queues) {
                (0, t) if t <= 1 => {
                    did.push("no XPS (one tx queue: the kernel has no xps_cpus for it)".into())
                }
                (0, _) => {
                    did.push("no XPS (no xps_cpus files: a kernel without CONFIG_XPS)".into())
                }
                (x, _) => did.push(format!("XPS on {}", queues(x, "tx"))),
            }
            if !n.irqs.is_empty() {
                did.push(format!("its queue interrupts {} named", n.irqs.join(" ")));
            }
            if !n.managed.is_empty() {
                did.push(format!(
                    "managed queue interrupts {} left to isolcpus=managed_irq",
                    n.managed.join(" ")
                ));
            }
            out.push(format!("NIC {}: {}", n.name, did.join("; ")));
        }
        if !self.virtual_names.is_empty() {
            out.push(format!(
                "virtual interfaces {} get no RPS/XPS masks: they have no interrupt, and their \
                 packets are processed on the sending CPU, so a mask would only move the \
                 workload's own traffic off its CPU",
                self.virtual_names.join(" ")
            ));
        }
        out
    }

    /// The rps, xps and NIC queue irq-affinity knobs for the split.
    pub(super) fn specs(&self, iso: &CpuList, hk: &CpuList) -> Vec<Spec> {
        let mut out = Vec::new();
        let globs = self.irq_globs();
        if !globs.is_empty() {
            out.push(irq_spec(self, &globs, iso, hk));
        }
        let slugs = unique_slugs(self.physical.iter().map(|n| n.name.as_str()));
        for (n, slug) in self.physical.iter().zip(slugs) {
            // A literal name: `e*` is a valid interface name and a glob.
            let target = map(&[("interfaces", Value::String(glob::Pattern::escape(&n.name)))]);
            let cpus = map(&[("cpus", list(hk))]);
            if n.rx_queues > 0 {
                out.push(Spec {
                    id: format!("isolate-rps-{slug}"),
                    kind: "rps",
                    title: format!("Process {}'s received packets on housekeeping CPUs {hk} (RPS)", n.name),
                    target: Some(target.clone()),
                    set: cpus.clone(),
                    persistence: "udev-reapply",
                    caveats: vec![
                        format!("RPS hands each packet to a CPU of {hk} after the interrupt (an IPI per batch): the protocol work leaves the CPU that took it, so even a queue interrupt that cannot move off {iso} (managed) keeps only the driver's poll there"),
                        "per queue: a nic-channels change makes or removes queues, and apply plans this knob again after it".into(),
                        "virtual interfaces (lo, veth, bridges) are left alone: their packets are processed on the sending CPU".into(),
                    ],
                    why: format!("Without RPS (rps_cpus 0) the kernel processes a queue's packets on the CPU that took its interrupt (Documentation/networking/scaling.rst); the mask {hk} keeps that work off the isolated CPUs {iso}."),
                });
            }
            if n.xps_queues > 0 {
                out.push(Spec {
                    id: format!("isolate-xps-{slug}"),
                    kind: "xps",
                    title: format!("Map only housekeeping CPUs {hk} to {}'s transmit queues (XPS)", n.name),
                    target: Some(target),
                    set: cpus,
                    persistence: "udev-reapply",
                    caveats: vec![
                        format!("XPS chooses a queue, it cannot stop a CPU from sending: CPUs {iso}, mapped to no queue, send on the queue their flow hashes to (netdev_pick_tx, skb_tx_hash)"),
                        "per queue: a nic-channels change makes or removes queues, and apply plans this knob again after it".into(),
                    ],
                    why: format!("Drivers map each transmit queue to the CPU of its interrupt when they make the queues (ice, mlx5), the isolated CPUs {iso} included; once the interrupts run on {hk}, the map of {hk} keeps the isolated CPUs out of it (Documentation/networking/scaling.rst, XPS)."),
                });
            }
        }
        out
    }
}

fn irq_spec(nics: &Nics, globs: &[String], iso: &CpuList, hk: &CpuList) -> Spec {
    let managed: Vec<&str> = nics
        .physical
        .iter()
        .flat_map(|n| n.managed.iter().map(String::as_str))
        .collect();
    let mut caveats = vec![format!(
        "the isolate-irq-affinity knob leaves these ({}) to this one (its target.exclude)",
        globs.join(" ")
    )];
    caveats.push(match managed.is_empty() {
        true => "a managed queue interrupt (many multi-queue NICs on kernels before 6.12) refuses the write (EIO) and is left out, named; isolcpus=managed_irq keeps it off the isolated CPUs".into(),
        false => format!("managed, so left out (the write would fail with EIO): {}; isolcpus=managed_irq keeps them off {iso}", managed.join(" ")),
    });
    caveats.push("irqbalance rewrites affinity unless its banned list covers the isolated CPUs (the isolate-irqbalance knob)".into());
    Spec {
        id: "isolate-nic-irq-affinity".into(),
        kind: "irq-affinity",
        title: format!("Move the NIC queue interrupts to housekeeping CPUs {hk}"),
        target: Some(map(&[(
            "actions",
            Value::Sequence(globs.iter().cloned().map(Value::String).collect()),
        )])),
        set: list(hk),
        persistence: "boot",
        caveats,
        why: format!(
            "A NIC queue's interrupt runs the driver's receive and transmit-completion work on the CPU it lands on; named by their /proc/interrupts action names, the queue interrupts of {} run on {hk}, never preempting the workload on {iso}.",
            nics.physical
                .iter()
                .filter(|n| !n.irqs.is_empty())
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `1 rx queue`, `16 rx queues`.
fn queues(n: usize, dir: &str) -> String {
    format!("{n} {dir} queue{}", if n == 1 { "" } else { "s" })
}

/// Each name's slug for a knob id; names whose slugs meet (`ens2.f0`,
/// `ens2_f0`) each get a suffix from the name itself, so ids stay unique
/// and the same on every host that has that name.
fn unique_slugs<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Vec<String> {
    let slugs: Vec<String> = names.clone().map(slug).collect();
    names
        .zip(&slugs)
        .map(|(name, s)| match slugs.iter().filter(|o| *o == s).count() {
            1 => s.clone(),
            _ => format!("{s}-{}", crate::name::tag(name)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::unique_slugs;

    #[test]
    fn names_that_slug_alike_get_distinct_ids() {
        let got = unique_slugs(["ens2.f0", "ens2_f0", "eth0"].into_iter());
        assert_eq!(got[2], "eth0");
        assert!(
            got[0].starts_with("ens2-f0-") && got[1].starts_with("ens2-f0-"),
            "{got:?}"
        );
        assert_ne!(got[0], got[1]);
        // The same name gets the same id whatever else the host has.
        assert_eq!(unique_slugs(["ens2_f0", "ens2-f0"].into_iter())[0], got[1]);
    }
}
