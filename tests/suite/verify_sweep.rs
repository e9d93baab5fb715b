//! verify sweeps and bundles on a copy of the VM capture, the probe on real
//! threads here: every value (every leg) in every round in a seeded shuffled
//! order, the tree byte-identical after success, an error and SIGINT, bad
//! values refused before anything is written.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

const RESUME: (&str, &str) = (
    "resume-cpu1",
    "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {cpus: \"1\"}\nset: n/a\n\
     verify: {probe: wakeup, note: x}\n",
);

const SWAP: (&str, &str) = (
    "swappiness",
    "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n\
     verify: {probe: wakeup, note: x}\n",
);

const THP: (&str, &str) = (
    "thp-defrag",
    "persistence: runtime\nkind: thp\ntarget: {setting: defrag}\nset: never\n\
     verify: {probe: wakeup, note: x}\n",
);

const FAST: [&str; 4] = ["--samples", "20", "--gap-us", "200..600"];

fn args<'a>(knobs: &[&'a str], extra: &[&'a str], probe: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--host", "vm", "--format", "json", "verify"];
    v.extend(knobs);
    v.extend(["--settle", "10ms"]);
    v.extend(extra);
    v.push("--");
    v.extend(probe);
    v
}

/// The ledger's entries, in the host's state directory.
fn ledger_entries(root: &std::path::Path) -> Vec<serde_yaml::Value> {
    match std::fs::read_to_string(crate::support::ledger::ledger_file(root)) {
        Ok(t) => serde_yaml::from_str(&t).unwrap(),
        Err(_) => Vec::new(),
    }
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&out(o)).unwrap_or_else(|e| panic!("{e}: {}\n{}", out(o), err(o)))
}

#[test]
fn a_sweep_runs_every_value_every_round_shuffled_and_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[SWAP]);
    let before = tree(&root);
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("s.svg");
    let o = run(
        &root,
        m.path(),
        &args(
            &["swappiness"],
            &[
                "--sweep",
                "10,60,100,0",
                "--rounds",
                "6",
                "--max-rounds",
                "6",
                "--seed",
                "5",
                // One spelling for a drawing, as a two-leg verify and the probes take it.
                "--plot",
                svg.to_str().unwrap(),
            ],
            &FAST,
        ),
    );
    let v = json(&o);
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", err(&o));
    assert_tree(&before, &root, "after a sweep");
    assert!(journal(&root).is_empty());
    assert!(!root.join(STATE_DIR).join("lock").exists());
    assert_eq!(v["restored"], true);
    assert_eq!(v["rounds"], 6);
    // The plan, said before the run: 5 legs (as found and 4 values).
    assert_eq!(v["plan"]["legs"], 5, "{v}");
    let e = err(&o);
    assert!(e.contains("5 legs per round") && e.contains("about"), "{e}");
    // Ranked by distance from the as-found 60: 60 (as found), 100, 10, 0.
    let values: Vec<&str> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["60", "100", "10", "0"], "{v}");
    assert_eq!(v["points"][0]["as_found"], true, "{v}");
    assert_eq!(v["points"][1]["as_found"], false, "{v}");
    // Every round runs every leg once; the orders are not all the same.
    let order = v["order"].as_array().unwrap();
    assert_eq!(order.len(), 6);
    let mut want = vec!["as found", "0", "10", "100", "60"];
    want.sort();
    for o in order {
        let mut got: Vec<&str> = o
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, want, "{o}");
    }
    assert!(order.iter().any(|o| o != &order[0]), "shuffled: {v}");
    // Mirrored blocks: the second round of a block runs the first reversed.
    for b in order.chunks(2) {
        let mut r = b[0].as_array().unwrap().clone();
        r.reverse();
        assert_eq!(&r, b[1].as_array().unwrap());
    }
    for p in v["points"].as_array().unwrap() {
        let (r, iv) = (p["ratio"].as_f64().unwrap(), &p["interval"]);
        assert!(
            iv[0].as_f64().unwrap() <= r && r <= iv[1].as_f64().unwrap(),
            "{p}"
        );
        assert_eq!(p["analysis"]["applied"]["samples"], 20 * 6, "{p}");
        // Four values, each at a quarter of the run's error rate.
        let c = p["analysis"]["confidence"].as_f64().unwrap();
        assert!((c - (1.0 - 0.005 / 4.0)).abs() < 1e-12, "{p}");
    }
    assert!(v["knee"]["words"].as_str().unwrap().contains("knee"), "{v}");
    // The seed repeats the orders.
    let again = run(
        &root,
        m.path(),
        &args(
            &["swappiness"],
            &[
                "--sweep",
                "10,60,100,0",
                "--rounds",
                "6",
                "--max-rounds",
                "6",
                "--seed",
                "5",
            ],
            &FAST,
        ),
    );
    assert_eq!(json(&again)["order"], v["order"]);
    // One verified entry per run, with every value's ratio.
    let entries = ledger_entries(&root);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0]["action"], "verified");
    assert_eq!(
        entries[0]["evidence"]["sweep"].as_sequence().unwrap().len(),
        4
    );
    assert!(entries[0]["note"].as_str().unwrap().contains("knee"));
    // The manifest's own value (10) is among them: its comparison is the verdict.
    assert_eq!(
        entries[0]["evidence"]["verdict"].as_str(),
        v["points"][2]["verdict"].as_str()
    );
    // The curve: one label per value, the as-found line, parses as XML.
    let text = std::fs::read_to_string(&svg).unwrap();
    let xml = roxmltree::Document::parse(&text).expect("the SVG parses as XML");
    let texts: Vec<&str> = xml.descendants().filter_map(|n| n.text()).collect();
    for value in ["60", "100", "10", "0"] {
        assert!(
            texts.iter().any(|t| t.trim() == value),
            "{value}: {texts:?}"
        );
    }
    assert!(
        texts.iter().any(|t| t.contains("as found (1.0)")),
        "{texts:?}"
    );
}

