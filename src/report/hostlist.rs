//! Host lists as people read them at fleet scale: `web-[001-040,042], db-1`
//! (the notation of Slurm's and pdsh's host lists).

use std::collections::BTreeMap;

/// A name split around its last run of digits.
struct Numbered<'a> {
    prefix: &'a str,
    digits: &'a str,
    suffix: &'a str,
}

/// The number is the last one in the first DNS label (`web-001.dc2.example`
/// is host 1 of `web-*.dc2.example`), else the last one in the name.
fn split(name: &str) -> Option<Numbered<'_>> {
    let bytes = name.as_bytes();
    let label = name.find('.').unwrap_or(name.len());
    let end = bytes[..label]
        .iter()
        .rposition(u8::is_ascii_digit)
        .or_else(|| bytes.iter().rposition(u8::is_ascii_digit))?
        + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    // Numbers beyond u64 stay as they are.
    if end - start > 18 {
        return None;
    }
    Some(Numbered {
        prefix: &name[..start],
        digits: &name[start..end],
        suffix: &name[end..],
    })
}

/// Names with a common prefix and suffix and numbers in between, runs of
/// consecutive numbers as `a-b`. Zero-padded numbers (`007`) keep their
/// width and group with numbers of that width; others group unpadded.
/// Names without a number, and clashing entries (`web-1 (a.json)`), stay
/// whole. The order: by prefix, suffix, then number.
pub fn compress(hosts: &[String]) -> String {
    // (prefix, suffix, width or 0 for unpadded) -> numbers
    let mut series: BTreeMap<(&str, &str, usize), Vec<u64>> = BTreeMap::new();
    let mut plain: Vec<&str> = Vec::new();
    let parsed: Vec<(&str, Option<Numbered>)> = hosts
        .iter()
        .map(|h| (h.as_str(), split(h).filter(|_| !h.contains(' '))))
        .collect();
    let padded: std::collections::BTreeSet<(&str, &str, usize)> = parsed
        .iter()
        .filter_map(|(_, n)| n.as_ref())
        .filter(|n| n.digits.len() > 1 && n.digits.starts_with('0'))
        .map(|n| (n.prefix, n.suffix, n.digits.len()))
        .collect();
    for (name, n) in &parsed {
        let Some(n) = n else {
            plain.push(name);
            continue;
        };
        let key = (n.prefix, n.suffix, n.digits.len());
        let width = if padded.contains(&key) { key.2 } else { 0 };
        let value: u64 = n.digits.parse().unwrap_or(0);
        series
            .entry((n.prefix, n.suffix, width))
            .or_default()
            .push(value);
    }
    let mut parts: Vec<(String, String, String)> = Vec::new();
    for ((prefix, suffix, width), mut nums) in series {
        nums.sort_unstable();
        nums.dedup();
        let fmt = |v: u64| format!("{v:0width$}");
        if let [one] = nums.as_slice() {
            parts.push((
                prefix.to_string(),
                suffix.to_string(),
                format!("{prefix}{}{suffix}", fmt(*one)),
            ));
            continue;
        }
        let mut runs = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            runs.push(if i == j {
                fmt(nums[i])
            } else {
                format!("{}-{}", fmt(nums[i]), fmt(nums[j]))
            });
            i = j + 1;
        }
        parts.push((
            prefix.to_string(),
            suffix.to_string(),
            format!("{prefix}[{}]{suffix}", runs.join(",")),
        ));
    }
    parts.extend(
        plain
            .into_iter()
            .map(|p| (p.to_string(), String::new(), p.to_string())),
    );
    parts.sort();
    parts
        .into_iter()
        .map(|(_, _, text)| text)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(names: &[&str]) -> String {
        compress(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn runs_are_compressed_and_widths_kept() {
        let web: Vec<String> = (1..=40).map(|i| format!("web-{i:03}")).collect();
        assert_eq!(compress(&web), "web-[001-040]");
        assert_eq!(
            c(&[
                "web-003", "web-001", "web-002", "web-007", "db-1", "db-2", "lb"
            ]),
            "db-[1-2], lb, web-[001-003,007]"
        );
        // Unpadded numbers of different lengths are one series; 100 joins the padded width.
        assert_eq!(c(&["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(c(&["web-099", "web-100"]), "web-[099-100]");
        assert_eq!(c(&["r1.dc2", "r2.dc2", "r1.dc3"]), "r[1-2].dc2, r1.dc3");
        assert_eq!(c(&["a.x1", "a.x2"]), "a.x[1-2]");
        assert_eq!(c(&["solo7"]), "solo7");
        assert_eq!(
            c(&["web-1 (a.json)", "web-1 (b.json)"]),
            "web-1 (a.json), web-1 (b.json)"
        );
        assert_eq!(c(&[]), "");
    }
}
