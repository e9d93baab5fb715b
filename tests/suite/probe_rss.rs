//! `probe rss`: a spawned process's allocation seen growing and shrinking,
//! and the in-process jemalloc burst with background_thread off and on.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const CHILD_ENV: &str = "HOSTKNOB_TEST_RSS_CHILD";
const MIB: usize = 1 << 20;

/// Not a test on its own: the body of the child process that
/// `sees_a_process_grow_and_shrink` starts (this test binary, run again with
/// CHILD_ENV set). It waits, allocates and touches 96 MiB, holds it, frees it
/// (the system allocator unmaps blocks this large at once), and idles.
#[test]
fn rss_child_process() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    std::thread::sleep(Duration::from_millis(1000));
    let block = vec![1u8; 96 * MIB];
    std::thread::sleep(Duration::from_millis(1500));
    drop(std::hint::black_box(block));
    std::thread::sleep(Duration::from_secs(30));
}

fn kb(v: &serde_json::Value, point: &str, field: &str) -> i64 {
    v["decay"][point][field].as_i64().unwrap()
}

#[test]
fn sees_a_process_grow_and_shrink() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "probe_rss::rss_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let v = json(&["probe", "rss", "--pid", &pid, "--duration", "4s"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        (v["mode"].as_str(), v["partial"].as_bool()),
        (Some("pid"), Some(false))
    );
    let series = v["series"].as_array().unwrap();
    // 2 Hz over 4 s: samples at 0, 0.5, ..., 4 s.
    assert!((8..=9).contains(&series.len()), "{}", series.len());
    let growth = kb(&v, "peak", "rss_kb") - kb(&v, "anchor", "rss_kb");
    assert!(growth >= 90 * 1024, "peak grew only {growth} kB");
    assert_eq!(
        kb(&v, "peak", "residual_kb"),
        v["decay"]["growth_kb"].as_i64().unwrap()
    );
    let left = kb(&v, "end", "rss_kb") - kb(&v, "anchor", "rss_kb");
    assert!(left < 16 * 1024, "{left} kB still resident at the end");
    // VmHWM keeps the peak; the kernel's RSS counters are per-CPU batched,
    // so it may differ from a sampled VmRSS by a few hundred kB.
    let hwm = v["decay"]["hwm_kb"].as_i64().unwrap();
    assert!(hwm >= kb(&v, "peak", "rss_kb") - 1024, "VmHWM {hwm} kB");
    let peak_t = v["decay"]["peak"]["t_s"].as_f64().unwrap();
    assert!((0.9..=3.5).contains(&peak_t), "peak at {peak_t} s");
    for s in series {
        let (rss, lazy) = (
            s["rss_kb"].as_u64().unwrap(),
            s["lazyfree_kb"].as_u64().unwrap(),
        );
        assert_eq!(s["corrected_kb"].as_u64().unwrap(), rss - lazy);
        assert!(s["pss_kb"].as_u64().unwrap() > 0);
    }
}

#[test]
fn self_burst_reads_back_what_it_set() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("rss.csv");
    let v = json(&[
        "probe",
        "rss",
        "--self-burst",
        "--duration",
        "1s",
        "--burst-mib",
        "24",
        "--threads",
        "2",
        "--raw",
        raw.to_str().unwrap(),
    ]);
    assert_eq!(v["mode"], "self-burst");
    let legs = v["legs"].as_array().unwrap();
    assert_eq!(legs.len(), 2);
    for (leg, on) in legs.iter().zip([false, true]) {
        assert_eq!(leg["background_thread_set"], on);
        assert_eq!(leg["background_thread_read_back"], on);
        // The burst went through jemalloc and was seen in RSS.
        assert!(leg["jemalloc_allocated_growth_kb"].as_u64().unwrap() >= 24 * 1024);
        assert!(leg["allocated_bytes"].as_u64().unwrap() >= 24 * MIB as u64);
        assert!(
            leg["decay"]["growth_kb"].as_i64().unwrap() >= 16 * 1024,
            "{leg}"
        );
        assert!(leg["decay"]["anchor"]["t_s"].as_f64().unwrap() <= 0.0);
    }
    assert_eq!(v["background_thread_restored"], false);
    let (header, rows) = csv(&raw);
    assert_eq!(header[0], "background_thread");
    assert_eq!(rows.len(), 6, "3 samples per 1 s leg");
}

#[test]
fn a_missing_or_vanishing_pid_is_reported() {
    let e = error(&["probe", "rss", "--pid", "999999", "--duration", "1s"]);
    assert_eq!(
        e,
        "hostknob: --pid 999999: no such process (/proc/999999/stat)"
    );
    let mut child = Command::new("sleep").arg("1").spawn().unwrap();
    let pid = child.id().to_string();
    let reaper = std::thread::spawn(move || child.wait().unwrap());
    let out = hostknob(&[
        "probe",
        "rss",
        "--pid",
        &pid,
        "--duration",
        "3s",
        "--format",
        "json",
    ]);
    reaper.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["partial"], true);
    assert!(!v["series"].as_array().unwrap().is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--pid {pid}: process {pid} exited after")),
        "{err}"
    );
}
