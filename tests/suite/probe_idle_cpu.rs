//! `probe idle-cpu` against spawned processes whose CPU use is known.

use crate::support::*;

fn windows(v: &serde_json::Value) -> Vec<f64> {
    v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["cpu_pct"].as_f64().unwrap())
        .collect()
}

#[test]
fn a_busy_loop_uses_one_core() {
    // The host is shared: at nice 0 a busy loop gets less than a core while
    // other work runs. At nice -20 (root only) it keeps one, so 100% is the
    // true answer the probe must find.
    let v = json(&[
        "probe",
        "idle-cpu",
        "--window",
        "1s",
        "--windows",
        "3",
        "--cmd",
        "nice",
        "-n",
        "-20",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    assert_eq!(v["partial"], false);
    let w = windows(&v);
    assert_eq!(w.len(), 3);
    let median = v["median_pct"].as_f64().unwrap();
    assert!(
        (85.0..=115.0).contains(&median),
        "median {median}% of {w:?}"
    );
    let (min, max) = (
        v["min_pct"].as_f64().unwrap(),
        v["max_pct"].as_f64().unwrap(),
    );
    assert!(min <= median && median <= max);
    let mut sorted = w.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!((sorted[0], sorted[1], sorted[2]), (min, median, max));
    for win in v["windows"].as_array().unwrap() {
        let secs = win["seconds"].as_f64().unwrap();
        assert!((0.99..1.5).contains(&secs), "{win}");
    }
}

#[test]
fn a_sleeping_process_uses_almost_nothing() {
    let v = json(&[
        "probe",
        "idle-cpu",
        "--window",
        "1s",
        "--windows",
        "3",
        "--cmd",
        "sleep",
        "30",
    ]);
    assert_eq!(windows(&v).len(), 3);
    let median = v["median_pct"].as_f64().unwrap();
    assert!(median < 5.0, "{median}");
    assert!(v["max_pct"].as_f64().unwrap() < 5.0);
    assert_eq!(v["command"][0], "sleep");
}

#[test]
fn a_pid_is_measured_and_left_running() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let v = json(&[
        "probe",
        "idle-cpu",
        "--pid",
        &pid,
        "--window",
        "300ms",
        "--windows",
        "2",
    ]);
    assert_eq!(v["pid"].to_string(), pid);
    assert_eq!(windows(&v).len(), 2);
    // Only what hostknob started is killed.
    assert!(child.try_wait().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_missing_pid_is_named() {
    let e = error(&["probe", "idle-cpu", "--pid", "999999", "--window", "1s"]);
    assert_eq!(
        e,
        "hostknob: --pid 999999: no such process (/proc/999999/stat)"
    );
}

#[test]
fn a_process_that_exits_gives_a_flagged_partial_result() {
    let out = hostknob(&[
        "probe",
        "idle-cpu",
        "--window",
        "1s",
        "--windows",
        "3",
        "--format",
        "json",
        "--cmd",
        "sleep",
        "1.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["partial"], true);
    assert_eq!(windows(&v).len(), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.trim()
            .ends_with("exited during window 2 of 3; the result is partial"),
        "{err}"
    );
    assert_eq!(
        v["note"].as_str().unwrap(),
        err.trim().trim_start_matches("hostknob: ")
    );
}
