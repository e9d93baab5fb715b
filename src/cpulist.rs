//! CPU lists in the kernel's notation (`0-15,32-47`) and values grouped over
//! the CPUs that agree on them, as pepc prints them.

use std::fmt;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// A sorted set of CPU numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuList(Vec<u32>);

/// CPU numbers above this are refused as typos rather than allocated.
pub const MAX_CPU: u32 = 1 << 16;

impl CpuList {
    pub fn new(mut cpus: Vec<u32>) -> CpuList {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    /// Parses `0-3,8,10-11` (white space and a trailing newline allowed; empty
    /// is the empty set).
    pub fn parse(text: &str) -> Result<CpuList> {
        let mut cpus = Vec::new();
        for part in text.trim().split(',') {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                bail!("empty element in CPU list {:?}", text.trim());
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a, text)?, parse_cpu(b, text)?),
                None => {
                    let c = parse_cpu(part, text)?;
                    (c, c)
                }
            };
            if lo > hi {
                bail!("descending range {part:?} in CPU list {:?}", text.trim());
            }
            cpus.extend(lo..=hi);
        }
        Ok(CpuList::new(cpus))
    }

    /// Parses a hex CPU mask as old kernels write it (`00000000,00000202`:
    /// 32-bit words, most significant first).
    pub fn parse_mask(text: &str) -> Result<CpuList> {
        let mut cpus = Vec::new();
        let words: Vec<&str> = text.trim().split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            let bits = u32::from_str_radix(word.trim(), 16).map_err(|_| {
                anyhow::anyhow!("{word:?} is not a hex word in CPU mask {:?}", text.trim())
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
            "CPU {n} in CPU list {:?} is out of range (max {MAX_CPU})",
            whole.trim()
        ),
        Err(_) => bail!("{s:?} is not a CPU number in CPU list {:?}", whole.trim()),
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
    fn groups_by_value_in_cpu_order() {
        let g = group([(0, "a"), (1, "b"), (2, "a"), (3, "b"), (4, "c")]);
        assert_eq!(describe(&g), "0,2: a; 1,3: b; 4: c");
        let one = group((0..16).map(|c| (c, "performance")));
        assert_eq!(describe(&one), "performance");
        assert_eq!(one[0].cpus.to_string(), "0-15");
    }
}
