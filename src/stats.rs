//! Statistics shared by every probe (and by `verify`): exact percentiles,
//! a log-linear histogram and the raw-sample CSV.
//!
//! Percentile rule (nearest rank): over the n samples sorted ascending, the
//! p-th percentile is the sample at 1-based rank `ceil(p/100 * n)`, and at
//! least rank 1. It is always a value that was measured, never interpolated:
//! with n = 4, p50 is the 2nd sample (the lower middle one) and p95, p99 and
//! p99.9 are the 4th; with n = 1000, p99.9 is the 999th. The rank is computed
//! in integers (p in thousandths of a percent), so boundaries are exact.

use std::fmt::Display;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// p in thousandths of a percent: 50% is 50_000, 99.9% is 99_900.
pub const P50: u32 = 50_000;
pub const P95: u32 = 95_000;
pub const P99: u32 = 99_000;
pub const P999: u32 = 99_900;

/// 0-based index into `n` sorted samples of the p-th percentile (p in
/// thousandths of a percent). `n` must be positive.
pub fn rank_index(n: usize, p_milli: u32) -> usize {
    assert!(n > 0, "percentile of no samples");
    let p = u128::from(p_milli.min(100_000));
    let rank = (p * n as u128).div_ceil(100_000).max(1);
    rank as usize - 1
}

/// The p-th percentile of samples already sorted ascending.
pub fn percentile_sorted<T: Copy>(sorted: &[T], p_milli: u32) -> T {
    sorted[rank_index(sorted.len(), p_milli)]
}

/// A latency distribution in nanoseconds. Field names are part of the JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub samples: usize,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Arithmetic mean, rounded to 0.1 ns.
    pub mean_ns: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 when n = 1), rounded to 0.1 ns.
    pub stdev_ns: f64,
}

impl Summary {
    /// `None` for no samples: there is no distribution to describe.
    pub fn from_ns(samples: &[u64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Summary::from_sorted(&sorted))
    }

