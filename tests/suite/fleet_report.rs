//! `hostknob report` over audit JSON outputs of corpus hosts, as the audit
//! playbook collects them: drifting hosts per knob, grouped; what is
//! unpersisted; the latest verify evidence; bad input named in one line.

use crate::support::*;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn shipped() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest")
}

fn report(args: &[&str], inputs: &[&Path]) -> Output {
    hostknob_command(args)
        .arg("report")
        .args(inputs)
        .output()
        .unwrap()
}

/// Writes `<host>.json`, the host's audit, into `dir`.
fn audit_into(dir: &Path, host: &str) {
    let (_keep, root) = fleet_host(host);
    let o = run(
        &root,
        &shipped(),
        &["--host", host, "--format", "json", "audit"],
    );
    assert!(matches!(o.status.code(), Some(0 | 2)));
    std::fs::write(dir.join(format!("{host}.json")), &o.stdout).unwrap();
}

fn fleet(hosts: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for h in hosts {
        audit_into(dir.path(), h);
    }
    dir
}

fn one_line_error(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let e = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn drifting_hosts_are_named_and_grouped_per_knob() {
    let dir = fleet(&["adl0", "dell-9360-kbl", "genoa0", "fc-haltpoll-2cpu"]);
    let o = report(&[], &[dir.path()]);
    assert_eq!(o.status.code(), Some(2), "a drifting fleet exits 2");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.starts_with("4 hosts, ") && table.contains("drifting: adl0, dell-9360-kbl, genoa0\n"),
        "{table}"
    );

    let o = report(&["--format", "json"], &[dir.path()]);
    assert_eq!(o.status.code(), Some(2));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let gov = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "cpufreq-governor-performance")
        .unwrap();
    assert_eq!(
        gov["drifting"],
        serde_json::json!(["adl0", "dell-9360-kbl", "genoa0"])
    );
    // Failing groups first; hosts with the same status and value together.
    let groups: Vec<(String, String, Vec<String>)> = gov["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["status"].as_str().unwrap().to_string(),
                g["current"].as_str().unwrap().to_string(),
                g["hosts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            (
                "drift".into(),
                "powersave".into(),
                vec!["adl0".into(), "dell-9360-kbl".into()]
            ),
            ("drift".into(), "schedutil".into(), vec!["genoa0".into()]),
            (
                "not-applicable".into(),
                "-".into(),
                vec!["fc-haltpoll-2cpu".into()]
            ),
        ]
    );
    let thp = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "thp-madvise")
        .unwrap();
    assert_eq!(thp["unpersisted"], serde_json::json!(["fc-haltpoll-2cpu"]));
    // No two hosts agree on every knob: adl0 and dell-9360-kbl share governor
    // and EPP but not their deep idle states (C6-C10 against C3-C10).
    let groups = r["host_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4, "{groups:#?}");
    assert!(groups.iter().all(|g| g["count"] == 1), "{groups:#?}");
    let fails: Vec<bool> = r["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["fails"].as_bool().unwrap())
        .collect();
    assert_eq!(fails, vec![true, true, false, true]);

    let md = report(&["--format", "markdown"], &[dir.path()]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.starts_with("# Fleet report\n"), "{md}");
    assert!(
        md.contains("## Lost on reboot or unpersisted")
            && md.contains("| thp-madvise ")
            && md.contains("| adl0, dell-9360-kbl "),
        "{md}"
    );
}

#[test]
fn a_fleet_without_drift_exits_0_and_files_can_be_named_one_by_one() {
    let dir = fleet(&["fc-haltpoll-2cpu"]);
    let o = report(&[], &[&dir.path().join("fc-haltpoll-2cpu.json")]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("; no host drifts\n"));
}

#[test]
fn the_latest_verify_evidence_per_knob_is_shown() {
    let (_t, root) = vm();
    let m = knobs(&[IDLE_OFF_CPU1]);
    let v: Value = short_verify(&root, m.path(), "idle-off-cpu1");
    let dir = tempfile::tempdir().unwrap();
    let a = run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "audit"],
    );
    std::fs::write(dir.path().join("vm.json"), &a.stdout).unwrap();
    let o = report(&["--format", "json"], &[dir.path()]);
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = &r["knobs"][0]["evidence"][0];
    assert_eq!(e["host"], "vm");
    assert_eq!(e["verdict"], v["verdict"]);
    let ratio = v["analysis"]["ratio"].as_f64().unwrap();
    assert!((e["ratio"].as_f64().unwrap() - ratio).abs() < 1e-12);
    let table = String::from_utf8_lossy(&report(&[], &[dir.path()]).stdout).into_owned();
    let verdict = v["verdict"].as_str().unwrap().replace('-', " ");
    assert!(
        table.contains("Latest verify evidence")
            && table.contains(&format!("{verdict}, ratio {ratio:.3} on vm")),
        "{table}"
    );
}

