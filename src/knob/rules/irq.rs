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
