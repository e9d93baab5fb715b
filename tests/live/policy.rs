//! Live scheduling policy (issue 46 item 3): a `thread-policy` knob sets a
//! process this test starts (a copy of sleep(1) under a name of its own,
//! killed on every path, a panic included) to SCHED_FIFO 10, checked with
//! `chrt -p`; revert puts it back to SCHED_OTHER, checked again. No other
//! thread of the machine changes (compared before and after). And the
//! scheduler tunables (item 4): audit reads one through debugfs, mounted
//! for the run where it is not and unmounted after, the mount table left
//! as found.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::support::*;

const KNOB: (&str, &str) = (
    "live-policy",
    "persistence: runtime\nkind: thread-policy\ntarget: {include: ['^hk-live-pol$']}\nset: {policy: fifo, priority: 10}\n",
);

const BATCH: (&str, &str) = (
    "live-batch",
    "persistence: runtime\nkind: thread-policy\ntarget: {include: ['^hk-live-pol$']}\nset: {policy: batch, nice: 5}\n",
);

/// `chrt -p PID`'s two lines: the policy and the priority.
fn chrt(pid: u32) -> String {
    let o = Command::new("chrt")
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .expect("chrt(1)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every thread's policy, RT priority and nice (stat fields 41, 40, 19) but
/// `skip`'s and this process's, by its directory and start time (field 22:
/// a number reused by a new thread is another key).
fn policies(skip: u32) -> BTreeMap<(String, String), String> {
    let me = std::process::id().to_string();
    let mut out = BTreeMap::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = p.file_name().to_string_lossy().to_string();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == skip.to_string() || pid == me {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .collect();
            out.insert(
                (t.path().display().to_string(), f[19].to_string()),
                format!("{} {} {}", f[38], f[37], f[16]),
            );
        }
    }
    out
}

/// The threads of `before` still running in `after` hold what they held
/// (threads of other work on the machine come and go meanwhile).
fn unchanged(
    before: &BTreeMap<(String, String), String>,
    after: &BTreeMap<(String, String), String>,
) {
    let mut both = 0;
    for (k, v) in before {
        if let Some(w) = after.get(k) {
            assert_eq!(v, w, "{} changed", k.0);
            both += 1;
        }
    }
    assert!(
        before.keys().any(|(d, _)| d == "/proc/1/task/1") && both > 0,
        "init's thread and others compared"
    );
}

/// stat fields 41 (policy), 40 (rt_priority) and 19 (nice) of `pid`.
fn sched_of(pid: u32) -> (String, String, String) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    (f[38].into(), f[37].into(), f[16].into())
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_thread_policy_sets_fifo_10_and_revert_gives_other_back() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let s = Sleeper::start("hk-live-pol");
    let pid = s.pid();
    let found = chrt(pid);
    assert!(
        found.contains("SCHED_OTHER") && found.contains("priority: 0"),
        "{found}"
    );
    let found_sched = sched_of(pid);
    let others = policies(pid);
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap();
    let m = knobs(&[KNOB, BATCH]);
    let root = Path::new("/");
    let applied = ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "apply", "live-policy"],
    ));
    let now = chrt(pid);
    assert!(
        now.contains("SCHED_FIFO") && now.contains("priority: 10"),
        "{now}\n{applied}"
    );
    assert!(
        applied.contains("kernel.sched_rt_runtime_us is"),
        "RT throttling stated: {applied}"
    );
    let (report, _) = audit_json(root, m.path(), None);
    let k = knob(&report, "live-policy");
    assert_eq!(k["status"], "unpersisted", "applied and in effect: {k:#}");
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "revert", "live-policy"],
    ));
    let back = chrt(pid);
    assert!(
        back.contains("SCHED_OTHER") && back.contains("priority: 0"),
        "{back}"
    );
    assert_eq!(
        sched_of(pid),
        found_sched,
        "policy, priority and nice as found"
    );

    // setpriority(2): SCHED_BATCH at nice 5 (not the sleeper's own), and back.
    let nice = if found_sched.2 == "5" { "6" } else { "5" };
    let batch = BATCH.1.replace("nice: 5", &format!("nice: {nice}"));
    let m = knobs(&[KNOB, ("live-batch", batch.as_str())]);
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "apply", "live-batch"],
    ));
    assert_eq!(sched_of(pid), ("3".into(), "0".into(), nice.to_string()));
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "revert", "live-batch"],
    ));
    assert_eq!(
        sched_of(pid),
        found_sched,
        "SCHED_OTHER at its own nice again"
    );
    unchanged(&others, &policies(pid));
    eprintln!(
        "live thread-policy: SCHED_OTHER -> SCHED_FIFO 10 -> SCHED_OTHER, then SCHED_BATCH nice {nice} -> SCHED_OTHER nice {} (pid {pid})",
        found_sched.2
    );
}

fn debugfs_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some("/sys/kernel/debug"))
        .map(str::to_string)
        .collect()
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_sched_tunable_reads_through_debugfs_and_leaves_the_mounts_as_found() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    if !std::fs::read_to_string("/proc/filesystems")
        .unwrap()
        .contains("\tdebugfs")
    {
        eprintln!("live test skipped: this kernel has no debugfs (CONFIG_DEBUG_FS)");
        return;
    }
    let before = debugfs_mounts();
    let m = knobs(&[(
        "live-migration",
        "persistence: runtime\nkind: sched-tunable\ntarget: {name: migration_cost_ns}\nset: 500000\n",
    )]);
    // Read only: audit surveys the knob, nothing is written.
    let (report, _) = audit_json(Path::new("/"), m.path(), None);
    let k = knob(&report, "live-migration");
    assert_eq!(debugfs_mounts(), before, "the mount table as found");
    if k["status"] == "unreadable" {
        // Kernel lockdown answers EPERM to every debugfs read: said, not failed.
        let detail = k["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("kernel lockdown"), "{k:#}");
        eprintln!(
            "live sched-tunable: value not read, this kernel is locked down ({detail}); the mounts as found"
        );
        return;
    }
    let current = k["current"][0]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{k:#}"));
    assert!(
        current.parse::<u64>().is_ok(),
        "a number read from debugfs: {k:#}"
    );
    eprintln!(
        "live sched-tunable: migration_cost_ns {current} read ({})",
        if before.is_empty() {
            "debugfs mounted for the run and unmounted"
        } else {
            "debugfs already mounted"
        }
    );
}
