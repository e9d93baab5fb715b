//! `inventory SECTION...` (or `--section`) prints only those sections, in
//! every format.

use crate::support::*;

#[test]
fn only_the_named_sections_in_json_yaml_and_table() {
    let root = corpus_host("gnr0");
    let root = root.to_str().unwrap();
    let v = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "cpu",
        "idle",
        "--format",
        "json",
    ]));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["cpu", "idle", "schema"]);
    assert_eq!(v["cpu"]["online_count"], 512);

    let flag = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "--section",
        "numa",
        "--section",
        "pm_qos",
        "--format",
        "json",
    ]));
    let keys: Vec<&str> = flag
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["numa", "pm_qos", "schema"]);
    assert_eq!(flag["numa"]["nodes"].as_array().unwrap().len(), 2);

    let out = hostknob(&["--root", root, "inventory", "caches", "--format", "yaml"]);
    assert!(out.status.success());
    let y: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let m = y.as_mapping().unwrap();
    assert_eq!(m.len(), 2, "caches and schema only: {y:?}");
    assert!(m.contains_key("caches"));

    let out = hostknob(&["--root", root, "inventory", "cpu"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let titles: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '│', '┌', '├', '└']))
        .collect();
    assert_eq!(titles, ["CPU"], "{text}");

    // With no section named, every section is there, as before.
    let all = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "--format",
        "json",
    ]));
    for k in [
        "host",
        "cpu",
        "caches",
        "numa",
        "memory",
        "idle",
        "network",
        "processes",
    ] {
        assert!(all.get(k).is_some(), "{k} missing");
    }
}

#[test]
fn an_unknown_section_is_refused() {
    let out = hostknob(&["inventory", "disks"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'disks'") && err.contains("pm_qos"), "{err}");
}

/// `--host` names the host in every format; the table's sections before the
/// process table are rendered while it is still read, after the name is set.
/// On this host (read only): captures have no processes.
#[test]
fn the_host_given_is_named_in_every_format() {
    let table = hostknob(&["--host", "web-7", "inventory"]);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    let hostname: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("hostname"))
        .collect();
    assert_eq!(hostname.len(), 1, "{text}");
    assert!(hostname[0].ends_with(" web-7"), "{text}");
    // The process tables follow the head, once each, and the text ends in
    // one newline.
    let titles: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '│', '┌', '├', '└']))
        .collect();
    let at = |t: &str| {
        let all: Vec<usize> = (0..titles.len())
            .filter(|&i| titles[i].starts_with(t))
            .collect();
        assert_eq!(all.len(), 1, "{t}: {titles:?}");
        all[0]
    };
    assert!(at("Host") < at("Network"), "{titles:?}");
    assert!(at("Network") < at("Busiest of"), "{titles:?}");
    assert!(at("Busiest of") < at("By resident memory"), "{titles:?}");
    assert!(text.ends_with('\n') && !text.ends_with("\n\n"), "{text:?}");
    for format in ["json", "yaml"] {
        let out = hostknob(&["--host", "web-7", "inventory", "--format", format]);
        let v: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
        assert_eq!(v["host"]["hostname"].as_str(), Some("web-7"), "{format}");
        assert!(v["processes"]["count"].as_u64().unwrap() > 0, "{format}");
    }
}

/// Issue 36: a section reads only what it shows. A FIFO in place of CPU 0's
/// first idle-state counter is named by `inventory idle` (the read is
/// refused) and never opened by `inventory host`, `cpu` or `memory`.
#[test]
fn a_section_does_not_read_the_idle_states_it_does_not_show() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let usage = root.join("sys/devices/system/cpu/cpu0/cpuidle/state0/usage");
    std::fs::remove_file(&usage).unwrap();
    let c = std::ffi::CString::new(usage.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let root = root.to_str().unwrap();

    let idle = hostknob(&["--root", root, "inventory", "idle"]);
    assert!(idle.status.success(), "{}", out(&idle));
    assert!(
        stderr(&idle).contains("state0/usage") && stderr(&idle).contains("FIFO"),
        "inventory idle names the FIFO it refused: {}",
        stderr(&idle)
    );
    // pm_qos reads the per-CPU resume latencies, not the idle states.
    let qos = hostknob(&["--root", root, "inventory", "pm_qos"]);
    assert!(out(&qos).contains("PM QoS resume latency"), "{}", out(&qos));
    assert!(!out(&qos).contains("Idle states"), "{}", out(&qos));
    for section in ["host", "cpu", "memory", "pm_qos"] {
        let o = hostknob(&["--root", root, "inventory", section]);
        assert!(o.status.success(), "{section}: {}", out(&o));
        assert!(
            !stderr(&o).contains("state0/usage"),
            "inventory {section} read an idle-state counter it does not show: {}",
            stderr(&o)
        );
    }
}

