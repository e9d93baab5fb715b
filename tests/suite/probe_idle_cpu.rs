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

/// utime + stime of `pid`, in seconds, from the kernel's own accounting.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 and 15 of proc(5), counted from the state (field 3).
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the C library.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    assert!(hz > 0);
    ticks as f64 / hz as f64
}

#[test]
fn a_busy_loop_is_measured_as_the_kernel_accounts_it() {
    // On a quiet host a busy loop uses one core (100%); on a shared one it gets
    // the scheduler's share (autogroups make nice irrelevant across sessions).
    // Either way the probe must agree with the kernel's own accounting of the
    // same process over the same span.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let (cpu0, t0) = (cpu_seconds(pid), std::time::Instant::now());
    let v = json(&[
        "probe",
        "idle-cpu",
        "--window",
        "1s",
        "--windows",
        "3",
        "--pid",
        &pid.to_string(),
    ]);
    let (cpu1, wall) = (cpu_seconds(pid), t0.elapsed().as_secs_f64());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(v["partial"], false);
    let w = windows(&v);
    assert_eq!(w.len(), 3);
    let mut secs = 0.0;
    let mut used = 0.0;
    for win in v["windows"].as_array().unwrap() {
        let s = win["seconds"].as_f64().unwrap();
        assert!((0.99..1.5).contains(&s), "{win}");
        secs += s;
        used += win["cpu_pct"].as_f64().unwrap() / 100.0 * s;
    }
    let probe_pct = 100.0 * used / secs;
    let kernel_pct = 100.0 * (cpu1 - cpu0) / wall;
    // The outer span is the probe's windows plus its start and exit (tens of ms).
    assert!(
        (probe_pct - kernel_pct).abs() <= 8.0,
        "probe {probe_pct:.1}% (windows {w:?}) vs kernel {kernel_pct:.1}% over {wall:.2} s"
    );
    let median = v["median_pct"].as_f64().unwrap();
    assert!(median > 0.0 && median <= 105.0, "median {median}% of {w:?}");
    let (min, max) = (
        v["min_pct"].as_f64().unwrap(),
        v["max_pct"].as_f64().unwrap(),
    );
    let mut sorted = w.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!((sorted[0], sorted[1], sorted[2]), (min, median, max));
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
