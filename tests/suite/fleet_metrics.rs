//! `audit --format prometheus` and `--textfile DIR` on corpus hosts: one
//! status per knob, counts that match the JSON, escaped labels, verify
//! evidence, and a textfile written whole or not at all. (CI also runs
//! `promtool check metrics` on the output: dist/ci-fleet.sh.)

use crate::support::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

fn shipped() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest")
}

/// (metric name, labels) -> value, checking every family has HELP and TYPE first.
fn parse(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let mut typed = BTreeSet::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(kind, "gauge");
            assert!(typed.insert(name.to_string()), "TYPE twice: {name}");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        assert!(typed.contains(name), "{name} before its TYPE line");
        let mut map = BTreeMap::new();
        // Values have no `",` inside in these tests, except escaped quotes.
        let body = labels.strip_suffix('}').unwrap();
        let mut rest = body;
        while !rest.is_empty() {
            let (k, v) = rest.split_once("=\"").unwrap();
            let mut end = 0;
            let bytes = v.as_bytes();
            while bytes[end] != b'"' || bytes[end - 1] == b'\\' && bytes[end - 2] != b'\\' {
                end += 1;
            }
            map.insert(k.to_string(), v[..end].to_string());
            rest = v[end + 1..].strip_prefix(',').unwrap_or(&v[end + 1..]);
        }
        let prev = out.insert((name.to_string(), map), value.parse::<f64>().unwrap());
        assert!(prev.is_none(), "duplicate series: {line}");
    }
    out
}

fn metrics(root: &Path, manifest: &Path, host: &str) -> (String, i32) {
    let o = run(
        root,
        manifest,
        &["--host", host, "--format", "prometheus", "audit"],
    );
    (
        String::from_utf8(o.stdout).unwrap(),
        o.status.code().unwrap(),
    )
}

#[test]
fn one_status_per_knob_and_counts_that_match_the_audit() {
    for host in ["adl0", "genoa0", "fc-haltpoll-2cpu", "spr1"] {
        let root = corpus_host(host);
        let (text, code) = metrics(&root, &shipped(), host);
        let json_out = run(
            &root,
            &shipped(),
            &["--host", host, "--format", "json", "audit"],
        );
        assert_eq!(Some(code), json_out.status.code(), "{host}: same exit code");
        let audit: Value = serde_json::from_slice(&json_out.stdout).unwrap();
        let m = parse(&text);
        for k in audit["knobs"].as_array().unwrap() {
            let ones: Vec<&String> = m
                .iter()
                .filter(|((n, l), v)| {
                    n == "hostknob_knob_status" && l["knob"] == k["id"] && **v == 1.0
                })
                .map(|((_, l), _)| &l["status"])
                .collect();
            assert_eq!(
                ones,
                vec![k["status"].as_str().unwrap()],
                "{host}: {}",
                k["id"]
            );
            // One series per knob: a fleet of 5,000 hosts with 7 knobs
            // stores 35,000 status series, not nine times that.
            let series = m
                .keys()
                .filter(|(n, l)| n == "hostknob_knob_status" && l["knob"] == k["id"])
                .count();
            assert_eq!(series, 1, "{host}: one series per knob");
        }
        for (status, n) in audit["summary"].as_object().unwrap() {
            let key = (
                "hostknob_knobs".to_string(),
                BTreeMap::from([("status".to_string(), status.clone())]),
            );
            assert_eq!(m[&key], n.as_f64().unwrap(), "{host}: {status}");
        }
        // The host is named once, on build_info; instance tells hosts apart.
        let named: Vec<_> = m.keys().filter(|(_, l)| l.contains_key("host")).collect();
        assert_eq!(named.len(), 1, "{host}: {named:?}");
        assert_eq!(named[0].0, "hostknob_build_info");
        assert_eq!(named[0].1["host"], host);
        let one = |name: &str| m[&(name.to_string(), BTreeMap::new())];
        assert_eq!(
            one("hostknob_audit_failing"),
            f64::from(u8::from(code == 2))
        );
        assert_eq!(one("hostknob_audit_exit_code"), f64::from(code));
        assert!(
            m.keys()
                .any(|(n, _)| n == "hostknob_audit_timestamp_seconds")
        );
    }
}

