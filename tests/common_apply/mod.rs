//! Helpers for apply, revert and persist tests: whole-tree comparison,
//! the binary run against a corpus copy, the journal as written.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::common_manifest::{copy_host, write_files};

/// One entry of a tree: what it is, its bytes (or link target), its permission bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
}

pub type Tree = BTreeMap<PathBuf, Node>;

/// hostknob's own state (lock, journal) lives here under the root.
pub const STATE_DIR: &str = "var/lib/hostknob";

/// Every file, directory and link under `dir` (relative paths), leaving out
/// hostknob's state directory (and `var/lib`, `var` when they hold only it).
pub fn tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if rel == Path::new(STATE_DIR) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&p).unwrap())
            } else if meta.is_dir() {
                stack.push(p.clone());
                Node::Dir(mode)
            } else {
                Node::File(std::fs::read(&p).unwrap(), mode)
            };
            out.insert(rel, node);
        }
    }
    // The state directory's parents exist only because of it: left out too.
    for parent in ["var/lib", "var"] {
        if !out.keys().any(|k| k.parent() == Some(Path::new(parent))) {
            out.remove(Path::new(parent));
        }
    }
    out
}

/// Asserts `dir` holds exactly `expected`, naming the first differences.
pub fn assert_tree(expected: &Tree, dir: &Path, context: &str) {
    assert_same(expected, &tree(dir), context);
}

/// Asserts two trees are equal, naming the first differences.
pub fn assert_same(expected: &Tree, now: &Tree, context: &str) {
    if now == expected {
        return;
    }
    let mut diffs = Vec::new();
    for (p, n) in expected {
        match now.get(p) {
            None => diffs.push(format!("missing: {}", p.display())),
            Some(m) if m != n => diffs.push(format!(
                "changed: {} ({} -> {})",
                p.display(),
                show(n),
                show(m)
            )),
            _ => {}
        }
    }
    for p in now.keys().filter(|p| !expected.contains_key(*p)) {
        diffs.push(format!("added: {}", p.display()));
    }
    diffs.truncate(10);
    panic!("{context}: the tree differs:\n  {}", diffs.join("\n  "));
}

fn show(n: &Node) -> String {
    match n {
        Node::File(b, m) => format!("{:?} {m:o}", String::from_utf8_lossy(b)),
        Node::Dir(m) => format!("dir {m:o}"),
        Node::Link(t) => format!("link {}", t.display()),
    }
}

/// `hostknob --root ROOT --manifest MANIFEST ARGS...`, with no HOSTKNOB_*
/// variable inherited from the environment.
pub fn command(root: &Path, manifest: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hostknob"));
    c.arg("--root").arg(root).arg("--manifest").arg(manifest);
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HOSTKNOB_") {
            c.env_remove(k);
        }
    }
    c
}

pub fn run(root: &Path, manifest: &Path, args: &[&str]) -> Output {
    command(root, manifest, args).output().unwrap()
}

pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        out(o),
        err(o)
    );
    out(o)
}

/// Asserts exit 1 with one line on stderr that ends "nothing was changed"
/// and contains every `needle`; returns it.
pub fn refused(o: &Output, needles: &[&str]) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        out(o),
        err(o)
    );
    let e = err(o);
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    assert!(e.trim().ends_with("nothing was changed"), "{e}");
    for n in needles {
        assert!(e.contains(n), "{n:?} not in: {e}");
    }
    e
}

/// The journal's entries as written (parsed line by line: a torn line fails).
pub fn journal(root: &Path) -> Vec<serde_json::Value> {
    match std::fs::read_to_string(root.join(STATE_DIR).join("journal.jsonl")) {
        Ok(t) => t
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The paths the journal lists, in order.
pub fn journal_paths(root: &Path) -> Vec<String> {
    journal(root)
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect()
}

/// A manifest of knobs `(id, body)`, each targeting every host.
pub fn knobs(docs: &[(&str, &str)]) -> tempfile::TempDir {
    let text: Vec<String> = docs
        .iter()
        .map(|(id, body)| format!("id: {id}\ntitle: {id}\nwhy: w\nhosts: \"*\"\n{body}"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("knobs.yaml"), text.join("---\n")).unwrap();
    dir
}

/// The unit an allocator knob targets, written into a copy of the VM.
pub const UNIT: (&str, &str) = (
    "etc/systemd/system/rpc-node.service",
    "[Unit]\nDescription=rpc\n[Service]\nExecStart=/usr/bin/rpc-node\n",
);

/// A copy of the VM capture with the unit the allocator knob targets.
pub fn vm() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    write_files(&root, &[UNIT]);
    (tmp, root)
}

/// Starts `hostknob ARGS` with the test-only write gate on `gate`
/// (it stops before write I until `gate/go-I` exists); output piped.
pub fn gated(root: &Path, manifest: &Path, args: &[&str], gate: &Path) -> Child {
    command(root, manifest, args)
        .env(hostknob::apply::GATE_VAR, gate)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Lets a gated apply make its first `n` writes.
pub fn open_gate(gate: &Path, n: usize) {
    for i in 0..n {
        std::fs::write(gate.join(format!("go-{i}")), "").unwrap();
    }
}

/// Knobs of every kind the VM capture (fc-haltpoll-2cpu) can take, one write each
/// but the idle state (one per CPU): 6 writes, the last one creating a drop-in.
pub const VM_KNOBS: [(&str, &str); 5] = [
    (
        "idle",
        "persistence: runtime\nkind: cpuidle-state\ntarget:\n  states: {names: [haltpoll idle]}\nset: disabled\n",
    ),
    (
        "thp",
        "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    ),
    (
        "swappiness",
        "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
    ),
    (
        "poll",
        "persistence: runtime\nkind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_ns}\nset: 200000\n",
    ),
    (
        "jemalloc",
        "persistence: systemd-dropin\nkind: allocator\ntarget: {service: rpc-node.service, variable: _RJEM_MALLOC_CONF}\nset: background_thread:true\n",
    ),
];

/// Waits (polling) until `path` exists; panics after a minute: a hang, not a timing.
pub fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}
