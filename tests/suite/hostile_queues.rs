//! Issue 50, items 4 and 5: a channel change under `--root` never loses a
//! value nor says the host is as it was when it is not, never follows a
//! link while it removes queue directories, and a SIGKILL at any unlink,
//! rename or mkdir of it, then `revert --all`, leaves the tree byte for
//! byte as it was. On an ice NIC built into copies of the 2-CPU VM capture,
//! each queue file with a value of its own, so a lost one shows.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::hostile::{exit1, hk, mkfifo};
use crate::support::nic::{ICE, ICE_STATE, Nic, host_with};
use crate::support::*;

const IF: &str = "ens2f0";

fn queues(root: &Path) -> PathBuf {
    root.join(format!("sys/class/net/{IF}/queues"))
}

fn put(p: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// ice with `n` combined channels (of 64) in a copy of the 2-CPU VM: every
/// queue's files as net-sysfs makes them (`byte_queue_limits` in each tx
/// queue, a read-only `tx_timeout`), each with a value of its own.
fn small_ice(n: u32) -> (tempfile::TempDir, PathBuf) {
    let state = ICE_STATE.replace("current: 16", &format!("current: {n}"));
    let nic = Nic {
        queues: n,
        cpus: 2,
        state: Box::leak(state.into_boxed_str()),
        ..ICE
    };
    let (t, root) = host_with("fc-haltpoll-2cpu", &nic);
    let q = queues(&root);
    for i in 0..n {
        let (rx, tx) = (q.join(format!("rx-{i}")), q.join(format!("tx-{i}")));
        put(&rx.join("rps_cpus"), &format!("{:08x}\n", i % 2 + 1), 0o644);
        put(
            &rx.join("rps_flow_cnt"),
            &format!("{}\n", 256 * (i + 1)),
            0o644,
        );
        put(&tx.join("xps_cpus"), &format!("{:08x}\n", 2 - i % 2), 0o644);
        put(&tx.join("xps_rxqs"), &format!("{:x}\n", 1 << i), 0o644);
        put(&tx.join("tx_timeout"), "0\n", 0o444);
        let bql = tx.join("byte_queue_limits");
        for (f, v) in [
            ("hold_time", "1000".to_string()),
            ("inflight", "0".to_string()),
            ("limit", (1514 * i).to_string()),
            ("limit_max", "1879048192".to_string()),
            ("limit_min", "0".to_string()),
        ] {
            put(&bql.join(f), &format!("{v}\n"), 0o644);
        }
    }
    (t, root)
}

fn channels(n: u32) -> (&'static str, String) {
    (
        "channels",
        format!(
            "persistence: runtime\nkind: nic-channels\ntarget: {{driver: ice}}\nset: {{combined: {n}}}\n"
        ),
    )
}

const STEER: (&str, &str) = (
    "steer",
    "persistence: runtime\nkind: rps\ntarget: {interfaces: ens2f0}\nset: {cpus: 1}\n",
);

fn manifest(docs: &[(&str, String)]) -> tempfile::TempDir {
    let docs: Vec<(&str, &str)> = docs.iter().map(|(i, b)| (*i, b.as_str())).collect();
    knobs(&docs)
}

fn state_file(root: &Path) -> String {
    std::fs::read_to_string(root.join(format!("hostknob-capture/ethtool/{IF}.yaml"))).unwrap()
}

// Item 4: refused before anything is written, naming the path.

#[test]
fn a_fifo_in_the_template_queue_is_refused_before_anything_is_written() {
    let (_t, root) = small_ice(4);
    let fifo = queues(&root).join("rx-0/rps_flow_cnt");
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let before = tree(&root);
    let m = manifest(&[channels(8)]);
    let dry = hk(&root, m.path(), &["apply", "--all", "--dry-run"]);
    let said = format!("{}{}", out(&dry), err(&dry));
    assert!(
        said.contains("apply would refuse") && said.contains("rx-0/rps_flow_cnt"),
        "{said}"
    );
    let e = exit1(
        &hk(&root, m.path(), &["apply", "--all"]),
        &[
            "/sys/class/net/ens2f0/queues/rx-0/rps_flow_cnt is a FIFO",
            "nothing was changed",
        ],
    );
    assert!(!e.contains("the host is as it was"), "{e}");
    assert!(state_file(&root).contains("current: 4"));
    assert_tree(&before, &root, "refused");
    assert!(journal(&root).is_empty() && !root.join(STATE_DIR).exists());
    let r = ok(&hk(&root, m.path(), &["revert", "--all"]));
    assert!(r.contains("nothing to revert"), "{r}");
    assert_tree(&before, &root, "after revert --all");
}

#[test]
fn a_queue_directory_linked_out_of_the_nic_is_never_followed() {
    let (_t, root) = small_ice(4);
    // A knob applied before: the state directory holds its lock and journal.
    let thp = (
        "thp",
        "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n".to_string(),
    );
    let m = manifest(&[thp, channels(2)]);
    let pristine = tree(&root);
    ok(&hk(&root, m.path(), &["apply", "thp"]));
    let state_dir = root.join(STATE_DIR);
    assert!(state_dir.join("lock").exists() && state_dir.join("journal.jsonl").exists());
    let precious = root.join("etc/precious");
    put(&precious.join("keep"), "precious\n", 0o644);
    let q = queues(&root);
    for (queue, to) in [("rx-3", "/var/lib/hostknob"), ("tx-3", "/etc/precious")] {
        std::fs::rename(q.join(queue), root.join(format!("{queue}.moved"))).unwrap();
        symlink(to, q.join(queue)).unwrap();
    }
    let before = tree(&root);
    let state_before = snapshot(&state_dir);
    exit1(
        &hk(&root, m.path(), &["apply", "channels"]),
        &[
            "/sys/class/net/ens2f0/queues/rx-3 is a symbolic link",
            "nothing was changed",
        ],
    );
    assert_tree(&before, &root, "refused");
    assert_eq!(
        snapshot(&state_dir),
        state_before,
        "the lock and journal are intact"
    );
    assert_eq!(
        std::fs::read_to_string(precious.join("keep")).unwrap(),
        "precious\n"
    );
    // revert --all undoes thp, and only thp: nothing else was changed.
    let r = ok(&hk(&root, m.path(), &["revert", "--all"]));
    assert!(r.contains("thp") && !r.contains("channels"), "{r}");
    for queue in ["rx-3", "tx-3"] {
        std::fs::remove_file(q.join(queue)).unwrap();
        std::fs::rename(root.join(format!("{queue}.moved")), q.join(queue)).unwrap();
    }
    std::fs::remove_dir_all(&precious).unwrap();
    assert_tree(&pristine, &root, "after revert --all");
}

// Items 4 and 5 under strace: an error or a SIGKILL at every call of a kind.

/// strace, which the sweeps need (.ci/run installs it).
fn strace(root: &Path, manifest: &Path, args: &[&str], opts: &[String]) -> Command {
    let mut c = Command::new("strace");
    isolate(&mut c);
    c.args(["-f", "-qq"])
        .args(opts)
        .arg(bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .env("HOSTKNOB_MANIFEST", manifest);
    c
}

/// How many `syscall` calls `hostknob ARGS` makes on `root` (it runs).
fn calls(root: &Path, manifest: &Path, args: &[&str], syscall: &str) -> usize {
    let log = tempfile::NamedTempFile::new().unwrap();
    let opts = [
        "-c".to_string(),
        "-U".into(),
        "calls,name".into(),
        "-o".into(),
        log.path().display().to_string(),
        format!("-etrace={syscall}"),
    ];
    let o = strace(root, manifest, args, &opts)
        .output()
        .unwrap_or_else(|e| panic!("strace: {e}: install it (apt-get install strace)"));
    assert!(o.status.success(), "{}", err(&o));
    let text = std::fs::read_to_string(log.path()).unwrap();
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let n = w.next()?.parse().ok()?;
            (w.next()? == syscall).then_some(n)
        })
        .unwrap_or(0)
}

