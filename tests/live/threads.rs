//! Live thread placement (issue 23: tuned's `isolated_cores` thread moves):
//! a `thread-affinity` knob moves a process of this test, chosen by its
//! name, to CPU 0 with `sched_setaffinity(2)`; revert gives it back its CPUs;
//! a thread that exited before the revert is counted, not an error. Every
//! other thread of the machine keeps its CPUs (compared before and after).
//! The only thread changed is the test's own child, killed on every path.

use std::path::Path;

use super::support::*;

/// Every thread's (directory, start time) and `Cpus_allowed_list` but those
/// of `skip` (a pid) and this process.
fn affinities(skip: u32) -> Vec<((String, String), String)> {
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
            // Field 22 of stat (after the parenthesised name): a reused
            // pid is another thread.
            let start = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|st| st.rsplit_once(") ").map(|(_, r)| r.to_string()))
                .and_then(|r| r.split_whitespace().nth(19).map(str::to_string));
            if let Ok(s) = std::fs::read_to_string(t.path().join("status"))
                && let Some(l) = s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                && let Some(start) = start
            {
                out.push((
                    (t.path().display().to_string(), start),
                    l.trim().to_string(),
                ));
            }
        }
    }
    out.sort();
    out
}

fn allowed(pid: u32) -> String {
    allowed_in(Path::new(&format!("/proc/{pid}/status")))
}

const KNOB: (&str, &str) = (
    "live-threads",
    "persistence: runtime\nkind: thread-affinity\ntarget: {include: ['^hk-live-thr$']}\nset: 0\n",
);

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_thread_affinity_moves_a_named_process_to_cpu0_and_revert_gives_its_cpus_back() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    if !Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        eprintln!("live test skipped: one CPU, nowhere to move a thread from");
        return;
    }
    let s = Sleeper::start("hk-live-thr");
    let pid = s.pid();
    let found = allowed(pid);
    assert_ne!(found, "0", "the child starts allowed on more than CPU 0");
    let others = affinities(pid);
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap();
    let m = knobs(&[KNOB]);
    let root = Path::new("/");
    let applied = ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "apply", "live-threads"],
    ));
    assert_eq!(allowed(pid), "0", "{applied}");
    let (report, _) = audit_json(root, m.path(), None);
    let k = knob(&report, "live-threads");
    assert_eq!(k["status"], "unpersisted", "applied and in effect: {k:#}");
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "revert", "live-threads"],
    ));
    assert_eq!(allowed(pid), found);
    // Other work on the machine starts and ends threads meanwhile: those
    // that ran before and still run keep their CPUs.
    let after: std::collections::BTreeMap<_, _> = affinities(pid).into_iter().collect();
    let changed: Vec<_> = others
        .iter()
        .filter(|(k, cpus)| after.get(k).is_some_and(|now| now != cpus))
        .collect();
    let kept = others.iter().filter(|(k, _)| after.contains_key(k)).count();
    assert!(
        kept * 2 > others.len(),
        "{kept} of {} threads still run",
        others.len()
    );
    assert!(changed.is_empty(), "other threads changed: {changed:?}");
    eprintln!("live thread-affinity: {found} -> 0 -> {found}");

    // Exits before the revert: counted, nothing written, exit 0.
    ok(&run(
        root,
        m.path(),
        &["--state-dir", st, "apply", "live-threads"],
    ));
    drop(s);
    let o = run(
        root,
        m.path(),
        &["--state-dir", st, "revert", "live-threads"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 thread(s) moved by apply have exited since"),
        "{}",
        stderr(&o)
    );
}
