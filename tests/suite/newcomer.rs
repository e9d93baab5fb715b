//! Issue 20, items 11, 14, 15 and 18: what a new user meets. A manifest without
//! knobs is an error (also in the textfile), nothing targeting the host is a
//! metric; shared options before any subcommand; "did you mean" for knob
//! ids; `knobs KNOB...`; nesting refused before the YAML parser; live tests
//! listed as ignored, never counted as passed.

use std::path::Path;

use crate::support::*;

const VM: &str = "fc-haltpoll-2cpu";

fn thp_for(hosts: &str) -> String {
    format!(
        "id: thp-m\ntitle: t\nkind: thp\ntarget: {{setting: enabled}}\nset: madvise\n\
         hosts: {hosts}\npersistence: runtime\nwhy: w\n"
    )
}

fn run(root: &Path, m: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        m.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    hostknob(&all)
}

// 11. Green only when something was checked.

#[test]
fn a_manifest_directory_without_knob_files_is_an_error_in_every_reader() {
    let root = corpus_host(VM);
    // What the package leaves in /etc/hostknob/manifest.
    let m = manifest(&[("README", "Put knob files (*.yaml) here.\n")]);
    let d = m.path().display().to_string();
    for args in [
        &["audit"][..],
        &["audit", "--format", "prometheus"],
        &["knobs"],
        &["apply", "--all", "--dry-run"],
        &["doc", "--out", "-"],
    ] {
        let o = run(&root, m.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", out(&o));
        let e = err(&o);
        assert!(
            e.contains(&format!("{d}: not a manifest: no knob files")),
            "{args:?}: {e}"
        );
        assert!(
            !out(&o).contains("no knob targets"),
            "{args:?}: {}",
            out(&o)
        );
    }
    // A directory of other documents is not a manifest either.
    let o = run(&root, &repo().join("docs"), &["audit"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("not a manifest"), "{}", err(&o));
}

#[test]
fn the_textfile_says_the_audit_failed_instead_of_keeping_the_last_green_one() {
    let root = corpus_host(VM);
    let text = tempfile::tempdir().unwrap();
    let prom = text.path().join("hostknob.prom");
    let good = manifest(&[("thp.yaml", &thp_for("\"*\""))]);
    let t = text.path().to_str().unwrap();
    let o = run(&root, good.path(), &["audit", "--textfile", t]);
    assert!(o.status.code() != Some(1), "{}", err(&o));
    let before = std::fs::read_to_string(&prom).unwrap();
    assert!(before.contains("hostknob_audit_error 0"), "{before}");
    assert!(before.contains("hostknob_audit_knobs_targeting 1"));
    // The knob files are gone: exit 1, and the textfile says so.
    std::fs::remove_file(good.path().join("thp.yaml")).unwrap();
    let o = run(&root, good.path(), &["audit", "--textfile", t]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("not a manifest"), "{}", err(&o));
    let after = std::fs::read_to_string(&prom).unwrap();
    assert!(after.contains("hostknob_audit_error 1"), "{after}");
    assert!(!after.contains("hostknob_knob_status"), "{after}");
    assert!(!after.contains("hostknob_audit_failing"), "{after}");
}

#[test]
fn nothing_targeting_this_host_exits_0_but_is_a_metric_and_a_line() {
    let root = corpus_host(VM);
    let m = manifest(&[("thp.yaml", &thp_for("[some-other-host]"))]);
    let o = run(&root, m.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("no knob targets this host (1 knob is for other hosts)"),
        "{}",
        out(&o)
    );
    let o = run(&root, m.path(), &["audit", "--format", "prometheus"]);
    assert_eq!(o.status.code(), Some(0));
    let p = out(&o);
    assert!(p.contains("hostknob_audit_knobs_targeting 0"), "{p}");
    assert!(p.contains("# HELP hostknob_audit_knobs_targeting "), "{p}");
    assert!(p.contains("hostknob_audit_error 0"), "{p}");
}

#[test]
fn a_directory_that_is_not_a_manifest_is_named_at_its_top() {
    // Like /tmp: no knob file at the top, and something unreadable deep inside.
    let top = tempfile::tempdir().unwrap();
    let mut deep = top.path().to_path_buf();
    for i in 0..20 {
        deep = deep.join(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let o = run(&corpus_host(VM), top.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    let line = e.lines().last().unwrap();
    assert!(
        line.starts_with(&format!(
            "hostknob: {}: not a manifest: no knob files (*.yaml, *.yml) at its top",
            top.path().display()
        )),
        "{e}"
    );
    // A real manifest with the same problem below keeps the deep path first.
    std::fs::write(top.path().join("thp.yaml"), thp_for("\"*\"")).unwrap();
    let e = err(&run(&corpus_host(VM), top.path(), &["audit"]));
    assert!(
        e.contains("/d0/d1/") && !e.contains("not a manifest:"),
        "{e}"
    );
}

#[test]
fn a_missing_textfile_directory_is_named_before_anything_runs() {
    let root = corpus_host(VM);
    let m = manifest(&[("thp.yaml", &thp_for("\"*\""))]);
    let o = run(
        &root,
        m.path(),
        &["audit", "--textfile", "/nonexistent/textfile"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).is_empty(), "{}", out(&o));
    assert!(
        err(&o).contains("--textfile /nonexistent/textfile: no such directory"),
        "{}",
        err(&o)
    );
}

// 14. Options.

#[test]
fn context_options_before_any_subcommand_are_taken_or_ignored_alike() {
    let root = corpus_host(VM);
    let r = root.to_str().unwrap();
    let m = repo().join("manifest");
    let m = m.to_str().unwrap();
    let plain = json_of(&hostknob(&["--root", r, "inventory", "--format", "json"]));
    for args in [
        &["-q", "--root", r, "inventory", "--format", "json"][..],
        &[
            "--manifest",
            m,
            "--root",
            r,
            "inventory",
            "--format",
            "json",
        ],
        &[
            "--quiet",
            "--state-dir",
            "/s",
            "--root",
            r,
            "--format",
            "json",
            "inventory",
        ],
        &[
            "--manifest=/m",
            "--host=h",
            "--root",
            r,
            "inventory",
            "--format",
            "json",
        ],
    ] {
        let o = hostknob(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
        let mut a = json_of(&o);
        if args.contains(&"--host=h") {
            assert_eq!(a["host"]["hostname"], "h", "{args:?}");
            a["host"] = plain["host"].clone();
        }
        assert_eq!(a, plain, "{args:?}");
    }
    // Every subcommand takes them there, even one that uses none.
    for sub in [
        &["schema"][..],
        &["completions", "bash"],
        &["report", "--help"],
    ] {
        let mut args = vec!["-q", "--root", r, "--manifest", m, "--state-dir", "/s"];
        args.extend_from_slice(sub);
        let o = hostknob(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
    }
    // After the name, only its own; --format is refused where it means nothing.
    for args in [
        &["inventory", "-q", "--root", r][..],
        &["inventory", "--manifest", m, "--root", r],
        &["--format", "json", "doc", "--root", r, "--out", "-"],
    ] {
        let o = hostknob(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            err(&o).contains("unexpected argument '-"),
            "{args:?}: {}",
            err(&o)
        );
    }
}

#[test]
fn a_mistyped_knob_id_gets_did_you_mean() {
    let root = corpus_host(VM);
    let m = repo().join("manifest");
    for args in [
        &["audit", "thp-madvis"][..],
        &["knobs", "thp-madvis"],
        &["apply", "thp-madvis", "--dry-run"],
        &["persist", "thp-madvis"],
    ] {
        let o = run(&root, &m, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            err(&o).contains("no knob with id \"thp-madvis\"")
                && err(&o).contains("did you mean \"thp-madvise\"?"),
            "{args:?}: {}",
            err(&o)
        );
    }
    // Nothing close: no guess.
    let e = err(&run(&root, &m, &["audit", "zzzz"]));
    assert!(e.contains("\"zzzz\"") && !e.contains("did you mean"), "{e}");
}

#[test]
fn knobs_filters_by_id_like_audit() {
    let root = corpus_host(VM);
    let m = repo().join("manifest");
    let all = json_of(&run(&root, &m, &["knobs", "--format", "json"]));
    let one = json_of(&run(
        &root,
        &m,
        &["knobs", "thp-madvise", "--format", "json"],
    ));
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["knobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(ids(&all).len() > 1, "{all:#}");
    assert_eq!(ids(&one), ["thp-madvise"]);
    let table = out(&run(&root, &m, &["knobs", "thp-madvise"]));
    assert!(
        table.contains("thp-madvise") && !table.contains("cpuidle-no-deep-state"),
        "{table}"
    );
}

// 18. Nesting is refused before serde_yaml sees the file.

#[test]
fn deep_nesting_is_refused_by_file_and_line_before_parsing() {
    let root = corpus_host(VM);
    let knob = thp_for("\"*\"");
    let flow = format!("{knob}caveats: {}\n", "[".repeat(100_000));
    let braces = format!("{knob}caveats: {}x{}\n", "{a: ".repeat(65), "}".repeat(65));
    let stairs: String = (0..2000)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i + 1)))
        .collect();
    let stairs = format!("{knob}target:\n{stairs}");
    let line_of_knob_end = knob.lines().count() + 1;
    for (name, text, line) in [
        ("flow.yaml", flow.as_str(), line_of_knob_end),
        ("braces.yaml", braces.as_str(), line_of_knob_end),
        // `target:` is level 1 and the 64th step is level 64.
        ("stairs.yaml", stairs.as_str(), line_of_knob_end + 64),
    ] {
        let m = manifest(&[(name, text)]);
        let o = run(&root, m.path(), &["knobs"]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let e = err(&o);
        assert!(
            e.contains(&format!("{name}:{line}: nested deeper than 64 levels")),
            "{name}: {e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    // Plain text that only looks like syntax, an anchor or a tag before the
    // brackets, and complex keys do not slip past the scan (each took seconds
    // and hundreds of MB in serde_yaml).
    let knob_lines = knob.lines().count();
    for (name, tail, line) in [
        (
            "bracket-in-text.yaml",
            format!("caveats: [x]\nset: a [\n{}x\n", "- ".repeat(500_000)),
            3,
        ),
        (
            "quote-in-text.yaml",
            format!("caveats: [x]\nset: a \"b\nid: {}\n", "[".repeat(50_000)),
            3,
        ),
        (
            "anchor.yaml",
            format!("caveats: &a {}\n", "[".repeat(50_000)),
            1,
        ),
        (
            "tag.yaml",
            format!("caveats: !t {}\n", "[".repeat(50_000)),
            1,
        ),
        (
            "complex-keys.yaml",
            format!("{}x\n", "? ".repeat(500_000)),
            1,
        ),
    ] {
        let m = manifest(&[(name, &format!("{knob}{tail}"))]);
        let e = err(&run(&root, m.path(), &["knobs"]));
        let want = format!("{name}:{}: nested deeper than 64 levels", knob_lines + line);
        assert!(e.contains(&want), "{want}: {e}");
    }
    // 64 levels of brackets are still read (and refused by the field's own rule).
    let ok = format!("{knob}caveats: {}x{}\n", "[".repeat(60), "]".repeat(60));
    let e = err(&run(
        &root,
        manifest(&[("ok.yaml", &ok)]).path(),
        &["knobs"],
    ));
    assert!(!e.contains("nested deeper"), "{e}");
}

#[test]
fn a_duplicate_id_is_still_found_among_many_knobs() {
    // Ids are checked through a map now (loading 160k knobs was quadratic).
    let mut text = String::new();
    for i in 0..5_000 {
        text.push_str(&thp_for("[nowhere]").replace("id: thp-m", &format!("id: k{i}")));
        text.push_str("---\n");
    }
    text.push_str(&thp_for("[nowhere]").replace("id: thp-m", "id: k7"));
    let m = manifest(&[("many.yaml", &text)]);
    let o = run(&corpus_host(VM), m.path(), &["knobs"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(e.contains("duplicate id \"k7\" (first defined at"), "{e}");
}

// 15. A skipped live test is never counted as a pass.

#[test]
fn every_live_test_is_ignored_with_its_reason_and_ci_asks_for_them() {
    let live = std::fs::read_to_string(repo().join("tests/live.rs")).unwrap();
    let lines: Vec<&str> = live.lines().collect();
    let tests: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim() == "#[test]")
        .collect();
    assert!(tests.len() >= 10, "{} live tests", tests.len());
    for i in tests {
        assert_eq!(
            lines[i + 1].trim(),
            "#[ignore = \"live: root and HOSTKNOB_LIVE=1\"]",
            "tests/live.rs:{}: a live test without its ignore reason",
            i + 1
        );
    }
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let run = ci
        .lines()
        .find(|l| l.contains("--test live"))
        .expect(".ci/run runs the live tests");
    assert!(
        run.contains("HOSTKNOB_LIVE=1") && run.contains("-- --ignored"),
        "{run}"
    );
    // Still behind the root and writable-/sys guard.
    let guard = ci.find("id -u").expect("a root check");
    assert!(ci.find("--test live").unwrap() > guard);
}
