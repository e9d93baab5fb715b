//! Ctrl-C stops a probe in the middle of a long idle gap, and progress is
//! drawn only on a terminal. Real runs of the binary on the live host; the
//! probes here hold no PM QoS and change nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Starts `hostknob ARGS`, sends SIGINT after 300 ms, and returns the exit
/// code, stdout, stderr and how long it took to end after the signal.
fn interrupt(args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let child = hostknob_command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
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
    // idle-cpu and rss sample this test's own process.
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
        ("rss", &["probe", "rss", "--pid", &me, "--duration", "10s"]),
        // Run by hostknob-jemalloc, which the signal is passed on to.
        (
            "rss",
            &[
                "probe",
                "rss",
                "--self-burst",
                "--burst-mib",
                "8",
                "--duration",
                "10s",
            ],
        ),
    ] {
        let (code, out, err, took) = interrupt(args);
        assert_eq!(code, Some(130), "{name}: {err}");
        assert!(
            took < Duration::from_secs(1),
            "{name}: ended {took:?} after SIGINT"
        );
        assert!(
            err.contains(&format!("probe {name}: interrupted by SIGINT")),
            "{name}: {err}"
        );
        assert!(out.is_empty(), "{name}: printed a result: {out}");
    }
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
