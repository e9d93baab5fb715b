//! `thread-policy` (issue 46 item 3) on a copy of the VM capture holding the
//! real thread files (`/proc/PID/task/TID/stat`, `status`) of processes
//! running on this machine: chosen by name as `thread-affinity` chooses,
//! set, read back, reverted to each thread's own policy; a thread the
//! kernel refuses is named and left out; a thread started since the apply
//! is named by audit; RT throttling stated.

use std::path::Path;

use crate::support::*;

const FIFO: &str = "persistence: runtime\nkind: thread-policy\ntarget: {include: ['^hk-policy$']}\nset: {policy: fifo, priority: 10}\n";

/// (policy, rt_priority, nice, priority) of a captured `stat`: fields 41, 40, 19, 18.
fn sched(stat: &Path) -> (String, String, String, String) {
    let text = std::fs::read_to_string(stat).unwrap();
    let f: Vec<&str> = text[text.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    (f[38].into(), f[37].into(), f[16].into(), f[15].into())
}

/// Sets field 22 (start time, clock ticks since boot) of a captured `stat`.
fn set_start(stat: &Path, ticks: u64) {
    let text = std::fs::read_to_string(stat).unwrap();
    let close = text.rfind(')').unwrap();
    let mut f: Vec<String> = text[close + 1..]
        .split_whitespace()
        .map(String::from)
        .collect();
    f[19] = ticks.to_string();
    std::fs::write(stat, format!("{} {}\n", &text[..=close], f.join(" "))).unwrap();
}

#[test]
fn thread_policy_sets_the_chosen_threads_and_revert_puts_each_back() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-policy");
    let dirs = s.capture_into(&root);
    let other = Sleeper::start("hk-bystander");
    let other_dirs = other.capture_into(&root);
    let stat = dirs[0].join("stat");
    let found = std::fs::read(&stat).unwrap();
    assert_eq!(sched(&stat).0, "0", "the sleeper starts at SCHED_OTHER");
    // Its own nice (the tests may run under nice(1)), kept by fifo.
    let nice = sched(&stat).2;
    let m = knobs(&[("policy", FIFO)]);

    let plan = ok(&run(&root, m.path(), &["apply", "policy", "--dry-run"]));
    let path = format!("/proc/{}/task/{}/sched@", s.pid(), s.pid());
    assert!(plan.contains(&path), "{plan}");
    assert!(
        plan.contains(&format!("\n-other nice {nice}\n+fifo 10 nice {nice}\n")),
        "{plan}"
    );
    assert!(
        plan.contains("1 threads chosen, 1 of them not at fifo 10 now"),
        "{plan}"
    );
    // The VM capture's RT runtime (its period is not in the capture).
    assert!(
        plan.contains("kernel.sched_rt_runtime_us is 950000"),
        "{plan}"
    );
    assert!(!plan.contains(&format!("/proc/{}/", other.pid())), "{plan}");
    assert_eq!(
        std::fs::read(&stat).unwrap(),
        found,
        "a dry run changes nothing"
    );

    ok(&run(&root, m.path(), &["apply", "policy"]));
    // SCHED_FIFO (1) at 10; proc(5)'s priority field -1 - 10.
    assert_eq!(
        sched(&stat),
        ("1".into(), "10".into(), nice.clone(), "-11".into())
    );
    assert_eq!(
        sched(&other_dirs[0].join("stat")).0,
        "0",
        "not chosen: untouched"
    );
    let j = journal(&root);
    assert_eq!(j.len(), dirs.len());
    assert_eq!(j[0]["mode"], "sched");
    assert_eq!(j[0]["before"], format!("other nice {nice}"));

    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(
        knob(&report, "policy")["status"],
        "unpersisted",
        "{report:#}"
    );

    ok(&run(&root, m.path(), &["revert", "policy"]));
    assert_eq!(
        std::fs::read(&stat).unwrap(),
        found,
        "the stat line as found, byte for byte"
    );
    assert!(journal(&root).is_empty());
}

