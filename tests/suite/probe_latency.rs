//! Short real runs of the latency probes (wakeup, timer, rpc) against the
//! live host, and their bad-input messages. Nothing here changes the host:
//! PM QoS is never held (that path is tested under a temporary root).

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};

use crate::support::*;
use serde_json::Value;

fn online_cpus() -> Vec<u64> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut v = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u64>().unwrap()..=b.parse().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

fn wakeup(mechanism: &str, n: u64, raw: &std::path::Path) -> Value {
    json(&[
        "probe",
        "wakeup",
        "--samples",
        &n.to_string(),
        "--gap-us",
        "200..2000",
        "--mechanism",
        mechanism,
        "--raw",
        raw.to_str().unwrap(),
    ])
}

#[test]
fn wakeup_samples_idle_states_and_raw_agree() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("wakeup.csv");
    let n = 60;
    let v = wakeup("futex", n, &raw);
    check_latency(&v, "wakeup", n);
    let s = &v["settings"];
    let (waker, sleeper) = (u(s, "waker_cpu"), u(s, "sleeper_cpu"));
    assert_ne!(waker, sleeper);
    assert!(online_cpus().contains(&waker) && online_cpus().contains(&sleeper));
    assert_eq!(s["mechanism"], "futex");
    assert!(s["pm_qos"]["held_us"].is_null());
    assert_eq!(
        (u(&s["gap_us"], "min_us"), u(&s["gap_us"], "max_us")),
        (200, 2000)
    );

    // Overhead measured at start: a clock read costs something, and far less than a sample.
    let o = &v["overhead"];
    assert!(u(o, "clock_read_min_ns") <= u(o, "clock_read_ns"));
    assert!(u(o, "per_sample_ns") < u(&v, "min_ns"), "{o}");
    assert!(o["wake_call_ns"].as_u64().is_some());

    // The raw CSV holds every sample, in schedule order, and reproduces p50.
    let (header, rows) = csv(&raw);
    assert_eq!(&header[..3], ["sample", "gap_ns", "latency_ns"]);
    assert_eq!(rows.len() as u64, n);
    for (i, r) in rows.iter().enumerate() {
        let gap = r[1].unwrap() as u64;
        assert_eq!(
            gap,
            200_000 + ((i as u64 * 5) % 17) * 112_500,
            "gap of sample {i}"
        );
    }
    let mut lat: Vec<u64> = rows.iter().map(|r| r[2].unwrap() as u64).collect();
    lat.sort_unstable();
    assert_eq!(nearest_rank(&lat, 50.0), u(&v, "p50_ns"));
    assert_eq!(
        (lat[0], lat[lat.len() - 1]),
        (u(&v, "min_ns"), u(&v, "max_ns"))
    );

    // Idle states of the sleeper's CPU: deltas over the run.
    let states = v["idle_states"].as_array().unwrap();
    let has_cpuidle = std::path::Path::new(&format!(
        "/sys/devices/system/cpu/cpu{sleeper}/cpuidle/state0"
    ))
    .exists();
    assert_eq!(!states.is_empty(), has_cpuidle, "{states:?}");
    let duration_us = u(&v, "duration_ms") * 1000;
    for (k, st) in states.iter().enumerate() {
        let entries = u(st, "entries");
        // Counters are read as deltas: never negative, and time in a state
        // cannot exceed the run's wall time (plus the reads' own milliseconds).
        assert!(
            u(st, "time_us") <= duration_us + 20_000,
            "{st} in {duration_us} µs"
        );
        let per = st["entries_per_sample"].as_f64().unwrap();
        assert!((per - entries as f64 / n as f64).abs() < 0.006, "{st}");
        // Entries counted inside the gaps are a part of the run's entries.
        let in_gaps: f64 = rows.iter().map(|r| r[3 + k].unwrap()).sum();
        assert!(
            in_gaps as u64 <= entries,
            "{in_gaps} in gaps > {entries} in the run"
        );
        assert!(header[3 + k].starts_with("entries_"));
        assert!(st["latency_us"].is_u64() && st["name"].is_string());
    }
    // Every sample is attributed to exactly one deepest state (or none).
    let by = v["by_deepest_state"].as_array().unwrap();
    assert_eq!(by.iter().map(|b| u(b, "samples")).sum::<u64>(), n);
    for b in by {
        let name = b["state"].as_str().unwrap();
        assert!(
            name == "none" || states.iter().any(|s| s["name"] == name),
            "{name}"
        );
        assert!(u(b, "min_ns") <= u(b, "p50_ns") && u(b, "p50_ns") <= u(b, "max_ns"));
    }
}

