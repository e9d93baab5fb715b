//! The kernel's IRQ affinity rules `irq-affinity` follows, with sources.

/// Where the kernel names a managed IRQ up front, when it has the IRQ
/// debugfs (CONFIG_GENERIC_IRQ_DEBUGFS, debugfs mounted): the file of each
/// IRQ lists its `dstate` bits by name, `IRQD_AFFINITY_MANAGED` among them
/// (kernel/irq/debugfs.c, `irqdata_states`). Since v6.12 (commit 92f9d825)
/// `register_irq_proc` also creates a managed IRQ's `smp_affinity_list`
/// without its write bit; before, the file is 0644 and the write answers EIO
/// (kernel/irq/proc.c, `write_irq_affinity`: `!irq_can_set_affinity_usr`),
/// so apply leaves out an IRQ whose write fails with EIO (or EPERM), as
/// tuned (plugin_scheduler.py, `_set_irq_affinity`) and irqbalance
/// (activate.c, `activate_mapping`: the IRQ is marked unmovable) do.
pub const MANAGED_DEBUGFS: (&str, &str) = ("/sys/kernel/debug/irq/irqs", "IRQD_AFFINITY_MANAGED");

// WITHIN: an IRQ is where the knob wants it when its affinity lies within
// the set. With `irqaffinity=` the kernel gives a new IRQ the default
// affinity intersected with the online CPUs and its device's NUMA node
// (kernel/irq/manage.c, `irq_setup_affinity`), so a correctly isolated
// two-socket host has node-local IRQs narrower than the set; apply keeps
// that: it writes the IRQ's affinity intersected with the set, or the set
// when they share no online CPU.
//
// ONE_ONLINE: a mask needs one online CPU; with none the kernel silently
// picks its default instead (kernel/irq/proc.c, `write_irq_affinity`:
// `irq_select_affinity_usr` when `!cpumask_intersects(new_value,
// cpu_online_mask)`). Offline CPUs beside an online one are kept in the
// mask and used when they come online.

/// The action names of NIC queue interrupts (globs over `/proc/interrupts`),
/// by the name each driver gives its per-queue vectors; control vectors
/// (`virtio2-config`, `mlx5_async0`, `ice-0000:17:00.0:misc`) match none:
/// - mlx5: `mlx5_comp<N>@pci:<BDF>` (drivers/net/ethernet/mellanox/mlx5/core/pci_irq.c,
///   `irq_set_name`: "mlx5_comp%d", the `@pci:` suffix from `mlx5_irq_alloc`);
/// - ice, i40e, iavf: `<driver>-<IF>-TxRx-<N>`, `-rx-`/`-tx-` for a vector with one
///   ring (ice_main.c `ice_vsi_req_irq_msix`, i40e_main.c `i40e_vsi_request_irq_msix`);
/// - ixgbe, igb, bnxt_en: `<IF>-TxRx-<N>` (ixgbe_main.c `ixgbe_request_msix_irqs`,
///   bnxt.c `bnxt_setup_msix`);
/// - virtio_net: `virtio<N>-input.<Q>` and `virtio<N>-output.<Q>` (virtio_net.c
///   `virtnet_find_vqs`: "input.%u"/"output.%u"; virtio_pci_common.c `vp_request_msix_vectors`:
///   "%s-%s", device and queue name).
pub const NIC_QUEUE_ACTIONS: &[&str] = &[
    "mlx5_comp*",
    "*-TxRx-*",
    "*-rx-*",
    "*-tx-*",
    "virtio*-input.*",
    "virtio*-output.*",
];

/// Whether `action` names a NIC queue's interrupt ([`NIC_QUEUE_ACTIONS`]).
pub fn is_nic_queue(action: &str) -> bool {
    NIC_QUEUE_ACTIONS
        .iter()
        .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(action)))
}

/// The glob naming every queue of the vector set `action` belongs to: its
/// queue number (the last digits before any `@` suffix) as `*`
/// (`mlx5_comp3@pci:0000:3b:00.0` -> `mlx5_comp*@pci:0000:3b:00.0`).
pub fn queue_glob(action: &str) -> String {
    let (head, tail) = match action.find('@') {
        Some(i) => action.split_at(i),
        None => (action, ""),
    };
    let stem = head.trim_end_matches(|c: char| c.is_ascii_digit());
    match stem.len() == head.len() {
        true => action.to_string(),
        false => format!("{stem}*{tail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nic_queue_vectors_are_told_from_control_ones_and_globbed_per_queue() {
        for (a, glob) in [
            ("mlx5_comp3@pci:0000:3b:00.0", "mlx5_comp*@pci:0000:3b:00.0"),
            ("ice-ens2f0-TxRx-12", "ice-ens2f0-TxRx-*"),
            ("eth0-TxRx-0", "eth0-TxRx-*"),
            ("i40e-eth1-rx-3", "i40e-eth1-rx-*"),
            ("virtio2-input.0", "virtio2-input.*"),
            ("virtio2-output.11", "virtio2-output.*"),
        ] {
            assert!(is_nic_queue(a), "{a}");
            assert_eq!(queue_glob(a), glob);
        }
        for a in [
            "virtio2-config",
            "mlx5_async0@pci:0000:3b:00.0",
            "ice-0000:17:00.0:misc",
            "virtio3-rx",
            "nvme0q1",
        ] {
            assert!(!is_nic_queue(a), "{a}");
        }
    }
}
