//! Short real runs of `probe noise` on this machine (counts attribution:
//! the suite never mounts tracefs; the tracefs path is in tests/live.rs),
//! and its bad-input messages.

use crate::support::*;
use serde_json::Value;

fn last_cpu() -> u32 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = text.trim().rsplit([',', '-']).next().unwrap();
    last.parse().unwrap()
}

fn noise(cpus: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "probe",
        "noise",
        "--cpus",
        cpus,
        "--duration",
        "300ms",
        "--attribution",
        "counts",
    ];
    args.extend(extra);
    json(&args)
}

#[test]
fn noise_reports_lost_time_gaps_and_sources_per_cpu() {
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("gaps.csv");
    let v = noise(&cpu.to_string(), &["--raw", raw.to_str().unwrap()]);
    assert_eq!(v["probe"], "noise");
    assert_eq!(v["attribution"], "counts");
    assert_eq!(v["settings"]["threshold_ns"], 1000);
    let c = &v["cpus"][0];
    assert_eq!(u(c, "cpu"), cpu as u64);
    // It measured about the time asked (the loop ends at the first read past it).
    let measured = u(c, "measured_ns");
    assert!((300_000_000..400_000_000).contains(&measured), "{measured}");
    assert!(
        u(c, "loops") > 1000,
        "a tight loop reads the clock often: {c}"
    );
    let (lost, gaps) = (u(c, "lost_ns"), u(c, "gaps"));
    // The raw file holds every gap, each above the threshold, summing to lost_ns.
    let text = std::fs::read_to_string(&raw).unwrap();
    let rows: Vec<Vec<u64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(text.lines().next(), Some("cpu,start_ns,gap_ns"));
    assert_eq!(rows.len() as u64, gaps);
    assert!(rows.iter().all(|r| r[0] == cpu as u64 && r[2] > 1000));
    assert_eq!(rows.iter().map(|r| r[2]).sum::<u64>(), lost);
    let per_s = c["lost_us_per_s"].as_f64().unwrap();
    let expect = lost as f64 * 1e6 / measured as f64;
    assert!(
        (per_s - expect).abs() < 0.01 + expect * 1e-6,
        "{per_s} vs {expect}"
    );
    assert!(
        (c["ppm"].as_f64().unwrap() - per_s).abs() < 0.01,
        "ppm = µs/s"
    );
    if gaps > 0 {
        assert_eq!(u(c, "max_gap_ns"), rows.iter().map(|r| r[2]).max().unwrap());
        assert_eq!(u(&c["gap"], "samples"), gaps);
        let hist: u64 = c["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| u(b, "count"))
            .sum();
        assert_eq!(hist, gaps);
    }
    // Shares of the sources and the unexplained rest cover the lost time.
    let sources = c["sources"].as_array().unwrap();
    let explained: u64 = sources.iter().map(|s| u(s, "time_ns")).sum();
    assert_eq!(explained + u(c, "unexplained_ns"), lost, "{c}");
    let times: Vec<u64> = sources.iter().map(|s| u(s, "time_ns")).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "largest first: {times:?}"
    );
    for s in sources {
        let kind = s["kind"].as_str().unwrap();
        assert!(["irq", "softirq", "thread", "steal"].contains(&kind), "{s}");
        assert_eq!(s["pid"].is_null(), kind != "thread", "{s}");
        assert_eq!(s["estimated"], true, "counts are estimates: {s}");
        // Steal's count is its clock ticks: time without a count would be invented.
        assert!(kind != "steal" || u(s, "count") > 0, "{s}");
    }
}

