//! Probe helpers: the checks every latency result must pass, percentiles
//! recomputed independently, the CSV that `--raw` writes.

pub fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// The checks every latency result must pass: n, ordered percentiles, a
/// mean inside the range, a histogram that counts every sample.
pub fn check_latency(v: &serde_json::Value, probe: &str, n: u64) {
    assert_eq!(v["probe"], probe);
    assert_eq!(u(v, "samples"), n);
    let p: Vec<u64> = ["min_ns", "p50_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns"]
        .iter()
        .map(|k| u(v, k))
        .collect();
    assert!(p[0] > 0, "min must be positive: {v}");
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {p:?}"
    );
    let mean = v["mean_ns"].as_f64().unwrap();
    assert!(
        mean >= p[0] as f64 && mean <= p[5] as f64,
        "mean {mean} outside {p:?}"
    );
    assert!(v["stdev_ns"].as_f64().unwrap() >= 0.0);
    if n > 1 && p[0] < p[5] {
        assert!(v["stdev_ns"].as_f64().unwrap() > 0.0);
    }
    let hist = v["histogram"].as_array().unwrap();
    let total: u64 = hist.iter().map(|b| u(b, "count")).sum();
    assert_eq!(total, n, "histogram counts");
    for b in hist {
        assert!(u(b, "lo_ns") < u(b, "hi_ns"));
    }
    assert!(u(&hist[0], "lo_ns") <= p[0] && p[5] < u(hist.last().unwrap(), "hi_ns"));
    assert!(v["settings"].is_object());
}

/// Nearest-rank percentile, written out again for cross-checks.
pub fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank - 1]
}

/// Reads a CSV written by --raw: header and rows of numbers (empty cells as None).
pub fn csv(path: &std::path::Path) -> (Vec<String>, Vec<Vec<Option<f64>>>) {
    let text = std::fs::read_to_string(path).expect("raw CSV");
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|f| f.parse().ok()).collect())
        .collect();
    (header, rows)
}