#[test]
fn wakeup_through_eventfd_and_pipe() {
    let dir = tempfile::tempdir().unwrap();
    for m in ["eventfd", "pipe"] {
        let raw = dir.path().join(format!("{m}.csv"));
        let v = wakeup(m, 20, &raw);
        check_latency(&v, "wakeup", 20);
        assert_eq!(v["settings"]["mechanism"], m);
    }
}

#[test]
fn wakeup_honours_the_chosen_cpus() {
    let cpus = online_cpus();
    if cpus.len() < 2 {
        return;
    }
    let (a, b) = (cpus[0].to_string(), cpus[1].to_string());
    let v = json(&[
        "probe",
        "wakeup",
        "--samples",
        "5",
        "--gap-us",
        "300",
        "--waker-cpu",
        &b,
        "--sleeper-cpu",
        &a,
    ]);
    assert_eq!(v["settings"]["waker_cpu"].to_string(), b);
    assert_eq!(v["settings"]["sleeper_cpu"].to_string(), a);
    check_latency(&v, "wakeup", 5);
}

#[test]
fn timer_lateness_is_measured_per_loop() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("timer.csv");
    let cpu = online_cpus()[0].to_string();
    let v = json(&[
        "probe",
        "timer",
        "--interval",
        "500",
        "--loops",
        "200",
        "--cpu",
        &cpu,
        "--mlock",
        "--raw",
        raw.to_str().unwrap(),
    ]);
    check_latency(&v, "timer", 200);
    let s = &v["settings"];
    assert_eq!(u(s, "interval_us"), 500);
    assert_eq!(s["cpu"].to_string(), cpu);
    assert_eq!(s["mlock"], true);
    assert!(s["priority"].is_null() && s["pm_qos"]["held_us"].is_null());
    // 200 loops of 500 µs cannot take less than 100 ms.
    assert!(u(&v, "duration_ms") >= 100);
    let (header, rows) = csv(&raw);
    assert_eq!(header, ["sample", "lateness_ns"]);
    assert_eq!(rows.len(), 200);
    let mut lat: Vec<u64> = rows.iter().map(|r| r[1].unwrap() as u64).collect();
    lat.sort_unstable();
    assert_eq!(nearest_rank(&lat, 50.0), u(&v, "p50_ns"));
    // "2ms" is the same as 2000.
    let v = json(&["probe", "timer", "--interval", "2ms", "--loops", "10"]);
    assert_eq!(u(&v["settings"], "interval_us"), 2000);
    check_latency(&v, "timer", 10);
}

#[test]
fn timer_sched_fifo_needs_privilege_or_says_so() {
    let args = [
        "probe",
        "timer",
        "--interval",
        "1000",
        "--loops",
        "20",
        "--priority",
        "10",
    ];
    if unsafe { libc::geteuid() } == 0 {
        let v = json(&args);
        assert_eq!(u(&v["settings"], "priority"), 10);
        check_latency(&v, "timer", 20);
    } else {
        assert!(error(&args).contains("SCHED_FIFO"));
    }
}

#[test]
fn rpc_over_loopback_udp_and_tcp() {
    for proto in ["udp", "tcp"] {
        let v = json(&[
            "probe",
            "rpc",
            "--proto",
            proto,
            "--samples",
            "40",
            "--gap-us",
            "200..2000",
        ]);
        check_latency(&v, "rpc", 40);
        let s = &v["settings"];
        assert_eq!(s["proto"], proto);
        assert_eq!(s["server"], "builtin-echo");
        assert!(
            s["target"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{s}"
        );
        assert_eq!(u(s, "payload_bytes"), 64);
        assert_ne!(s["client_cpu"], s["server_cpu"]);
        assert_eq!(
            (u(&v, "lost"), u(&v, "reconnects"), u(&v, "stray_bytes")),
            (0, 0, 0)
        );
    }
}

#[test]
fn rpc_connects_to_a_users_tcp_service() {
    // A tiny service of our own: answers each "ping\n" with "pong\n".
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        let mut served = 0;
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => return served,
                Ok(n) => {
                    assert_eq!(&buf[..n], b"ping\n");
                    c.write_all(b"pong\n").unwrap();
                    served += 1;
                }
            }
        }
    });
    let v = json(&[
        "probe",
        "rpc",
        "--proto",
        "tcp",
        "--connect",
        &addr,
        "--payload",
        "ping\\n",
        "--expect",
        "pong\\n",
        "--samples",
        "15",
        "--gap-us",
        "200..1000",
    ]);
    check_latency(&v, "rpc", 15);
    assert_eq!(v["settings"]["server"], "connect");
    assert_eq!(v["settings"]["expect"], "pong\n");
    assert_eq!(server.join().unwrap(), 15);
}

