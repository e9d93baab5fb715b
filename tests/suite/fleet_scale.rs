//! Issue 25 item 13: `report` at fleet scale, on audit JSON written by the
//! binary on corpus hosts (renamed where a fleet needs many): two files for
//! one host kept apart with the clash said, host counts and compressed host
//! lists, CSV and JUnit XML for CI gates, and `--compare` of two rounds.

use crate::support::*;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn shipped() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest")
}

fn report(args: &[&str], inputs: &[&Path]) -> Output {
    hostknob_command(&["report"])
        .args(args)
        .args(inputs)
        .output()
        .unwrap()
}

/// The audit of corpus host `corpus` under the name `host`, as JSON.
fn audit_as(corpus: &str, host: &str) -> Value {
    let (_keep, root) = fleet_host(corpus);
    let o = run(
        &root,
        &shipped(),
        &["--host", host, "--format", "json", "audit"],
    );
    assert!(matches!(o.status.code(), Some(0 | 2)), "{}", err(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Writes `audit` with its host renamed to `host` as DIR/FILE.
fn write_as(dir: &Path, file: &str, audit: &Value, host: &str) {
    let mut a = audit.clone();
    a["host"] = host.into();
    std::fs::write(dir.join(file), a.to_string()).unwrap();
}

fn json(o: &Output) -> Value {
    assert!(matches!(o.status.code(), Some(0 | 2)), "{}", err(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn two_files_for_one_host_are_both_kept_and_the_clash_said() {
    let dir = tempfile::tempdir().unwrap();
    let adl = audit_as("adl0", "adl0");
    write_as(dir.path(), "monday.json", &adl, "adl0");
    write_as(
        dir.path(),
        "tuesday.json",
        &audit_as("fc-haltpoll-2cpu", "x"),
        "adl0",
    );
    write_as(
        dir.path(),
        "genoa0.json",
        &audit_as("genoa0", "genoa0"),
        "genoa0",
    );
    let o = report(&["--format", "json"], &[dir.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let r = json(&o);
    let names: Vec<&str> = r["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["adl0 (monday.json)", "adl0 (tuesday.json)", "genoa0"]
    );
    assert_eq!(r["clashes"][0]["host"], "adl0");
    assert_eq!(r["clashes"][0]["files"].as_array().unwrap().len(), 2);
    // Each entry keeps its own figures: the VM's audit is not the desktop's.
    assert_ne!(r["hosts"][0]["summary"], r["hosts"][1]["summary"]);
    let o = report(&[], &[dir.path()]);
    let table = out(&o);
    assert!(
        table.contains("host adl0 is named by 2 files (")
            && table.contains("monday.json")
            && table.contains("tuesday.json"),
        "{table}"
    );
    // The same file twice under two names in different directories: named by path.
    let other = tempfile::tempdir().unwrap();
    write_as(other.path(), "monday.json", &adl, "adl0");
    let o = report(
        &["--format", "json"],
        &[
            &dir.path().join("monday.json"),
            &other.path().join("monday.json"),
        ],
    );
    let r = json(&o);
    let first = r["hosts"][0]["host"].as_str().unwrap();
    assert!(
        first.starts_with("adl0 (/") && first.ends_with("monday.json)"),
        "{first}"
    );
}

/// web-001..web-040 drifting (adl0's audit), db-1..db-3 not (the VM's).
fn big_fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let web = audit_as("adl0", "web");
    let db = audit_as("fc-haltpoll-2cpu", "db");
    for i in 1..=40 {
        let h = format!("web-{i:03}");
        write_as(dir.path(), &format!("{h}.json"), &web, &h);
    }
    for i in 1..=3 {
        let h = format!("db-{i}");
        write_as(dir.path(), &format!("{h}.json"), &db, &h);
    }
    dir
}

#[test]
fn groups_carry_host_counts_and_compressed_host_lists() {
    let dir = big_fleet();
    let r = json(&report(&["--format", "json"], &[dir.path()]));
    let groups = r["host_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert_eq!(groups[0]["count"], 40);
    assert_eq!(groups[0]["compressed"], "web-[001-040]");
    assert_eq!(groups[0]["hosts"].as_array().unwrap().len(), 40);
    assert_eq!(groups[1]["compressed"], "db-[1-3]");
    let gov = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "cpufreq-governor-performance")
        .unwrap();
    assert_eq!(gov["groups"][0]["status"], "drift");
    assert_eq!(gov["groups"][0]["count"], 40);
    assert_eq!(gov["groups"][0]["compressed"], "web-[001-040]");
    let table = out(&report(&[], &[dir.path()]));
    assert!(table.contains("drifting: web-[001-040]\n"), "{table}");
    assert!(!table.contains("web-002"), "lists are compressed:\n{table}");
    // Every audit named the same manifest revision (the shipped manifest's hash).
    assert_eq!(r["manifest_revisions"].as_array().unwrap().len(), 1);
    assert_eq!(r["manifest_revisions"][0]["count"], 43);
    let rev = r["manifest_revisions"][0]["value"].as_str().unwrap();
    assert!(
        rev.starts_with("sha256:") || rev.starts_with("git:"),
        "{rev}"
    );
}

/// RFC 4180 rows (quoted fields, doubled quotes, CRLF).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut field, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(row.is_empty() && field.is_empty(), "ends with a line break");
    rows
}

#[test]
fn csv_has_a_row_per_host_and_knob_matching_the_json() {
    let dir = big_fleet();
    let r = json(&report(&["--format", "json"], &[dir.path()]));
    let o = report(&["--format", "csv"], &[dir.path()]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the exit code gates CI as the table's does"
    );
    let rows = parse_csv(&out(&o));
    assert_eq!(
        rows[0],
        [
            "host", "file", "knob", "status", "fails", "current", "desired"
        ]
    );
    let pairs: usize = r["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            h["summary"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap() as usize)
                .sum::<usize>()
        })
        .sum();
    assert_eq!(rows.len() - 1, pairs);
    assert!(rows.iter().all(|r| r.len() == 7), "{rows:?}");
    let row = rows
        .iter()
        .find(|r| r[0] == "web-017" && r[2] == "cpufreq-governor-performance")
        .unwrap();
    assert_eq!(row[3], "drift");
    assert_eq!(row[4], "true");
    assert!(row[1].ends_with("web-017.json"), "{row:?}");
    assert_eq!(row[6], "performance");
    let gov = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "cpufreq-governor-performance")
        .unwrap();
    assert_eq!(row[5], gov["groups"][0]["current"].as_str().unwrap());
}

#[test]
fn junit_has_a_suite_per_host_and_a_failure_per_failing_knob() {
    let dir = big_fleet();
    let r = json(&report(&["--format", "json"], &[dir.path()]));
    let o = report(&["--format", "junit"], &[dir.path()]);
    assert_eq!(o.status.code(), Some(2));
    let text = out(&o);
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 43);
    let mut failures_total = 0;
    for (s, h) in suites.iter().zip(r["hosts"].as_array().unwrap()) {
        assert_eq!(s.attribute("name"), h["host"].as_str());
        let cases: Vec<_> = s
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(s.attribute("tests").unwrap(), cases.len().to_string());
        let failed = cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
            .count();
        assert_eq!(s.attribute("failures").unwrap(), failed.to_string());
        assert_eq!(failed > 0, h["fails"] == true, "{}", h["host"]);
        failures_total += failed;
    }
    assert_eq!(
        root.attribute("failures").unwrap(),
        failures_total.to_string()
    );
    let web = suites
        .iter()
        .find(|s| s.attribute("name") == Some("web-005"))
        .unwrap();
    let gov = web
        .children()
        .find(|c| c.attribute("name") == Some("cpufreq-governor-performance"))
        .unwrap();
    let f = gov.children().find(|n| n.has_tag_name("failure")).unwrap();
    assert_eq!(f.attribute("type"), Some("drift"));
    assert!(
        f.attribute("message")
            .unwrap()
            .contains("(desired performance)")
    );
    // Names that XML must escape stay intact.
    let odd = tempfile::tempdir().unwrap();
    write_as(odd.path(), "odd.json", &audit_as("adl0", "x"), "a<b>&\"c\"");
    let text = out(&report(&["--format", "junit"], &[odd.path()]));
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let s = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(s.attribute("name"), Some("a<b>&\"c\""));
}

#[test]
fn compare_says_which_knobs_started_or_stopped_drifting_and_which_hosts_came_and_went() {
    let old = tempfile::tempdir().unwrap();
    let new = tempfile::tempdir().unwrap();
    let drifting = audit_as("adl0", "x");
    let clean = audit_as("fc-haltpoll-2cpu", "x");
    write_as(old.path(), "h1.json", &clean, "h1");
    write_as(old.path(), "h2.json", &drifting, "h2");
    write_as(old.path(), "h3.json", &clean, "h3");
    write_as(new.path(), "h1.json", &drifting, "h1");
    write_as(new.path(), "h2.json", &clean, "h2");
    write_as(new.path(), "h4.json", &clean, "h4");
    let o = report(
        &["--format", "json", "--compare"],
        &[old.path(), new.path()],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "something started drifting: {}",
        err(&o)
    );
    let c = json(&o);
    assert_eq!(c["hosts_added"], serde_json::json!(["h4"]));
    assert_eq!(c["hosts_gone"], serde_json::json!(["h3"]));
    assert_eq!(c["hosts_in_both"], 2);
    let gov = c["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "cpufreq-governor-performance")
        .unwrap_or_else(|| panic!("{c:#}"));
    assert_eq!(gov["started_drifting"][0]["host"], "h1");
    assert_eq!(gov["started_drifting"][0]["now"], "drift");
    assert_eq!(gov["stopped_drifting"][0]["host"], "h2");
    assert_eq!(gov["stopped_drifting"][0]["before"], "drift");
    // Every reported change is one: the knob's status on that host fails in one round only.
    let adl_fails: Vec<&str> = drifting["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| {
            matches!(
                k["status"].as_str(),
                Some("drift" | "unsupported" | "lost-on-reboot" | "not-honoured")
            )
        })
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    let changed: Vec<&str> = c["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        changed.len(),
        adl_fails.len(),
        "{changed:?} vs {adl_fails:?}"
    );
    let table = out(&report(&["--compare"], &[old.path(), new.path()]));
    assert!(
        table.contains("added: h4") && table.contains("gone: h3"),
        "{table}"
    );
    assert!(
        table.contains("started drifting") && table.contains("stopped drifting"),
        "{table}"
    );
    // The same round twice: nothing changed, exit 0.
    let o = report(
        &["--format", "json", "--compare"],
        &[old.path(), old.path()],
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["knobs"], serde_json::json!([]));
    // CSV and JUnit are for one round: said in one line, exit 1.
    let o = report(&["--format", "csv", "--compare"], &[old.path(), new.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("--compare shows changes as table"),
        "{}",
        err(&o)
    );
}