/// `hostknob ARGS` with the `n`th `syscall` answered by `action`
/// (`error=EIO`, `signal=SIGKILL`).
fn injected(root: &Path, m: &Path, args: &[&str], syscall: &str, action: &str, n: usize) -> Output {
    let opts = [
        "-o".to_string(),
        "/dev/null".into(),
        format!("-etrace={syscall}"),
        format!("-einject={syscall}:{action}:when={n}"),
    ];
    strace(root, m, args, &opts).output().unwrap()
}

/// A fresh copy of `from` (a NIC's host) at `to`.
fn fresh(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    copy_tree(from, to);
}

/// `revert --all` until it is clean (the first may say a torn journal
/// record was set aside), then the tree must be `want`.
fn reverts_to(root: &Path, m: &Path, want: &Tree, context: &str) {
    let first = run(root, m, &["revert", "--all"]);
    let again = run(root, m, &["revert", "--all"]);
    assert!(
        again.status.success(),
        "{context}: {}\n(first revert: {})",
        err(&again),
        err(&first)
    );
    assert_tree(want, root, context);
    assert!(journal(root).is_empty(), "{context}: the journal is empty");
}

#[test]
fn a_failed_queue_sync_is_rolled_back_and_said_truthfully() {
    let (_t, pristine) = small_ice(4);
    let want = tree(&pristine);
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("host");
    // Growing makes queue files (renameat), shrinking removes them (unlinkat).
    for (to, syscall) in [(8, "renameat"), (2, "unlinkat")] {
        let m = manifest(&[channels(to)]);
        fresh(&pristine, &root);
        let n = calls(&root, m.path(), &["apply", "--all"], syscall);
        assert!(n > 4, "{syscall}: {n} calls");
        let mut rolled_back = 0;
        for i in 1..=n {
            fresh(&pristine, &root);
            let o = injected(
                &root,
                m.path(),
                &["apply", "--all"],
                syscall,
                "error=EIO",
                i,
            );
            let context = format!("combined {to}, {syscall} {i} of {n} failing: {}", err(&o));
            if err(&o).contains("the host is as it was") {
                rolled_back += 1;
                assert_eq!(o.status.code(), Some(1), "{context}");
                assert_tree(&want, &root, &context);
                // Unless the journal's own rewrite was the call that failed (said).
                assert!(
                    journal(&root).is_empty() || err(&o).contains("journal still lists"),
                    "{context}"
                );
            }
            reverts_to(&root, m.path(), &want, &context);
        }
        assert!(
            rolled_back > 0,
            "combined {to}: no {syscall} failure rolled back"
        );
    }
}

