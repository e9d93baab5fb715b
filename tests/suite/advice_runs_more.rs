//! Issue 49 item 2, the rest: every kind of command hostknob prints for a
//! person to run, run as printed (the test binary standing for `hostknob`,
//! nothing added) on the copy of the host it was printed for. Each command
//! carries the options that reached that host (src/advice.rs): before it
//! runs, the test checks it names the copy (`--root`), so that a command
//! printed without it never reaches this machine.
//!
//! The advice sites (src/), when printed, and the test that runs them:
//!
//! | site | command | printed | test |
//! |---|---|---|---|
//! | render/apply.rs apply_summary | `hostknob revert K...` | apply wrote values | `applys_revert_advice_runs_as_printed` |
//! | render/apply.rs apply_summary | `hostknob audit K` | a value the kernel ignores | `the_not_honoured_warnings_audit_says_what_it_promises` |
//! | apply/apply.rs persistence_note | `hostknob persist K --install` (after setting persistence) | a runtime knob applied | `applys_persist_advice_runs_once_the_manifest_says_it` |
//! | render/apply.rs persist_hints | `hostknob persist K --install` | `persist K` without --install | `persists_install_advice_runs_as_printed` |
//! | commands/revert.rs left_alone_lines | `hostknob revert K --force` | a value changed since apply | `reverts_force_advice_runs_as_printed` |
//! | commands/revert.rs persisted | `hostknob persist K --remove`, `hostknob revert K --persisted` | revert of a persisted knob | `reverts_persisted_advice_runs_as_printed` |
//! | verify/mod.rs check_verifiable | `hostknob revert K` first | verify of an applied knob | `verifys_revert_first_advice_runs_as_printed` |
//! | apply/apply.rs select | `hostknob knobs` | apply with no knob named | `apply_without_knobs_names_a_knobs_command_that_lists_them` |
//! | commands/doc.rs | `hostknob doc [--out FILE]` | `doc --check`, missing or stale | `doc_checks_advice_writes_the_file_it_checked` |
//! | peers/tuned/load.rs searched | `hostknob import tuned --list [--from DIR]` | an unknown profile | `imports_list_advice_lists_where_it_looked` |
//! | audit/evidence.rs | `hostknob revert K && hostknob verify K && hostknob apply K` | evidence to renew | advice_runs.rs `audits_verify_advice_runs_as_printed` |
//! | commands/isolate.rs | `hostknob --manifest DIR verify K --probe noise ...` | isolate's plan | isolate.rs `isolates_printed_verify_commands_run_as_printed` |
//! | commands/capture.rs | `hostknob --root OUT inventory` | capture wrote a tree | capture tests |
//!
//! Printed through the same path (src/advice.rs `runnable`, or main.rs for
//! every error) without a test of their own here, their state being out of
//! a copy's reach: verify/legs.rs and verify/multi.rs (a leg's value changed
//! during the run: `revert K --force`; stopped early: `revert K`),
//! commands/verify*.rs (interrupted, not restored: `revert K`), render/verify.rs,
//! render/sweep.rs, render/tune.rs (not restored: `audit`, `revert --all`),
//! audit/mod.rs (`verify K` shows the idle entries), apply/mod.rs (failed
//! restore: `revert --all`), apply/others.rs, apply/install.rs, persist/*.rs.
//! Commands that measure (`verify`, `probe`: isolate's lines, blind.rs's
//! `probe rpc`) carry no `--root`: a probe measures the machine it runs on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

const THP_FILE: &str = "sys/kernel/mm/transparent_hugepage/enabled";
const THP_NEVER: (&str, &str) = (
    "thp-never",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);
/// A state directory other than the default: printed commands must name it.
const STATE: &str = "/var/lib/hostknob-other";

/// A manifest of `docs` in a directory whose name has a space (the printed
/// commands must quote it).
fn spaced(docs: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let plain = knobs(docs);
    let dir = plain.path().join("the manifest");
    std::fs::create_dir(&dir).unwrap();
    std::fs::rename(plain.path().join("knobs.yaml"), dir.join("knobs.yaml")).unwrap();
    (plain, dir)
}

/// `hostknob --root ROOT --manifest M --host vm --state-dir STATE ARGS`, as
/// a person types it.
fn hk(root: &Path, m: &Path, args: &[&str]) -> Output {
    hk_command(root, m, args).output().unwrap()
}

fn hk_command(root: &Path, m: &Path, args: &[&str]) -> Command {
    let mut all = vec![
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        m.to_str().unwrap(),
        "--host",
        "vm",
        "--state-dir",
        STATE,
    ];
    all.extend(args);
    hostknob_command(&all)
}

