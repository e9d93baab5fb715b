//! Issue 12: hostile trees, crashes and full disks, one test (or more) per
//! numbered defect, each on a copy of a captured host. Every command is run
//! under a hang guard that also reads its peak RSS: no hang, no panic, at
//! most 100 MB.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const THP: (&str, &str) = (
    "thp",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);
const DROPIN: &str = "etc/systemd/system/rpc-node.service.d/zz-hostknob-rjem_malloc_conf.conf";
const RSS_LIMIT_KB: i64 = 100 * 1024;

/// Forks, runs its arguments and writes the child's own peak RSS (kB) to
/// `$HK_RSS_OUT`, ending as the child ended. Started by the suite itself, a
/// command's peak RSS is at least the suite's: Rust spawns with CLONE_VM,
/// and exec keeps the old mm's high-water mark (fs/exec.c `exec_mmap`,
/// `setmax_mm_hiwater_rss`); a fork's copy counts the suite's pages too.
/// A fresh python3 is small, and its fork's exec starts from that.
const SPAWN: &str = "import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, st, ru = os.wait4(pid, 0)
with open(os.environ['HK_RSS_OUT'], 'w') as f:
    f.write(str(ru.ru_maxrss))
if os.WIFSIGNALED(st):
    try:
        signal.signal(os.WTERMSIG(st), signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), os.WTERMSIG(st))
sys.exit(os.WEXITSTATUS(st))
";

/// Runs `c` to its end (killed after 60 s: a hang), returning its output
/// and peak RSS in kB; asserts it did not panic, abort or exceed 100 MB.
pub(crate) fn guarded(c: &mut Command) -> Output {
    guarded_as(c, None)
}

/// [`guarded`], run as `ids` (uid, gid) where given.
pub(crate) fn guarded_as(c: &mut Command, ids: Option<(u32, u32)>) -> Output {
    let rss_out = tempfile::NamedTempFile::new().unwrap();
    std::fs::set_permissions(rss_out.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let python = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| !p.starts_with('/') || Path::new(p).exists())
        .unwrap();
    let mut spawner = Command::new(python);
    spawner
        .arg("-c")
        .arg(SPAWN)
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => spawner.env(k, v),
            None => spawner.env_remove(k),
        };
    }
    if let Some(d) = c.get_current_dir() {
        spawner.current_dir(d);
    }
    spawner.env("HK_RSS_OUT", rss_out.path()).process_group(0);
    if let Some((uid, gid)) = ids {
        spawner.uid(uid).gid(gid);
    }
    let c = &mut spawner;
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().unwrap();
    let mut errp = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).unwrap();
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut errp, &mut v).unwrap();
        v
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break status;
        }
        if Instant::now() > deadline {
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("{c:?}: hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::mem::forget(child);
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    };
    let text = err(&output);
    assert!(
        !text.contains("panicked") && !text.contains("memory allocation"),
        "{c:?}: {text}"
    );
    assert!(
        output.status.code().is_some(),
        "{c:?}: killed by a signal: {text}"
    );
    let rss: i64 = std::fs::read_to_string(rss_out.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{c:?}: no peak RSS: {e}"));
    assert!(rss < RSS_LIMIT_KB, "{c:?}: peak RSS {rss} kB over 100 MB");
    output
}

pub(crate) fn hk(root: &Path, manifest: &Path, args: &[&str]) -> Output {
    guarded(&mut command(root, manifest, args))
}

pub(crate) fn exit1(o: &Output, needles: &[&str]) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout {}\nstderr {}",
        out(o),
        err(o)
    );
    let e = err(o);
    for n in needles {
        assert!(e.contains(n), "{n:?} not in: {e}");
    }
    e
}

pub(crate) fn state(root: &Path) -> PathBuf {
    root.join(STATE_DIR)
}

// 1. The state directory stays inside the root.

