//! Issue 24 item 6: the wakeup probe splits each sample into the wake and
//! the wait for the CPU (the sleeper's schedstat run delay). With real
//! threads: a busy thread pinned on the sleeper's CPU makes the run delay
//! rise while the wake part does not.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::*;

fn wakeup(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--format",
        "json",
        "probe",
        "wakeup",
        "--samples",
        "300",
        "--gap-us",
        "200..600",
        "--sleeper-cpu",
        "1",
        "--waker-cpu",
        "0",
    ];
    args.extend(extra);
    serde_json::from_str(&ok(&hostknob(&args))).unwrap()
}

fn mean(v: &serde_json::Value) -> f64 {
    v["split"]["run_delay"]["mean_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("run_delay.mean_ns: {}", v["split"]))
}

fn p(v: &serde_json::Value, part: &str, q: &str) -> u64 {
    v["split"][part][q]
        .as_u64()
        .unwrap_or_else(|| panic!("{part}.{q}: {}", v["split"]))
}

/// A quiet run and one with a busy thread on the sleeper's CPU; `None`
/// when the thread cannot be raised to nice -20.
fn quiet_and_busy() -> Option<(serde_json::Value, serde_json::Value)> {
    let quiet = wakeup(&[]);
    assert_eq!(quiet["split"]["source"], "/proc/thread-self/schedstat");
    // The busy thread runs at nice -20: under EEVDF (Linux 6.6 on) a woken
    // nice-0 thread preempts a nice-0 spinner at once, so it waits for
    // nothing; against a weight of 88761 to its 1024 it waits its turn
    // (3.3 ms p50 on the 2-CPU VM, kernel 6.18).
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    let busy = std::thread::scope(|s| {
        s.spawn(|| {
            let mut set = nix::sched::CpuSet::new();
            set.set(1).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
            let tid = nix::unistd::gettid().as_raw() as libc::id_t;
            // SAFETY: setpriority on this thread's own id.
            let raised = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, -20) } == 0;
            tx.send(raised).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let raised = rx.recv().unwrap();
        let v = raised.then(|| wakeup(&[]));
        stop.store(true, Ordering::Relaxed);
        v
    });
    busy.map(|b| (quiet, b))
}

#[test]
fn a_busy_thread_on_the_sleepers_cpu_raises_the_run_delay_not_the_wake() {
    // The whole suite shares these 2 CPUs: a pair whose busy run did not
    // hold CPU 1 (other tests' threads there) is measured again, at most 3 times.
    let mut tries = Vec::new();
    let (quiet, busy) = loop {
        let Some((quiet, busy)) = quiet_and_busy() else {
            eprintln!("skipped: cannot raise a thread to nice -20 (needs CAP_SYS_NICE)");
            return;
        };
        let (q, b) = (mean(&quiet), mean(&busy));
        tries.push(format!(
            "run delay mean {q:.0} ns quiet, {b:.0} ns with a busy thread"
        ));
        if (b > 2.0 * q && b >= 500.0) || tries.len() == 3 {
            break (quiet, busy);
        }
    };
    // Every sample is split: the parts add up to its latency.
    for v in [&quiet, &busy] {
        assert_eq!(p(v, "wake", "samples"), 300);
        assert!(
            p(v, "run_delay", "min_ns") <= v["min_ns"].as_u64().unwrap(),
            "{}",
            v["split"]
        );
    }
    // The mean, not the median: the spinner's slices make some wakes wait
    // milliseconds while others (EEVDF's lag credit) run at once; which share
    // varies from run to run (p50 0 or 3.3 ms, p95 3.4 ms, on the VM).
    let (q_delay, b_delay) = (mean(&quiet), mean(&busy));
    assert!(b_delay > 2.0 * q_delay && b_delay >= 500.0, "{tries:?}");
    // Sharing the CPU costs a wait for it; the wake itself (no idle exit
    // now) is not slower for it.
    let (q_wake, b_wake) = (p(&quiet, "wake", "p50_ns"), p(&busy, "wake", "p50_ns"));
    assert!(
        b_wake <= q_wake + q_wake / 2 + 10_000,
        "wake p50 {q_wake} ns quiet, {b_wake} ns with a busy thread"
    );
    let table = ok(&hostknob(&[
        "probe",
        "wakeup",
        "--samples",
        "20",
        "--gap-us",
        "200..600",
    ]));
    assert!(
        table.contains("the wake, then the wait for the CPU"),
        "{table}"
    );
}
