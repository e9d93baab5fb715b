//! Short real runs of `probe noise` on this machine (counts attribution:
//! the suite never mounts tracefs; the tracefs path is in tests/live.rs),
//! and its bad-input messages.

use crate::support::*;
use serde_json::Value;
use std::process::{Command, Stdio};

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
            .arg(crate::support::bin())
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
            .any(|l| l.contains("hostknob --manifest DIR verify ")
                && l.contains("--probe noise -- --cpus 1")),
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
        table.contains("time lost per second of each round"),
        "{table}"
    );
    assert!(table.contains(" µs/s"), "{table}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.contains("µs/s, log scale") && !plot.contains("latency"),
        "{plot}"
    );
}

/// The threads of process `pid`: (tid, comm, allowed CPUs, last CPU, run ns).
fn tasks(pid: u32) -> Vec<(u32, String, hostknob::cpulist::CpuList, u32, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let tid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let base = format!("/proc/{pid}/task/{tid}");
        let stat = std::fs::read_to_string(format!("{base}/stat")).ok()?;
        let comm = stat[stat.find('(')? + 1..stat.rfind(')')?].to_string();
        let cpu = stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(36)?
            .parse()
            .ok()?;
        let status = std::fs::read_to_string(format!("{base}/status")).ok()?;
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(|v| hostknob::cpulist::CpuList::parse(v.trim()).ok())?;
        let run = std::fs::read_to_string(format!("{base}/schedstat"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some((tid, comm, allowed, cpu, run))
    })
    .collect()
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// Starts `c` with its output piped, and waits until its thread `comm` runs.
fn start_until(mut c: Command, comm: &str) -> std::process::Child {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for_thread(&mut child, comm), "no {comm} thread");
    child
}

/// Waits until process `pid` has a thread named `comm` (false: it ended first).
fn wait_for_thread(child: &mut std::process::Child, comm: &str) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < until {
        if tasks(child.id()).iter().any(|t| t.1 == comm) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    false
}

