//! Live scheduling policy (issue 46 item 3): a `thread-policy` knob sets a
//! process this test starts (a copy of sleep(1) under a name of its own,
//! killed on every path, a panic included) to SCHED_FIFO 10, checked with
//! `chrt -p`; revert puts it back to SCHED_OTHER, checked again. No other
//! thread of the machine changes (compared before and after). And the
//! scheduler tunables (item 4): audit reads one through debugfs, mounted
//! for the run where it is not and unmounted after, the mount table left
//! as found.

use std::path::Path;
use std::process::Command;

use super::support::*;

const KNOB: (&str, &str) = (
    "live-policy",
    "persistence: runtime\nkind: thread-policy\ntarget: {include: ['^hk-live-pol$']}\nset: {policy: fifo, priority: 10}\n",
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

/// Every thread's policy, RT priority and nice (stat fields 41, 40, 19) but `skip`'s and this process's.
fn policies(skip: u32) -> Vec<(String, String)> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
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
            out.push((
                t.path().display().to_string(),
                format!("{} {} {}", f[38], f[37], f[16]),
            ));
        }
    }
    out.sort();
    out
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
    let others = policies(pid);
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap();
    let m = knobs(&[KNOB]);
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
    assert_eq!(policies(pid), others, "no other thread changed");
    eprintln!("live thread-policy: SCHED_OTHER -> SCHED_FIFO 10 -> SCHED_OTHER (chrt -p {pid})");
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
