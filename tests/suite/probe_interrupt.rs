//! Ctrl-C stops a probe in the middle of a long idle gap, a probe so
//! stopped prints the samples it has, marked partial, and progress is drawn
//! only on a terminal. Real runs of the binary on the live host; the
//! probes here hold no PM QoS and change nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Starts `hostknob ARGS`, sends SIGINT after 300 ms, and returns the exit
/// code, stdout, stderr and how long it took to end after the signal.
fn interrupt(args: &[&str]) -> (Option<i32>, String, String, Duration) {
    signal_after(args, Duration::from_millis(300), libc::SIGINT)
}

/// Starts `hostknob ARGS`, sends `sig` after `after`, and returns as
/// [`interrupt`] does.
fn signal_after(
    args: &[&str],
    after: Duration,
    sig: libc::c_int,
) -> (Option<i32>, String, String, Duration) {
    let child = hostknob_command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let sent = Instant::now();
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let pid = child.id();
    // Wait on another thread so a probe that does not stop fails the test
    // instead of hanging it (it is killed after 10 s).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()).unwrap());
    let out = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{args:?}: still running 10 s after SIGINT");
        }
    };
    (
        out.status.code(),
        stdout(&out),
        stderr(&out),
        sent.elapsed(),
    )
}

#[test]
fn ctrl_c_stops_a_probe_in_a_long_idle_gap() {
    // idle-cpu samples this test's own process (rss --pid, which always
    // has its first sample, is in the test of partial results below).
    let me = std::process::id().to_string();
    for (name, args) in [
        (
            "wakeup",
            &[
                "probe",
                "wakeup",
                "--samples",
                "3",
                "--gap-us",
                "10000000..10000000",
            ][..],
        ),
        (
            "rpc",
            &[
                "probe",
                "rpc",
                "--samples",
                "3",
                "--gap-us",
                "10000000..10000000",
            ],
        ),
        (
            "timer",
            &["probe", "timer", "--interval", "10s", "--loops", "3"],
        ),
        (
            "idle-cpu",
            &["probe", "idle-cpu", "--pid", &me, "--window", "10s"],
        ),
    ] {
        let (code, out, err, took) = interrupt(args);
        assert_eq!(code, Some(130), "{name}: {err}");
        assert!(
            took < Duration::from_secs(1),
            "{name}: ended {took:?} after SIGINT"
        );
        assert!(
            err.contains(&format!(
                "probe {name}: interrupted by SIGINT: nothing is reported"
            )),
            "{name}: {err}"
        );
        assert!(out.is_empty(), "{name}: printed a result: {out}");
    }
    // Run by hostknob-jemalloc, which the signal is passed on to: it prints
    // the leg under way, cut short, and hostknob passes it on marked partial.
    let (code, out, err, took) = interrupt(&[
        "probe",
        "rss",
        "--self-burst",
        "--burst-mib",
        "8",
        "--duration",
        "10s",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(1), "ended {took:?} after SIGINT");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(
        (&v["partial"], &v["interrupted"]),
        (&true.into(), &"SIGINT".into()),
        "{v}"
    );
    let legs = v["legs"].as_array().unwrap();
    assert_eq!(legs.len(), 1, "the second leg never started: {v}");
    let series = legs[0]["series"].as_array().unwrap();
    assert!(
        !series.is_empty() && series.last().unwrap()["t_ms"].as_i64().unwrap() < 10_000,
        "{v}"
    );
    assert!(
        err.contains("probe rss: interrupted by SIGINT after 1 of 2 legs"),
        "{err}"
    );
    // The helper this test started (its arguments are this test's) is gone.
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| {
            c.contains("hostknob-jemalloc --burst-mib 8 ") && c.contains("--duration-ms 10000")
        })
        .collect();
    assert!(left.is_empty(), "hostknob-jemalloc left running: {left:?}");
}

/// A probe of about 2 s: long enough that progress shows.
const TIMER: &str = "probe timer --interval 50ms --loops 40";

#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let args: Vec<&str> = TIMER.split(' ').chain(["--format", "json"]).collect();
    let o = hostknob(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "",
        "nothing on stderr but a terminal's progress"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["samples"], 40);
}

/// Runs `hostknob ARGS` with stderr on a pseudo-terminal (script(1)) and
/// stdout to a file; returns what the terminal showed and stdout.
fn on_a_terminal(args: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let line = format!("{} {args} --format json > {}", bin(), json.display());
    let mut c = Command::new("script");
    c.args(["-qec", &line, "/dev/null"]);
    isolate(&mut c);
    let o = c.output().expect("script(1) runs");
    assert!(o.status.success(), "{}", stderr(&o));
    (stdout(&o), std::fs::read_to_string(json).unwrap())
}

#[test]
fn a_probe_on_a_terminal_shows_progress_unless_quiet() {
    let (tty, json) = on_a_terminal(TIMER);
    assert!(tty.contains("timer") && tty.contains("/40"), "{tty:?}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["samples"], 40, "the result is on stdout as before");
    let (tty, _) = on_a_terminal(&format!("{TIMER} --quiet"));
    assert!(!tty.contains("/40"), "--quiet draws nothing: {tty:?}");
}

/// The samples `--raw` wrote: column `col` of each row after the header.
fn raw_column(path: &std::path::Path, col: usize) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
        .collect()
}

