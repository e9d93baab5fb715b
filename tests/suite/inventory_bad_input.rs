//! Bad roots and bad files: a clear one-line message naming what was wrong,
//! no panic, and for a damaged file the rest of the inventory still printed.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::support::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_no_panic(out: &std::process::Output) {
    let e = stderr(out);
    assert!(!e.contains("panicked"), "panic: {e}");
}

#[test]
fn a_root_that_does_not_exist() {
    let out = hostknob(&["--root", "/nonexistent/hostknob-root", "inventory"]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("/nonexistent/hostknob-root") && e.contains("cannot open"),
        "{e}"
    );
}

#[test]
fn a_root_without_sys_or_proc() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    let out = hostknob(&["--root", dir.path().to_str().unwrap(), "inventory"]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("neither sys/ nor proc/"), "{e}");
}

#[test]
fn garbage_in_a_latency_file_is_named_and_the_rest_still_reads() {
    let copy = corpus_copy("spr1");
    let f = copy
        .path()
        .join("sys/devices/system/cpu/cpu0/cpuidle/state2/latency");
    std::fs::write(&f, "abc\n").unwrap();
    let out = hostknob(&[
        "--root",
        copy.path().to_str().unwrap(),
        "inventory",
        "--format",
        "json",
    ]);
    assert_no_panic(&out);
    let inv = json_of(&out);
    let e = stderr(&out);
    assert!(
        e.contains("/sys/devices/system/cpu/cpu0/cpuidle/state2/latency: expected a whole number, found \"abc\""),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        inv["idle"]["states"][2]["latency_us"].is_null(),
        "no guessed latency"
    );
    assert_eq!(
        inv["idle"]["states"][3]["latency_us"], 290,
        "other states unaffected"
    );
    assert_eq!(inv["cpu"]["online_count"], 320);
}

#[test]
fn an_empty_proc_cpuinfo() {
    let copy = corpus_copy("spr1");
    std::fs::write(copy.path().join("proc/cpuinfo"), "").unwrap();
    let out = hostknob(&[
        "--root",
        copy.path().to_str().unwrap(),
        "inventory",
        "--format",
        "json",
    ]);
    assert_no_panic(&out);
    let inv = json_of(&out);
    assert!(
        stderr(&out).contains("/proc/cpuinfo: no `processor` entries"),
        "{}",
        stderr(&out)
    );
    // spr1 exposes no sysfs topology: with no cpuinfo the counts are unknown, not zero.
    assert!(inv["cpu"]["cores"].is_null());
    assert!(inv["cpu"]["packages"].is_null());
    assert!(inv["cpu"]["model_name"].is_null());
    assert_eq!(
        inv["cpu"]["online"], "0-319",
        "online CPUs still come from sysfs"
    );
    let table = hostknob(&["--root", copy.path().to_str().unwrap(), "inventory"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("CPU topology"),
        "table names what is missing"
    );
}

/// Root reads everything, so the unreadable case runs the binary as `nobody`.
#[test]
fn an_unreadable_file_is_reported_and_capture_lists_it() {
    let copy = corpus_copy("fc-haltpoll-2cpu");
    let secret = copy
        .path()
        .join("sys/devices/system/cpu/cpu1/cpuidle/state1/usage");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let is_root = unsafe { libc::geteuid() } == 0;
    let run = |args: &[&str]| {
        let mut cmd = hostknob_command(args);
        if is_root {
            // The temp tree must be traversable by nobody.
            Command::new("chmod")
                .arg("-R")
                .arg("a+rX")
                .arg(copy.path())
                .status()
                .unwrap();
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
            cmd.uid(65534).gid(65534);
        }
        cmd.output().unwrap()
    };
    let root = copy.path().to_str().unwrap();
    let out = run(&["--root", root, "inventory", "--format", "json"]);
    assert_no_panic(&out);
    let inv = json_of(&out);
    assert!(
        stderr(&out)
            .contains("/sys/devices/system/cpu/cpu1/cpuidle/state1/usage: Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(
        inv["idle"]["states"][1]["usage"].is_null(),
        "a sum missing one CPU is not reported"
    );

    let outdir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outdir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let target = outdir.path().join("cap");
    let out = run(&["--root", root, "capture", "--out", target.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("skipped 1 unreadable") && stdout.contains("state1/usage"),
        "{stdout}"
    );
    let meta = std::fs::read_to_string(target.join("hostknob-capture.yaml")).unwrap();
    assert!(
        meta.contains("/sys/devices/system/cpu/cpu1/cpuidle/state1/usage"),
        "{meta}"
    );
}

/// Per-CPU files are read on all cores, yet their warnings come in the order
/// of a serial pass (CPU by CPU, section by section) on every run.
#[test]
fn warnings_from_many_cpus_keep_their_order() {
    let (_tmp, root) = copy_host("gnr0");
    let cpus = [3u32, 70, 200, 333, 511];
    for cpu in cpus {
        let base = root.join(format!("sys/devices/system/cpu/cpu{cpu}"));
        std::fs::write(base.join("power/pm_qos_resume_latency_us"), b"\xff\xfe\n").unwrap();
        std::fs::write(base.join("cpuidle/state1/usage"), b"lots\n").unwrap();
        std::fs::write(base.join("power/energy_perf_bias"), b"x\n").unwrap();
    }
    let run = || {
        let out = inventory_json(&root);
        assert_no_panic(&out);
        json_of(&out)["warnings"].clone()
    };
    let first = run();
    let warnings: Vec<&str> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let position = |needle: String| {
        warnings
            .iter()
            .position(|w| w.contains(&needle))
            .unwrap_or_else(|| panic!("no warning about {needle}: {warnings:#?}"))
    };
    for kind in [
        "cpuidle/state1/usage",
        "power/pm_qos_resume_latency_us",
        "power/energy_perf_bias",
    ] {
        let at: Vec<usize> = cpus
            .iter()
            .map(|c| position(format!("cpu{c}/{kind}")))
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{kind} out of CPU order: {warnings:#?}"
        );
    }
    for _ in 0..4 {
        assert_eq!(run(), first, "the warnings changed between runs");
    }
}
