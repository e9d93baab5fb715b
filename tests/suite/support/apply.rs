//! Apply, revert, persist and verify helpers: the binary on a root and a
//! manifest, the journal as written, knobs of every kind the VM capture takes,
//! and the test-only write gate.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::corpus::copy_host;
use super::run::hostknob_command;
use super::tree::{STATE_DIR, write_files};

/// `hostknob --root ROOT ARGS...` with `HOSTKNOB_MANIFEST=MANIFEST`,
/// isolated (see `run`). The manifest goes by the variable because the
/// commands that take no --manifest (inventory, capture) refuse the option.
pub fn command(root: &Path, manifest: &Path, args: &[&str]) -> Command {
    let mut c = hostknob_command(&[]);
    c.arg("--root").arg(root).env("HOSTKNOB_MANIFEST", manifest);
    c.args(args);
    // The test-only seam that lets verify run its probe under a copy's root.
    c.env("HOSTKNOB_TEST_PROBE_ON_ROOT", "1");
    c
}

pub fn run(root: &Path, manifest: &Path, args: &[&str]) -> Output {
    command(root, manifest, args).output().unwrap()
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

/// A copy of the VM capture with the unit the allocator knob targets, and
/// the `menu` cpuidle governor, which honours a disabled idle state (under
/// the capture's own `haltpoll`, audit says `not-honoured`: tested in
/// `audit_status`).
pub fn vm() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &root,
        &[
            UNIT,
            ("sys/devices/system/cpu/cpuidle/current_governor", "menu\n"),
            (
                "sys/devices/system/cpu/cpuidle/current_governor_ro",
                "menu\n",
            ),
        ],
    );
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

/// On a copy of the VM capture: `haltpoll idle` disabled on CPU 1, with a
/// wakeup probe to verify it by (and no expectation, so any verdict exits 0).
pub const IDLE_OFF_CPU1: (&str, &str) = (
    "idle-off-cpu1",
    "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: \"1\", states: {names: [haltpoll idle]}}\n\
     set: disabled\nverify: {probe: wakeup, note: p50 lower by at least 5 µs}\n",
);

/// `verify KNOB` in its shortest legal run (5 rounds of 20 short gaps) on
/// host `vm`; its JSON report.
pub fn short_verify(root: &Path, manifest: &Path, knob: &str) -> serde_json::Value {
    let out = run(
        root,
        manifest,
        &[
            "--host",
            "vm",
            "--format",
            "json",
            "verify",
            knob,
            "--rounds",
            "5",
            "--max-rounds",
            "5",
            "--settle",
            "10ms",
            "--",
            "--samples",
            "20",
            "--gap-us",
            "200..600",
        ],
    );
    // Under a copy the idle counters never move: an idle knob's run cannot be
    // exercised, and verify says inconclusive (exit 3).
    assert!(
        matches!(out.status.code(), Some(0 | 2 | 3)),
        "{}",
        super::run::err(&out)
    );
    serde_json::from_str(&super::run::out(&out)).unwrap()
}
