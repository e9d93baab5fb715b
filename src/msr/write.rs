//! Writing one field of a model-specific register, through the root seam.
//!
//! A knob owns a field (bits `hi:lo` of one register) on one scope domain
//! (a thread, core, module, die or package, as pepc documents the register).
//! Its logical path names both: `/dev/cpu/N/msr@0x1fc[1:1]`, N being the
//! domain's first CPU. The scope domain is the set of CPUs the feature
//! affects, which the knob must cover whole; it is not the set sharing one
//! copy of the register (pepc's `sname` vs `iosname`: PCStateConfigCtl.py
//! at 5be60112 gives MSR_PKG_CST_CONFIG_CONTROL core I/O scope, module on
//! Silvermont/Airmont, package on Xeon Phi, while its package C-state limit
//! affects the package). So the field is changed by a read-modify-write on
//! every CPU of the domain, each through its own `/dev/cpu/N/msr` (offset =
//! address; only a character device of the msr driver, major 202, is
//! written; where the hardware shares the copy the repeat is harmless), and
//! read back on every CPU. A captured tree holds one sparse file per CPU
//! (offset 8 × address, see the module above), written the same way. Only
//! the field's bits ever change; the rest of each register is written back
//! as read on that CPU.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use super::{Msrs, capture_offset, check_regular, device, generic};
use crate::root::Root;

/// The msr driver's character major (Documentation/admin-guide/devices.txt: 202 = cpu/msr).
const MSR_MAJOR: u32 = 202;

/// Bits `hi:lo` of register `reg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub reg: u32,
    pub hi: u32,
    pub lo: u32,
}

impl Field {
    pub const fn new(reg: u32, hi: u32, lo: u32) -> Field {
        Field { reg, hi, lo }
    }

    pub fn bit(reg: u32, bit: u32) -> Field {
        Field::new(reg, bit, bit)
    }

    /// The field's bits in place.
    pub fn mask(&self) -> u64 {
        let width = self.hi - self.lo + 1;
        let ones = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        ones << self.lo
    }

    pub fn get(&self, value: u64) -> u64 {
        (value & self.mask()) >> self.lo
    }

    /// `value` with the field set to `bits` and every other bit as it was.
    pub fn put(&self, value: u64, bits: u64) -> u64 {
        (value & !self.mask()) | ((bits << self.lo) & self.mask())
    }

    /// The largest value the field holds.
    pub fn max(&self) -> u64 {
        self.mask() >> self.lo
    }

    /// `[1:1]`, `[3:0]`.
    pub fn bits_text(&self) -> String {
        format!("[{}:{}]", self.hi, self.lo)
    }
}

/// The logical path of `field` on the domain whose first CPU is `cpu`.
pub fn path(cpu: u32, field: Field) -> String {
    format!("{}@{:#x}{}", device(cpu), field.reg, field.bits_text())
}

/// `/dev/cpu/N/msr@0xREG[HI:LO]` back into its CPU and field; `None` for any other path.
pub fn parse_path(path: &str) -> Option<(u32, Field)> {
    let rest = path.strip_prefix("/dev/cpu/")?;
    let (cpu, rest) = rest.split_once("/msr@0x")?;
    let (reg, rest) = rest.split_once('[')?;
    let (hi, lo) = rest.strip_suffix(']')?.split_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(cpu) || !digits(hi) || !digits(lo) {
        return None;
    }
    let reg = u32::from_str_radix(reg, 16).ok()?;
    let (hi, lo): (u32, u32) = (hi.parse().ok()?, lo.parse().ok()?);
    (hi < 64 && lo <= hi && path == self::path(cpu.parse().ok()?, Field::new(reg, hi, lo)))
        .then_some((cpu.parse().ok()?, Field::new(reg, hi, lo)))
}

/// The field's value as the journal keeps it: `0x1`.
pub fn field_text(bits: u64) -> String {
    format!("{bits:#x}")
}

/// A whole register as the journal keeps it: `0x000000002000005f`.
pub fn register_text(value: u64) -> String {
    format!("{value:#018x}")
}

pub fn parse_hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim().strip_prefix("0x")?, 16).ok()
}