#[test]
fn label_values_are_escaped() {
    let (text, _) = metrics(&corpus_host("adl0"), &shipped(), "we\"ird\\host");
    assert!(
        text.contains("hostknob_build_info{host=\"we\\\"ird\\\\host\",version="),
        "{text}"
    );
    let m = parse(&text);
    assert!(
        m.keys()
            .filter_map(|(_, l)| l.get("host"))
            .all(|h| h == "we\\\"ird\\\\host")
    );
}

#[test]
fn verify_evidence_becomes_verdict_ratio_and_time() {
    let (_t, root) = vm();
    let m = knobs(&[IDLE_OFF_CPU1]);
    let v: Value = short_verify(&root, m.path(), "idle-off-cpu1");
    let (text, _) = metrics(&root, m.path(), "vm");
    let parsed = parse(&text);
    let label = |extra: &[(&str, &str)]| {
        let mut l = BTreeMap::from([("knob".to_string(), "idle-off-cpu1".to_string())]);
        for (k, v) in extra {
            l.insert(k.to_string(), v.to_string());
        }
        l
    };
    // One verdict series per knob, the verdict its label.
    let verdicts: Vec<_> = parsed
        .keys()
        .filter(|(n, _)| n == "hostknob_knob_verify_verdict")
        .collect();
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    let verdict = v["verdict"].as_str().unwrap();
    let value = parsed[&(
        "hostknob_knob_verify_verdict".to_string(),
        label(&[("verdict", verdict)]),
    )];
    assert_eq!(value, 1.0);
    let ratio = parsed[&("hostknob_knob_verify_ratio".to_string(), label(&[]))];
    assert_eq!(ratio, v["analysis"]["ratio"].as_f64().unwrap());
    let when = parsed[&(
        "hostknob_knob_verify_timestamp_seconds".to_string(),
        label(&[]),
    )];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(when <= now && when > now - 600.0, "{when} vs {now}");
}

#[test]
fn textfile_is_written_whole_beside_the_chosen_format() {
    let dir = tempfile::tempdir().unwrap();
    let root = corpus_host("adl0");
    let o = run(
        &root,
        &shipped(),
        &[
            "--host",
            "adl0",
            "--format",
            "json",
            "audit",
            "--textfile",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "drift still exits 2");
    let stdout: Value = serde_json::from_slice(&o.stdout).expect("stdout keeps --format json");
    assert_eq!(stdout["schema"], 1);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["hostknob.prom"], "no temporary file left");
    let file = std::fs::read_to_string(dir.path().join("hostknob.prom")).unwrap();
    let (stdout_metrics, _) = metrics(&root, &shipped(), "adl0");
    let strip = |t: &str| -> String {
        t.lines()
            .filter(|l| !l.starts_with("hostknob_audit_timestamp_seconds"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&file), strip(&stdout_metrics));

    // A second audit replaces the file.
    let before = std::fs::metadata(dir.path().join("hostknob.prom")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(
        &root,
        &shipped(),
        &[
            "--host",
            "adl0",
            "audit",
            "--textfile",
            dir.path().to_str().unwrap(),
        ],
    );
    let after = std::fs::metadata(dir.path().join("hostknob.prom")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(
        before.ino(),
        after.ino(),
        "renamed into place, not rewritten"
    );
}

#[test]
fn a_missing_textfile_directory_is_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = run(
        &corpus_host("adl0"),
        &shipped(),
        &[
            "--host",
            "adl0",
            "audit",
            "--textfile",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("--textfile") && e.contains("nope: no such directory"),
        "{e}"
    );
    assert!(!missing.exists());
    assert!(
        o.stdout.is_empty(),
        "nothing printed when the metrics cannot be written"
    );
}

#[test]
fn prometheus_and_markdown_are_refused_where_they_do_not_apply() {
    // A usage error: each command lists the formats it renders.
    let o = run(
        &corpus_host("adl0"),
        &shipped(),
        &["--format", "prometheus", "inventory"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("invalid value 'prometheus'") && e.contains("table, yaml, json"),
        "{e}"
    );
    let o = run(
        &corpus_host("adl0"),
        &shipped(),
        &["--format", "markdown", "knobs"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid value 'markdown'"));
    let o = run(
        &corpus_host("adl0"),
        &shipped(),
        &["--format", "prometheus", "audit"],
    );
    assert!(o.status.code() != Some(1), "audit takes prometheus");
}
