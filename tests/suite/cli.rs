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