#[test]
fn an_idle_knob_sweep_that_could_not_idle_states_no_knee() {
    // Under a copy the idle counters never move: not exercised, every value inconclusive.
    let (_t, root) = vm();
    let m = knobs(&[RESUME]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &args(
            &["resume-cpu1"],
            &[
                "--sweep",
                "0,5,20,100,n/a",
                "--rounds",
                "5",
                "--max-rounds",
                "5",
                "--seed",
                "3",
            ],
            &FAST,
        ),
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let v = json(&o);
    assert_tree(&before, &root, "after an idle sweep");
    let values: Vec<&str> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["0", "100", "20", "5", "n/a"], "{v}");
    assert!(
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["verdict"] == "inconclusive" && p["decision"] == "not-exercised"),
        "{v}"
    );
    assert_eq!(v["knee"]["value"], serde_json::Value::Null);
    assert_eq!(v["placement"]["sleeper"], 1);
}

#[test]
fn bad_sweeps_and_bundles_are_refused_before_anything_is_written() {
    let (_t, root) = vm();
    let m = knobs(&[
        RESUME,
        SWAP,
        THP,
        (
            "in-effect",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\nverify: {probe: wakeup, note: x}\n",
        ),
    ]);
    let before = tree(&root);
    let cases: [(&[&str], &str); 13] = [
        (
            &["swappiness", "in-effect"],
            "in-effect is already in effect",
        ),
        (
            &["swappiness", "--sweep", "30,90"],
            "ranks the same as 30; a sysctl's values rank by their distance from the as-found 60",
        ),
        (&["resume-cpu1", "--sweep", "0,5,-3"], "--sweep -3:"),
        (&["resume-cpu1", "--sweep", "0,5,lots"], "--sweep lots:"),
        (&["resume-cpu1", "--sweep", "5,5"], "--sweep 5: given twice"),
        (&["resume-cpu1", "--sweep", "5"], "give 2 to 12 values"),
        (&["resume-cpu1", "--sweep", "0,"], "value 2 is empty"),
        (
            &["thp-defrag", "--sweep", "never,always"],
            "no ordered values to sweep",
        ),
        (
            &["swappiness", "--sweep", "10,x"],
            "--sweep x: \"x\" is not a whole number",
        ),
        (
            &["resume-cpu1", "swappiness", "--sweep", "0,5"],
            "--sweep takes one knob",
        ),
        (&["resume-cpu1", "resume-cpu1"], "given twice"),
        (&["resume-cpu1", "nope"], "no knob with id \"nope\""),
        (
            &["resume-cpu1", "--sweep", "0,5", "--knee-tolerance", "150"],
            "percentage from 0 to 100",
        ),
    ];
    for (a, needle) in cases {
        let mut v = vec!["--host", "vm", "verify"];
        v.extend(a);
        v.extend(["--", "--samples", "5"]);
        let o = run(&root, m.path(), &v);
        assert_ne!(o.status.code(), Some(0), "{a:?}");
        let e = err(&o);
        assert!(e.contains(needle), "{a:?}: {e}");
        assert_tree(&before, &root, &format!("{a:?}"));
        assert!(journal(&root).is_empty(), "{a:?}");
    }
    assert!(ledger_entries(&root).is_empty());
}

