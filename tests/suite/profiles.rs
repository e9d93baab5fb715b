//! Issue 23 item 2: profiles (`profiles/NAME.yaml` in the manifest) and local
//! overrides (`/etc/hostknob/overrides/*.yaml` under --root, or
//! `--overrides DIR`), on copies of the VM capture and adl0.

use std::path::Path;

use crate::support::*;

const KNOBS: &str = "id: swappiness\ntitle: swappiness\nwhy: w\nhosts: \"*\"\npersistence: sysctl.d\n\
kind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n---\n\
id: thp\ntitle: thp\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n---\n\
id: poll\ntitle: poll\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: module-param\n\
target: {module: haltpoll, param: guest_halt_poll_ns}\nset: 200000\n";

/// A manifest with the three knobs above and `profiles` (file name, text).
fn with_profiles(profiles: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files = vec![("knobs.yaml".to_string(), KNOBS.to_string())];
    for (name, text) in profiles {
        files.push((format!("profiles/{name}"), text.to_string()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    manifest(&refs)
}

const BASELINE: &str =
    "why: every host\nknobs: [swappiness, thp]\noverrides:\n  swappiness: {set: 20}\n";
const RPC: &str =
    "why: RPC nodes\ninclude: [baseline]\nknobs: [thp]\noverrides:\n  swappiness:\n    set: 30\n";

fn audit_with(root: &Path, m: &Path, extra: &[&str]) -> (serde_json::Value, i32) {
    let mut args = vec!["audit", "--format", "json"];
    args.extend(extra);
    let o = apply::run(root, m, &args);
    let code = o.status.code().unwrap_or(-1);
    let json = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", out(&o), err(&o)));
    (json, code)
}

fn files_of(k: &serde_json::Value) -> Vec<String> {
    k["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["file"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn profile_includes_come_first_and_the_including_profile_and_local_files_win() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[("baseline.yaml", BASELINE), ("rpc.yaml", RPC)]);
    let rpc_file = m.path().join("profiles/rpc.yaml");
    let base_file = m.path().join("profiles/baseline.yaml");
    // No profile named, none with `hosts`: the knob's own value.
    let (r, _) = audit_with(&root, m.path(), &[]);
    assert_eq!(knob(&r, "swappiness")["desired"], "10");
    assert_eq!(knob(&r, "swappiness")["overrides"], serde_json::json!([]));
    // rpc includes baseline (20) and says 30 itself: rpc wins, both files named in order.
    let (r, _) = audit_with(&root, m.path(), &["--profile", "rpc"]);
    assert_eq!(r["profile"], "rpc");
    let k = knob(&r, "swappiness");
    assert_eq!(k["desired"], "30", "{k:#}");
    assert_eq!(
        files_of(k),
        vec![
            base_file.display().to_string(),
            rpc_file.display().to_string()
        ]
    );
    assert_eq!(k["overrides"][1]["profile"], "rpc");
    assert_eq!(k["overrides"][1]["line"], 5);
    assert_eq!(k["overrides"][1]["fields"], serde_json::json!(["set"]));
    // Only the profile's knobs (after includes) are audited.
    let ids: Vec<&str> = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["swappiness", "thp"]);
    // The table says where the value came from.
    let table = out(&apply::run(&root, m.path(), &["audit", "--profile", "rpc"]));
    assert!(
        table.contains(&format!(
            "override: set from {}:5 (profile rpc)",
            rpc_file.display()
        )),
        "{table}"
    );
    // A local override file under --root is the last word, and named.
    write_files(
        &root,
        &[(
            "etc/hostknob/overrides/site.yaml",
            "# this rack\nswappiness: {set: 40}\n",
        )],
    );
    let (r, _) = audit_with(&root, m.path(), &["--profile", "rpc"]);
    let k = knob(&r, "swappiness");
    assert_eq!(k["desired"], "40");
    let local = root.join("etc/hostknob/overrides/site.yaml");
    assert_eq!(files_of(k).last().unwrap(), &local.display().to_string());
    assert_eq!(k["overrides"][2]["line"], 2);
    assert_eq!(k["overrides"][2]["profile"], serde_json::Value::Null);
    let list = apply::run(&root, m.path(), &["knobs", "--format", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let line = list["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "swappiness")
        .unwrap();
    assert_eq!(line["desired"], "40");
    assert_eq!(line["overrides"][0]["file"], local.display().to_string());
    // --overrides DIR replaces the default directory.
    let other = tempfile::tempdir().unwrap();
    write_files(other.path(), &[("a.yaml", "swappiness: {set: 50}\n")]);
    let (r, _) = audit_with(
        &root,
        m.path(),
        &["--overrides", other.path().to_str().unwrap()],
    );
    assert_eq!(knob(&r, "swappiness")["desired"], "50");
}

#[test]
fn the_later_include_wins_over_the_earlier_one() {
    let (_tmp, root) = apply::vm();
    let a = "why: a\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 11}\n";
    let b = "why: b\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 12}\n";
    for (include, expect) in [("[a, b]", "12"), ("[b, a]", "11")] {
        let top = format!("why: both\ninclude: {include}\n");
        let m = with_profiles(&[("a.yaml", a), ("b.yaml", b), ("top.yaml", &top)]);
        let (r, _) = audit_with(&root, m.path(), &["--profile", "top"]);
        assert_eq!(
            knob(&r, "swappiness")["desired"],
            expect,
            "include {include}"
        );
    }
}

#[test]
fn apply_profile_dry_run_plans_the_overridden_value_and_changes_nothing() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[("baseline.yaml", BASELINE), ("rpc.yaml", RPC)]);
    let before = tree(&root);
    let text = ok(&apply::run(
        &root,
        m.path(),
        &["apply", "--profile", "rpc", "--dry-run"],
    ));
    assert!(text.contains("+30\n"), "{text}");
    assert!(!text.contains("+10\n"), "{text}");
    assert!(
        !text.contains("guest_halt_poll_ns"),
        "poll is not in rpc: {text}"
    );
    assert_tree(&before, &root, "after a dry run");
    // A target override on adl0: the knob's CPUs replaced, its value kept.
    let (_tmp2, adl) = copy_host("adl0");
    let m = manifest(&[
        (
            "resume.yaml",
            "id: resume\ntitle: r\nwhy: w\nhosts: \"*\"\npersistence: runtime\n\
             kind: pm-qos-resume-latency\ntarget: {cpus: 8-15}\nset: 20\n",
        ),
        (
            "profiles/edge.yaml",
            "why: edge\nknobs: [resume]\noverrides:\n  resume: {target: {cpus: \"0-3\"}}\n",
        ),
    ]);
    let text = ok(&apply::run(
        &adl,
        m.path(),
        &["apply", "--profile", "edge", "--dry-run"],
    ));
    assert!(
        text.contains("cpu0-3/power/pm_qos_resume_latency_us"),
        "{text}"
    );
    assert!(!text.contains("cpu8"), "{text}");
    let plain = ok(&apply::run(
        &adl,
        m.path(),
        &["apply", "resume", "--dry-run"],
    ));
    assert!(
        plain.contains("cpu8-15/power/pm_qos_resume_latency_us"),
        "{plain}"
    );
}

#[test]
fn apply_and_revert_of_a_profile_round_trip_the_tree() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[("baseline.yaml", BASELINE), ("rpc.yaml", RPC)]);
    let pristine = tree(&root);
    let poll = root.join("sys/module/haltpoll/parameters/guest_halt_poll_ns");
    let poll_before = std::fs::read_to_string(&poll).unwrap();
    ok(&apply::run(&root, m.path(), &["apply", "--profile", "rpc"]));
    assert_eq!(
        std::fs::read_to_string(root.join("proc/sys/vm/swappiness"))
            .unwrap()
            .trim(),
        "30"
    );
    assert_eq!(std::fs::read_to_string(&poll).unwrap(), poll_before);
    let (r, code) = audit_with(&root, m.path(), &["--profile", "rpc"]);
    assert_eq!(code, 0, "{r:#}");
    // Without the profile the knob's own 10 is drift: the override is what was applied.
    let (r, _) = audit_with(&root, m.path(), &["swappiness"]);
    assert_eq!(knob(&r, "swappiness")["status"], "drift");
    // A knob outside the profile is refused by name.
    refused(
        &apply::run(&root, m.path(), &["revert", "poll", "--profile", "rpc"]),
        &["not in profile rpc", "swappiness, thp"],
    );
    ok(&apply::run(
        &root,
        m.path(),
        &["revert", "--profile", "rpc"],
    ));
    assert_tree(&pristine, &root, "after revert --profile rpc");
}

#[test]
fn an_include_cycle_is_a_load_error_with_the_whole_path_and_both_files() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[
        ("a.yaml", "why: a\ninclude: [b]\n"),
        ("b.yaml", "why: b\nknobs: [thp]\ninclude: [c]\n"),
        ("c.yaml", "why: c\ninclude: [a]\n"),
    ]);
    let o = apply::run(&root, m.path(), &["knobs"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(e.contains("include cycle a -> b -> c -> a"), "{e}");
    for (f, line) in [("a.yaml", 2), ("b.yaml", 3), ("c.yaml", 2)] {
        let at = format!("{}:{line}", m.path().join("profiles").join(f).display());
        assert!(e.contains(&at), "{at} not in {e}");
    }
    assert_eq!(e.matches("include cycle").count(), 1, "reported once: {e}");
}

#[test]
fn two_profiles_for_one_host_setting_a_knob_differently_name_both_files() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[
        (
            "p1.yaml",
            "why: one\nhosts: \"*\"\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 20}\n",
        ),
        (
            "p2.yaml",
            "why: two\nhosts: [vm]\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 30}\n",
        ),
    ]);
    let o = apply::run(&root, m.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let e = err(&o);
    for f in ["p1.yaml:5", "p2.yaml:5"] {
        assert!(e.contains(f), "{f} not in {e}");
    }
    assert!(e.contains("conflict: knob swappiness set"), "{e}");
    // On a host p2 does not name, p1 alone applies: no conflict.
    let (r, code) = audit_with(&root, m.path(), &["--host", "web-1"]);
    assert_ne!(code, 1, "{r:#}");
    assert_eq!(knob(&r, "swappiness")["desired"], "20");
    assert_eq!(r["profiles"], serde_json::json!(["p1"]));
    // Agreeing values are no conflict; one including the other is layering.
    let m = with_profiles(&[
        (
            "p1.yaml",
            "why: one\nhosts: \"*\"\nknobs: [swappiness]\noverrides:\n  swappiness: {set: 20}\n",
        ),
        (
            "p2.yaml",
            "why: two\nhosts: \"*\"\ninclude: [p1]\noverrides:\n  swappiness: {set: 30}\n",
        ),
    ]);
    let (r, _) = audit_with(&root, m.path(), &[]);
    assert_eq!(knob(&r, "swappiness")["desired"], "30");
}

#[test]
fn a_bad_value_in_a_local_override_names_its_file_and_line_and_changes_nothing() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[("rpc.yaml", "why: r\nknobs: [thp]\n")]);
    let file = root.join("etc/hostknob/overrides/10-site.yaml");
    write_files(
        &root,
        &[(
            "etc/hostknob/overrides/10-site.yaml",
            "swappiness: {set: 30}\nthp:\n  set: \"[never]\"\n",
        )],
    );
    let before = tree(&root);
    let o = apply::run(&root, m.path(), &["apply", "--all"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains(&format!("{}:3: thp.set:", file.display())),
        "{e}"
    );
    assert!(e.contains("without brackets"), "{e}");
    assert!(e.contains("override of thp knob thp"), "{e}");
    assert_tree(&before, &root, "after a refused override");
    // A value only the host refuses: apply's refusal names the override too.
    write_files(
        &root,
        &[(
            "etc/hostknob/overrides/10-site.yaml",
            "swappiness: {set: 30}\nthp:\n  set: sometimes\n",
        )],
    );
    let before = tree(&root);
    let e = refused(
        &apply::run(&root, m.path(), &["apply", "--all"]),
        &["sometimes is not a choice here"],
    );
    assert!(
        e.contains(&format!("(thp overridden: set from {}:2)", file.display())),
        "{e}"
    );
    assert_tree(&before, &root, "after a refused apply");
    // An unknown knob id: did you mean; an unknown field: named.
    let site = "etc/hostknob/overrides/10-site.yaml";
    write_files(&root, &[(site, "swapiness: {set: 30}\n")]);
    let e = err(&apply::run(&root, m.path(), &["audit"]));
    assert!(e.contains("10-site.yaml:1: swapiness: override of an unknown knob \"swapiness\"; did you mean \"swappiness\"?"), "{e}");
    write_files(
        &root,
        &[(
            site,
            "swappiness: {set: 30}\nthp: {set: never, hosts: \"*\"}\n",
        )],
    );
    let e = err(&apply::run(&root, m.path(), &["audit"]));
    assert!(
        e.contains("10-site.yaml:2: thp.hosts: unknown field `hosts`"),
        "{e}"
    );
    // A named --overrides directory that is missing is an error, not nothing.
    let e = err(&apply::run(
        &root,
        m.path(),
        &["audit", "--overrides", "/nonexistent/ov"],
    ));
    assert!(
        e.contains("/nonexistent/ov: no such overrides directory"),
        "{e}"
    );
}

