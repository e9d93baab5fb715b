//! Model-specific registers, read through the root seam.
//!
//! On the live host a register is 8 bytes read with `pread` at offset =
//! its address from `/dev/cpu/N/msr` (the `msr` driver, which hostknob never
//! loads). A capture holds them as regular sparse files, each register's 8
//! bytes little-endian at offset 8 × its address: the device's offset is a
//! register number, and at byte offset = address neighbours such as 0x770
//! and 0x774 (or 0x1ad and 0x1b0) would overlap. `/dev/cpu/msr-index` lists
//! which registers were captured for which CPUs: a hole in a sparse file
//! reads as zeros, and a register nobody read must never look like 0.
//! [`write`] changes one field of a register on one scope domain for the
//! MSR knob kinds; [`model`] says which CPU models have which bits.

pub mod capture;
pub mod model;
pub mod write;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::cpulist::CpuList;
use crate::root::{Root, is_absent};

/// What lists the captured registers in a tree.
pub const INDEX: &str = "/dev/cpu/msr-index";

/// The first line of [`INDEX`].
pub const INDEX_HEADER: &str = "# hostknob MSR capture: dev/cpu/N/msr holds each register listed here as 8 bytes, little-endian, at offset 8 x its address; lines are `<register> <CPU list>`";

/// The index line of a capture whose source had no readable MSRs.
pub const UNAVAILABLE: &str = "# unavailable at capture:";

/// Where register `reg` is in a captured `dev/cpu/N/msr`.
pub fn capture_offset(reg: u32) -> u64 {
    reg as u64 * 8
}

pub fn device(cpu: u32) -> String {
    format!("/dev/cpu/{cpu}/msr")
}

/// The read-only command that shows the same register (msr-tools).
pub fn rdmsr(cpu: u32, reg: u32) -> String {
    format!("rdmsr -p {cpu} {reg:#x}")
}

/// Where registers come from, once per root: the live device, or a capture's index.
pub struct Msrs<'r> {
    root: &'r Root,
    /// `None` on the live host.
    index: Option<BTreeMap<u32, CpuList>>,
}

/// A register read on one CPU, or why there is no value.
pub type Read = Result<u64, String>;

impl<'r> Msrs<'r> {
    /// The registers of `root`, or why none can be read at all (`first` is a
    /// CPU to look for: the live device's presence is checked on it).
    pub fn open(root: &'r Root, first: u32) -> Result<Msrs<'r>, String> {
        if root.is_live() {
            if !root.exists(&device(first)) {
                return Err(if root.exists("/sys/module/msr") {
                    format!(
                        "{} is missing although the msr driver is loaded",
                        device(first)
                    )
                } else {
                    format!(
                        "the msr module is not loaded, so {} is absent; hostknob never loads it (`modprobe msr` as root would)",
                        device(first)
                    )
                });
            }
            return Ok(Msrs { root, index: None });
        }
        let text = match root.read_string(INDEX) {
            Ok(t) => t,
            Err(e) if is_absent(&e) => {
                return Err(format!("the capture holds no MSRs (no {INDEX})"));
            }
            Err(e) => return Err(format!("{INDEX}: {e}")),
        };
        let possible = root
            .read_string("/sys/devices/system/cpu/possible")
            .ok()
            .and_then(|t| CpuList::parse(t.trim()).ok())
            .map_or(MAX_POSSIBLE, |l| l.len().max(1));
        let index = parse_index_capped(&text, possible)?;
        // A capture of a host whose registers could not be read keeps the reason.
        if index.is_empty()
            && let Some(why) = text.lines().find_map(|l| l.strip_prefix(UNAVAILABLE))
        {
            return Err(why.trim().to_string());
        }
        Ok(Msrs {
            root,
            index: Some(index),
        })
    }

    pub fn is_live(&self) -> bool {
        self.index.is_none()
    }

    /// `regs` on `cpu`, in order: one open, one `pread` per register.
    pub fn read(&self, cpu: u32, regs: &[u32]) -> Vec<Read> {
        let path = device(cpu);
        let file = match self.open_cpu(&path, cpu) {
            Ok(f) => f,
            Err(why) => return regs.iter().map(|_| Err(why.clone())).collect(),
        };
        regs.iter()
            .map(|&reg| self.read_one(&file, &path, cpu, reg))
            .collect()
    }

    fn open_cpu(&self, path: &str, cpu: u32) -> Result<File, String> {
        let path_n = generic(path, cpu);
        // In a tree, never open a device node: it could be a real one.
        if self.index.is_some() {
            let fd = self
                .root
                .open_raw(path, libc::O_PATH, 0)
                .map_err(|e| open_error(&path_n, &e))?;
            check_regular(&path_n, fd.as_raw_fd())?;
        }
        self.root
            .open_read(path)
            .map_err(|e| open_error(&path_n, &e))
    }

    /// Messages name no CPU, so that CPUs alike group together.
    fn read_one(&self, file: &File, path: &str, cpu: u32, reg: u32) -> Read {
        if let Some(index) = &self.index
            && !index.get(&reg).is_some_and(|cpus| cpus.contains(cpu))
        {
            return Err(format!("MSR {reg:#x} is not in the capture"));
        }
        let mut buf = [0u8; 8];
        let offset = match self.index {
            None => reg as u64,
            Some(_) => capture_offset(reg),
        };
        match file.read_at(&mut buf, offset) {
            Ok(8) => Ok(u64::from_le_bytes(buf)),
            Ok(n) => Err(format!(
                "MSR {reg:#x}: {n} bytes at its offset, expected 8 (a cut-short capture?)"
            )),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Err(format!(
                "MSR {reg:#x} faults (EIO: not implemented by this CPU, or refused by the hypervisor)"
            )),
            Err(e) => Err(format!(
                "reading MSR {reg:#x} from {}: {e}",
                generic(path, cpu)
            )),
        }
    }
}

/// `/dev/cpu/N/msr` for messages shared by CPUs.
fn generic(path: &str, cpu: u32) -> String {
    path.replace(&format!("/{cpu}/"), "/N/")
}

fn open_error(path: &str, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("{path}: permission denied (reading MSRs needs root, CAP_SYS_RAWIO)")
        }
        Some(libc::ENOENT) => format!("{path} is absent (CPU offline, or not captured)"),
        Some(libc::ENXIO) | Some(libc::EIO) => {
            format!("{path}: the CPU does not support MSRs ({e})")
        }
        _ => format!("{path}: {e}"),
    }
}