#[test]
fn the_state_directory_lock_and_journal_never_leave_the_root() {
    let outside = tempfile::tempdir().unwrap();
    let m = knobs(&[THP]);
    // An absolute and a relative link for the state directory: resolved
    // inside the copy, where they lead nowhere (refused) or to a directory there.
    for how in ["absolute", "relative"] {
        let (_t, root) = vm();
        let target = outside.path().join(how);
        std::fs::create_dir_all(&target).unwrap();
        std::fs::create_dir_all(root.join("var/lib")).unwrap();
        match how {
            "absolute" => symlink(&target, root.join(STATE_DIR)).unwrap(),
            _ => {
                std::fs::remove_dir_all(root.join("var")).unwrap();
                symlink("../../outside-of-it", root.join("var")).unwrap();
            }
        }
        refused(
            &hk(&root, m.path(), &["apply", "thp"]),
            &["leads nowhere inside the root"],
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{how}");
        let inside = root.join(target.strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(root.join("outside-of-it/lib/hostknob")).unwrap();
        ok(&hk(&root, m.path(), &["apply", "thp"]));
        let journal_inside = match how {
            "absolute" => inside.join("journal.jsonl"),
            _ => root.join("outside-of-it/lib/hostknob/journal.jsonl"),
        };
        assert!(
            journal_inside.is_file(),
            "{how}: {}",
            journal_inside.display()
        );
        ok(&hk(&root, m.path(), &["revert", "--all"]));
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{how}");
        // A full revert removes the journal (issue 20 item 17).
        assert!(!journal_inside.exists(), "{how}");
    }
    // A lock that is a link to a file outside: refused, the file intact.
    let (_t, root) = vm();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::create_dir_all(state(&root)).unwrap();
    symlink(&victim, state(&root).join("lock")).unwrap();
    exit1(&hk(&root, m.path(), &["apply", "thp"]), &["symbolic link"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A planted temporary journal name is not followed by revert.
    let (_t, root) = vm();
    ok(&hk(&root, m.path(), &["apply", "thp"]));
    symlink(&victim, state(&root).join(".journal.jsonl.hostknob-new")).unwrap();
    symlink(&victim, state(&root).join("journal.jsonl.tmp")).unwrap();
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    // Emptied, the journal is removed (issue 20 item 17); never a link.
    let j = std::fs::symlink_metadata(state(&root).join("journal.jsonl"));
    assert!(
        j.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound),
        "the journal is removed, not replaced by a link"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // --state-dir climbing out lands inside.
    let (_t, root) = vm();
    let o = hk(
        &root,
        m.path(),
        &["--state-dir", "/../../outside-sd/sd", "apply", "thp"],
    );
    ok(&o);
    assert!(root.join("outside-sd/sd/journal.jsonl").is_file());
    assert!(!root.parent().unwrap().join("outside-sd").exists());
}

#[test]
fn a_var_link_to_the_real_var_stays_in_the_copy() {
    let live = Path::new("/var/lib/hostknob");
    let live_before = std::fs::read_dir(live).map(|d| d.count()).ok();
    let live_journal = std::fs::metadata(live.join("journal.jsonl"))
        .and_then(|m| m.modified())
        .ok();
    let (_t, root) = vm();
    std::fs::remove_dir_all(root.join("var")).ok();
    symlink("/var", root.join("var")).unwrap();
    let m = knobs(&[THP]);
    // Resolved inside the copy, where /var is the link itself: it leads nowhere.
    refused(
        &hk(&root, m.path(), &["apply", "thp"]),
        &["/var is a symbolic link to /var"],
    );
    assert_eq!(std::fs::read_dir(live).map(|d| d.count()).ok(), live_before);
    assert_eq!(
        std::fs::metadata(live.join("journal.jsonl"))
            .and_then(|m| m.modified())
            .ok(),
        live_journal
    );
}

// 2. doc writes only where its name says.

#[test]
fn doc_refuses_a_host_name_that_is_a_path() {
    let outside = tempfile::tempdir().unwrap();
    let abs = outside.path().join("abs");
    // A manifest with a knob: an empty one is refused first (issue 20 item 11).
    let m = knobs(&[THP]);
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    std::fs::remove_file(root.join("proc/sys/kernel/hostname")).unwrap();
    std::fs::write(
        root.join("hostknob-capture.yaml"),
        format!("host: {}\n", abs.display()),
    )
    .unwrap();
    let e = exit1(
        &hk(&root, m.path(), &["doc"]),
        &["host name", "hostknob-capture.yaml"],
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(!outside.path().join("abs.md").exists());
    std::fs::write(
        root.join("proc/sys/kernel/hostname"),
        "../../../outside/pwn\n",
    )
    .unwrap();
    exit1(
        &hk(&root, m.path(), &["doc"]),
        &["/proc/sys/kernel/hostname"],
    );
    // An explicit --out that is a link is refused, not followed.
    let victim = outside.path().join("victim.md");
    std::fs::write(&victim, "precious").unwrap();
    let out_link = outside.path().join("doc.md");
    symlink(&victim, &out_link).unwrap();
    let o = hk(
        &root,
        m.path(),
        &["--host", "vm", "doc", "--out", out_link.to_str().unwrap()],
    );
    exit1(&o, &["symbolic link"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

// 3. Files root executes: no link followed or replaced, no inherited 0777,
// no planted temporary name.

#[test]
fn an_install_over_a_link_is_refused_and_a_mask_survives_apply_and_revert() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    let dropin = root.join(DROPIN);
    std::fs::create_dir_all(dropin.parent().unwrap()).unwrap();
    symlink("/dev/null", &dropin).unwrap();
    let before = tree(&root);
    refused(
        &hk(&root, m.path(), &["apply", "jemalloc"]),
        &["/dev/null", "mask"],
    );
    refused(
        &hk(&root, m.path(), &["persist", "jemalloc", "--install"]),
        &["symbolic link"],
    );
    let _ = hk(&root, m.path(), &["revert", "--all"]);
    assert_tree(&before, &root, "the mask is kept");
    // A tmpfiles.d file linked to a system path: refused, nothing made there.
    let sys = "persistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: never\n";
    let m2 = knobs(&[("gov", sys)]);
    std::fs::create_dir_all(root.join("etc/tmpfiles.d")).unwrap();
    symlink(
        "/usr/lib/tmpfiles.d/x.conf",
        root.join("etc/tmpfiles.d/hostknob-20-gov.conf"),
    )
    .unwrap();
    refused(
        &hk(&root, m2.path(), &["persist", "gov", "--install"]),
        &["symbolic link"],
    );
    assert!(!root.join("usr/lib/tmpfiles.d/x.conf").exists());
}

#[test]
fn a_planted_temporary_name_is_not_written_through_and_modes_are_masked() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    let dir = root.join(DROPIN).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let victim = root.join("etc/victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::hard_link(
        &victim,
        dir.join(".zz-hostknob-rjem_malloc_conf.conf.hostknob-new"),
    )
    .unwrap();
    ok(&hk(&root, m.path(), &["apply", "jemalloc"]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let mode = std::fs::metadata(root.join(DROPIN))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o644);
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    // A world-writable file replaced keeps its bits less group/other write.
    std::fs::write(root.join(DROPIN), "[Service]\n").unwrap();
    std::fs::set_permissions(root.join(DROPIN), std::fs::Permissions::from_mode(0o4777)).unwrap();
    ok(&hk(&root, m.path(), &["apply", "jemalloc"]));
    let mode = std::fs::metadata(root.join(DROPIN))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o755);
}

// 4. One name rule, before the first write.

#[test]
fn a_bad_host_name_is_refused_before_anything_is_written() {
    let m = knobs(&[THP]);
    for bad in ["a/b", "..", "web 7", "a\nb", "../../x"] {
        let (_t, root) = vm();
        let before = tree(&root);
        let e = exit1(
            &hk(&root, m.path(), &["--host", bad, "apply", "thp"]),
            &["--host"],
        );
        assert_eq!(e.trim().lines().count(), 1, "{bad:?}: {e}");
        assert_tree(&before, &root, bad);
        assert!(!state(&root).exists(), "{bad:?}: no state directory");
        assert!(nothing_recorded(&root, m.path()), "{bad:?}: no ledger");
    }
    let (_t, root) = vm();
    std::fs::write(root.join("proc/sys/kernel/hostname"), "web 7\n").unwrap();
    exit1(
        &hk(&root, m.path(), &["apply", "thp"]),
        &["/proc/sys/kernel/hostname", "--host"],
    );
    assert!(!state(&root).exists());
}

// 5. A torn journal is repaired before the next append; revert is loud.

#[test]
fn a_torn_journal_is_cut_back_kept_aside_and_reverted_through() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    let before = tree(&root);
    ok(&hk(&root, m.path(), &["apply", "thp", "idle"]));
    let j = state(&root).join("journal.jsonl");
    let mut text = std::fs::read_to_string(&j).unwrap();
    text.push_str("{\"path\":\"/proc/sys/vm/swappi");
    std::fs::write(&j, &text).unwrap();
    let o = hk(&root, m.path(), &["apply", "swappiness"]);
    ok(&o);
    assert!(err(&o).contains("torn record"), "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(state(&root).join("journal.jsonl.torn")).unwrap(),
        "{\"path\":\"/proc/sys/vm/swappi\n"
    );
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    assert_tree(&before, &root, "all restored after a torn journal");
}

#[test]
fn a_journal_cut_short_makes_revert_loud() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    let j = state(&root).join("journal.jsonl");
    let text = std::fs::read(&j).unwrap();
    let cut = text.len() - 20;
    std::fs::write(&j, &text[..cut]).unwrap();
    let e = exit1(
        &hk(&root, m.path(), &["revert", "--all"]),
        &["torn record", "journal.jsonl.torn"],
    );
    assert!(e.contains("restored the"), "{e}");
    // Said once; the journal is whole again and a second revert is quiet.
    ok(&hk(&root, m.path(), &["revert", "--all"]));
}

#[test]
fn a_full_disk_while_journaling_leaves_no_fragment() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    let before = tree(&root);
    let o = guarded(
        command(&root, m.path(), &["apply", "--all"])
            .env(hostknob::apply::APPEND_LIMIT_VAR, "journal:300"),
    );
    refused(&o, &["journal", "No space left on device"]);
    assert_tree(&before, &root, "nothing written");
    assert!(journal(&root).is_empty(), "the fragment is cut back off");
    ok(&hk(&root, m.path(), &["apply", "--all"]));
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    assert_tree(&before, &root, "applied and reverted after space returned");
}

/// A real full disk: the state directory on a 2 MB tmpfs in a private
/// mount namespace, filled but for 8 kB; the 1,280-entry journal of spr1
/// does not fit. Skipped (said) where mounts are not allowed.
#[test]
fn a_real_full_disk_under_the_state_directory() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to mount a tmpfs");
        return;
    }
    let (_t, root) = copy_host("spr1");
    let m = knobs(&[(
        "idle",
        "persistence: runtime\nkind: cpuidle-state\ntarget:\n  states: {names: [C6]}\nset: disabled\n",
    )]);
    std::fs::create_dir_all(state(&root)).unwrap();
    let before = tree(&root);
    let script = format!(
        "set -e; mount -t tmpfs -o size=2m tmpfs {sd}; head -c 2088960 /dev/zero > {sd}/filler; \
         J={sd}/journal.jsonl; {bin} --root {root} --manifest {m} apply idle && echo applied-on-full; \
         [ ! -s $J ] || [ -z \"$(tail -c1 $J | tr -d '\\n')\" ] || echo torn-left; rm {sd}/filler; \
         {bin} --root {root} --manifest {m} apply idle >/dev/null && echo applied-after; \
         {bin} --root {root} --manifest {m} revert --all >/dev/null && echo reverted; exit 0",
        sd = state(&root).display(),
        bin = bin(),
        root = root.display(),
        m = m.path().display()
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    isolate(&mut c);
    let o = guarded(&mut c);
    if err(&o).contains("mount:") || err(&o).contains("unshare:") {
        eprintln!("skipped: {}", err(&o));
        return;
    }
    assert!(!out(&o).contains("applied-on-full"), "{}", out(&o));
    assert!(
        !out(&o).contains("torn-left"),
        "the failed append is cut back: {}",
        out(&o)
    );
    assert!(
        out(&o).contains("applied-after") && out(&o).contains("reverted"),
        "{}\n{}",
        out(&o),
        err(&o)
    );
    assert!(err(&o).contains("No space left on device"), "{}", err(&o));
    assert!(err(&o).contains("nothing was changed"), "{}", err(&o));
    assert_tree(&before, &root, "a full disk changed nothing");
}

// 6. A torn ledger is repaired; a failed ledger append is cut back.

#[test]
fn a_torn_ledger_is_repaired_and_audit_reads_it() {
    let m = knobs(&VM_KNOBS);
    let (_t, root) = vm();
    ok(&hk(&root, m.path(), &["apply", "thp"]));
    let ledger = ledger_file(&root);
    let whole = std::fs::read_to_string(&ledger).unwrap();
    std::fs::write(
        &ledger,
        format!("{whole}- timestamp: 2026-01-01T00:00:00Z\n  changes:\n  - path: "),
    )
    .unwrap();
    let o = hk(&root, m.path(), &["audit"]);
    assert_ne!(
        o.status.code(),
        Some(1),
        "audit reads past the torn item: {}",
        err(&o)
    );
    let o = hk(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    assert!(err(&o).contains("torn item"), "{}", err(&o));
    let after = std::fs::read_to_string(&ledger).unwrap();
    assert!(
        after.starts_with(&whole) && after.len() > whole.len(),
        "{after}"
    );
    assert!(
        std::fs::read_to_string(ledger.with_extension("yaml.torn"))
            .unwrap()
            .ends_with("- path: ")
    );
    let o = hk(&root, m.path(), &["audit"]);
    assert!(!err(&o).contains("torn"), "{}", err(&o));
    // A full disk during the ledger append: cut back to the last item.
    let o = guarded(
        command(&root, m.path(), &["apply", "thp"])
            .env(hostknob::apply::APPEND_LIMIT_VAR, "ledger:40"),
    );
    exit1(&o, &["ledger", "cut back"]);
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), after);
    // A full disk during a revert's ledger append: the files are restored
    // all the same (the host matters more than its history), and it says so.
    ok(&hk(&root, m.path(), &["apply", "thp"]));
    let recorded = std::fs::read_to_string(&ledger).unwrap();
    let o = guarded(
        command(&root, m.path(), &["revert", "--all"])
            .env(hostknob::apply::APPEND_LIMIT_VAR, "ledger:40"),
    );
    ok(&o);
    assert!(
        err(&o).contains("restored, but not recorded in the ledger"),
        "{}",
        err(&o)
    );
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), recorded);
    assert!(journal_paths(&root).is_empty(), "nothing left journaled");
}