#[test]
fn rpc_connect_looks_names_up_in_etc_hosts_and_nowhere_else() {
    // No DNS and no NSS module (the static binary loads none): a name that
    // /etc/hosts lacks is refused, saying where it was looked for.
    let name = "no-such-host.hostknob.invalid";
    assert!(
        !std::fs::read_to_string("/etc/hosts")
            .unwrap()
            .contains(name)
    );
    let e = error(&[
        "probe",
        "rpc",
        "--connect",
        &format!("{name}:80"),
        "--samples",
        "2",
    ]);
    assert_eq!(
        e,
        format!(
            "hostknob: --connect {name}:80: host \"{name}\" is not in /etc/hosts: hostknob looks \
             names up there only (no DNS; its static binary loads no name service), so give the \
             address or add the name to /etc/hosts"
        )
    );
    let e = error(&["probe", "rpc", "--connect", "10.0.0.1", "--samples", "2"]);
    assert_eq!(
        e,
        "hostknob: --connect 10.0.0.1: no port: expected HOST:PORT"
    );
}

#[test]
fn rpc_connects_to_a_users_udp_service() {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..10 {
            let (n, from) = s.recv_from(&mut buf).unwrap();
            s.send_to(&buf[..n], from).unwrap();
        }
    });
    let v = json(&[
        "probe",
        "rpc",
        "--connect",
        &addr,
        "--samples",
        "10",
        "--gap-us",
        "200..1000",
    ]);
    check_latency(&v, "rpc", 10);
    server.join().unwrap();
}

/// Issue 14 item 8: replies without the `--expect` text are named as such,
/// with the first of them, over real sockets to real local services that
/// answer something else (closing the connection, keeping it open, UDP).
#[test]
fn replies_without_the_expected_text_say_so() {
    // A TCP service that answers every request with a 500 and closes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        for _ in 0..3 {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 64];
            let _ = c.read(&mut buf).unwrap();
            c.write_all(b"HTTP/1.1 500 nope\r\n").unwrap();
        }
    });
    let args = |addr: &str, proto: &str| -> Vec<String> {
        [
            "probe",
            "rpc",
            "--proto",
            proto,
            "--connect",
            addr,
            "--payload",
            "GET\\n",
            "--expect",
            "200 OK",
            "--samples",
            "10",
            "--gap-us",
            "100",
            "--timeout",
            "300ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        error(&a)
    };
    let e = run(args(&addr, "tcp"));
    assert_eq!(
        e,
        format!(
            "hostknob: --connect {addr}: 3 replies did not contain --expect \"200 OK\" \
             (samples 0, 1, 2; stopped there); first reply: \"HTTP/1.1 500 nope\\r\\n\""
        )
    );
    server.join().unwrap();

    // One that keeps the connection open and answers `busy`: the reply never
    // completes, which is not the same as no reply.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        let mut answered = 0;
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
            c.write_all(b"busy\n").unwrap();
            answered += 1;
        }
        answered
    });
    let e = run(args(&addr, "tcp"));
    assert_eq!(
        e,
        format!(
            "hostknob: --connect {addr}: 3 replies did not contain --expect \"200 OK\" \
             (samples 0, 1, 2; stopped there); first reply: \"busy\\n\""
        )
    );
    assert_eq!(server.join().unwrap(), 3);

    // UDP: each datagram answered with another text.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            let (_, from) = s.recv_from(&mut buf).unwrap();
            s.send_to(b"nope", from).unwrap();
        }
    });
    let e = run(args(&addr, "udp"));
    assert_eq!(
        e,
        format!(
            "hostknob: --connect {addr}: 3 replies did not contain --expect \"200 OK\" \
             (samples 0, 1, 2; stopped there); first reply: \"nope\""
        )
    );
    server.join().unwrap();
}