#[test]
fn bad_profiles_are_load_errors_naming_file_line_and_field() {
    let (_tmp, root) = apply::vm();
    let cases: [(&str, &[&str]); 6] = [
        (
            "why: x\nknobs: [swapiness]\n",
            &[
                "p.yaml:2: knobs[0]: no knob with id \"swapiness\"",
                "did you mean \"swappiness\"?",
            ],
        ),
        (
            "why: x\ninclude: [basline]\n",
            &[
                "p.yaml:2: include[0]: no profile \"basline\"",
                "profiles: p",
            ],
        ),
        (
            "why: x\nknobs: [thp]\ncolour: red\n",
            &["p.yaml:3: colour: unknown field `colour`"],
        ),
        ("knobs: [thp]\n", &["p.yaml:1: why: missing field `why`"]),
        (
            "why: x\nknobs: [thp]\noverrides:\n  swappiness: {set: 5}\n",
            &[
                "p.yaml:4: overrides.swappiness: knob swappiness is overridden but not in this profile",
            ],
        ),
        (
            "why: x\nknobs: [thp]\noverrides:\n  thp:\n    set: \"[never]\"\n",
            &["p.yaml:5: overrides.thp.set:", "without brackets"],
        ),
    ];
    for (text, needles) in cases {
        let m = with_profiles(&[("p.yaml", text)]);
        let o = apply::run(&root, m.path(), &["knobs"]);
        assert_eq!(o.status.code(), Some(1), "{text}: {}", out(&o));
        let e = err(&o);
        for n in needles {
            assert!(e.contains(n), "{n:?} not in {e}\n(profile: {text})");
        }
    }
}