// 7. No lock without a write; persist --remove removes what --install made.

#[test]
fn a_refused_apply_makes_no_lock_and_remove_takes_its_directories() {
    let m = knobs(&[(
        "nosuch",
        "persistence: runtime\nkind: sysctl\ntarget: {name: vm.no_such_setting}\nset: 1\n",
    )]);
    let (_t, root) = vm();
    let o = hk(&root, m.path(), &["apply", "nosuch"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        !state(&root).exists(),
        "no state directory for a refused apply"
    );
    let o = hk(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    assert!(
        !state(&root).exists(),
        "no state directory for an empty revert"
    );
    let m = knobs(&VM_KNOBS);
    let before = tree(&root);
    ok(&hk(&root, m.path(), &["persist", "jemalloc", "--install"]));
    assert!(root.join(DROPIN).is_file());
    ok(&hk(&root, m.path(), &["persist", "jemalloc", "--remove"]));
    assert_tree(&before, &root, "--remove took the directory --install made");
}

// 8. FIFOs are refused, never waited on.

pub(crate) fn mkfifo(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "{}",
        p.display()
    );
}

#[test]
fn fifos_anywhere_hang_nothing() {
    let m = knobs(&VM_KNOBS);
    mkfifo(&m.path().join("z.yaml"));
    let (_t, root) = vm();
    for cmd in [&["knobs"][..], &["audit"], &["apply", "thp"]] {
        exit1(&hk(&root, m.path(), cmd), &["z.yaml", "not a regular file"]);
    }
    // revert works without a loadable manifest.
    ok(&hk(&root, m.path(), &["revert", "--all"]));
    std::fs::remove_file(m.path().join("z.yaml")).unwrap();
    // The collected ledger and the host's own: both read, neither waited on.
    for ledger in [collected_ledger(m.path(), "vm"), ledger_file(&root)] {
        mkfifo(&ledger);
        exit1(&hk(&root, m.path(), &["audit"]), &["not a regular file"]);
        exit1(&hk(&root, m.path(), &["knobs"]), &["not a regular file"]);
        std::fs::remove_file(&ledger).unwrap();
    }
    std::fs::remove_dir_all(root.join(STATE_DIR)).unwrap();
    // A target that is a FIFO: refused before the lock.
    let thp = root.join("sys/kernel/mm/transparent_hugepage/enabled");
    std::fs::remove_file(&thp).unwrap();
    mkfifo(&thp);
    exit1(&hk(&root, m.path(), &["apply", "thp"]), &["FIFO"]);
    assert!(!state(&root).exists());
    // Host facts: inventory and doc finish, naming the file.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    std::fs::remove_file(root.join("proc/cpuinfo")).unwrap();
    mkfifo(&root.join("proc/cpuinfo"));
    let empty = tempfile::tempdir().unwrap();
    for cmd in [&["inventory"][..], &["doc", "--out", "-"]] {
        let o = hk(&root, empty.path(), cmd);
        assert!(err(&o).contains("FIFO"), "{cmd:?}: {}", err(&o));
    }
}

// 9. Bounded memory.

#[test]
fn huge_and_endless_host_files_are_capped() {
    let empty = tempfile::tempdir().unwrap();
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(root.join("proc/cpuinfo"))
        .unwrap();
    f.set_len(1 << 30).unwrap();
    let o = hk(&root, empty.path(), &["inventory"]);
    assert!(err(&o).contains("larger than 16 MiB"), "{}", err(&o));
    let o = hk(&root, empty.path(), &["doc", "--out", "-"]);
    assert!(err(&o).contains("larger than 16 MiB"), "{}", err(&o));
    // /proc/meminfo as /dev/zero: a device node in a tree is never opened
    // (issue 20 item 23), so never read forever either.
    std::fs::remove_file(root.join("proc/meminfo")).unwrap();
    let c = std::ffi::CString::new(root.join("proc/meminfo").to_str().unwrap()).unwrap();
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 5)) } == 0 {
        let o = hk(&root, empty.path(), &["inventory"]);
        assert!(err(&o).contains("/proc/meminfo"), "{}", err(&o));
        assert!(err(&o).contains("device node (1:5)"), "{}", err(&o));
    }
}