#[test]
fn a_refused_connect_is_one_clear_line() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let e = error(&[
        "probe",
        "rpc",
        "--proto",
        "tcp",
        "--connect",
        &addr,
        "--samples",
        "2",
    ]);
    assert_eq!(e, format!("hostknob: --connect {addr}: connection refused"));
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let e = error(&[
        "probe",
        "rpc",
        "--connect",
        &addr,
        "--samples",
        "2",
        "--gap-us",
        "100",
    ]);
    assert!(
        e.starts_with(&format!("hostknob: --connect {addr}: connection refused")),
        "{e}"
    );
}

#[test]
fn cpus_that_do_not_exist_are_refused() {
    let e = error(&["probe", "wakeup", "--sleeper-cpu", "4096", "--samples", "1"]);
    assert!(
        e.starts_with("hostknob: --sleeper-cpu 4096: no such CPU (this host has CPUs "),
        "{e}"
    );
    let e = error(&["probe", "timer", "--cpu", "4096", "--loops", "1"]);
    assert!(e.starts_with("hostknob: --cpu 4096: no such CPU"), "{e}");
    let e = error(&["probe", "rpc", "--server-cpu", "4096", "--samples", "1"]);
    assert!(
        e.starts_with("hostknob: --server-cpu 4096: no such CPU"),
        "{e}"
    );
}

/// `hostknob ARGS...` with the test-only seam that lets a probe run under a
/// root; fails with one line.
fn seam_error(args: &[&str]) -> String {
    let out = hostknob_command(args)
        .env("HOSTKNOB_TEST_PROBE_ON_ROOT", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
    let e = stderr(&out).trim().to_string();
    assert_eq!(e.lines().count(), 1, "one line expected: {e}");
    e
}

#[test]
fn probes_refuse_a_root_other_than_slash() {
    // Issue 11: a probe under --root measured this VM and reported the
    // tree's idle states as if they had been measured.
    let gnr = corpus_host("gnr0");
    let gnr = gnr.to_str().unwrap();
    for args in [
        &["--root", gnr, "probe", "wakeup", "--samples", "5"][..],
        &["--root", gnr, "probe", "timer", "--loops", "1"],
        &[
            "--root",
            gnr,
            "--format",
            "json",
            "probe",
            "rpc",
            "--samples",
            "5",
        ],
    ] {
        let e = error(args);
        assert!(
            e.contains("measures this machine, not the tree at --root") && e.contains("gnr0"),
            "{e}"
        );
    }
    let e = error(&["--root", gnr, "verify", "anything"]);
    assert!(e.contains("measures this machine"), "{e}");
}

#[test]
fn offline_cpus_are_refused_under_a_root() {
    // A host tree where CPUs 2-3 are present but offline (this host cannot
    // be changed to show that), through the suite's seam.
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), "0-1\n").unwrap();
    std::fs::write(cpu.join("present"), "0-3\n").unwrap();
    let root = dir.path().to_str().unwrap();
    let e = seam_error(&[
        "--root",
        root,
        "probe",
        "wakeup",
        "--sleeper-cpu",
        "3",
        "--samples",
        "1",
    ]);
    assert_eq!(
        e,
        "hostknob: --sleeper-cpu 3: CPU 3 is offline (online CPUs: 0-1)"
    );
    let e = seam_error(&[
        "--root", root, "probe", "timer", "--cpu", "2", "--loops", "1",
    ]);
    assert_eq!(e, "hostknob: --cpu 2: CPU 2 is offline (online CPUs: 0-1)");
}

#[test]
fn the_same_cpu_twice_is_refused() {
    let e = error(&["probe", "wakeup", "--waker-cpu", "0", "--sleeper-cpu", "0"]);
    assert!(
        e.contains("--waker-cpu and --sleeper-cpu are both 0: they must differ"),
        "{e}"
    );
}

#[test]
fn tables_name_the_percentiles() {
    let out = hostknob(&["probe", "timer", "--interval", "1000", "--loops", "20"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for word in ["Timer lateness", "p50", "p99.9", "Histogram", "clock read"] {
        assert!(text.contains(word), "{word} missing:\n{text}");
    }
}

#[test]
fn plot_draws_the_distribution_as_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("w.svg");
    let v = json(&[
        "probe",
        "wakeup",
        "--samples",
        "20",
        "--gap-us",
        "200..400",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let xml = roxmltree::Document::parse(&text).expect("SVG parses as XML");
    let texts: Vec<&str> = xml.descendants().filter_map(|n| n.text()).collect();
    assert!(
        texts.iter().any(|t| t.contains("wakeup latency")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains(&format!("samples (n={})", v["samples"]))),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t.contains("latency (µs, log scale)")));
}