/// Nearest-rank percentile (p in thousandths of a percent), as the summary
/// is documented to compute it.
fn nearest_rank(sorted: &[u64], p_milli: u64) -> u64 {
    let rank = (p_milli * sorted.len() as u64).div_ceil(100_000).max(1);
    sorted[rank as usize - 1]
}

#[test]
fn an_interrupted_latency_probe_prints_the_samples_it_has_marked_partial() {
    let dir = tempfile::tempdir().unwrap();
    // 1000 samples 5-10 ms apart: about 7 s, cut after 700 ms.
    for (name, line, raw_col) in [
        (
            "wakeup",
            "probe wakeup --samples 1000 --gap-us 5000..10000",
            2,
        ),
        ("timer", "probe timer --interval 7ms --loops 1000", 1),
        ("rpc", "probe rpc --samples 1000 --gap-us 5000..10000", 2),
    ] {
        let raw = dir.path().join(format!("{name}.csv"));
        let raw_s = raw.to_str().unwrap();
        let args: Vec<&str> = line
            .split(' ')
            .chain(["--format", "json", "--raw", raw_s])
            .collect();
        let (code, out, err, _) = signal_after(&args, Duration::from_millis(700), libc::SIGINT);
        assert_eq!(code, Some(130), "{name}: {err}");
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out:?}"));
        assert_eq!(v["partial"], true, "{name}: {v}");
        assert_eq!(v["interrupted"], "SIGINT", "{name}: {v}");
        let n = v["samples"].as_u64().unwrap();
        assert!(n > 0 && n < 1000, "{name}: {n} samples");
        assert!(
            err.contains(&format!(
                "probe {name}: interrupted by SIGINT after {n} of 1000 samples: the result printed is PARTIAL"
            )),
            "{name}: {err}"
        );
        // The summary is of exactly the samples taken, which --raw holds.
        let mut samples = raw_column(&raw, raw_col);
        samples.sort_unstable();
        assert_eq!(samples.len() as u64, n, "{name}");
        assert_eq!(v["min_ns"], samples[0], "{name}");
        assert_eq!(v["max_ns"], *samples.last().unwrap(), "{name}");
        for (key, p) in [("p50_ns", 50_000), ("p99_ns", 99_000)] {
            assert_eq!(v[key], nearest_rank(&samples, p), "{name}: {key}");
        }
        let counted: u64 = v["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(counted, n, "{name}: the histogram holds the samples taken");
    }
}

#[test]
fn an_interrupted_probe_table_says_partial_and_sigterm_exits_143() {
    let (code, out, err, _) = signal_after(
        &["probe", "timer", "--interval", "7ms", "--loops", "1000"],
        Duration::from_millis(500),
        libc::SIGTERM,
    );
    assert_eq!(code, Some(128 + 15), "{err}");
    let first = out.lines().next().unwrap_or_default();
    let n: u64 = first
        .strip_prefix("partial: interrupted after ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no partial line first: {out}"));
    assert!(n > 0 && n < 1000, "{out}");
    assert!(
        first.contains(&format!("after {n} of 1000 samples (SIGTERM)")),
        "{first}"
    );
    assert!(out.contains("Timer lateness"), "the table follows: {out}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    // A complete run has no such line.
    let o = hostknob(&["probe", "timer", "--interval", "1ms", "--loops", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("partial"), "{}", stdout(&o));
}

#[test]
fn interrupted_idle_cpu_and_rss_report_what_they_measured() {
    let me = std::process::id().to_string();
    let (code, out, err, _) = signal_after(
        &[
            "probe",
            "idle-cpu",
            "--pid",
            &me,
            "--window",
            "100ms",
            "--windows",
            "100",
            "--format",
            "json",
        ],
        Duration::from_millis(700),
        libc::SIGINT,
    );
    assert_eq!(code, Some(130), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["partial"], &v["interrupted"]),
        (&true.into(), &"SIGINT".into()),
        "{v}"
    );
    let windows = v["windows"].as_array().unwrap();
    assert!(!windows.is_empty() && windows.len() < 100, "{v}");
    assert!(v["median_pct"].is_number(), "{v}");
    assert!(v["note"].is_null(), "the process did not exit: {v}");
    assert!(
        err.contains(&format!("after {} of 100 windows", windows.len())),
        "{err}"
    );

    let (code, out, err, _) = signal_after(
        &[
            "probe",
            "rss",
            "--pid",
            &me,
            "--duration",
            "10s",
            "--format",
            "json",
        ],
        Duration::from_millis(700),
        libc::SIGINT,
    );
    assert_eq!(code, Some(130), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["partial"], &v["interrupted"]),
        (&true.into(), &"SIGINT".into()),
        "{v}"
    );
    assert!(v["note"].is_null(), "the process did not exit: {v}");
    let series = v["series"].as_array().unwrap();
    assert!(!series.is_empty(), "{v}");
    let last_ms = series.last().unwrap()["t_ms"].as_i64().unwrap();
    assert!(last_ms < 10_000, "stopped early: {v}");
    let end = v["decay"]["end"]["t_s"].as_f64().unwrap();
    assert!(
        (end - last_ms as f64 / 1000.0).abs() < 1e-9,
        "the decay ends at the last sample: {v}"
    );
}
