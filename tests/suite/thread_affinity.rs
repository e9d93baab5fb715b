//! `thread-affinity` on a copy of the VM capture holding the real thread
//! files (`/proc/PID/task/TID/stat` and `status`) of a process running on
//! this machine: chosen by name, moved, read back, reverted; a thread that
//! exited since is skipped and counted; a capture without threads says so.

use std::path::Path;

use crate::support::*;

fn allowed(status: &Path) -> String {
    allowed_in(status)
}

const KNOB: &str = "persistence: runtime\nkind: thread-affinity\ntarget: {include: ['^hk-threads$'], exclude: [never-this]}\nset: 1\n";

#[test]
fn thread_affinity_moves_the_chosen_threads_and_revert_puts_them_back() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-threads");
    let dirs = s.capture_into(&root);
    // Another process's thread, which the pattern does not choose.
    let other = Sleeper::start("hk-bystander");
    let other_dirs = other.capture_into(&root);
    let status = dirs[0].join("status");
    let before = allowed(&status);
    assert_ne!(before, "1", "the sleeper starts allowed on every CPU");
    let m = knobs(&[("threads", KNOB)]);

    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    let path = format!("/proc/{}/task/{}/affinity@", s.pid(), s.pid());
    assert!(plan.contains(&path), "{plan}");
    assert!(plan.contains(&format!("\n-{before}\n+1\n")), "{plan}");
    assert!(
        plan.contains("1 threads chosen, 1 of them also allowed outside CPUs 1"),
        "{plan}"
    );
    assert!(!plan.contains(&format!("/proc/{}/", other.pid())), "{plan}");
    assert_eq!(allowed(&status), before, "a dry run changes nothing");

    ok(&run(&root, m.path(), &["apply", "threads"]));
    assert_eq!(allowed(&status), "1");
    assert_eq!(
        allowed(&other_dirs[0].join("status")),
        before,
        "not chosen: untouched"
    );
    let j = journal(&root);
    assert_eq!(j.len(), dirs.len());
    assert_eq!(j[0]["mode"], "affinity");
    assert_eq!(j[0]["before"], before.as_str());

    // Applied and in effect: ok, no drift (a runtime knob: unpersisted).
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "threads");
    assert_eq!(k["status"], "unpersisted", "{k:#}");

    let text = ok(&run(&root, m.path(), &["revert", "threads"]));
    assert!(text.contains("threads"), "{text}");
    assert_eq!(allowed(&status), before);
    assert!(journal(&root).is_empty());
}

#[test]
fn a_thread_that_exited_since_the_apply_is_skipped_and_counted() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-threads");
    let dirs = s.capture_into(&root);
    let m = knobs(&[("threads", KNOB)]);
    ok(&run(&root, m.path(), &["apply", "threads"]));
    // The thread exits; a new one gets its number with another start time.
    let stat = dirs[0].join("stat");
    let text = std::fs::read_to_string(&stat).unwrap();
    let close = text.rfind(')').unwrap();
    let mut fields: Vec<String> = text[close + 1..]
        .split_whitespace()
        .map(String::from)
        .collect();
    let start: u64 = fields[19].parse().unwrap();
    fields[19] = (start + 1000).to_string();
    std::fs::write(&stat, format!("{} {}\n", &text[..=close], fields.join(" "))).unwrap();
    let o = run(&root, m.path(), &["revert", "threads"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        stderr(&o).contains("1 thread(s) moved by apply have exited since: nothing to restore"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        allowed(&dirs[0].join("status")),
        "1",
        "another thread's file is never written"
    );
    assert!(journal(&root).is_empty(), "the entry is dropped");
}

#[test]
fn a_capture_without_threads_is_not_applicable_with_the_reason() {
    let (_tmp, root) = vm();
    let m = knobs(&[("threads", KNOB)]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "threads");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k.to_string().contains("no threads under /proc here"),
        "{k:#}"
    );
    // No CPU of `set` online: unsupported, naming the CPUs.
    let s = Sleeper::start("hk-threads");
    s.capture_into(&root);
    let m = knobs(&[("threads", &KNOB.replace("set: 1", "set: 7-9"))]);
    let o = run(&root, m.path(), &["apply", "threads"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        err(&o).contains("none of CPUs 7-9 is online"),
        "{}",
        err(&o)
    );
}

/// This test process's own thread files (the harness names its threads
/// after the tests: names unlike the process's), copied into the tree.
fn capture_self(root: &Path) -> (u32, usize) {
    let pid = std::process::id();
    let mut n = 0;
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let tid = e.unwrap().file_name();
        let src = Path::new("/proc/self/task").join(&tid);
        let dst = root.join(format!("proc/{pid}/task")).join(&tid);
        let (Ok(stat), Ok(status)) = (
            std::fs::read(src.join("stat")),
            std::fs::read(src.join("status")),
        ) else {
            continue; // exited meanwhile: not in the tree
        };
        let text = String::from_utf8_lossy(&stat).to_string();
        let state = text[text.rfind(')').unwrap() + 1..]
            .trim_start()
            .chars()
            .next();
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("stat"), &stat).unwrap();
        std::fs::write(dst.join("status"), &status).unwrap();
        n += usize::from(!matches!(state, Some('Z' | 'X')));
    }
    (pid, n)
}

