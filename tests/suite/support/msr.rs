//! pepc's MSR dumps (`tests/corpus/msr/<host>.msr.txt.gz`) as a captured
//! tree holds them: `dev/cpu/N/msr` regular sparse files with each register's
//! 8 bytes, little-endian, at offset 8 x its address, and `dev/cpu/msr-index` naming
//! the registers present (a hole reads as zeros, so the index says what was
//! captured). Written here independently of hostknob's own code.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One dump: register -> CPU -> value.
pub type Dump = BTreeMap<u32, BTreeMap<u32, u64>>;

pub fn msr_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/msr")
}

pub fn msr_dump_path(host: &str) -> PathBuf {
    msr_dir().join(format!("{host}.msr.txt.gz"))
}

/// The hosts with an MSR dump, sorted.
pub fn msr_hosts() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(msr_dir())
        .expect("tests/corpus/msr")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".msr.txt.gz").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// The dump's text (gunzip by the `gzip` program, as the corpus unpacks with tar).
pub fn msr_dump_text(host: &str) -> Option<String> {
    let path = msr_dump_path(host);
    if !path.exists() {
        return None;
    }
    let mut child = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip runs");
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "gzip -dc {}",
        path.display()
    );
    Some(text)
}

/// `<hex reg>:<cpu>|<hex value> ...` lines; `#` lines are comments.
pub fn parse_dump(text: &str) -> Dump {
    let mut dump = Dump::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (reg, rest) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("dump line {}: no `:`", n + 1));
        let reg = u32::from_str_radix(reg, 16).unwrap();
        let cpus = dump.entry(reg).or_default();
        for pair in rest.split_whitespace() {
            let (cpu, value) = pair.split_once('|').unwrap();
            cpus.insert(
                cpu.parse().unwrap(),
                u64::from_str_radix(value, 16).unwrap(),
            );
        }
    }
    dump
}

pub fn msr_dump(host: &str) -> Option<Dump> {
    msr_dump_text(host).map(|t| parse_dump(&t))
}

/// Writes `dump` into `tree` as sparse `dev/cpu/N/msr` files and the index.
pub fn materialize_msrs(tree: &Path, dump: &Dump) {
    let mut per_cpu: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    for (reg, cpus) in dump {
        for (cpu, value) in cpus {
            per_cpu.entry(*cpu).or_default().push((*reg, *value));
        }
    }
    for (cpu, regs) in &per_cpu {
        let dir = tree.join(format!("dev/cpu/{cpu}"));
        std::fs::create_dir_all(&dir).unwrap();
        let f = std::fs::File::create(dir.join("msr")).unwrap();
        for (reg, value) in regs {
            f.write_all_at(&value.to_le_bytes(), *reg as u64 * 8)
                .unwrap();
        }
    }
    let mut index = String::from(
        "# hostknob MSR capture: dev/cpu/N/msr holds each register listed here as 8 bytes, \
         little-endian, at offset 8 x its address; lines are `<register> <CPU list>`\n",
    );
    for (reg, cpus) in dump {
        let list: Vec<String> = cpus.keys().map(|c| c.to_string()).collect();
        index += &format!("{reg:#x} {}\n", list.join(","));
    }
    std::fs::write(tree.join("dev/cpu/msr-index"), index).unwrap();
}