#[test]
fn noise_table_names_lost_time_and_sources() {
    let cpu = last_cpu().to_string();
    let out = ok(&hostknob(&[
        "probe",
        "noise",
        "--cpus",
        &cpu,
        "--duration",
        "200ms",
        "--attribution",
        "counts",
    ]));
    for want in [
        "Lost time per CPU",
        "lost µs/s",
        "who took the time",
        "unexplained",
        "attribution",
        "counts (an estimate",
    ] {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
}

#[test]
fn noise_refuses_bad_cpus_and_options_with_the_reason() {
    let e = error(&["probe", "noise", "--cpus", "4096", "--duration", "100ms"]);
    assert!(
        e.starts_with("hostknob: --cpus 4096: no such CPU (this host has CPUs "),
        "{e}"
    );
    let e = error(&["probe", "noise", "--cpus", "1-", "--duration", "100ms"]);
    assert!(e.contains("--cpus 1-"), "{e}");
    let e = error(&["probe", "noise", "--duration", "100ms"]);
    assert!(e.contains("--cpus"), "{e}");
    for (flag, bad) in [("--threshold", "0"), ("--duration", "soon")] {
        let o = hostknob(&["probe", "noise", "--cpus", "0", flag, bad]);
        assert_eq!(o.status.code(), Some(1), "{flag} {bad}");
        assert!(err(&o).contains(flag), "{}", err(&o));
    }
    // A CPU outside this process's affinity: run under taskset.
    let cpu = last_cpu();
    if cpu > 0 {
        let out = std::process::Command::new("taskset")
            .args(["-c", "0"])
            .arg(env!("CARGO_BIN_EXE_hostknob"))
            .args([
                "probe",
                "noise",
                "--cpus",
                &cpu.to_string(),
                "--duration",
                "100ms",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let e = stderr(&out);
        assert!(
            e.contains(&format!("--cpus {cpu}: CPU {cpu} is online but outside this process's CPU affinity (allowed: 0)")),
            "{e}"
        );
    }
    let gnr = corpus_host("gnr0");
    let e = error(&[
        "--root",
        gnr.to_str().unwrap(),
        "probe",
        "noise",
        "--cpus",
        "0",
    ]);
    assert!(e.contains("measures this machine"), "{e}");
}

#[test]
fn offline_cpus_are_refused_by_noise_under_a_root() {
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), "0-1\n").unwrap();
    std::fs::write(cpu.join("present"), "0-3\n").unwrap();
    let out = hostknob_command(&[
        "--root",
        dir.path().to_str().unwrap(),
        "probe",
        "noise",
        "--cpus",
        "0,3",
        "--duration",
        "100ms",
    ])
    .env("HOSTKNOB_TEST_PROBE_ON_ROOT", "1")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "hostknob: --cpus 3: CPU 3 is offline (online CPUs: 0-1)"
    );
}

#[test]
fn isolate_says_how_to_verify_with_the_noise_probe() {
    let root = corpus_host("fc-haltpoll-2cpu");
    let r = root.to_str().unwrap();
    let v = json_of(&hostknob(&[
        "--root", r, "--host", "vm", "isolate", "--cpus", "1", "--format", "json",
    ]));
    let lines: Vec<&str> = v["verify"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        v["knobs"].as_array().unwrap().len(),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("hostknob verify ") && l.contains("--probe noise -- --cpus 1")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("after the reboot, `hostknob probe noise --cpus 1")),
        "{lines:?}"
    );
    let o = hostknob(&["--root", r, "--host", "vm", "isolate", "--cpus", "1"]);
    assert!(err(&o).contains("--probe noise"), "{}", err(&o));
}

#[test]
fn doc_shows_noise_evidence_for_isolated_cpus() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    std::fs::write(root.join("sys/devices/system/cpu/isolated"), "1\n").unwrap();
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/manifest");
    let out = ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "vm",
        "--manifest",
        manifest,
        "doc",
        "--out",
        "-",
    ]));
    assert!(out.contains("OS noise on the isolated CPUs (1)"), "{out}");
    assert!(
        out.contains("`hostknob verify KNOB --probe noise -- --cpus 1`"),
        "{out}"
    );
}

#[test]
fn verify_with_the_noise_probe_shows_lost_time_per_second_not_latency() {
    // The leg table printed the noise probe's ns lost per second as "µs",
    // and --plot drew them on a latency axis.
    let (t, root) = vm();
    let m = knobs(&[(
        "thp-never",
        "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    )]);
    let svg = t.path().join("v.svg");
    let cpu = last_cpu().to_string();
    let o = run(
        &root,
        m.path(),
        &[
            "--host",
            "vm",
            "verify",
            "thp-never",
            "--probe",
            "noise",
            "--rounds",
            "5",
            "--max-rounds",
            "5",
            "--settle",
            "1ms",
            "--seed",
            "1",
            "--plot",
            svg.to_str().unwrap(),
            "--",
            "--cpus",
            &cpu,
            "--duration",
            "100ms",
            "--attribution",
            "counts",
        ],
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{table}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        table.contains("time lost per second in each 100 ms window"),
        "{table}"
    );
    assert!(table.contains(" µs/s"), "{table}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.contains("µs/s, log scale") && !plot.contains("latency"),
        "{plot}"
    );
}