#[test]
fn nice_is_set_for_other_and_put_back() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-policy");
    let dirs = s.capture_into(&root);
    let stat = dirs[0].join("stat");
    let found = std::fs::read(&stat).unwrap();
    let knob_text = FIFO.replace("{policy: fifo, priority: 10}", "{policy: batch, nice: -5}");
    let m = knobs(&[("policy", &knob_text)]);
    ok(&run(&root, m.path(), &["apply", "policy"]));
    // SCHED_BATCH (3), nice -5, proc(5)'s priority 20 + nice.
    assert_eq!(
        sched(&stat),
        ("3".into(), "0".into(), "-5".into(), "15".into())
    );
    ok(&run(&root, m.path(), &["revert", "policy"]));
    assert_eq!(std::fs::read(&stat).unwrap(), found);
}

#[test]
fn a_thread_the_kernel_refuses_is_named_and_the_others_change() {
    let (_tmp, root) = vm();
    let a = Sleeper::start("hk-policy");
    let b = Sleeper::start("hk-policy");
    let (da, db) = (a.capture_into(&root), b.capture_into(&root));
    let m = knobs(&[("policy", FIFO)]);
    let start = std::fs::read_to_string(da[0].join("stat")).unwrap();
    let start = start[start.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let refused = format!("/proc/{}/task/{}/sched@{start}", a.pid(), a.pid());
    let o = command(&root, m.path(), &["apply", "policy"])
        .env(
            "HOSTKNOB_TEST_WRITE_ERRNO",
            format!("{refused}={}", libc::EPERM),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let text = format!("{}{}", out(&o), err(&o));
    assert!(
        text.contains(&format!("hk-policy ({}/{})", a.pid(), a.pid())) && text.contains("EPERM"),
        "{text}"
    );
    assert_eq!(sched(&da[0].join("stat")).0, "0", "refused: as it was");
    assert_eq!(
        sched(&db[0].join("stat")).0,
        "1",
        "the other thread changed"
    );
}

#[test]
fn audit_names_a_thread_started_since_the_apply() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-policy");
    s.capture_into(&root);
    let m = knobs(&[("policy", FIFO)]);
    ok(&run(&root, m.path(), &["apply", "policy"]));
    // A thread that started a minute after the apply, by the capture's boot time.
    let late = Sleeper::start("hk-policy");
    let dirs = late.capture_into(&root);
    let btime: u64 = std::fs::read_to_string(root.join("proc/stat"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for d in &dirs {
        set_start(&d.join("stat"), (now + 60 - btime) * 100);
    }
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "policy");
    let text = k.to_string();
    assert!(
        text.contains(&format!(
            "hk-policy ({}/{}): started at",
            late.pid(),
            late.pid()
        )) && text.contains("after the apply")
            && text.contains("apply again to cover it"),
        "{k:#}"
    );
    assert!(
        !text.contains(&format!("hk-policy ({}/{}): started", s.pid(), s.pid())),
        "the thread the apply set is not named: {k:#}"
    );
}

#[test]
fn deadline_threads_are_left_alone_and_counted() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-policy");
    let dirs = s.capture_into(&root);
    let stat = dirs[0].join("stat");
    let text = std::fs::read_to_string(&stat).unwrap();
    let close = text.rfind(')').unwrap();
    let mut f: Vec<String> = text[close + 1..]
        .split_whitespace()
        .map(String::from)
        .collect();
    f[38] = "6".into(); // SCHED_DEADLINE
    std::fs::write(&stat, format!("{} {}\n", &text[..=close], f.join(" "))).unwrap();
    let m = knobs(&[("policy", FIFO)]);
    let plan = ok(&run(&root, m.path(), &["apply", "policy", "--dry-run"]));
    assert!(
        plan.contains(&format!("hk-policy ({}/{}, deadline)", s.pid(), s.pid())),
        "{plan}"
    );
    assert!(!plan.contains("/sched@"), "{plan}");
}
