//! JSON contracts: every machine-readable output, produced on corpus hosts
//! (and this machine for probes), validates against the JSON Schema
//! `hostknob schema NAME` prints, carries `schema: 1`, and the schemas
//! committed under docs/schemas/ are the ones the binary prints.

use crate::support::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn schema_names() -> Vec<String> {
    let o = hostknob_command(&[]).arg("schema").output().unwrap();
    ok(&o)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

fn schema_of(name: &str) -> Value {
    let o = hostknob_command(&[])
        .args(["schema", name])
        .output()
        .unwrap();
    serde_json::from_str(&ok(&o)).unwrap()
}

/// Validates `out` (JSON on stdout, exit 0, 2 or, verify inconclusive, 3) against schema `name`.
pub(crate) fn check(name: &str, out: &Output, seen: &mut BTreeSet<String>) -> Value {
    assert!(
        matches!(out.status.code(), Some(0 | 2 | 3))
            || (name == "error" && out.status.code() == Some(1)),
        "{name}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["schema"], 1, "{name}: schema field");
    let schema = schema_of(name);
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("{name}: the schema does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {}", errors.join("\n"));
    seen.insert(name.to_string());
    v
}

fn hk(root: &Path, manifest: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--format", "json"];
    all.extend(args);
    run(root, manifest, &all)
}

#[test]
fn every_json_output_validates_against_its_schema() {
    let mut seen = BTreeSet::new();
    let shipped = repo().join("manifest");

    // inventory and audit/knobs on several different real hosts.
    for host in [
        "adl0",
        "spr1",
        "genoa0",
        "fc-haltpoll-2cpu",
        "knl0",
        "bdwex0-nocpuidle",
    ] {
        let root = corpus_host(host);
        let host_args = ["--host", host];
        check("inventory", &hk(&root, &shipped, &["inventory"]), &mut seen);
        let a = check(
            "audit",
            &hk(&root, &shipped, &[&host_args[..], &["audit"]].concat()),
            &mut seen,
        );
        assert!(
            !a["knobs"].as_array().unwrap().is_empty(),
            "{host}: no knobs"
        );
        check(
            "knobs",
            &hk(&root, &shipped, &[&host_args[..], &["knobs"]].concat()),
            &mut seen,
        );
    }

    // apply (dry run and real), persist, revert on a copy; then verify and the
    // audit that shows its evidence.
    let (_t, root) = copy_host("adl0");
    let m = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&shipped).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, m.path().join(f.file_name().unwrap())).unwrap();
    }
    let h = ["--host", "adl0"];
    let dry = check(
        "apply",
        &hk(
            &root,
            m.path(),
            &[&h[..], &["apply", "--all", "--dry-run"]].concat(),
        ),
        &mut seen,
    );
    assert_eq!(dry["dry_run"], true);
    let applied = check(
        "apply",
        &hk(&root, m.path(), &[&h[..], &["apply", "--all"]].concat()),
        &mut seen,
    );
    assert!(applied["written"].as_u64().unwrap() > 0);
    check(
        "persist",
        &hk(
            &root,
            m.path(),
            &[&h[..], &["persist", "cpufreq-governor-performance"]].concat(),
        ),
        &mut seen,
    );
    check(
        "persist-change",
        &hk(
            &root,
            m.path(),
            &[
                &h[..],
                &["persist", "cpufreq-governor-performance", "--install"],
            ]
            .concat(),
        ),
        &mut seen,
    );
    let reverted = check(
        "revert",
        &hk(&root, m.path(), &[&h[..], &["revert", "--all"]].concat()),
        &mut seen,
    );
    assert_eq!(reverted["restored"], applied["written"]);

    let (_vt, vroot) = vm();
    let vm_knobs = knobs(&[(
        "idle-off-cpu1",
        "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: \"1\", states: {names: [haltpoll idle]}}\n\
         set: disabled\nverify: {probe: wakeup, expect: {metric: p50, change: lower, by: 5 µs}, note: p50 lower by at least 5 µs}\n",
    )]);
    check(
        "verify",
        &hk(
            &vroot,
            vm_knobs.path(),
            &[
                "--host",
                "vm",
                "verify",
                "idle-off-cpu1",
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
        ),
        &mut seen,
    );
    let with_evidence = check(
        "audit",
        &hk(&vroot, vm_knobs.path(), &["--host", "vm", "audit"]),
        &mut seen,
    );
    let e = &with_evidence["knobs"][0]["evidence"];
    assert!(e["ratio"].as_f64().unwrap() > 0.0, "evidence: {e}");
    let multi = knobs(&[
        (
            "swappiness",
            "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\nverify: {probe: wakeup, note: x}\n",
        ),
        (
            "thp-defrag",
            "persistence: runtime\nkind: thp\ntarget: {setting: defrag}\nset: never\nverify: {probe: wakeup, note: x}\n",
        ),
    ]);
    let fast = [
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
    ];
    for (name, head) in [
        (
            "verify-sweep",
            &["--host", "vm", "verify", "swappiness", "--sweep", "10,30"][..],
        ),
        (
            "verify-bundle",
            &["--host", "vm", "verify", "swappiness", "thp-defrag"][..],
        ),
    ] {
        check(
            name,
            &hk(&vroot, multi.path(), &[head, &fast[..]].concat()),
            &mut seen,
        );
    }

    // capture of a corpus tree.
    let cap = tempfile::tempdir().unwrap();
    let out = cap.path().join("out");
    check(
        "capture",
        &hk(
            &corpus_host("fc-haltpoll-2cpu"),
            &shipped,
            &["capture", "--out", out.to_str().unwrap()],
        ),
        &mut seen,
    );

    // Probes run here, briefly.
    let here = Path::new("/");
    let probe = |args: &[&str]| hk(here, &shipped, &[&["probe"], args].concat());
    check(
        "probe-wakeup",
        &probe(&["wakeup", "--samples", "20", "--gap-us", "200..600"]),
        &mut seen,
    );
    check(
        "probe-timer",
        &probe(&["timer", "--interval", "2ms", "--loops", "10"]),
        &mut seen,
    );
    check(
        "probe-rpc",
        &probe(&["rpc", "--samples", "20", "--gap-us", "200..600"]),
        &mut seen,
    );
    check(
        "probe-noise",
        &probe(&[
            "noise",
            "--cpus",
            "0",
            "--duration",
            "100ms",
            "--attribution",
            "counts",
        ]),
        &mut seen,
    );
    check(
        "probe-idle-cpu",
        &probe(&[
            "idle-cpu",
            "--window",
            "200ms",
            "--windows",
            "2",
            "--cmd",
            "sleep",
            "5",
        ]),
        &mut seen,
    );
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let rss = probe(&["rss", "--pid", &pid, "--duration", "1s"]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    check("probe-rss", &rss, &mut seen);
    check(
        "probe-rss-self",
        &probe(&[
            "rss",
            "--self-burst",
            "--duration",
            "1s",
            "--burst-mib",
            "8",
            "--threads",
            "1",
        ]),
        &mut seen,
    );

    // report over audits written like the playbook writes them.
    let dir = tempfile::tempdir().unwrap();
    for host in ["adl0", "genoa0", "fc-haltpoll-2cpu"] {
        let o = hk(&corpus_host(host), &shipped, &["--host", host, "audit"]);
        std::fs::write(dir.path().join(format!("{host}.json")), &o.stdout).unwrap();
    }
    let report = check(
        "report",
        &hostknob_command(&[])
            .args(["--format", "json", "report"])
            .arg(dir.path())
            .output()
            .unwrap(),
        &mut seen,
    );
    assert_eq!(report["hosts"].as_array().unwrap().len(), 3);
    let compare = check(
        "report-compare",
        &hostknob_command(&[])
            .args(["--format", "json", "report", "--compare"])
            .args([dir.path(), dir.path()])
            .output()
            .unwrap(),
        &mut seen,
    );
    assert_eq!(compare["hosts_in_both"], 3);

    let isolate = check(
        "isolate",
        &hostknob(&[
            "--root",
            corpus_host("genoa0").to_str().unwrap(),
            "--host",
            "genoa0",
            "isolate",
            "--count",
            "8",
            "--format",
            "json",
        ]),
        &mut seen,
    );
    assert_eq!(isolate["knobs"].as_array().unwrap().len(), 6);

    // Profiles and overrides (tests/suite/profiles.rs): the list, and audit's `overrides`.
    let m = manifest(&[
        (
            "k.yaml",
            "id: swappiness\ntitle: s\nwhy: w\nhosts: \"*\"\npersistence: runtime\n\
             kind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
        ),
        (
            "profiles/p.yaml",
            "why: p\nhosts: \"*\"\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 30}\n",
        ),
    ]);
    let vm = corpus_host("fc-haltpoll-2cpu");
    let list = check(
        "profiles",
        &hk(&vm, m.path(), &["knobs", "--profiles"]),
        &mut seen,
    );
    assert_eq!(list["profiles"][0]["applies_here"], true);
    let a = check("audit", &hk(&vm, m.path(), &["audit"]), &mut seen);
    assert_eq!(a["knobs"][0]["overrides"][0]["profile"], "p");

    // A command that fails, asked for JSON: its error object (exit 1).
    let e = check(
        "error",
        &hk(&vm, m.path(), &["apply", "no-such-knob"]),
        &mut seen,
    );
    assert_eq!(e["exit_code"], 1);

    // `tune` needs a whole search: its output is checked by this test's
    // `check` in tune::a_planted_sysctl_is_found_advised_replayed_and_the_tree_restored.
    seen.insert("tune".to_string());
    let all: BTreeSet<String> = schema_names().into_iter().collect();
    assert_eq!(seen, all, "outputs not produced by this test");
}

#[test]
fn yaml_outputs_carry_the_schema_version_too() {
    let shipped = repo().join("manifest");
    let o = run(
        &corpus_host("adl0"),
        &shipped,
        &["--host", "adl0", "--format", "yaml", "audit"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("schema: 1\nhost: adl0\n"), "{text}");
}

#[test]
fn the_committed_schemas_are_the_ones_the_binary_prints() {
    let dir = repo().join("docs/schemas");
    let mut committed: BTreeSet<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    for name in schema_names() {
        let path = dir.join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}: run `hostknob schema {name}`", path.display()));
        let o = hostknob_command(&[])
            .args(["schema", &name])
            .output()
            .unwrap();
        assert!(
            text == ok(&o),
            "{} is stale: hostknob schema {name} > {}",
            path.display(),
            path.display()
        );
        committed.remove(&path);
    }
    assert!(committed.is_empty(), "schemas of no output: {committed:?}");
}

#[test]
fn an_unknown_schema_name_is_one_line_naming_the_choices() {
    let o = hostknob_command(&[])
        .args(["schema", "nope"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("\"nope\"") && e.contains("audit") && e.contains("probe-wakeup"),
        "{e}"
    );
}

/// Issue 35 item 7: the verify reports the Ansible tests play back to the
/// `hostknob_verify` module are ones today's verify could print.
#[test]
fn the_ansible_verify_recordings_validate_against_the_verify_schema() {
    let dir = repo().join("ansible/tests/files");
    let schema = schema_of("verify");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("verify-") && name.ends_with(".json")) {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&v)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {}", errors.join("\n"));
        n += 1;
    }
    assert_eq!(n, 2, "the recordings in {}", dir.display());
}

/// Issue 35 item 10: asked for JSON, a failing command says why in JSON on
/// stdout too (with its exit code), as well as on stderr.
#[test]
fn an_error_is_json_on_stdout_when_json_was_asked_for() {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let m = repo().join("manifest");
    let o = run(&root, &m, &["apply", "no-such-knob", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(v["schema"], 1);
    assert_eq!(v["exit_code"], 1);
    let said = v["error"].as_str().unwrap();
    assert!(said.contains("no knob with id \"no-such-knob\""), "{said}");
    assert!(err(&o).contains(said), "{}", err(&o));
    let schema = schema_of("error");
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&v), "{v:#}");
    // Without --format json stdout stays empty; a knob id after -- is not an option.
    let o = run(&root, &m, &["apply", "--", "no-such-knob"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "{}", out(&o));
}
