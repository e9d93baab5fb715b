//! Crash safety and concurrency: `hostknob apply` killed with SIGKILL at
//! random points, and between every two writes; each time `revert --all`
//! restores the byte-identical tree. Two applies at once: the second fails
//! naming the first's pid, or waits; the journal is never interleaved.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

const ITERATIONS: usize = 60;
/// Test-only delay before each write (ms): spreads an apply over time so
/// that random kills land between writes as well as inside them.
const DELAY_MS: u64 = 4;

/// xorshift64*: reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn revert_all(root: &Path, manifest: &Path, context: &str) {
    let o = run(root, manifest, &["revert", "--all"]);
    assert!(
        o.status.success(),
        "{context}: revert failed: {}\n{}",
        err(&o),
        out(&o)
    );
}

#[test]
fn sigkill_at_random_points_then_revert_restores_the_tree() {
    let (_tmp, root) = vm();
    let pristine = tree(&root);
    let m = knobs(&VM_KNOBS);
    let apply = || {
        let mut c = command(&root, m.path(), &["apply", "--all"]);
        c.env(hostknob::apply::DELAY_VAR, DELAY_MS.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // How long a whole apply takes here, to spread the kills over it.
    let t0 = Instant::now();
    assert!(apply().status().unwrap().success());
    let whole = t0.elapsed();
    revert_all(&root, m.path(), "calibration");
    assert_tree(&pristine, &root, "calibration");

    let seed = std::env::var("HOSTKNOB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("seed {seed} (HOSTKNOB_TEST_SEED={seed} repeats it); a whole apply takes {whole:?}");
    let mut rng = Rng(seed);
    let span = whole.as_micros() as u64 * 6 / 5 + 1;
    let (mut before_journal, mut mid_apply, mut finished) = (0, 0, 0);
    for i in 0..ITERATIONS {
        let at = Duration::from_micros(rng.next() % span);
        let mut child = apply().spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let status = child.wait().unwrap();
        let journaled = journal(&root).len();
        match (status.success(), journaled) {
            (true, _) => finished += 1,
            (false, 0) => before_journal += 1,
            (false, _) => mid_apply += 1,
        }
        revert_all(&root, m.path(), &format!("kill {i} after {at:?}"));
        assert_tree(
            &pristine,
            &root,
            &format!("kill {i} after {at:?} (seed {seed})"),
        );
        assert!(journal(&root).is_empty(), "kill {i}: journal emptied");
    }
    eprintln!(
        "{ITERATIONS} kills: {before_journal} before the journal, {mid_apply} in the middle of an apply, \
         {finished} after it finished"
    );
}

/// Deterministic: stopped before write k (test-only gate) and killed there.
#[test]
fn sigkill_before_each_write_then_revert_restores_the_tree() {
    let (_tmp, root) = vm();
    let pristine = tree(&root);
    let m = knobs(&VM_KNOBS);
    for k in 0..6 {
        let gate = tempfile::tempdir().unwrap();
        open_gate(gate.path(), k);
        let mut child = gated(&root, m.path(), &["apply", "--all"], gate.path());
        wait_for(&gate.path().join(format!("at-{k}")));
        child.kill().unwrap();
        child.wait().unwrap();
        // Killed with k files written: the journal holds all six, the tree differs in k.
        assert_eq!(journal(&root).len(), 6, "{k}");
        let now = tree(&root);
        let changed = pristine
            .iter()
            .filter(|(p, n)| now.get(*p) != Some(*n))
            .count()
            + now.keys().filter(|p| !pristine.contains_key(*p)).count();
        // The drop-in is never written here (it is the sixth); a write is one changed file.
        assert_eq!(changed, k, "killed before write {k}");
        revert_all(&root, m.path(), &format!("killed before write {k}"));
        assert_tree(&pristine, &root, &format!("killed before write {k}"));
    }
}

/// Pids blocked waiting for a lock, from /proc/locks (`-> FLOCK ... PID ...`).
fn lock_waiters() -> Vec<u32> {
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("->"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let i = f.iter().position(|w| *w == "->")?;
            f.get(i + 4)?.parse().ok()
        })
        .collect()
}

#[test]
fn two_applies_at_once_one_fails_naming_the_other_or_waits() {
    let (_tmp, root) = vm();
    let pristine = tree(&root);
    let m = knobs(&VM_KNOBS);
    let gate = tempfile::tempdir().unwrap();
    // The first apply holds the lock, stopped before its first write.
    let first = gated(&root, m.path(), &["apply", "idle", "thp"], gate.path());
    wait_for(&gate.path().join("at-0"));
    let journal_then = journal(&root);

    let o = run(&root, m.path(), &["apply", "swappiness"]);
    refused(
        &o,
        &[
            &format!("another hostknob (pid {}) holds", first.id()),
            "--wait",
        ],
    );
    let o = run(&root, m.path(), &["revert", "--all"]);
    refused(&o, &[&format!("pid {}", first.id())]);
    assert_eq!(journal(&root), journal_then, "the journal is untouched");

    // With --wait the second blocks on the lock until the first is done.
    let second = command(&root, m.path(), &["apply", "swappiness", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lock_waiters().contains(&second.id()) {
        assert!(
            Instant::now() < deadline,
            "the second apply never waited for the lock"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    open_gate(gate.path(), 3);
    ok(&first.wait_with_output().unwrap());
    ok(&second.wait_with_output().unwrap());
    // One apply's entries, then the other's: never interleaved.
    let knobs_in_order: Vec<String> = journal(&root)
        .iter()
        .map(|e| e["knob"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(knobs_in_order, vec!["idle", "idle", "thp", "swappiness"]);
    revert_all(&root, m.path(), "after both");
    assert_tree(&pristine, &root, "after both");
}