// 10, 11. The manifest walk and the YAML locator are bounded.

#[test]
fn link_loops_in_the_manifest_are_walked_once() {
    let m = knobs(&[THP]);
    for d in ["sub", "other"] {
        std::fs::create_dir_all(m.path().join(d)).unwrap();
        symlink("..", m.path().join(d).join("up")).unwrap();
    }
    let o = hk(&corpus_host("fc-haltpoll-2cpu"), m.path(), &["knobs"]);
    assert!(!err(&o).contains("duplicate"), "{}", err(&o));
    ok(&o);
}

#[test]
fn a_deeply_nested_document_gets_a_short_error_quickly() {
    let m = manifest(&[("deep.yaml", &format!("{}x\n", "- ".repeat(20_000)))]);
    let o = hk(&corpus_host("fc-haltpoll-2cpu"), m.path(), &["knobs"]);
    let e = exit1(&o, &["deep.yaml:1"]);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.len() < 400, "{} bytes: {e}", e.len());
}

// 12. Escaping and clear errors.

#[test]
fn percent_is_escaped_in_a_dropin_and_read_back() {
    let doc = "persistence: systemd-dropin\nkind: allocator\ntarget: {service: rpc-node.service, variable: _RJEM_MALLOC_CONF}\nset: prof_prefix:a%n\n";
    let m = knobs(&[("jemalloc", doc)]);
    let (_t, root) = vm();
    ok(&hk(&root, m.path(), &["apply", "jemalloc"]));
    let text = std::fs::read_to_string(root.join(DROPIN)).unwrap();
    assert!(text.contains("prof_prefix:a%%n"), "{text}");
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "jemalloc")["status"], "ok", "{report:#}");
}

