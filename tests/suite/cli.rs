//! The command line contract: global options anywhere, exit codes, teaching help.

use crate::support::*;

#[test]
fn global_options_work_before_or_after_the_subcommand() {
    let root = corpus_host("fc-haltpoll-2cpu");
    let r = root.to_str().unwrap();
    let before = hostknob(&["--root", r, "--format", "json", "inventory"]);
    let after = hostknob(&["inventory", "--root", r, "--format", "json"]);
    let mixed = hostknob(&["--format", "json", "inventory", "--root", r]);
    let a = json_of(&before);
    assert_eq!(a, json_of(&after));
    assert_eq!(a, json_of(&mixed));
    assert_eq!(a["cpu"]["online"], "0-1");
    let env = hostknob_command(&["inventory", "--format", "json"])
        .env("HOSTKNOB_ROOT", r)
        .output()
        .unwrap();
    assert_eq!(json_of(&env), a, "HOSTKNOB_ROOT selects the root");
}

#[test]
fn yaml_output_carries_the_same_facts() {
    let root = corpus_host("spr1");
    let out = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "--format",
        "yaml",
    ]);
    assert!(out.status.success());
    let y: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(y["cpu"]["online_count"].as_u64(), Some(320));
    assert_eq!(y["idle"]["states"][3]["name"].as_str(), Some("C6"));
}