#[test]
fn a_process_left_out_by_name_keeps_every_thread_as_tuned_does() {
    let (_tmp, root) = vm();
    let (pid, threads) = capture_self(&root);
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let comm = comm.trim();
    // Excluded by the process's name: none of its threads moves, whatever theirs.
    let knob = format!(
        "persistence: runtime\nkind: thread-affinity\ntarget: {{exclude: ['^{}$']}}\nset: 1\n",
        regex_escape(comm)
    );
    let m = knobs(&[("threads", &knob)]);
    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    assert!(!plan.contains(&format!("/proc/{pid}/")), "{plan}");
    assert!(
        plan.contains(&format!("{threads} threads match target.exclude")),
        "{plan}"
    );
    // Included by a thread's name only: the process does not match, so nothing.
    let knob = "persistence: runtime\nkind: thread-affinity\ntarget: {include: ['^thread_affin']}\nset: 1\n";
    let m = knobs(&[("threads", knob)]);
    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    assert!(!plan.contains(&format!("/proc/{pid}/")), "{plan}");
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c.is_ascii_alphanumeric() || c == '_' {
            true => vec![c],
            false => vec!['\\', c],
        })
        .collect()
}

#[test]
fn a_thread_its_cpuset_keeps_off_set_is_left_alone_and_counted() {
    let (_tmp, root) = vm();
    let s = Sleeper::start("hk-threads");
    let dirs = s.capture_into(&root);
    // A container pinned to CPU 0: its cgroup allows 0, the thread runs on 0.
    let status = dirs[0].join("status");
    let text = std::fs::read_to_string(&status).unwrap();
    let pinned: String = text
        .lines()
        .map(|l| match l.starts_with("Cpus_allowed_list:") {
            true => "Cpus_allowed_list:\t0\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&status, pinned).unwrap();
    write_files(
        &root,
        &[
            (
                &format!("proc/{}/task/{}/cpuset", s.pid(), s.pid()),
                "/kubepods.slice/pod1\n",
            ),
            (
                "sys/fs/cgroup/kubepods.slice/pod1/cpuset.cpus.effective",
                "0\n",
            ),
        ],
    );
    let m = knobs(&[("threads", KNOB)]);
    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    assert!(!plan.contains(&format!("/proc/{}/", s.pid())), "{plan}");
    assert!(
        plan.contains("1 threads are kept by their cpuset to CPUs outside 1"),
        "{plan}"
    );
    // Its cgroup allows CPU 1 too: moved there.
    write_files(
        &root,
        &[(
            "sys/fs/cgroup/kubepods.slice/pod1/cpuset.cpus.effective",
            "0-1\n",
        )],
    );
    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    assert!(plan.contains("\n-0\n+1\n"), "{plan}");
}

#[test]
fn revert_never_writes_a_thread_entry_of_another_boot_even_forced() {
    let (_tmp, root) = vm();
    let boot = "proc/sys/kernel/random/boot_id";
    write_files(&root, &[(boot, "boot-one\n")]);
    let s = Sleeper::start("hk-threads");
    let dirs = s.capture_into(&root);
    let m = knobs(&[("threads", KNOB)]);
    ok(&run(&root, m.path(), &["apply", "threads"]));
    assert_eq!(allowed(&dirs[0].join("status")), "1");
    // A reboot: the same numbers and start time now name another thread.
    write_files(&root, &[(boot, "boot-two\n")]);
    let o = run(&root, m.path(), &["revert", "threads", "--force"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains("stale"), "{}", err(&o));
    assert_eq!(allowed(&dirs[0].join("status")), "1", "not written");
    assert!(journal(&root).is_empty());
}

/// tuned's `cgroup_ps_blacklist` as `exclude-cgroup`: the process in a
/// matching cgroup (its `cgroup` file, lines last to first joined by `,`)
/// is left alone and counted; the other one is moved.
#[test]
fn threads_in_an_excluded_cgroup_are_left_alone_and_counted() {
    let (_tmp, root) = vm();
    let pod = Sleeper::start("hk-cg");
    let pod_dirs = pod.capture_into(&root);
    let free = Sleeper::start("hk-free");
    let free_dirs = free.capture_into(&root);
    for d in &pod_dirs {
        std::fs::write(
            d.join("cgroup"),
            "1:name=systemd:/x\n0::/kubepods.slice/kubepods-pod1.slice/cri-1.scope\n",
        )
        .unwrap();
    }
    for d in &free_dirs {
        std::fs::write(d.join("cgroup"), "0::/system.slice/hk.service\n").unwrap();
    }
    let before = allowed(&pod_dirs[0].join("status"));
    let m = knobs(&[(
        "threads",
        "persistence: runtime\nkind: thread-affinity\n\
         target: {include: ['^hk-(cg|free)$'], exclude-cgroup: ['cri-1\\.scope,1:name']}\nset: 1\n",
    )]);
    let plan = ok(&run(&root, m.path(), &["apply", "threads", "--dry-run"]));
    assert!(
        plan.contains("1 threads are in cgroups matching target.exclude-cgroup and are left alone"),
        "{plan}"
    );
    assert!(!plan.contains(&format!("/proc/{}/", pod.pid())), "{plan}");
    assert!(plan.contains(&format!("/proc/{}/", free.pid())), "{plan}");
    ok(&run(&root, m.path(), &["apply", "threads"]));
    assert_eq!(allowed(&free_dirs[0].join("status")), "1");
    assert_eq!(
        allowed(&pod_dirs[0].join("status")),
        before,
        "excluded: untouched"
    );
    ok(&run(&root, m.path(), &["revert", "threads"]));
}
