//! Writing the registers inventory reads into a captured tree: one sparse
//! `dev/cpu/N/msr` per CPU and the index of what was read.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{Context, Result};

use super::{
    INDEX, INDEX_HEADER, Msrs, UNAVAILABLE, capture_offset, device, index_text,
    model::INVENTORY_REGISTERS,
};
use crate::root::Root;

/// Copies [`INVENTORY_REGISTERS`] of `cpus` (those inventory opened) from
/// `root` into `out`. Returns the number of files written: a register that
/// faulted is left out, and the index says which were read; when none can be
/// read at all, the index keeps the reason (CPU 0 stands in for the first
/// online CPU when inventory opened none).
pub fn mirror(root: &Root, out: &Path, cpus: &[u32]) -> Result<usize> {
    let idx = out.join(INDEX.trim_start_matches('/'));
    let msrs = match Msrs::open(root, cpus.first().copied().unwrap_or(0)) {
        Ok(m) => m,
        Err(why) => {
            std::fs::create_dir_all(idx.parent().unwrap())?;
            std::fs::write(&idx, format!("{INDEX_HEADER}\n{UNAVAILABLE} {why}\n"))
                .with_context(|| format!("writing {}", idx.display()))?;
            return Ok(0);
        }
    };
    let mut read: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut files = 0;
    for &cpu in cpus {
        let values: Vec<(u32, u64)> = INVENTORY_REGISTERS
            .iter()
            .zip(msrs.read(cpu, &INVENTORY_REGISTERS))
            .filter_map(|(&reg, v)| Some((reg, v.ok()?)))
            .collect();
        if values.is_empty() {
            continue;
        }
        let dst = out.join(device(cpu).trim_start_matches('/'));
        std::fs::create_dir_all(dst.parent().unwrap())?;
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&dst)
            .with_context(|| format!("creating {}", dst.display()))?;
        for (reg, value) in values {
            f.write_all_at(&value.to_le_bytes(), capture_offset(reg))
                .with_context(|| format!("writing {}", dst.display()))?;
            read.entry(reg).or_default().push(cpu);
        }
        files += 1;
    }
    if files > 0 {
        std::fs::write(&idx, index_text(&read))
            .with_context(|| format!("writing {}", idx.display()))?;
    }
    Ok(files)
}