/// Kills `hostknob ARGS` at its every `syscall` on a fresh copy of
/// `pristine` (after `apply --all` for a revert), then `revert --all`
/// must leave the tree as `want`. Returns how many runs were killed.
fn kill_sweep(pristine: &Path, want: &Tree, m: &Path, phase: &str, syscall: &str) -> usize {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("host");
    let ready = |root: &Path| {
        fresh(pristine, root);
        if phase == "revert" {
            ok(&run(root, m, &["apply", "--all"]));
        }
    };
    ready(&root);
    let n = calls(&root, m, &[phase, "--all"], syscall);
    let mut killed = 0;
    for i in 1..=n {
        ready(&root);
        let o = injected(&root, m, &[phase, "--all"], syscall, "signal=SIGKILL", i);
        // strace ends as its tracee did: by SIGKILL.
        killed += usize::from(o.status.signal() == Some(libc::SIGKILL));
        reverts_to(
            &root,
            m,
            want,
            &format!("{phase} killed at {syscall} {i} of {n}"),
        );
    }
    assert_eq!(killed, n, "{phase}: a kill at every {syscall}");
    killed
}

#[test]
fn sigkill_at_every_unlink_rename_and_mkdir_of_a_channel_change_then_revert_restores_the_tree() {
    let (_t, pristine) = small_ice(4);
    let want = tree(&pristine);
    let m = manifest(&[(STEER.0, STEER.1.to_string()), channels(2)]);
    let mut runs = 0;
    for phase in ["apply", "revert"] {
        for syscall in ["unlinkat", "renameat", "mkdirat"] {
            runs += kill_sweep(&pristine, &want, m.path(), phase, syscall);
        }
    }
    eprintln!("{runs} runs killed, each reverted to the byte");
}