/// Issue 36: three system calls per file read in a tree (`openat2`, `read`,
/// `close`), plus a fixed few for start-up, counted by `strace -c` over the
/// idle states of gnr0's 512 CPUs and over `audit` of the shipped catalog
/// (per-CPU idle states and per-policy cpufreq files). The `O_PATH` check
/// that refuses device nodes made it six; a nodev view of the tree makes the
/// check unnecessary (it needs root to make the view: another user's run
/// says so and stops). A directory handle per CPU or per policy added an
/// open and a close each, and a look for a state past the first CPU's table
/// one more (3.19 per file for `inventory idle`, 3.53 for `audit`): they are
/// read beneath one handle on the CPU or cpufreq directory.
#[test]
fn a_file_in_a_tree_costs_three_system_calls() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the tree's nodev view needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("strace");
    let root = corpus_host("gnr0");
    let catalog = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let catalog = catalog.to_str().unwrap();
    let audit = ["--host", "rpc-1.example", "--manifest", catalog, "audit"];
    for args in [&["inventory", "idle", "--format", "json"][..], &audit[..]] {
        let traced = std::process::Command::new("strace")
            .args(["-f", "-c", "-U", "name,calls", "-o"])
            .arg(&summary)
            .arg(env!("CARGO_BIN_EXE_hostknob"))
            .arg("--root")
            .arg(&root)
            .args(args)
            .output();
        let Ok(traced) = traced else {
            eprintln!("skipped: strace is not installed");
            return;
        };
        // audit exits 2 on drift, which gnr0 has.
        assert!(
            matches!(traced.status.code(), Some(0 | 2)),
            "{}",
            out(&traced)
        );
        let text = std::fs::read_to_string(&summary).unwrap();
        let calls = |name: &str| -> u64 {
            text.lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next()? == name).then(|| w.next()?.parse::<u64>().ok())?
                })
                .sum()
        };
        let reads = calls("read");
        assert!(
            reads > 2_000,
            "{args:?}: gnr0's idle states and policies are thousands of files: {text}"
        );
        let file_calls: u64 = [
            "openat2",
            "openat",
            "newfstatat",
            "fstat",
            "statx",
            "read",
            "close",
        ]
        .iter()
        .map(|n| calls(n))
        .sum();
        // Start-up (the root, its nodev view, the thread count) is a few dozen.
        assert!(
            file_calls <= 3 * reads + 100,
            "{args:?}: {file_calls} system calls for {reads} file reads ({:.3} each; at most 3 \
             and 100 for start-up):\n{text}",
            file_calls as f64 / reads as f64
        );
    }
}

/// Issue 36: a file the kernel prints alike for every cpufreq policy is read
/// once, not once per policy: on gnr0's 512 policies `audit` of the shipped
/// catalog read `scaling_driver` 1,025 times, `scaling_available_governors`
/// 1,024 and intel_pstate's `energy_performance_available_preferences` 512,
/// and `inventory frequency` read `scaling_driver` 512 times. The
/// per-policy values (governor, EPP) are still read for each policy, and
/// once for both knobs that need the governor: `audit` writes nothing, so
/// what one survey read holds for the next (apply reads them again at each
/// survey, so a survey after a write sees it).
/// Counted from the paths the binary opens (`strace -e trace=%file`).
#[test]
fn files_global_to_cpufreq_are_read_once_not_per_policy() {
    let root = corpus_host("gnr0");
    let catalog = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("opens");
    let opened = |args: &[&str]| -> Option<String> {
        let traced = std::process::Command::new("strace")
            .args(["-f", "-e", "trace=%file", "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_hostknob"))
            .arg("--root")
            .arg(&root)
            .args(args)
            .output()
            .ok()?;
        // audit exits 2 on drift, which gnr0 has.
        let code = traced.status.code();
        assert!(matches!(code, Some(0 | 2)), "{}", out(&traced));
        Some(std::fs::read_to_string(&log).unwrap())
    };
    // By path from the root or by name beneath a directory handle.
    let count = |log: &str, name: &str| {
        let (path, rel) = (format!("/{name}\""), format!("\"{name}\""));
        log.lines()
            .filter(|l| l.contains(&path) || l.contains(&rel))
            .count()
    };
    let catalog = catalog.to_str().unwrap();
    let audit_args = ["--host", "rpc-1.example", "--manifest", catalog, "audit"];
    let Some(audit) = opened(&audit_args) else {
        eprintln!("skipped: strace is not installed");
        return;
    };
    for name in [
        "scaling_driver",
        "scaling_available_governors",
        "energy_performance_available_preferences",
    ] {
        // Once per survey of each cpufreq knob (two in the catalog) at most.
        let n = count(&audit, name);
        assert!((1..=3).contains(&n), "audit opened {name} {n} times");
    }
    // The governor and EPP of each policy are read, the governor once for
    // the governor and the EPP knob (1,024 times before).
    assert_eq!(count(&audit, "scaling_governor"), 512);
    assert_eq!(count(&audit, "energy_performance_preference"), 512);

    // The cpuidle knobs select states by exit latency, an attribute of the
    // one idle driver's table: read on the first CPU, then the last state's
    // once per other CPU (512 CPUs x 5 states = 2,560 reads a knob before).
    // The catalog has two (the RPC example and the baseline's), each its own survey.
    let latency = count(&audit, "latency");
    assert!(
        (1024..=1060).contains(&latency),
        "audit opened latency {latency} times"
    );

    let freq = opened(&["inventory", "frequency"]).unwrap();
    assert_eq!(count(&freq, "scaling_driver"), 1);
    assert_eq!(count(&freq, "scaling_governor"), 512);
}