    fn from_sorted(sorted: &[u64]) -> Summary {
        let n = sorted.len();
        let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
        let mean = sum as f64 / n as f64;
        let var = if n > 1 {
            sorted
                .iter()
                .map(|&v| (v as f64 - mean).powi(2))
                .sum::<f64>()
                / (n - 1) as f64
        } else {
            0.0
        };
        Summary {
            samples: n,
            min_ns: sorted[0],
            p50_ns: percentile_sorted(sorted, P50),
            p95_ns: percentile_sorted(sorted, P95),
            p99_ns: percentile_sorted(sorted, P99),
            p999_ns: percentile_sorted(sorted, P999),
            max_ns: sorted[n - 1],
            mean_ns: round1(mean),
            stdev_ns: round1(var.sqrt()),
        }
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The median (same nearest-rank rule) and range of real-valued samples, such
/// as per-window CPU percentages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Spread {
            median: percentile_sorted(&v, P50),
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// One histogram bucket: samples with `lo_ns <= v < hi_ns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

/// Log-linear buckets: linear steps of 10^k inside each decade [10^k, 10^(k+1))
/// (..., 10-20 µs, 20-30 µs, ..., 90-100 µs, 100-200 µs, ...), so every bucket
/// is at most 2x wide at its lower edge and 1.11x at its upper one, and the
/// edges are round numbers a person can read. Only non-empty buckets are kept.
pub fn histogram(samples: &[u64]) -> Vec<Bucket> {
    let mut map = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    for &v in samples {
        let (lo, hi) = bucket_of(v);
        map.entry(lo).or_insert((hi, 0)).1 += 1;
    }
    map.into_iter()
        .map(|(lo_ns, (hi_ns, count))| Bucket {
            lo_ns,
            hi_ns,
            count,
        })
        .collect()
}

/// The bucket `[lo, hi)` holding `v`.
pub fn bucket_of(v: u64) -> (u64, u64) {
    let mut step = 1u64;
    while v / step >= 10 {
        step *= 10;
    }
    let lo = v / step * step;
    (lo, lo.saturating_add(step))
}

/// Writes a CSV file: a header line, then one line per row. Fields are plain
/// numbers or names without commas, quotes or newlines; anything else is quoted.
pub fn write_csv<R, F>(path: &Path, header: &[&str], rows: R) -> Result<()>
where
    R: IntoIterator<Item = Vec<F>>,
    F: Display,
{
    let file = crate::root::create_output(path)
        .with_context(|| format!("--raw {}: cannot create", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let write = |w: &mut std::io::BufWriter<std::fs::File>| -> std::io::Result<()> {
        writeln!(w, "{}", header.join(","))?;
        for row in rows {
            let fields: Vec<String> = row.iter().map(|f| csv_field(&f.to_string())).collect();
            writeln!(w, "{}", fields.join(","))?;
        }
        w.flush()
    };
    write(&mut w).with_context(|| format!("--raw {}: cannot write", path.display()))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_is_every_percentile() {
        let s = Summary::from_ns(&[42]).unwrap();
        assert_eq!(
            (s.min_ns, s.p50_ns, s.p95_ns, s.p99_ns, s.p999_ns, s.max_ns),
            (42, 42, 42, 42, 42, 42)
        );
        assert_eq!((s.samples, s.mean_ns, s.stdev_ns), (1, 42.0, 0.0));
    }

    #[test]
    fn no_samples_no_summary() {
        assert!(Summary::from_ns(&[]).is_none());
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn nearest_rank_by_hand() {
        // n = 4, unsorted input: ranks ceil(0.5*4)=2, ceil(0.95*4)=4.
        let s = Summary::from_ns(&[40, 10, 30, 20]).unwrap();
        assert_eq!((s.min_ns, s.p50_ns, s.p95_ns, s.max_ns), (10, 20, 40, 40));
        // mean 25; squares of deviations 225+25+25+225 = 500; 500/3 = 166.67; sqrt = 12.9099
        assert_eq!(s.mean_ns, 25.0);
        assert_eq!(s.stdev_ns, 12.9);
        // n = 5: p50 = rank 3 (the true middle).
        assert_eq!(Summary::from_ns(&[5, 1, 4, 2, 3]).unwrap().p50_ns, 3);
    }

    #[test]
    fn rank_boundaries_are_exact() {
        // p50 of 100 is rank 50 exactly, not 51; of 101 it is rank 51.
        assert_eq!(rank_index(100, P50), 49);
        assert_eq!(rank_index(101, P50), 50);
        // p99 of 100 is rank 99; of 101, ceil(99.99) = 100.
        assert_eq!(rank_index(100, P99), 98);
        assert_eq!(rank_index(101, P99), 99);
        // p99.9 of 1000 is rank 999; of 1001, ceil(999.999) = 1000; of 999, ceil(998.001) = 999.
        assert_eq!(rank_index(1000, P999), 998);
        assert_eq!(rank_index(1001, P999), 999);
        assert_eq!(rank_index(999, P999), 998);
        // p0 is the minimum (rank 1), p100 the maximum.
        assert_eq!(rank_index(7, 0), 0);
        assert_eq!(rank_index(7, 100_000), 6);
        // p95 of 20 is rank 19 exactly (0.95 * 20 = 19.0).
        assert_eq!(rank_index(20, P95), 18);
    }

    #[test]
    fn ties_and_tails() {
        let v: Vec<u64> = (1..=1000).collect();
        let s = Summary::from_ns(&v).unwrap();
        assert_eq!(
            (s.p50_ns, s.p95_ns, s.p99_ns, s.p999_ns),
            (500, 950, 990, 999)
        );
        assert_eq!(s.mean_ns, 500.5);
        let ties = Summary::from_ns(&[7, 7, 7, 7, 9]).unwrap();
        assert_eq!((ties.min_ns, ties.p50_ns, ties.p95_ns), (7, 7, 9));
        // Population of equal values: stdev 0.
        assert_eq!(Summary::from_ns(&[3, 3, 3]).unwrap().stdev_ns, 0.0);
    }

    #[test]
    fn large_values_do_not_overflow_the_mean() {
        let s = Summary::from_ns(&[u64::MAX, u64::MAX]).unwrap();
        assert_eq!(s.p50_ns, u64::MAX);
        assert!(s.mean_ns > 1.8e19);
    }

    #[test]
    fn spread_uses_the_same_rule() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0]).unwrap();
        assert_eq!(s.median, 1.0);
    }

    #[test]
    fn histogram_buckets_are_log_linear() {
        assert_eq!(bucket_of(0), (0, 1));
        assert_eq!(bucket_of(9), (9, 10));
        assert_eq!(bucket_of(10), (10, 20));
        assert_eq!(bucket_of(99), (90, 100));
        assert_eq!(bucket_of(100), (100, 200));
        assert_eq!(bucket_of(52_345), (50_000, 60_000));
        assert_eq!(bucket_of(u64::MAX).1, u64::MAX);
        let h = histogram(&[12, 15, 19, 20, 250, 12]);
        assert_eq!(
            h,
            vec![
                Bucket {
                    lo_ns: 10,
                    hi_ns: 20,
                    count: 4
                },
                Bucket {
                    lo_ns: 20,
                    hi_ns: 30,
                    count: 1
                },
                Bucket {
                    lo_ns: 200,
                    hi_ns: 300,
                    count: 1
                },
            ]
        );
        assert_eq!(h.iter().map(|b| b.count).sum::<u64>(), 6);
    }

    #[test]
    fn csv_has_header_and_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("raw.csv");
        write_csv(&p, &["i", "name"], vec![vec!["0", "a"], vec!["1", "b,c"]]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "i,name\n0,a\n1,\"b,c\"\n"
        );
        let err = write_csv(
            &dir.path().join("no/such/dir.csv"),
            &["i"],
            Vec::<Vec<u8>>::new(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("--raw"), "{err:#}");
    }
}