#[test]
fn usage_errors_exit_1_not_the_drift_code() {
    let out = hostknob(&["inventroy"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inventory"),
        "suggests the right name"
    );
    let out = hostknob(&["inventory", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("table, yaml, json"));
}

#[test]
fn help_teaches() {
    let out = hostknob(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "inventory",
        "capture",
        "doc",
        "--root",
        "Examples:",
        "Exit codes",
    ] {
        assert!(text.contains(word), "--help lacks {word}");
    }
    let out = hostknob(&["inventory", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("not exposed"));
}

/// `--help` of `hostknob ARGS... --help`.
fn help(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--help");
    let o = hostknob(&all);
    assert_eq!(o.status.code(), Some(0), "{all:?}");
    stdout(&o)
}

#[test]
fn each_subcommand_lists_only_the_options_it_uses() {
    let lists = |args: &[&str], yes: &[&str], no: &[&str]| {
        let h = help(args);
        for o in yes {
            assert!(h.contains(o), "{args:?} --help lacks {o}");
        }
        for o in no {
            assert!(!h.contains(o), "{args:?} --help lists {o}");
        }
    };
    let all = [
        "--root",
        "--format",
        "--host",
        "--manifest",
        "--state-dir",
        "--quiet",
    ];
    lists(&["inventory"], &all[..3], &all[3..]);
    lists(
        &["capture"],
        &["--root", "--host", "--format", "--quiet"],
        &["--manifest", "--state-dir"],
    );
    // doc, audit and knobs read the ledger in the state directory.
    lists(
        &["doc"],
        &["--root", "--host", "--manifest", "--state-dir"],
        &["--format", "--quiet"],
    );
    lists(&["audit"], &all[..5], &all[5..]);
    lists(&["knobs"], &all[..5], &all[5..]);
    // Every command that takes knob ids takes a profile and local overrides.
    for cmd in [
        "doc", "audit", "knobs", "apply", "revert", "persist", "verify", "hold",
    ] {
        lists(&[cmd], &["--profile", "--overrides"], &[]);
    }
    for cmd in ["inventory", "capture", "isolate", "report"] {
        lists(&[cmd], &[], &["--profile", "--overrides"]);
    }
    lists(&["apply"], &all, &[]);
    lists(&["revert"], &all, &[]);
    lists(&["persist"], &all, &[]);
    lists(&["verify"], &all, &[]);
    lists(&["isolate"], &all[..3], &all[3..]);
    lists(
        &["hold"],
        &["--root", "--host", "--manifest"],
        &["--format", "--state-dir", "--quiet"],
    );
    lists(
        &["report"],
        &["--format"],
        &["--root", "--host", "--manifest", "--state-dir"],
    );
    for cmd in ["schema", "completions", "man"] {
        lists(&[cmd], &[], &all);
    }
    lists(
        &["probe", "wakeup"],
        &["--root", "--format", "--host", "--quiet"],
        &["--manifest", "--state-dir"],
    );
    // A probe shows its own options first.
    let h = help(&["probe", "wakeup"]);
    assert!(
        h.find("--samples").unwrap() < h.find("--format").unwrap(),
        "{h}"
    );
}

#[test]
fn an_option_a_subcommand_does_not_take_is_a_usage_error_after_it() {
    // Before the name, context options it does not use are ignored
    // (tests/suite/newcomer.rs); --format is not.
    let root = corpus_host("fc-haltpoll-2cpu");
    let r = root.to_str().unwrap();
    for args in [
        &["inventory", "--manifest", "/m", "--root", r][..],
        &["inventory", "--state-dir", "/s"],
        &["--format", "json", "doc", "--root", r, "--out", "-"],
        &["doc", "--root", r, "--format", "json", "--out", "-"],
        &["capture", "--out", "/tmp/never-made", "--manifest", "/m"],
        &["schema", "--root", r],
        &["report", "--root", r, "x.json"],
        &["inventory", "--quiet"],
    ] {
        let o = hostknob(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stdout(&o));
        let e = stderr(&o);
        assert!(e.contains("unexpected argument '--"), "{args:?}: {e}");
        assert!(stdout(&o).is_empty(), "{args:?} printed something");
    }
    assert!(!std::path::Path::new("/tmp/never-made").exists());
    // `doc` writes Markdown: --format is refused, not ignored.
    let e = stderr(&hostknob(&[
        "doc", "--root", r, "--format", "json", "--out", "-",
    ]));
    assert!(
        e.contains("'--format'") && e.contains("hostknob doc"),
        "{e}"
    );
}

#[test]
fn manifest_host_and_state_options_work_before_or_after_the_subcommand() {
    let root = corpus_host("fc-haltpoll-2cpu");
    let r = root.to_str().unwrap();
    let m = env!("CARGO_MANIFEST_DIR").to_string() + "/manifest";
    let before = hostknob(&[
        "--root",
        r,
        "--manifest",
        &m,
        "--host",
        "h1",
        "--format",
        "json",
        "knobs",
    ]);
    let after = hostknob(&[
        "knobs",
        "--format=json",
        "--host=h1",
        "--manifest",
        &m,
        "--root",
        r,
    ]);
    let a = json_of(&before);
    assert_eq!(a, json_of(&after));
    assert_eq!(a["host"], "h1");
    let env = hostknob_command(&["knobs", "--format", "json"])
        .env("HOSTKNOB_ROOT", r)
        .env("HOSTKNOB_MANIFEST", &m)
        .env("HOSTKNOB_HOST", "h1")
        .output()
        .unwrap();
    assert_eq!(
        json_of(&env),
        a,
        "the variables select root, manifest and host"
    );
    // --state-dir before apply reaches apply (a dry run takes no lock, so
    // a state directory that cannot exist does not matter; the plan does).
    let o = hostknob(&[
        "--root",
        r,
        "--manifest",
        &m,
        "--state-dir",
        "/st",
        "apply",
        "--all",
        "--dry-run",
    ]);
    assert!(
        !stderr(&o).contains("unexpected argument"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn usage_errors_name_the_mistake_and_exit_1() {
    for args in [
        &["probe", "wakeup", "--samples", "many"][..],
        &["audit", "--format", "markdown"],
        &["report", "--format", "prometheus", "x.json"],
        &["verify"],
    ] {
        let o = hostknob(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).starts_with("error: "),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(hostknob(&["--version"]).status.code(), Some(0));
    assert_eq!(hostknob(&["probe", "--help"]).status.code(), Some(0));
}

/// `hostknob ... | head`: the reader closes the pipe early. hostknob exits
/// 141 (128 + SIGPIPE, as a shell expects) and prints no panic.
#[test]
fn a_reader_that_stops_early_gets_exit_141_and_no_panic() {
    let host = corpus_host("gnr0");
    let mut child = hostknob_command(&[
        "--root",
        host.to_str().unwrap(),
        "inventory",
        "--format",
        "json",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // More than a pipe's 64 KiB follows, so a write meets the closed end.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
