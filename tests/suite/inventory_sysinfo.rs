//! sysinfo as a second, independent reader of this live host (read-only): CPU
//! count and memory total against `inventory`, a process's RSS against
//! `probe rss`, its CPU time against `probe idle-cpu`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(script: &str) -> Reaped {
    Reaped(
        Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn cpu_count_and_memory_total_agree_with_sysinfo() {
    let inv = json(&["inventory"]);
    let mut sys = System::new().expect("sysinfo supports Linux");
    sys.refresh_cpu_all();
    sys.refresh_memory();
    assert_eq!(
        inv["cpu"]["online_count"].as_u64().unwrap(),
        sys.cpus().len() as u64,
        "online CPUs"
    );
    let ours = inv["memory"]["mem_total_kib"].as_u64().unwrap() * 1024;
    assert_eq!(ours, sys.total_memory(), "MemTotal in bytes");
}

fn refresh(sys: &mut System, pid: Pid) -> &sysinfo::Process {
    sys.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing().with_memory().with_cpu(),
    );
    sys.process(pid).expect("the child is alive")
}

#[test]
fn a_process_rss_agrees_with_sysinfo() {
    // A shell holding ~8 MiB in a variable, then sleeping: its RSS is still.
    let child = spawn("x=$(head -c 8000000 /dev/zero | tr '\\0' a); sleep 30");
    let pid = child.0.id();
    std::thread::sleep(Duration::from_millis(700));
    let mut sys = System::new().expect("sysinfo supports Linux");
    let theirs_kib = refresh(&mut sys, Pid::from_u32(pid)).memory() / 1024;
    let v = json(&[
        "probe",
        "rss",
        "--pid",
        &pid.to_string(),
        "--duration",
        "300ms",
    ]);
    let ours_kib = v["decay"]["end"]["rss_kb"].as_u64().unwrap();
    assert!(
        theirs_kib > 8000,
        "the child should hold its 8 MB: {theirs_kib} KiB"
    );
    let diff = ours_kib.abs_diff(theirs_kib);
    assert!(
        diff * 20 <= theirs_kib,
        "probe rss {ours_kib} KiB vs sysinfo {theirs_kib} KiB (more than 5% apart)"
    );
}

#[test]
fn a_process_cpu_time_agrees_with_sysinfo() {
    let child = spawn("while :; do :; done");
    let pid = Pid::from_u32(child.0.id());
    let mut sys = System::new().expect("sysinfo supports Linux");
    let before = refresh(&mut sys, pid).accumulated_cpu_time();
    let v = json(&[
        "probe",
        "idle-cpu",
        "--pid",
        &pid.to_string(),
        "--window",
        "300ms",
        "--windows",
        "2",
    ]);
    let after = refresh(&mut sys, pid).accumulated_cpu_time();
    let hz = v["settings"]["clock_ticks_per_s"].as_u64().unwrap();
    let ticks: u64 = v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["cpu_ticks"].as_u64().unwrap())
        .sum();
    let ours_ms = ticks * 1000 / hz;
    let theirs_ms = after - before;
    // The probe's windows lie inside sysinfo's interval: never more CPU than
    // that (one tick of rounding per window), and a busy loop gets some.
    assert!(
        theirs_ms > 0 && ours_ms > 0,
        "ours {ours_ms} ms, sysinfo {theirs_ms} ms"
    );
    assert!(
        ours_ms <= theirs_ms + 2 * 1000 / hz,
        "probe idle-cpu counted {ours_ms} ms, sysinfo saw {theirs_ms} ms in a longer interval"
    );
}
