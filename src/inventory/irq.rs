//! `/proc/interrupts` as the `irq-affinity` knob reads it: numbered IRQs
//! with their chip and action names, and the named per-CPU rows (`LOC`,
//! `NMI`, `RES`...) that no affinity file moves.
//!
//! The line layout is `show_interrupts()` in kernel/irq/proc.c: `N:`, one
//! count per CPU column, the chip's name, the hardware IRQ number (with
//! `-name` of the flow handler, `5-edge`; `Level`/`Edge` on
//! CONFIG_GENERIC_IRQ_SHOW_LEVEL architectures), then two spaces and the
//! actions separated by `, `.

use crate::cpulist::CpuList;

/// One numbered row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqRow {
    pub irq: u32,
    pub chip: String,
    /// Action names (`virtio2-input.0`, `nvme0q1`); empty when none is registered.
    pub actions: Vec<String>,
    /// How often it fired on each CPU column (`Interrupts::cpus`).
    pub counts: Vec<u64>,
}

/// What `/proc/interrupts` lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interrupts {
    /// The CPU of each count column (the header's `CPUn`).
    pub cpus: Vec<u32>,
    pub rows: Vec<IrqRow>,
    /// Named rows (`LOC`, `NMI`, `IPI0`...): per-CPU interrupts, never movable.
    pub per_cpu: Vec<String>,
}

/// Parses the file; lines that are neither numbered nor named are skipped.
pub fn parse(text: &str) -> Interrupts {
    let mut lines = text.lines();
    let cpus: Vec<u32> = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let columns = cpus.len();
    let mut out = Interrupts {
        cpus,
        ..Interrupts::default()
    };
    for line in lines {
        let Some((head, rest)) = line.split_once(':') else {
            continue;
        };
        let head = head.trim();
        let Ok(irq) = head.parse::<u32>() else {
            if !head.is_empty() && !out.per_cpu.iter().any(|n| n == head) {
                out.per_cpu.push(head.to_string());
            }
            continue;
        };
        // Skip the per-CPU counts, word by word, keeping the remainder's spacing.
        let mut tail = rest;
        let mut counts = Vec::with_capacity(columns);
        for _ in 0..columns {
            let t = tail.trim_start();
            let end = t.find(char::is_whitespace).unwrap_or(t.len());
            let Ok(n) = t[..end].parse::<u64>() else {
                break;
            };
            counts.push(n);
            tail = &t[end..];
        }
        let tail = tail.trim();
        let chip = tail.split_whitespace().next().unwrap_or("").to_string();
        out.rows.push(IrqRow {
            irq,
            chip,
            actions: actions(tail),
            counts,
        });
    }
    out
}

impl Interrupts {
    /// How often `row` fired, over every CPU.
    pub fn total(row: &IrqRow) -> u64 {
        row.counts.iter().sum()
    }

    /// The CPUs `row` fired on.
    pub fn fired_on(&self, row: &IrqRow) -> CpuList {
        self.cpus
            .iter()
            .zip(&row.counts)
            .filter(|(_, n)| **n > 0)
            .map(|(c, _)| *c)
            .collect()
    }
}

/// The action names: after the last run of two or more spaces (the kernel
/// prints `"  %s"` before the first and `", %s"` between them); none when
/// the tail has no such run past the chip and hardware number.
fn actions(tail: &str) -> Vec<String> {
    let bytes = tail.as_bytes();
    let mut start = None;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b' ' && bytes[i + 1] == b' ' {
            let mut j = i;
            while j < bytes.len() && bytes[j] == b' ' {
                j += 1;
            }
            start = Some(j);
            i = j;
        } else {
            i += 1;
        }
    }
    let Some(start) = start else {
        return Vec::new();
    };
    // Two spaces inside the chip/hwirq columns (`IO-APIC   5-edge`) leave
    // at least two words before the actions; fewer means no action.
    if tail[..start].split_whitespace().count() < 2 {
        return Vec::new();
    }
    tail[start..]
        .split(", ")
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// CPU numbers as a mask as `/proc/irq/default_smp_affinity` prints it, in as many 32-bit groups as `like` has (at
/// least enough for the highest CPU), the first group as wide as `like`'s
/// and the others 8 digits: the kernel's `%*pb` format (lib/vsprintf.c,
/// `bitmap_string`).
pub fn cpus_mask(cpus: &[u32], like: &str) -> String {
    let like: Vec<&str> = like.trim().split(',').collect();
    let need = cpus.iter().max().map_or(1, |m| *m as usize / 32 + 1);
    let groups = like.len().max(need);
    let first_width = if groups == like.len() {
        like[0].len().max(1)
    } else {
        1
    };
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .enumerate()
        .map(|(k, w)| match k {
            0 => format!("{w:0first_width$x}"),
            _ => format!("{w:08x}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_actions_and_per_cpu_names() {
        let text = "           CPU0       CPU1       \n  \
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n  \
 16:          0          0  IO-APIC  16-fasteoi   ehci_hcd:usb1, i801_smbus\n  \
 36:          0     894285 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n  \
 50:          0          0  IR-PCI-MSIX 1048576-edge\n  \
 11:          5          5     GICv3  27 Level     arch_timer\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      84484     194592   Local timer interrupts\n\
ERR:          0\n";
        let i = parse(text);
        let names: Vec<(u32, Vec<String>)> =
            i.rows.iter().map(|r| (r.irq, r.actions.clone())).collect();
        assert_eq!(
            names,
            vec![
                (24, vec!["ACPI:Ged".to_string()]),
                (16, vec!["ehci_hcd:usb1".into(), "i801_smbus".into()]),
                (36, vec!["virtio1-req.0".into()]),
                (50, vec![]),
                (11, vec!["arch_timer".into()]),
            ]
        );
        assert_eq!(i.rows[2].chip, "PCI-MSIX-0000:00:02.0");
        assert_eq!(i.per_cpu, vec!["NMI", "LOC", "ERR"]);
    }

    #[test]
    fn masks_in_the_kernels_format() {
        assert_eq!(cpus_mask(&[0], "3"), "1");
        assert_eq!(
            cpus_mask(&[31, 64], "1,00000000,00000000"),
            "1,00000000,80000000"
        );
        assert_eq!(cpus_mask(&[0, 1], "ff"), "03");
    }
}