#[test]
fn the_probes_own_threads_stay_off_the_measured_cpu() {
    // Issue 44.12: five of hostknob's own threads woke on the measured CPU.
    let cpu = last_cpu();
    if cpu == 0 {
        eprintln!("skipped: one CPU online, none left for hostknob's own threads");
        return;
    }
    let spin = format!("noise/{cpu}");
    let args = format!("--format json probe noise --cpus {cpu} --duration 2s --attribution counts");
    let mut child = start_until(hostknob_command(&words(&args)), &spin);
    let mut looks = 0;
    let mut ran: std::collections::HashMap<u32, u64> = Default::default();
    let mut others = std::collections::BTreeSet::new();
    while child.try_wait().unwrap().is_none() {
        let now = tasks(child.id());
        if !now.iter().any(|t| t.1 == spin) {
            break;
        }
        for (tid, comm, allowed, last, run) in now.into_iter().filter(|t| t.1 != spin) {
            others.insert(comm.clone());
            assert!(
                !allowed.contains(cpu),
                "{comm} ({tid}) may run on measured CPU {cpu}: allowed {allowed}"
            );
            // It ran since the last look, and last on the measured CPU.
            let before = ran.insert(tid, run);
            assert!(
                before.is_none_or(|b| b == run) || last != cpu,
                "{comm} ({tid}) ran on measured CPU {cpu}"
            );
        }
        looks += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(looks >= 20, "only {looks} looks during the run");
    assert!(!others.is_empty(), "the main thread was seen");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
}

#[test]
fn no_cpu_left_for_its_own_threads_is_a_warning() {
    let all = format!("0-{}", last_cpu());
    let o = hostknob(&[
        "--format",
        "json",
        "probe",
        "noise",
        "--cpus",
        &all,
        "--duration",
        "100ms",
        "--attribution",
        "counts",
    ]);
    let v = json_of(&o);
    let w = v["warnings"].to_string();
    assert!(
        w.contains(&format!(
            "no CPU outside --cpus {all} is allowed to hostknob"
        )),
        "{v}"
    );
    assert!(
        err(&o).contains("hostknob: warning: no CPU outside"),
        "{}",
        err(&o)
    );
}

/// `probe noise` on a copy of the VM capture (the probe's threads run
/// here; its host files are the copy's).
fn noise_on(root: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut all = vec![
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
        "probe",
        "noise",
    ];
    all.extend(args);
    let mut c = hostknob_command(&all);
    c.env("HOSTKNOB_TEST_PROBE_ON_ROOT", "1");
    c
}

/// Adds `by` to CPU `cpu`'s column of row `row` in a `/proc/interrupts` text.
fn bump_interrupts(text: &str, row: &str, cpu: usize, by: u64) -> String {
    text.lines()
        .map(|l| match l.split_once(':') {
            Some((h, rest)) if h.trim() == row => {
                let mut w: Vec<String> = rest.split_whitespace().map(String::from).collect();
                let n: u64 = w[cpu].parse().unwrap();
                w[cpu] = (n + by).to_string();
                format!("{h}: {}", w.join(" "))
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn counts_attribution_charges_steal_first_and_system_wide_rows_to_no_cpu() {
    // Issue 44.13: steal got only what LOC/RES left; ERR's one column went to CPU 0.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    // The probe has read its first snapshot once its thread runs.
    let args = words("--cpus 0 --duration 1500ms --attribution counts");
    let child = start_until(noise_on(&root, &args), "noise/0");
    let irq = std::fs::read_to_string(root.join("proc/interrupts")).unwrap();
    let irq = bump_interrupts(&irq, "LOC", 0, 5_000);
    let irq = bump_interrupts(&irq, "ERR", 0, 7);
    std::fs::write(root.join("proc/interrupts"), irq).unwrap();
    // 200 ticks (2 s at USER_HZ 100) of steal on CPU 0: more than any lost time.
    let stat = std::fs::read_to_string(root.join("proc/stat")).unwrap();
    let stat: String = stat
        .lines()
        .map(|l| {
            let mut w: Vec<String> = l.split_whitespace().map(String::from).collect();
            if w[0] == "cpu0" {
                w[8] = (w[8].parse::<u64>().unwrap() + 200).to_string();
            }
            w.join(" ") + "\n"
        })
        .collect();
    std::fs::write(root.join("proc/stat"), stat).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["cpus"][0];
    let lost = u(c, "lost_ns");
    assert!(lost > 0, "no gap in 1.5 s on CPU 0: {c}");
    let sources = c["sources"].as_array().unwrap();
    let find = |name: &str| sources.iter().find(|s| s["name"] == name);
    let steal = find("steal (hypervisor)").expect("steal");
    assert_eq!((u(steal, "count"), u(steal, "time_ns")), (200, lost), "{c}");
    let loc = find("LOC").expect("LOC counted");
    assert_eq!((u(loc, "count"), u(loc, "time_ns")), (5_000, 0), "{c}");
    assert!(find("ERR").is_none(), "ERR is no CPU's: {c}");
}

#[test]
fn a_clocksource_without_vdso_refuses_the_default_threshold() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let cs = root.join("sys/devices/system/clocksource/clocksource0");
    std::fs::create_dir_all(&cs).unwrap();
    for slow in ["hpet", "acpi_pm"] {
        std::fs::write(cs.join("current_clocksource"), format!("{slow}\n")).unwrap();
        let o = noise_on(&root, &["--cpus", "1", "--duration", "100ms"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{slow}");
        let e = stderr(&o);
        assert!(
            e.contains(&format!("--threshold 1000 ns: the clocksource is {slow}"))
                && e.contains("give --threshold 5us or more"),
            "{e}"
        );
    }
    let o = noise_on(
        &root,
        &[
            "--cpus",
            "1",
            "--duration",
            "100ms",
            "--threshold",
            "5us",
            "--attribution",
            "counts",
        ],
    )
    .output()
    .unwrap();
    let v = json_of(&o);
    assert_eq!(v["settings"]["clocksource"], "acpi_pm");
    assert!(
        v["warnings"]
            .to_string()
            .contains("the clocksource is acpi_pm"),
        "{v}"
    );
    std::fs::write(cs.join("current_clocksource"), "tsc\n").unwrap();
    let v = json_of(
        &noise_on(
            &root,
            &[
                "--cpus",
                "1",
                "--duration",
                "100ms",
                "--attribution",
                "counts",
            ],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(v["settings"]["clocksource"], "tsc");
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
}

#[test]
fn priority_under_rt_throttling_is_a_warning() {
    let root_user = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root_user {
        eprintln!("skipped: SCHED_FIFO needs root");
        return;
    }
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let args = [
        "--cpus",
        "1",
        "--duration",
        "100ms",
        "--priority",
        "1",
        "--attribution",
        "counts",
    ];
    // The capture's own 950000 of 1000000 µs.
    let v = json_of(&noise_on(&root, &args).output().unwrap());
    let w = v["warnings"].to_string();
    assert!(
        w.contains("--priority 1: RT throttling is on (kernel.sched_rt_runtime_us 950000 of sched_rt_period_us 1000000)")
            && w.contains("up to 50 ms of every 1000 ms"),
        "{v}"
    );
    std::fs::write(root.join("proc/sys/kernel/sched_rt_runtime_us"), "-1\n").unwrap();
    let v = json_of(&noise_on(&root, &args).output().unwrap());
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
}

#[test]
fn verify_measures_the_cpus_isolcpus_managed_irq_isolates() {
    // Issue 44.11: isolate's default isolcpus=managed_irq,LIST leaves
    // cpu/isolated empty, and verify measured another CPU.
    let (_t, root) = vm();
    let cmdline = std::fs::read_to_string(root.join("proc/cmdline")).unwrap();
    std::fs::write(
        root.join("proc/cmdline"),
        format!("{} isolcpus=managed_irq,0\n", cmdline.trim()),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("sys/devices/system/cpu/isolated"))
            .unwrap()
            .trim(),
        ""
    );
    let m = knobs(&[(
        "timer-migration-off",
        "persistence: runtime\nkind: sysctl\ntarget: {name: kernel.timer_migration}\nset: 0\n",
    )]);
    let args = "--host vm --format json verify timer-migration-off --probe noise --rounds 5 \
                --max-rounds 5 --settle 1ms -- --duration 100ms --attribution counts";
    let o = run(&root, m.path(), &words(args));
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    let m = &v["placement"]["measured"];
    assert_eq!(m["cpus"], "0", "{v}");
    assert_eq!(
        m["why"], "the CPUs the running kernel isolates: isolcpus=managed_irq,0 on /proc/cmdline",
        "{v}"
    );
    assert_eq!(v["settings"]["cpus"], "0", "{}", v["settings"]);
}
