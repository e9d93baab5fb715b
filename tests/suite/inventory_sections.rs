//! `inventory SECTION...` (or `--section`) prints only those sections, in
//! every format.

use crate::support::*;

#[test]
fn only_the_named_sections_in_json_yaml_and_table() {
    let root = corpus_host("gnr0");
    let root = root.to_str().unwrap();
    let v = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "cpu",
        "idle",
        "--format",
        "json",
    ]));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["cpu", "idle", "schema"]);
    assert_eq!(v["cpu"]["online_count"], 512);

    let flag = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "--section",
        "numa",
        "--section",
        "pm_qos",
        "--format",
        "json",
    ]));
    let keys: Vec<&str> = flag
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["numa", "pm_qos", "schema"]);
    assert_eq!(flag["numa"]["nodes"].as_array().unwrap().len(), 2);

    let out = hostknob(&["--root", root, "inventory", "caches", "--format", "yaml"]);
    assert!(out.status.success());
    let y: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let m = y.as_mapping().unwrap();
    assert_eq!(m.len(), 2, "caches and schema only: {y:?}");
    assert!(m.contains_key("caches"));

    let out = hostknob(&["--root", root, "inventory", "cpu"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let titles: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '│', '┌', '├', '└']))
        .collect();
    assert_eq!(titles, ["CPU"], "{text}");

    // With no section named, every section is there, as before.
    let all = json_of(&hostknob(&[
        "--root",
        root,
        "inventory",
        "--format",
        "json",
    ]));
    for k in [
        "host",
        "cpu",
        "caches",
        "numa",
        "memory",
        "idle",
        "network",
        "processes",
    ] {
        assert!(all.get(k).is_some(), "{k} missing");
    }
}

#[test]
fn an_unknown_section_is_refused() {
    let out = hostknob(&["inventory", "disks"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'disks'") && err.contains("pm_qos"), "{err}");
}

/// `--host` names the host in every format; the table's sections before the
/// process table are rendered while it is still read, after the name is set.
/// On this host (read only): captures have no processes.
#[test]
fn the_host_given_is_named_in_every_format() {
    let table = hostknob(&["--host", "web-7", "inventory"]);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    let hostname: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("hostname"))
        .collect();
    assert_eq!(hostname.len(), 1, "{text}");
    assert!(hostname[0].ends_with(" web-7"), "{text}");
    // The process tables follow the head, once each, and the text ends in
    // one newline.
    let titles: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '│', '┌', '├', '└']))
        .collect();
    let at = |t: &str| {
        let all: Vec<usize> = (0..titles.len())
            .filter(|&i| titles[i].starts_with(t))
            .collect();
        assert_eq!(all.len(), 1, "{t}: {titles:?}");
        all[0]
    };
    assert!(at("Host") < at("Network"), "{titles:?}");
    assert!(at("Network") < at("Busiest of"), "{titles:?}");
    assert!(at("Busiest of") < at("By resident memory"), "{titles:?}");
    assert!(text.ends_with('\n') && !text.ends_with("\n\n"), "{text:?}");
    for format in ["json", "yaml"] {
        let out = hostknob(&["--host", "web-7", "inventory", "--format", format]);
        let v: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
        assert_eq!(v["host"]["hostname"].as_str(), Some("web-7"), "{format}");
        assert!(v["processes"]["count"].as_u64().unwrap() > 0, "{format}");
    }
}