/// Every backticked `hostknob ...` command in `text`, each part of a chain.
fn printed(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("hostknob "))
        .flat_map(|c| c.split("&&").map(|p| p.trim().to_string()))
        .collect()
}

/// The one printed command with `word` (a subcommand, an option) in it.
fn printed_with(text: &str, word: &str) -> String {
    let all: Vec<String> = printed(text)
        .into_iter()
        .filter(|c| c.split_whitespace().any(|w| w == word))
        .collect();
    assert_eq!(all.len(), 1, "one command with {word:?} in: {text}");
    all[0].clone()
}

/// Runs `cmd` as printed through `sh`, the test binary as `hostknob`. It
/// must name the copy and the manifest the invocation used.
fn run_printed(cmd: &str, root: &Path) -> Output {
    assert!(
        cmd.contains(&format!("--root {}", root.display())),
        "the command names no --root: as printed it acts on this machine: {cmd}"
    );
    let rest = cmd.strip_prefix("hostknob ").unwrap();
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!("\"$0\" {rest}")).arg(bin());
    isolate(&mut c).output().unwrap()
}

fn text_of(o: &Output) -> String {
    format!("{}{}", out(o), err(o))
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn applys_revert_advice_runs_as_printed() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[THP_NEVER]);
    let before = read(root.join(THP_FILE));
    let text = ok(&hk(&root, &m, &["apply", "thp-never"]));
    assert_ne!(read(root.join(THP_FILE)), before, "apply wrote nothing");
    let cmd = printed_with(&text, "revert");
    assert!(cmd.contains(&format!("--state-dir {STATE}")), "{cmd}");
    assert!(
        cmd.contains(&format!("--manifest '{}'", m.display())),
        "{cmd}"
    );
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert!(out(&o).contains("restored and read back"), "{}", out(&o));
    assert_eq!(read(root.join(THP_FILE)), before, "{cmd} did not restore");
}

#[test]
fn reverts_force_advice_runs_as_printed() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[THP_NEVER]);
    let before = read(root.join(THP_FILE));
    ok(&hk(&root, &m, &["apply", "thp-never"]));
    // Someone else changes the file after apply.
    std::fs::write(root.join(THP_FILE), "[always] madvise never\n").unwrap();
    let o = hk(&root, &m, &["revert", "thp-never"]);
    assert_eq!(o.status.code(), Some(1), "{}", text_of(&o));
    let cmd = printed_with(&err(&o), "--force");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert_eq!(read(root.join(THP_FILE)), before, "{cmd} did not restore");
}

#[test]
fn reverts_persisted_advice_runs_as_printed() {
    for (word, with) in [("persist", "--remove"), ("revert", "--persisted")] {
        let (_t, root) = vm();
        let (_m, m) = spaced(&[(
            "thp",
            "persistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
        )]);
        ok(&hk(&root, &m, &["apply", "thp"]));
        ok(&hk(&root, &m, &["persist", "thp", "--install"]));
        let o = hk(&root, &m, &["revert", "thp"]);
        assert!(o.status.success(), "{}", text_of(&o));
        let warning = err(&o);
        let file = warning
            .split(" is persisted by ")
            .nth(1)
            .and_then(|r| r.split(", which").next())
            .unwrap_or_else(|| panic!("{warning}"));
        let file = root.join(file.trim_start_matches('/'));
        assert!(file.exists(), "{}", file.display());
        let cmd = printed(&warning)
            .into_iter()
            .find(|c| c.contains(&format!(" {word} ")) && c.contains(with))
            .unwrap_or_else(|| panic!("no {word} {with}: {warning}"));
        let o = run_printed(&cmd, &root);
        assert!(o.status.success(), "{cmd}: {}", text_of(&o));
        assert!(!file.exists(), "{cmd} left {}", file.display());
    }
}

#[test]
fn verifys_revert_first_advice_runs_as_printed() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[IDLE_OFF_CPU1]);
    ok(&hk(&root, &m, &["apply", "idle-off-cpu1"]));
    // The test-only seam that lets verify probe under a copy.
    let verify = || {
        hk_command(&root, &m, &["verify", "idle-off-cpu1"])
            .env("HOSTKNOB_TEST_PROBE_ON_ROOT", "1")
            .output()
            .unwrap()
    };
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", text_of(&o));
    assert!(err(&o).contains("unreverted changes"), "{}", err(&o));
    let cmd = printed_with(&err(&o), "revert");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    // What the advice promised: the journal no longer holds the knob.
    let journal = root
        .join(STATE.trim_start_matches('/'))
        .join("journal.jsonl");
    let left = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(!left.contains("idle-off-cpu1"), "{cmd} left: {left}");
}