/// The field at an MSR path now (`0x1`), or why it cannot be read.
pub fn read_field(root: &Root, path: &str) -> Result<u64, String> {
    let (cpu, field) = parse_path(path).ok_or_else(|| format!("{path} is not an MSR field"))?;
    let msrs = Msrs::open(root, cpu)?;
    let v = msrs.read(cpu, &[field.reg]).remove(0)?;
    Ok(field.get(v))
}

/// Why a write failed, and whether a register may have changed.
#[derive(Debug)]
pub struct WriteError {
    pub touched: bool,
    pub why: String,
}

impl Msrs<'_> {
    /// Sets `field` to `bits` on every CPU of the domain `cpus`, each
    /// through its own device (live) or file (tree) by read-modify-write,
    /// then reads it back on every CPU. `on_write` is told each CPU just
    /// before its write. Returns the register value found on the first CPU.
    pub fn write_field(
        &self,
        cpus: &[u32],
        field: Field,
        bits: u64,
        on_write: &mut dyn FnMut(u32),
    ) -> Result<u64, WriteError> {
        let fail = |touched, why| WriteError { touched, why };
        let Some(&first) = cpus.first() else {
            return Err(fail(false, "no CPU to write".into()));
        };
        if bits > field.max() {
            return Err(fail(
                false,
                format!(
                    "{bits:#x} does not fit MSR {:#x}{}",
                    field.reg,
                    field.bits_text()
                ),
            ));
        }
        let mut befores = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            befores.push(
                self.read(cpu, &[field.reg])
                    .remove(0)
                    .map_err(|e| fail(false, e))?,
            );
        }
        // Apply plans only domains whose copies agree; a rollback or revert
        // may meet copies that differ (a write stopped midway): each is set.
        let differed = cpus
            .iter()
            .zip(&befores)
            .find(|(_, v)| field.get(**v) != field.get(befores[0]))
            .map(|(cpu, v)| {
                format!(
                    "; the domain's copies differed before the write ({:#x} on CPU {first}, {:#x} on CPU {cpu})",
                    field.get(befores[0]),
                    field.get(*v)
                )
            })
            .unwrap_or_default();
        let offset = match self.is_live() {
            true => field.reg as u64,
            false => capture_offset(field.reg),
        };
        let mut touched = false;
        for &cpu in cpus {
            // Read again: where CPUs share the copy, an earlier write already set it.
            let before = self
                .read(cpu, &[field.reg])
                .remove(0)
                .map_err(|e| fail(touched, e))?;
            let after = field.put(before, bits);
            if after == before {
                continue;
            }
            let file = self.open_for_write(cpu).map_err(|e| fail(touched, e))?;
            on_write(cpu);
            touched = true;
            file.write_all_at(&after.to_le_bytes(), offset)
                .map_err(|e| fail(true, self.refused_write(cpu, field.reg, &e)))?;
        }
        for &cpu in cpus {
            let now = self
                .read(cpu, &[field.reg])
                .remove(0)
                .map_err(|e| fail(touched, format!("reading it back on CPU {cpu}: {e}")))?;
            if field.get(now) != bits {
                return Err(fail(
                    touched,
                    format!(
                        "MSR {:#x}{} reads {:#x} on CPU {cpu} after writing {bits:#x} to CPUs {}{differed}",
                        field.reg,
                        field.bits_text(),
                        field.get(now),
                        crate::cpulist::CpuList::new(cpus.to_vec())
                    ),
                ));
            }
        }
        Ok(befores[0])
    }

    /// A write that failed once the device was open: EPERM there is the
    /// driver's filter or lockdown, not a missing capability (open checks that).
    fn refused_write(&self, cpu: u32, reg: u32, e: &std::io::Error) -> String {
        if e.raw_os_error() == Some(libc::EPERM) {
            let why = allow_writes(self.root)
                .or_else(|| lockdown(self.root))
                .unwrap_or_else(|| {
                    format!("the kernel refused it; see {ALLOW_WRITES} and /sys/kernel/security/lockdown")
                });
            return format!("MSR {reg:#x}: write refused (EPERM): {why}");
        }
        write_error(&device(cpu), cpu, reg, e)
    }

    /// Live: the msr driver's device only. In a tree: a regular file, never a
    /// device, never a symbolic link (`O_NOFOLLOW`, as whole files).
    fn open_for_write(&self, cpu: u32) -> Result<File, String> {
        let path = device(cpu);
        let shown = generic(&path, cpu);
        let fd = self
            .root
            .open_raw(&path, libc::O_WRONLY | libc::O_NOCTTY | libc::O_NOFOLLOW, 0)
            .map_err(|e| write_error(&path, cpu, 0, &e))?;
        if self.is_live() {
            let st = fstat(fd.as_raw_fd()).map_err(|e| format!("{shown}: {e}"))?;
            let major = libc::major(st.st_rdev);
            if st.st_mode & libc::S_IFMT != libc::S_IFCHR || major != MSR_MAJOR {
                return Err(format!(
                    "{shown} is not the msr driver's device (character major {MSR_MAJOR}): not written"
                ));
            }
        } else {
            check_regular(&shown, fd.as_raw_fd())?;
        }
        Ok(File::from(fd))
    }
}