#[test]
fn profile_on_every_command_and_the_profile_list() {
    let (_tmp, root) = apply::vm();
    let m = with_profiles(&[("baseline.yaml", BASELINE), ("rpc.yaml", RPC)]);
    // An unknown profile lists the known ones.
    for cmd in [
        &["apply", "--profile", "rcp", "--dry-run"][..],
        &["audit", "--profile", "rcp"],
        &["knobs", "--profile", "rcp"],
        &["revert", "--profile", "rcp"],
        &["persist", "swappiness", "--profile", "rcp"],
    ] {
        let e = err(&apply::run(&root, m.path(), cmd));
        assert!(
            e.contains("no profile \"rcp\"; did you mean \"rpc\"?; profiles: baseline, rpc"),
            "{cmd:?}: {e}"
        );
    }
    let persisted = ok(&apply::run(
        &root,
        m.path(),
        &["persist", "swappiness", "--profile", "rpc"],
    ));
    assert!(persisted.contains("30"), "{persisted}");
    let knobs = ok(&apply::run(
        &root,
        m.path(),
        &["knobs", "--profile", "baseline"],
    ));
    assert!(knobs.contains("profile baseline"), "{knobs}");
    assert!(!knobs.contains("poll"), "{knobs}");
    let list = ok(&apply::run(
        &root,
        m.path(),
        &["knobs", "--profiles", "--format", "json"],
    ));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let rpc = &list["profiles"][1];
    assert_eq!(rpc["name"], "rpc");
    assert_eq!(rpc["knobs"], serde_json::json!(["swappiness", "thp"]));
    assert_eq!(rpc["include"], serde_json::json!(["baseline"]));
    assert_eq!(rpc["applies_here"], false);
    let table = ok(&apply::run(&root, m.path(), &["knobs", "--profiles"]));
    assert!(table.contains("overrides swappiness: set from"), "{table}");
}