#[test]
fn unclear_errors_of_item_12_are_clear() {
    // A dangling `var` link.
    let m = knobs(&[THP]);
    let (_t, root) = vm();
    std::fs::remove_dir_all(root.join("var")).ok();
    symlink("nowhere/at/all", root.join("var")).unwrap();
    let e = exit1(
        &hk(&root, m.path(), &["apply", "thp"]),
        &["/var", "leads nowhere"],
    );
    assert!(!e.contains("File exists"), "{e}");
    // A manifest file that is not UTF-8: its line.
    let bad = manifest(&[("a.yaml", "id: a\nkind: thp\ntitle: caf\u{e9}\n")]);
    let mut bytes = std::fs::read(bad.path().join("a.yaml")).unwrap();
    let n = bytes.len();
    bytes[n - 3] = 0xff;
    std::fs::write(bad.path().join("a.yaml"), &bytes).unwrap();
    exit1(
        &hk(&root, bad.path(), &["knobs"]),
        &["a.yaml:3", "not UTF-8"],
    );
    // A 300-digit number is not echoed whole.
    let big = "9".repeat(300);
    let m = knobs(&[(
        "sw",
        &format!(
            "persistence: runtime\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: {big}\n"
        ),
    )]);
    let e = exit1(
        &hk(&root, m.path(), &["knobs"]),
        &["knobs.yaml:8", "set", "too large"],
    );
    assert!(
        !e.contains("99999999999999999999") && !e.contains("00000000000000000000"),
        "{e}"
    );
    // An unreadable manifest subdirectory is named itself (as nobody: root reads anything).
    if unsafe { libc::geteuid() } == 0 {
        let m = knobs(&[THP]);
        std::fs::set_permissions(m.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(
            m.path().join("knobs.yaml"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::create_dir(m.path().join("secret")).unwrap();
        std::fs::set_permissions(
            m.path().join("secret"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let root = corpus_host("fc-haltpoll-2cpu");
        let o = guarded_as(
            &mut command(&root, m.path(), &["knobs"]),
            Some((65534, 65534)),
        );
        exit1(&o, &["secret", "Permission denied"]);
    }
}

// Every command on every captured host: bounded, no panic (the timing is
// bench/all-commands.sh's).

#[test]
fn every_command_on_every_corpus_tree_is_bounded() {
    let shipped = repo().join("manifest");
    let commands: [&[&str]; 6] = [
        &["inventory"],
        &["knobs"],
        &["audit"],
        &["doc", "--out", "-"],
        &["apply", "--all", "--dry-run"],
        &["revert", "--all"],
    ];
    for host in corpus_hosts() {
        let root = corpus_host(&host);
        for args in commands {
            let mut all = vec!["--host", host.as_str()];
            all.extend_from_slice(args);
            let o = hk(&root, &shipped, &all);
            assert!(
                matches!(o.status.code(), Some(0..=2)),
                "{host} {args:?}: {}",
                err(&o)
            );
        }
        assert!(!root.join(STATE_DIR).exists(), "{host}: nothing written");
    }
}