#[test]
fn a_bundle_runs_all_leave_one_out_legs_and_names_its_shares() {
    let (_t, root) = vm();
    let m = knobs(&[SWAP, THP]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &args(
            &["swappiness", "thp-defrag"],
            &["--rounds", "6", "--max-rounds", "6", "--seed", "9"],
            &FAST,
        ),
    );
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", err(&o));
    let v = json(&o);
    assert_tree(&before, &root, "after a bundle");
    assert!(journal(&root).is_empty());
    assert_eq!(v["plan"]["legs"], 4, "{v}");
    assert!(err(&o).contains("4 legs per round"), "{}", err(&o));
    let mut want = vec![
        "all",
        "as found",
        "without swappiness",
        "without thp-defrag",
    ];
    want.sort();
    for o in v["order"].as_array().unwrap() {
        let mut got: Vec<&str> = o
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, want);
    }
    let shares = v["shares"].as_array().unwrap();
    assert_eq!(shares.len(), 2);
    assert_eq!(shares[0]["knob"], "swappiness");
    assert_eq!(shares[1]["knob"], "thp-defrag");
    // Three comparisons, each at a third of the run's error rate.
    let c = v["together"]["confidence"].as_f64().unwrap();
    assert!((c - (1.0 - 0.005 / 3.0)).abs() < 1e-12, "{v}");
    // A share with no detectable effect or a regression is a drop candidate,
    // or, when the reduced bundle re-tested needs it, not jointly droppable;
    // nothing else is named.
    let listed = |field: &str, knob: &serde_json::Value| {
        v[field]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["knob"] == *knob)
    };
    let mut candidates = 0;
    for s in shares {
        let named = listed("drop_candidates", &s["knob"]);
        let kept = listed("not_jointly_droppable", &s["knob"]);
        let no_share = s["verdict"] == "no-detectable-effect" || s["verdict"] == "regressed";
        assert_eq!(named || kept, no_share, "{v}");
        assert!(!(named && kept), "{v}");
        candidates += no_share as usize;
    }
    // Two candidates: the second was re-tested without the first.
    let retests = v["elimination"].as_array().unwrap();
    assert_eq!(retests.len(), (candidates == 2) as usize, "{v}");
    if let Some(r) = retests.first() {
        assert_eq!(r["bundle"].as_array().unwrap().len(), 1, "{v}");
        assert!(err(&o).contains("re-testing"), "{}", err(&o));
    }
    let entries = ledger_entries(&root);
    assert_eq!(entries.len(), 2, "one entry per knob: {entries:?}");
    assert_eq!(entries[1]["knob"], "thp-defrag");
    assert!(entries[1]["evidence"]["share"]["interval"].is_sequence());
}

#[test]
fn a_probe_error_mid_sweep_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[SWAP]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &args(
            &["swappiness"],
            &["--sweep", "10,30", "--rounds", "5", "--seed", "1"],
            &["--samples", "5", "--waker-cpu", "4095"],
        ),
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("round 1") && err(&o).contains("4095"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "after a probe error");
    assert!(journal(&root).is_empty());
    assert!(ledger_entries(&root).is_empty());
}

#[test]
fn sigint_stops_a_sweep_and_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[SWAP]);
    let before = tree(&root);
    let a = args(
        &["swappiness"],
        &["--sweep", "10,30,50", "--rounds", "6", "--seed", "2"],
        &["--samples", "2000", "--gap-us", "2000..4000"],
    );
    let mut child = command(&root, m.path(), &a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while journal(&root).is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "ended before applying");
        assert!(Instant::now() < deadline, "never applied");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    assert!(err(&o).contains("interrupted by SIGINT"), "{}", err(&o));
    let v = json(&o);
    assert_eq!(v["interrupted"], "SIGINT");
    assert!(
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["decision"] == "interrupted"),
        "{v}"
    );
    assert_tree(&before, &root, "after SIGINT");
    assert!(journal(&root).is_empty());
    assert!(ledger_entries(&root).is_empty());
}