#[test]
fn bad_inputs_are_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    std::fs::write(d.join("broken.json"), "{\n  \"schema\": 1,\n  oops\n}\n").unwrap();
    let e = one_line_error(&report(&[], &[&d.join("broken.json")]));
    assert!(e.contains("broken.json: line 3 column 3: not JSON"), "{e}");

    let knobs_out = run(
        &corpus_host("adl0"),
        &shipped(),
        &["--host", "adl0", "--format", "json", "knobs"],
    );
    std::fs::write(d.join("knobs.json"), &knobs_out.stdout).unwrap();
    let e = one_line_error(&report(&[], &[&d.join("knobs.json")]));
    assert!(
        e.contains("knobs.json: not a `hostknob audit --format json` output"),
        "{e}"
    );

    audit_into(d, "adl0");
    let mut old: Value =
        serde_json::from_slice(&std::fs::read(d.join("adl0.json")).unwrap()).unwrap();
    old.as_object_mut().unwrap().remove("schema");
    std::fs::write(d.join("old.json"), old.to_string()).unwrap();
    let e = one_line_error(&report(&[], &[&d.join("old.json")]));
    assert!(e.contains("old.json: field `schema` missing"), "{e}");

    old["schema"] = 7.into();
    std::fs::write(d.join("future.json"), old.to_string()).unwrap();
    let e = one_line_error(&report(&[], &[&d.join("future.json")]));
    assert!(
        e.contains("future.json: field `schema`: 7 is not audit schema 1"),
        "{e}"
    );

    // Two files naming one host are not an error: fleet_scale.

    let empty = tempfile::tempdir().unwrap();
    let e = one_line_error(&report(&[], &[empty.path()]));
    assert!(
        e.contains("no *.json audit outputs in this directory"),
        "{e}"
    );

    let e = one_line_error(&report(&[], &[&d.join("missing.json")]));
    assert!(e.contains("missing.json: No such file"), "{e}");
}

/// `report ARGS INPUTS`, the arguments after the subcommand.
fn rep(args: &[&str], inputs: &[&Path]) -> Output {
    hostknob_command(&["report"])
        .args(args)
        .args(inputs)
        .output()
        .unwrap()
}

#[test]
fn a_5000_host_report_names_an_empty_a_schema_2_and_a_stale_file_and_reports_the_rest() {
    // Issue 35 item 3: one bad file made report exit 1 with no report at all,
    // and the table printed 30,000-character lines.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let audits: Vec<Value> = ["adl0", "genoa0", "fc-haltpoll-2cpu", "spr1"]
        .iter()
        .map(|h| {
            let o = run(
                &corpus_host(h),
                &shipped(),
                &["--host", h, "--format", "json", "audit"],
            );
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect();
    let roles = ["web", "db", "cache", "edge", "rpc"];
    for i in 0..4997 {
        let mut a = audits[i % audits.len()].clone();
        // Names that compress badly, as a real fleet's do.
        a["host"] = format!("{}-{}", roles[i % roles.len()], (i * 7919) % 100_003).into();
        if i % 1000 == 0 {
            a["hostknob_version"] = "0.0.9".into();
        }
        std::fs::write(d.join(format!("h{i:04}.json")), a.to_string()).unwrap();
    }
    std::fs::write(d.join("empty.json"), "").unwrap();
    let mut newer = audits[0].clone();
    newer["schema"] = 2.into();
    newer["host"] = "future-1".into();
    std::fs::write(d.join("newer.json"), newer.to_string()).unwrap();
    let mut old = audits[1].clone();
    old["host"] = "stale-1".into();
    old["audited_at"] = "2020-01-01T00:00:00Z".into();
    std::fs::write(d.join("stale.json"), old.to_string()).unwrap();

    let o = rep(&["--format", "json", "--max-age", "2h"], &[d]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["hosts"].as_array().unwrap().len(), 4998);
    let unreadable: Vec<(String, String)> = r["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["file"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                u["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(unreadable.len(), 2, "{unreadable:?}");
    assert_eq!(unreadable[0].0, "empty.json");
    assert!(unreadable[0].1.contains("not JSON"), "{unreadable:?}");
    assert_eq!(unreadable[1].0, "newer.json");
    assert!(
        unreadable[1]
            .1
            .contains("field `schema`: 2 is not audit schema 1"),
        "{unreadable:?}"
    );
    assert_eq!(r["stale"]["hosts"], serde_json::json!(["stale-1"]));
    assert_eq!(r["stale"]["value"], "2h");
    let versions: Vec<&str> = r["hostknob_versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["value"].as_str().unwrap())
        .collect();
    assert_eq!(versions, [env!("CARGO_PKG_VERSION"), "0.0.9"]);
    assert!(
        err(&o).contains("2 of 5000 input files could not be read"),
        "{}",
        err(&o)
    );

    // The table: a summary first, the three named, no line past a screen's worth.
    let o = rep(&["--max-age", "2h"], &[d]);
    assert_eq!(o.status.code(), Some(2));
    let table = out(&o);
    let first = table.lines().next().unwrap();
    assert!(first.starts_with("4998 hosts, "), "{first}");
    for needle in [
        "2 input files could not be read and are not in this report",
        "stale: 1 host audited more than 2h ago",
        "2 hostknob versions: ",
        "Unreadable inputs (not in this report)",
        "empty.json",
        "newer.json",
        "stale-1",
        "(cut; --format json lists all)",
    ] {
        assert!(table.contains(needle), "{needle}");
    }
    let longest = table.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 400, "a {longest}-character line");

    // CI gates see the two files too; --strict makes them an exit 1.
    let csv = out(&rep(&["--format", "csv"], &[d]));
    assert_eq!(
        csv.lines()
            .filter(|l| l.contains(",unreadable,true,"))
            .count(),
        2
    );
    let junit = out(&rep(&["--format", "junit"], &[d]));
    assert!(junit.contains("errors=\"2\""), "{}", &junit[..300]);
    let o = rep(&["--strict", "--format", "json"], &[d]);
    assert_eq!(o.status.code(), Some(1));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["hosts"].as_array().unwrap().len(),
        4998,
        "reported all the same"
    );
}