#[test]
fn a_profile_is_part_of_the_manifest_revision() {
    let m = with_profiles(&[("rpc.yaml", "why: r\nknobs: [thp]\n")]);
    let root = corpus_host("fc-haltpoll-2cpu");
    let (a, _) = audit_with(&root, m.path(), &[]);
    assert!(
        a["manifest_revision"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    std::fs::write(
        m.path().join("profiles/rpc.yaml"),
        "why: r2\nknobs: [thp]\n",
    )
    .unwrap();
    let (b, _) = audit_with(&root, m.path(), &[]);
    assert_ne!(a["manifest_revision"], b["manifest_revision"]);
}

#[test]
fn a_profiles_when_decides_where_it_applies_like_its_hosts() {
    let root = corpus_host("fc-haltpoll-2cpu");
    let intel = "why: bare metal\nhosts: \"*\"\nwhen: {idle_driver: intel_idle}\nknobs: [swappiness]\n\
overrides:\n  swappiness: {set: 40}\n";
    let vm = "why: guests\nhosts: \"*\"\nwhen: {idle_driver: haltpoll}\nknobs: [swappiness]\n\
overrides:\n  swappiness: {set: 50}\n";
    // The VM runs haltpoll: the intel_idle profile does not apply by itself, the haltpoll one does.
    let m = with_profiles(&[("metal.yaml", intel), ("guest.yaml", vm)]);
    let (r, _) = audit_with(&root, m.path(), &[]);
    assert_eq!(knob(&r, "swappiness")["desired"], "50", "{r:#}");
    assert_eq!(r["profiles"], serde_json::json!(["guest"]), "{r:#}");
    // Chosen by name, a profile whose `when:` fails is refused with the failing condition.
    let o = apply::run(&root, m.path(), &["audit", "--profile", "metal"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("metal.yaml")
            && e.contains("does not apply")
            && e.contains("when: idle_driver == intel_idle; this host: haltpoll"),
        "{e}"
    );
    // An unknown fact in a profile's `when:` is a load error at its file and field.
    let bad = with_profiles(&[(
        "x.yaml",
        "why: x\nwhen: {idle_drivr: haltpoll}\nknobs: [thp]\n",
    )]);
    let o = apply::run(&root, bad.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("x.yaml") && err(&o).contains("idle_drivr"),
        "{}",
        err(&o)
    );
}
