//! CPU lists in the kernel's notation (`0-15,32-47`) and values grouped over
//! the CPUs that agree on them, as pepc prints them.

use std::fmt;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// A sorted set of CPU numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuList(Vec<u32>);

/// The highest CPU number a list may name: the kernel's NR_CPUS is at most
/// 8192 (arch/x86/Kconfig `NR_CPUS_RANGE_END` with MAXSMP; arm64 and
/// powerpc stop lower), so a larger number is a typo or a hostile file.
pub const MAX_CPU: u32 = 8191;

impl CpuList {
    pub fn new(mut cpus: Vec<u32>) -> CpuList {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    /// Parses `0-3,8,10-11` (white space and a trailing newline allowed; empty
    /// is the empty set).
    pub fn parse(text: &str) -> Result<CpuList> {
        // Ranges are merged in a bitmap of every possible CPU, never
        // expanded one by one: `0-8191,` repeated a million times costs a
        // pass over the text, not a billion CPU numbers.
        let mut set = Bitmap::default();
        for part in text.trim().split(',') {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                bail!("empty element in CPU list {:?}", short(text));
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a, text)?, parse_cpu(b, text)?),
                None => {
                    let c = parse_cpu(part, text)?;
                    (c, c)
                }
            };
            if lo > hi {
                bail!("descending range {part:?} in CPU list {:?}", short(text));
            }
            set.insert(lo, hi);
        }
        Ok(CpuList(set.cpus()))
    }

    /// Parses a hex CPU mask as old kernels write it (`00000000,00000202`:
    /// 32-bit words, most significant first).
    pub fn parse_mask(text: &str) -> Result<CpuList> {
        let mut cpus = Vec::new();
        let words: Vec<&str> = text.trim().split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            let bits = u32::from_str_radix(word.trim(), 16).map_err(|_| {
                anyhow::anyhow!(
                    "{:?} is not a hex word in CPU mask {:?}",
                    short(word),
                    short(text)
                )
            })?;
            for b in 0..32 {
                if bits & (1 << b) != 0 {
                    let cpu = i as u32 * 32 + b;
                    if cpu > MAX_CPU {
                        bail!("CPU {cpu} in CPU mask is out of range (max {MAX_CPU})");
                    }
                    cpus.push(cpu);
                }
            }
        }
        Ok(CpuList::new(cpus))
    }

    /// The kernel's bitmap form (`tracing_cpumask`, tuned's `cpulist2hex`):
    /// 32-bit words, most significant first, each zero padded, commas between.
    pub fn to_mask(&self) -> String {
        let top = self.0.iter().max().copied().unwrap_or(0);
        let mut words = vec![0u32; top as usize / 32 + 1];
        for &c in &self.0 {
            words[c as usize / 32] |= 1 << (c % 32);
        }
        words
            .iter()
            .rev()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }
}

fn parse_cpu(s: &str, whole: &str) -> Result<u32> {
    let s = s.trim();
    match s.parse::<u32>() {
        Ok(n) if n <= MAX_CPU => Ok(n),
        Ok(n) => bail!(
            "CPU {n} in CPU list {:?} is out of range (max {MAX_CPU}: the kernel's NR_CPUS is at most 8192)",
            short(whole)
        ),
        Err(_) => bail!(
            "{:?} is not a CPU number in CPU list {:?}",
            short(s),
            short(whole)
        ),
    }
}

/// A list as an error message quotes it: its first 80 characters (a hostile
/// file can be megabytes long).
fn short(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &t[..at]),
        None => t.to_string(),
    }
}

/// One bit per possible CPU (0..=MAX_CPU).
struct Bitmap([u64; (MAX_CPU as usize + 1) / 64]);

impl Default for Bitmap {
    fn default() -> Bitmap {
        Bitmap([0; (MAX_CPU as usize + 1) / 64])
    }
}

impl Bitmap {
    /// Sets `lo..=hi` (both at most MAX_CPU) a word at a time.
    fn insert(&mut self, lo: u32, hi: u32) {
        let (lw, hw) = ((lo / 64) as usize, (hi / 64) as usize);
        for w in lw..=hw {
            let from = if w == lw { lo % 64 } else { 0 };
            let to = if w == hw { hi % 64 } else { 63 };
            let bits = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.0[w] |= bits;
        }
    }

