//! The kernel's command-line rules `kernel-cmdline` follows, with sources.

use crate::cpulist::CpuList;

/// `COMMAND_LINE_SIZE` per architecture (named as inventory's `arch` fact
/// names it) and the header that defines it: the kernel copies the boot
/// loader's line into a buffer of that size, NUL included, and silently
/// drops the rest (init/main.c, `setup_command_line`; `strscpy` in
/// arch/x86/kernel/setup.c), so a cut word can become a different valid
/// value (`nohz_full=4-11` cut to `nohz_full=4-1`).
pub const COMMAND_LINE_SIZE: [(&str, usize, &str); 5] = [
    ("x86", 2048, "arch/x86/include/asm/setup.h"),
    ("arm64", 4096, "arch/arm64/include/uapi/asm/setup.h"),
    ("powerpc", 2048, "arch/powerpc/include/uapi/asm/setup.h"),
    ("s390x", 4096, "arch/s390/include/uapi/asm/setup.h"),
    ("riscv64", 1024, "arch/riscv/include/uapi/asm/setup.h"),
];

/// The limit of an architecture, and where it is defined; x86's when the
/// architecture is unknown or not listed (the hosts hostknob is used on).
pub fn command_line_size(arch: Option<&str>) -> (usize, String) {
    match COMMAND_LINE_SIZE.iter().find(|(a, _, _)| Some(*a) == arch) {
        Some((a, n, src)) => (*n, format!("COMMAND_LINE_SIZE on {a}, {src}")),
        None => (
            COMMAND_LINE_SIZE[0].1,
            format!(
                "COMMAND_LINE_SIZE on x86 ({}), assumed for an architecture {}",
                COMMAND_LINE_SIZE[0].2,
                arch.map_or("not known".to_string(), |a| format!("not listed ({a})"))
            ),
        ),
    }
}

/// Keys whose FIRST word counts: kernel/sched/isolation.c,
/// `housekeeping_setup`, keeps the first mask of each housekeeping type and
/// ignores a later different one ("Housekeeping: nohz_full= must match
/// isolcpus="). For every other key the last word counts (each `__setup`
/// handler overwrites what the one before set).
pub const FIRST_WINS: [&str; 2] = ["isolcpus", "nohz_full"];

/// Keys whose value is a CPU list (`isolcpus=` after its flags), compared
/// as sets: `1,2,3,4` is `1-4` (lib/bitmap.c, `bitmap_parselist`).
pub const CPU_LIST_KEYS: [&str; 4] = ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"];

/// `isolcpus=` flags, in any order (kernel/sched/isolation.c,
/// `housekeeping_isolcpus_setup`; kernel-parameters.txt).
pub const ISOLCPUS_FLAGS: [&str; 3] = ["nohz", "domain", "managed_irq"];

/// Whether two values of `key` mean the same to the kernel: CPU lists as
/// sets, `isolcpus=` flags as a set; otherwise the same text.
pub fn same_value(key: &str, a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let key = key.replace('-', "_");
    if !CPU_LIST_KEYS.contains(&key.as_str()) {
        return false;
    }
    match (split_flags(&key, a), split_flags(&key, b)) {
        (Some((fa, la)), Some((fb, lb))) => fa == fb && la == lb,
        _ => false,
    }
}

/// A CPU-list value: its flags (sorted; `isolcpus=` only) and its CPUs.
pub fn split_flags(key: &str, value: &str) -> Option<(Vec<String>, CpuList)> {
    let mut flags: Vec<String> = Vec::new();
    let mut rest = value;
    if key == "isolcpus" {
        while let Some((head, tail)) = rest.split_once(',') {
            if !ISOLCPUS_FLAGS.contains(&head) {
                break;
            }
            flags.push(head.to_string());
            rest = tail;
        }
    }
    flags.sort();
    flags.dedup();
    CpuList::parse(rest).ok().map(|l| (flags, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_flags_compare_as_sets() {
        assert!(same_value("nohz_full", "1,2,3,4", "1-4"));
        assert!(same_value(
            "isolcpus",
            "domain,managed_irq,1-4,161-164",
            "managed_irq,domain,1,2,3,4,161,162,163,164"
        ));
        assert!(!same_value("isolcpus", "managed_irq,1-4", "domain,1-4"));
        assert!(!same_value("nohz_full", "1-4", "1-5"));
        assert!(!same_value("console", "ttyS0", "ttyS0,115200"));
        assert_eq!(command_line_size(Some("x86")).0, 2048);
        assert_eq!(command_line_size(Some("s390x")).0, 4096);
        assert_eq!(command_line_size(None).0, 2048);
    }
}