#[test]
fn the_not_honoured_warnings_audit_says_what_it_promises() {
    // The capture's own haltpoll governor ignores a disabled idle state.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let (_m, m) = spaced(&[IDLE_OFF_CPU1]);
    let text = ok(&hk(&root, &m, &["apply", "idle-off-cpu1"]));
    let cmd = printed_with(&text, "audit");
    let promised = text
        .lines()
        .find(|l| l.contains("will say"))
        .and_then(|l| l.rsplit('`').nth(1))
        .unwrap_or_else(|| panic!("{text}"))
        .to_string();
    let o = run_printed(&cmd, &root);
    // Audit exits 2 on a status other than ok; what matters is what it says.
    assert!(
        matches!(o.status.code(), Some(0 | 2)),
        "{cmd}: {}",
        text_of(&o)
    );
    assert!(out(&o).contains(&promised), "{cmd} says: {}", out(&o));
}

#[test]
fn applys_persist_advice_runs_once_the_manifest_says_it() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[THP_NEVER]);
    let text = ok(&hk(&root, &m, &["apply", "thp-never"]));
    let line = text
        .lines()
        .find(|l| l.contains("to make it permanent"))
        .unwrap_or_else(|| panic!("{text}"));
    // "set `persistence: A | B` at FILE and run `hostknob persist ...`"
    let mechanism = line
        .split("`persistence: ")
        .nth(1)
        .and_then(|r| r.split(['`', ' ']).next())
        .unwrap();
    let yaml = m.join("knobs.yaml");
    std::fs::write(
        &yaml,
        read(yaml.clone()).replace("persistence: runtime", &format!("persistence: {mechanism}")),
    )
    .unwrap();
    let cmd = printed_with(line, "persist");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert!(out(&o).contains("installed"), "{}", out(&o));
}

#[test]
fn persists_install_advice_runs_as_printed() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[(
        "thp",
        "persistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    )]);
    let o = hk(&root, &m, &["persist", "thp"]);
    assert!(o.status.success(), "{}", text_of(&o));
    let hint = err(&o);
    let cmd = printed_with(&hint, "--install");
    let file = hint
        .split("writes it to ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .unwrap_or_else(|| panic!("{hint}"));
    let file = root.join(file.trim_start_matches('/'));
    assert!(!file.exists());
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert_eq!(read(file), out(&hk(&root, &m, &["persist", "thp"])));
}

#[test]
fn apply_without_knobs_names_a_knobs_command_that_lists_them() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[THP_NEVER]);
    let o = hk(&root, &m, &["apply"]);
    assert_eq!(o.status.code(), Some(1), "{}", text_of(&o));
    let cmd = printed_with(&err(&o), "knobs");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert!(out(&o).contains("thp-never"), "{cmd}: {}", out(&o));
}

#[test]
fn doc_checks_advice_writes_the_file_it_checked() {
    let (_t, root) = vm();
    let (_m, m) = spaced(&[THP_NEVER]);
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("vm doc.md");
    let f = file.to_str().unwrap();
    let o = hk(&root, &m, &["doc", "--check", "--out", f]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    let cmd = printed_with(&err(&o), "doc");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    let o = hk(&root, &m, &["doc", "--check", "--out", f]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{cmd} wrote no current {f}: {}",
        text_of(&o)
    );
    // Stale: the same advice, and it runs.
    std::fs::write(&file, "old\n").unwrap();
    let o = hk(&root, &m, &["doc", "--check", "--out", f]);
    assert_eq!(o.status.code(), Some(2), "{}", text_of(&o));
    let cmd = printed_with(&err(&o), "doc");
    assert!(run_printed(&cmd, &root).status.success(), "{cmd}");
    let o = hk(&root, &m, &["doc", "--check", "--out", f]);
    assert_eq!(o.status.code(), Some(0), "{}", text_of(&o));
}

#[test]
fn imports_list_advice_lists_where_it_looked() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    let profiles = from.path().join("my profiles");
    write_files(
        &profiles,
        &[(
            "lat/tuned.conf",
            "[main]\nsummary=s\n[sysctl]\nvm.swappiness=10\n",
        )],
    );
    let out_dir = tempfile::tempdir().unwrap();
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        "nosuch",
        "--from",
        profiles.to_str().unwrap(),
        "--out",
        out_dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text_of(&o));
    let cmd = printed_with(&err(&o), "--list");
    let o = run_printed(&cmd, &root);
    assert!(o.status.success(), "{cmd}: {}", text_of(&o));
    assert!(out(&o).contains("lat"), "{cmd} lists: {}", out(&o));
}