    fn cpus(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (w, &word) in self.0.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                out.push(w as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        out
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl FromIterator<u32> for CpuList {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuList::new(iter.into_iter().collect())
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for CpuList {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CpuList".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A CPU list as the kernel writes it, e.g. `0-3,8`; empty for none."
        })
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuList::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Whether a file's bytes are a hex CPU mask as the kernel prints it
/// (`rps_cpus`, `xps_cpus`, an IRQ's `smp_affinity`, a workqueue's
/// `cpumask`): what people read of it is the CPU list (`mask_as_list`).
pub fn is_mask_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "rps_cpus" | "xps_cpus" | "smp_affinity" | "default_smp_affinity"
    ) || (name == "cpumask" && path.contains("workqueue"))
}

/// A mask's CPUs in the kernel's list notation, `none` for an empty mask;
/// `None` when the text is no mask.
pub fn mask_as_list(raw: &str) -> Option<String> {
    let l = CpuList::parse_mask(raw.trim()).ok()?;
    Some(if l.is_empty() {
        "none".into()
    } else {
        l.to_string()
    })
}

/// One value and the CPUs that have it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Group<T> {
    pub cpus: CpuList,
    pub value: T,
}

/// Groups `(cpu, value)` pairs by value, ordered by each group's first CPU.
pub fn group<T: PartialEq + Clone>(pairs: impl IntoIterator<Item = (u32, T)>) -> Vec<Group<T>> {
    let mut groups: Vec<(Vec<u32>, T)> = Vec::new();
    for (cpu, value) in pairs {
        match groups.iter_mut().find(|(_, v)| *v == value) {
            Some((cpus, _)) => cpus.push(cpu),
            None => groups.push((vec![cpu], value)),
        }
    }
    let mut out: Vec<Group<T>> = groups
        .into_iter()
        .map(|(cpus, value)| Group {
            cpus: CpuList::new(cpus),
            value,
        })
        .collect();
    out.sort_by_key(|g| g.cpus.first());
    out
}

/// `0-15: performance; 16-31: powersave`, or just the value when all agree.
pub fn describe<T: fmt::Display>(groups: &[Group<T>]) -> String {
    match groups {
        [] => String::new(),
        [one] => one.value.to_string(),
        many => many
            .iter()
            .map(|g| format!("{}: {}", g.cpus, g.value))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hex_masks_word_by_word() {
        assert_eq!(
            CpuList::parse_mask("00000000,00000202\n").unwrap(),
            CpuList::new(vec![1, 9])
        );
        assert_eq!(
            CpuList::parse_mask("00000001,80000000").unwrap(),
            CpuList::new(vec![31, 32])
        );
        assert!(CpuList::parse_mask("0000000g").is_err());
    }

    #[test]
    fn parses_and_prints_kernel_lists() {
        let l = CpuList::parse("0-3,8,10-11\n").unwrap();
        assert_eq!(l.as_slice(), &[0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(l.to_string(), "0-3,8,10-11");
        assert_eq!(CpuList::parse("").unwrap().len(), 0);
        assert_eq!(CpuList::parse("5").unwrap().to_string(), "5");
        assert_eq!(CpuList::parse("1,0,1").unwrap().to_string(), "0-1");
    }

    #[test]
    fn rejects_malformed_lists() {
        for bad in ["a", "3-1", "1,,2", "0-", "-1", "99999999"] {
            assert!(CpuList::parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn ranges_merge_without_expanding() {
        // Issue 50 item 6: 160 KB of `0-65536,` once expanded to 1 GB before
        // deduplication; a number past NR_CPUS is now refused at once, and a
        // repeated range in bounds costs nothing per repeat.
        let hostile = "0-65536,".repeat(20_000);
        let e = CpuList::parse(&hostile).unwrap_err().to_string();
        assert!(e.contains("out of range (max 8191") && e.len() < 300, "{e}");
        let repeated = "0-8191,".repeat(200_000) + "5";
        let all = CpuList::parse(&repeated).unwrap();
        assert_eq!((all.len(), all.to_string()), (8192, "0-8191".to_string()));
        assert!(CpuList::parse("8192").is_err());
        assert!(CpuList::parse_mask(&format!("1{}", ",00000000".repeat(256))).is_err());
        // The bitmap agrees with plain expansion on lists that cross words.
        let mut seed = 7u64;
        for _ in 0..200 {
            let mut text = Vec::new();
            let mut want = std::collections::BTreeSet::new();
            for _ in 0..(seed % 6 + 1) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let lo = ((seed >> 33) % 300) as u32;
                let hi = lo + ((seed >> 13) % 140) as u32;
                want.extend(lo..=hi);
                text.push(if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                });
            }
            let got = CpuList::parse(&text.join(",")).unwrap();
            assert_eq!(
                got.as_slice(),
                want.into_iter().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn groups_by_value_in_cpu_order() {
        let g = group([(0, "a"), (1, "b"), (2, "a"), (3, "b"), (4, "c")]);
        assert_eq!(describe(&g), "0,2: a; 1,3: b; 4: c");
        let one = group((0..16).map(|c| (c, "performance")));
        assert_eq!(describe(&one), "performance");
        assert_eq!(one[0].cpus.to_string(), "0-15");
    }
}