fn check_regular(path: &str, fd: i32) -> Result<(), String> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(format!("{path}: {}", std::io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!(
            "{path}: not a regular file; a captured tree holds MSRs as regular files, and device nodes in a tree are never opened"
        ));
    }
    Ok(())
}

/// The most registers an index may list: Linux's
/// arch/x86/include/asm/msr-index.h names fewer than a thousand, and a
/// capture holds only the few inventory reads.
pub const MAX_REGISTERS: usize = 1024;

/// The CPUs assumed possible when the tree does not say (the kernel's
/// NR_CPUS is at most 8192, arch/x86/Kconfig).
const MAX_POSSIBLE: usize = 8192;

/// `<register> <CPU list>` lines; `#` starts a comment.
pub fn parse_index(text: &str) -> Result<BTreeMap<u32, CpuList>, String> {
    parse_index_capped(text, MAX_POSSIBLE)
}

/// [`parse_index`], refusing more than [`MAX_REGISTERS`] registers or more
/// (register, CPU) entries than a host of `possible` CPUs can have; one pass.
pub fn parse_index_capped(text: &str, possible: usize) -> Result<BTreeMap<u32, CpuList>, String> {
    let mut index = BTreeMap::new();
    let mut entries = 0usize;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{INDEX}:{}: {why}: {line:?}", n + 1);
        let (reg, cpus) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("expected `<register> <CPU list>`"))?;
        let reg = reg
            .strip_prefix("0x")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| bad("the register is not a hex address such as 0x1fc"))?;
        let cpus = CpuList::parse(cpus.trim()).map_err(|e| bad(&e.to_string()))?;
        entries += cpus.len();
        if entries > MAX_REGISTERS * possible {
            return Err(bad(&format!(
                "more (register, CPU) entries than {MAX_REGISTERS} registers on {possible} possible CPUs"
            )));
        }
        if index.insert(reg, cpus).is_some() {
            return Err(bad("register listed twice"));
        }
        if index.len() > MAX_REGISTERS {
            return Err(bad(&format!(
                "more than {MAX_REGISTERS} registers: no host has that many (Linux's msr-index.h names fewer)"
            )));
        }
    }
    Ok(index)
}

/// The index text for `regs`: each register and the CPUs it was captured for.
pub fn index_text(regs: &BTreeMap<u32, Vec<u32>>) -> String {
    let mut out = format!("{INDEX_HEADER}\n");
    for (reg, cpus) in regs {
        out += &format!("{reg:#x} {}\n", CpuList::new(cpus.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_round_trips_and_names_bad_lines() {
        let regs = BTreeMap::from([(0x1fc, vec![0, 1, 2, 3]), (0xe2, vec![0, 2])]);
        let parsed = parse_index(&index_text(&regs)).unwrap();
        assert_eq!(parsed[&0x1fc].to_string(), "0-3");
        assert_eq!(parsed[&0xe2].to_string(), "0,2");
        let e = parse_index("0x1fc 0-3\n1fc 0\n").unwrap_err();
        assert!(
            e.contains("msr-index:2:") && e.contains("hex address"),
            "{e}"
        );
        let e = parse_index("0x1fc 0\n0x1fc 1\n").unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
    }
}
