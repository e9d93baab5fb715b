//! Writing the registers inventory reads into a captured tree: one sparse
//! `dev/cpu/N/msr` per CPU and the index of what was read.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{Context, Result};

use super::{INDEX, Msrs, capture_offset, device, index_text, model::INVENTORY_REGISTERS};
use crate::root::Root;

/// Copies [`INVENTORY_REGISTERS`] of `cpus` from `root` into `out`. Returns
/// the number of files written (none when no register could be read: a
/// register that faulted is left out, and the index says which were read).
pub fn mirror(root: &Root, out: &Path, cpus: &[u32]) -> Result<usize> {
    let Some(&first) = cpus.first() else {
        return Ok(0);
    };
    let Ok(msrs) = Msrs::open(root, first) else {
        return Ok(0);
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
        let idx = out.join(INDEX.trim_start_matches('/'));
        std::fs::write(&idx, index_text(&read))
            .with_context(|| format!("writing {}", idx.display()))?;
    }
    Ok(files)
}