fn fstat(fd: i32) -> std::io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn write_error(path: &str, cpu: u32, reg: u32, e: &std::io::Error) -> String {
    let shown = generic(path, cpu);
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => format!(
            "{shown}: permission denied (writing MSRs needs root with CAP_SYS_RAWIO, and no kernel lockdown)"
        ),
        Some(libc::EIO) => {
            format!("MSR {reg:#x}: the write faults (EIO: the CPU or the hypervisor refuses it)")
        }
        // The rule of whole files: never written through a symbolic link.
        Some(libc::ELOOP) => format!(
            "{shown} is a symbolic link: MSR files are written only as themselves, never through a link"
        ),
        _ => format!("{shown}: {e}"),
    }
}

/// The msr driver's write filter (`/sys/module/msr/parameters/allow_writes`,
/// arch/x86/kernel/msr.c since v5.9, `filter_write`): `off` makes every
/// write fail with EPERM; `on` and `default` let them through (`default`
/// logs "Write to unrecognized MSR"). `None` when writes may go through.
pub fn allow_writes(root: &Root) -> Option<String> {
    let text = root.read_string(ALLOW_WRITES).ok()?;
    (text.trim() == "off").then(|| {
        format!(
            "the msr driver refuses writes: {ALLOW_WRITES} is `off` (msr.allow_writes=off; \
             every write fails with EPERM, arch/x86/kernel/msr.c filter_write); \
             `echo on > {ALLOW_WRITES}` as root, or boot with msr.allow_writes=on, allows them"
        )
    })
}

const ALLOW_WRITES: &str = "/sys/module/msr/parameters/allow_writes";

/// Kernel lockdown (`/sys/kernel/security/lockdown`): `None` when writes are
/// allowed (`[none]`, or no lockdown file), else the reason they are not.
pub fn lockdown(root: &Root) -> Option<String> {
    let text = root.read_string("/sys/kernel/security/lockdown").ok()?;
    let mode = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))?
        .to_string();
    (mode != "none").then(|| {
        format!(
            "kernel lockdown is `{mode}` (/sys/kernel/security/lockdown): the kernel refuses MSR writes"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_change_only_their_bits() {
        let f = Field::new(0xe2, 2, 0);
        assert_eq!(f.mask(), 0b111);
        assert_eq!(f.put(0x1400_040b, 1), 0x1400_0409);
        assert_eq!(f.get(0x1400_040b), 3);
        let b = Field::bit(0x1fc, 1);
        assert_eq!(b.put(u64::MAX, 0), u64::MAX - 2);
        assert_eq!(Field::new(0x774, 15, 8).put(0, 0xff), 0xff00);
    }

    #[test]
    fn paths_round_trip_and_nothing_else_parses() {
        let f = Field::new(0x774, 7, 0);
        assert_eq!(path(12, f), "/dev/cpu/12/msr@0x774[7:0]");
        assert_eq!(parse_path("/dev/cpu/12/msr@0x774[7:0]"), Some((12, f)));
        for bad in [
            "/dev/cpu/12/msr",
            "/dev/cpu/x/msr@0x774[7:0]",
            "/dev/cpu/1/msr@0x774[0:7]",
            "/dev/cpu/1/msr@0x0774[7:0]",
            "/dev/cpu/1/msr@0x774[7:0]/x",
            "/etc/systemd/system/a@0x1.service",
            "/dev/cpu/01/msr@0x774[7:0]",
        ] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }
}
