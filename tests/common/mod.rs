//! Shared test helpers: the real host captures in `../shared/corpus`, unpacked
//! once per machine into `target/corpus/<host>-<hash>/` and reused.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hostknob")
}

pub fn corpus_dir() -> PathBuf {
    if let Ok(d) = std::env::var("HOSTKNOB_CORPUS") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/hosts")
}

/// Every captured host's name, sorted.
pub fn corpus_hosts() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory ../shared/corpus/hosts")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".tar.gz")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// FNV-1a: enough to notice a changed tarball, no dependency needed.
fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The unpacked, read-only-by-convention tree of one captured host.
pub fn corpus_host(name: &str) -> PathBuf {
    let tarball = corpus_dir().join(format!("{name}.tar.gz"));
    let bytes = std::fs::read(&tarball).unwrap_or_else(|e| panic!("{}: {e}", tarball.display()));
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/corpus");
    let dest = cache.join(format!("{name}-{:016x}", fnv64(&bytes)));
    if dest.is_dir() {
        return dest;
    }
    std::fs::create_dir_all(&cache).unwrap();
    // Unpack beside, then rename: concurrent test processes never see half a tree.
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(&cache)
        .unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success(), "tar failed on {}", tarball.display());
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &dest).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(dest.is_dir(), "could not place {}", dest.display());
    }
    dest
}

/// A private, writable copy of a captured host (for tests that change files).
pub fn corpus_copy(name: &str) -> tempfile::TempDir {
    let src = corpus_host(name);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir()
        .unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    dir
}

pub fn expected(name: &str) -> serde_yaml::Value {
    let p = corpus_dir().join(format!("{name}.expected.yaml"));
    serde_yaml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

pub fn hostknob(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("HOSTKNOB_ROOT")
        .output()
        .unwrap()
}

pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "hostknob failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

// Probe tests' helpers.

/// Runs a probe that must succeed and returns its JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    // Global options go first: `--cmd` takes everything after it.
    let mut all = vec!["--format", "json"];
    all.extend(args);
    let out = hostknob(&all);
    assert!(
        out.status.success(),
        "hostknob {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// Runs a command that must fail with exit code 1; returns stderr's one line.
pub fn error(args: &[&str]) -> String {
    let out = hostknob(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hostknob {args:?} should fail with 1; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    err
}

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
