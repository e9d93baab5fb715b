//! verify on a temporary root: the knob's writes go to a copy of the VM
//! capture, the probe runs on real threads here. The tree is restored after
//! success, a probe error and SIGINT, and `revert` restores it after SIGKILL.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

const KNOB: (&str, &str) = (
    "idle-off-cpu1",
    "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: \"1\", states: {names: [haltpoll idle]}}\nset: disabled\n\
     verify: {probe: wakeup, expect: {change: ceiling, below: 1 s}}\n",
);

const FAST: [&str; 4] = ["--samples", "20", "--gap-us", "200..600"];

fn verify_args<'a>(extra: &[&'a str], probe: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--host",
        "vm",
        "--format",
        "json",
        "verify",
        "idle-off-cpu1",
        "--settle",
        "10ms",
    ];
    v.extend(extra);
    v.push("--");
    v.extend(probe);
    v
}

#[test]
fn a_verify_reports_a_verdict_records_evidence_and_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &verify_args(
            &["--rounds", "5", "--max-rounds", "5", "--seed", "42"],
            &FAST,
        ),
    );
    // Under a copy the idle counters never move: CPU 1 "entered no idle
    // state", so the run could not exercise this idle-state knob (exit 3).
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    // Issue 49 item 4: from the first look, what this run can decide at its noise.
    assert!(
        err(&o).contains(
            "at the noise of these rounds, a run of --max-rounds 5 can tell a change of about"
        ),
        "{}",
        err(&o)
    );
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_tree(&before, &root, "after a verify");
    // Nothing journaled after it: neither the journal nor the lock stays.
    let sd = root.join(STATE_DIR);
    assert!(!sd.join("lock").exists() && !sd.join("journal.jsonl").exists());
    assert!(
        journal(&root).is_empty(),
        "the journal holds nothing after a clean run"
    );
    assert_eq!(v["verdict"], "inconclusive", "{v}");
    assert_eq!(v["decision"], "not-exercised", "{v}");
    // Nothing entered, nothing checked: not a "yes".
    assert_eq!(v["honoured"]["status"], "not-checked", "{v}");
    assert!(
        v["verdict_words"]
            .as_str()
            .unwrap()
            .contains("could not exercise the knob"),
        "{v}"
    );
    assert_eq!(v["restored"], true);
    assert_eq!(v["rounds"], 5);
    assert_eq!(v["seed"], 42);
    let a = &v["analysis"];
    assert_eq!(a["ratios"].as_array().unwrap().len(), 5);
    assert_eq!(a["baseline"]["samples"], 100);
    assert_eq!(a["applied"]["samples"], 100);
    let iv = a["interval"].as_array().unwrap();
    let ratio = a["ratio"].as_f64().unwrap();
    assert!(
        iv[0].as_f64().unwrap() <= ratio && ratio <= iv[1].as_f64().unwrap(),
        "{a}"
    );
    for leg in ["baseline", "applied"] {
        let p50 = a[leg]["p50_ns"].as_f64().unwrap();
        assert!(
            p50 > 0.0 && p50 <= a[leg]["p99_ns"].as_f64().unwrap(),
            "{leg}: {a}"
        );
        // A built-in probe's figures are whole ns, as its samples are.
        assert_eq!(p50.fract(), 0.0, "{leg}: {a}");
    }
    assert_eq!(v["expectations"][0]["text"], "p50 at most 1000 ms");
    assert_eq!(v["expectations"][0]["outcome"], "inconclusive", "{v}");
    assert_eq!(v["expectations"][0]["met"], false, "{v}");
    // The interval reported is the look's: one look, the whole 0.5 %.
    assert!(
        (a["confidence"].as_f64().unwrap() - 0.995).abs() < 1e-12,
        "{a}"
    );
    // Each round ran both legs; the order repeats with the seed.
    let order = v["order"].as_array().unwrap();
    assert!(
        order
            .iter()
            .all(|o| o.as_array().unwrap().len() == 2 && o[0] != o[1])
    );
    // ABBA blocks: each leg first once in every two rounds.
    assert!(order.chunks(2).all(|b| b.len() == 1 || b[0] != b[1]), "{v}");
    let again = run(
        &root,
        m.path(),
        &verify_args(
            &["--rounds", "5", "--max-rounds", "5", "--seed", "42"],
            &FAST,
        ),
    );
    assert_eq!(again.status.code(), Some(3), "{}", err(&again));
    let w: serde_json::Value = serde_json::from_str(&out(&again)).unwrap();
    assert_eq!(w["order"], v["order"], "the seed repeats the leg order");

    let ledger = ledger_text(&root);
    let entries: Vec<serde_yaml::Value> = serde_yaml::from_str(&ledger).unwrap();
    assert_eq!(
        entries.len(),
        2,
        "one verified entry per run, none per leg: {ledger}"
    );
    assert!(entries.iter().all(|e| e["action"] == "verified"));
    let ev = &entries[0]["evidence"];
    assert_eq!(ev["probe"], "wakeup");
    assert_eq!(ev["rounds"], 5);
    assert!(
        ev["interval"].is_sequence() && ev["decision"].is_string(),
        "{ev:?}"
    );
    assert_eq!(ev["verdict"].as_str(), v["verdict"].as_str());
    assert!(entries[0]["note"].as_str().unwrap().contains("% interval"));
    // knobs and audit show the latest evidence.
    let k = run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "knobs"],
    );
    let k: serde_json::Value = serde_json::from_str(&ok(&k)).unwrap();
    let ours = k["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == "idle-off-cpu1")
        .unwrap();
    assert_eq!(ours["evidence"]["verdict"].as_str(), w["verdict"].as_str());
    assert_eq!(
        ours["evidence"]["timestamp"].as_str(),
        entries[1]["timestamp"].as_str(),
        "the latest of two"
    );
    // The knob is not applied here after the run: audit says drift (exit 2).
    let audit = run(&root, m.path(), &["--host", "vm", "audit"]);
    assert_eq!(audit.status.code(), Some(2));
    let table = out(&audit);
    assert!(
        table.contains("Latest verify evidence:") && table.contains("% interval"),
        "{table}"
    );
    // The host document shows the latest evidence.
    let doc = run(&root, m.path(), &["--host", "vm", "doc", "--out", "-"]);
    assert!(ok(&doc).contains("% interval"));
}

#[test]
fn the_plot_shows_both_legs_titled_with_host_knob_and_verdict() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("v.svg");
    let o = run(
        &root,
        m.path(),
        &verify_args(
            &[
                "--rounds",
                "5",
                "--max-rounds",
                "5",
                "--seed",
                "1",
                "--plot",
                svg.to_str().unwrap(),
            ],
            &FAST,
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    let xml = roxmltree::Document::parse(&text).expect("the SVG parses as XML");
    let texts: Vec<&str> = xml
        .descendants()
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    let verdict = v["verdict"].as_str().unwrap().replace('-', " ");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("vm") && t.contains("idle-off-cpu1") && t.contains(&verdict)),
        "title: {texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("as found (n=100)")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("applied (n=100)")),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t.contains("latency (µs, log scale)")));
    assert!(texts.iter().any(|t| t.contains("fraction of samples")));
    assert!(
        xml.descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count()
            >= 2
    );
}

#[test]
fn a_probe_error_in_the_applied_leg_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    // Seed 20261130 runs the applied leg first; CPU 1 is the sleeper, CPU 4095 does not exist.
    let o = run(
        &root,
        m.path(),
        &verify_args(
            &["--rounds", "5", "--seed", "20261130"],
            &["--samples", "5", "--waker-cpu", "4095"],
        ),
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("round 1") && e.contains("4095"), "{e}");
    assert!(
        e.contains("was reverted and read back") || journal(&root).is_empty(),
        "{e}"
    );
    assert_tree(&before, &root, "after a probe error");
    assert!(journal(&root).is_empty());
    assert!(
        nothing_recorded(&root, m.path()),
        "nothing recorded for a failed run"
    );
}

#[test]
fn bad_input_is_refused_before_anything_changes() {
    let (_t, root) = vm();
    let m = knobs(&[
        KNOB,
        (
            "no-probe",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
        ),
        (
            "in-effect",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\nverify: {probe: wakeup, note: x}\n",
        ),
        (
            "rss-probe",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\nverify: {probe: rss, note: x}\n",
        ),
    ]);
    let before = tree(&root);
    let cases: [(&[&str], &str); 9] = [
        (
            &["verify", "idle-off-cpu1", "--max-rounds", "61"],
            "--max-rounds 61: at most 60 rounds",
        ),
        (
            &["verify", "idle-off-cpu1", "--rounds", "61"],
            "--rounds 61: at most 60 rounds",
        ),
        (&["verify", "nope"], "no knob with id \"nope\""),
        (&["verify", "no-probe"], "declares no probe"),
        (&["verify", "in-effect"], "already in effect"),
        (
            &["verify", "rss-probe"],
            "not one (use wakeup, timer, rpc or noise",
        ),
        (
            &["verify", "idle-off-cpu1", "--rounds", "2"],
            "at least 5 rounds are needed",
        ),
        (
            &["verify", "idle-off-cpu1", "--max-rounds", "3"],
            "--max-rounds 3 is below --rounds 6",
        ),
        (
            &["verify", "idle-off-cpu1", "--", "--samples", "x"],
            "probe options after `--`",
        ),
    ];
    for (args, needle) in cases {
        let mut a = vec!["--host", "vm"];
        a.extend(args);
        let o = run(&root, m.path(), &a);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", err(&o));
        let e = err(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: one line: {e}");
        assert_tree(&before, &root, &format!("{args:?}"));
    }
}

fn wait_until_applied(root: &std::path::Path, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while journal(root).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "verify ended before applying"
        );
        assert!(Instant::now() < deadline, "verify never applied the knob");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts a verify whose legs last long enough to be interrupted.
fn spawn_long_verify(
    root: &std::path::Path,
    m: &std::path::Path,
    out: fn() -> Stdio,
) -> std::process::Child {
    let args = verify_args(
        &["--rounds", "6", "--seed", "42"],
        &["--samples", "2000", "--gap-us", "2000..4000"],
    );
    command(root, m, &args)
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap()
}

#[test]
fn sigint_stops_the_run_and_restores_the_tree() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    // Long legs: the signal lands inside a probe run or a settle.
    let mut child = spawn_long_verify(&root, m.path(), Stdio::piped);
    wait_until_applied(&root, &mut child);
    std::thread::sleep(Duration::from_millis(50));
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(20),
        "verify took {:?} to stop",
        sent.elapsed()
    );
    // 128 + SIGINT, as the help says; the complete rounds, marked partial.
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("interrupted by SIGINT") && e.contains("reverted and read back"),
        "{e}"
    );
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["interrupted"], "SIGINT", "{v}");
    assert_eq!(v["analysis"]["partial"], true, "{v}");
    assert_eq!(v["decision"], "interrupted", "{v}");
    assert_eq!(v["verdict"], "inconclusive", "{v}");
    let rounds = v["rounds"].as_u64().unwrap() as usize;
    assert_eq!(v["order"].as_array().unwrap().len(), rounds, "{v}");
    assert_eq!(v["analysis"]["baseline"]["samples"], 2000 * rounds, "{v}");
    assert_tree(&before, &root, "after SIGINT");
    assert!(journal(&root).is_empty());
    assert!(
        nothing_recorded(&root, m.path()),
        "an interrupted run records no evidence"
    );
}

#[test]
fn an_interrupt_before_the_first_complete_round_says_no_complete_round_and_claims_nothing() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    // A leg lasts seconds: the signal lands inside round 1.
    let args = verify_args(
        &["--rounds", "6", "--seed", "42"],
        &["--samples", "2000", "--gap-us", "2000..4000"],
    );
    for format in ["table", "json"] {
        let mut a = args.clone();
        a[3] = format;
        let mut child = command(&root, m.path(), &a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until_applied(&root, &mut child);
        std::thread::sleep(Duration::from_millis(50));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{}", err(&o));
        assert!(
            err(&o).contains("before the first complete round (no complete round)"),
            "{}",
            err(&o)
        );
        let t = out(&o);
        if format == "table" {
            assert!(t.contains("no complete round"), "{t}");
            // No figures of nothing, no claim without an applied leg.
            for bad in ["0.0000", "0.0 µs", "NaN", "inf", "yes: the kernel"] {
                assert!(!t.contains(bad), "{bad}: {t}");
            }
            assert!(
                t.contains("not checked: no applied leg ran to its end"),
                "{t}"
            );
        } else {
            let v: serde_json::Value = serde_json::from_str(&t).unwrap();
            assert_eq!(v["rounds"], 0, "{v}");
            assert_eq!(v["honoured"]["status"], "not-checked", "{v}");
        }
        assert_tree(&before, &root, &format!("after SIGINT ({format})"));
    }
    assert!(nothing_recorded(&root, m.path()));
}

#[test]
fn after_sigkill_revert_restores_the_tree_from_the_journal() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    let mut child = spawn_long_verify(&root, m.path(), Stdio::null);
    // Killed once the write has landed (the journal is written just before it).
    let disable = root.join("sys/devices/system/cpu/cpu1/cpuidle/state1/disable");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&disable).unwrap().trim() != "1" {
        assert!(
            child.try_wait().unwrap().is_none() && Instant::now() < deadline,
            "verify never applied the knob"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !journal(&root).is_empty(),
        "the journal holds the value before"
    );
    ok(&run(&root, m.path(), &["--host", "vm", "revert", "--all"]));
    assert_tree(&before, &root, "after SIGKILL and revert --all");
}

/// A knob that is not about idle states (the run need not idle the CPU),
/// with the given expectations: under a copy, an A/A run.
fn swappiness(expect: &str) -> (&'static str, String) {
    (
        "swappiness",
        format!(
            "persistence: runtime\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: 10\n\
             verify: {{probe: wakeup, expect: {expect}, note: deeper sleep costs}}\n"
        ),
    )
}

fn swappiness_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = verify_args(extra, &FAST);
    v[5] = "swappiness";
    v
}

#[test]
fn a_contradicted_expectation_exits_2_and_is_recorded_as_not_met() {
    // A ceiling of 1 ns cannot be met; "lower by 5 µs" in an A/A run is not met
    // or (undecided) inconclusive, never met.
    let (_t, root) = vm();
    let (id, yaml) = swappiness(
        "[{change: ceiling, below: 1 s}, {change: ceiling, below: 1 ns}, {metric: p99, change: lower, by: 5 µs}]",
    );
    let m = knobs(&[(id, yaml.as_str())]);
    let before = tree(&root);
    let o = run(
        &root,
        m.path(),
        &swappiness_args(&["--rounds", "5", "--max-rounds", "5", "--seed", "7"]),
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_tree(&before, &root, "after a contradicted verify");
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let ex = v["expectations"].as_array().unwrap();
    assert_eq!(ex.len(), 3);
    let outcome = |i: usize| ex[i]["outcome"].as_str().unwrap();
    assert_eq!((outcome(0), outcome(1)), ("met", "not-met"), "{v}");
    assert_ne!(outcome(2), "met", "{v}");
    assert_eq!(ex[2]["text"], "p99 lower by at least 5 µs");
    assert_eq!(ex[2]["expect"]["metric"], "p99");
    assert_eq!(v["note"], "deeper sleep costs");
    let ledger = ledger_text(&root);
    assert!(ledger.contains("NOT met"), "{ledger}");
    assert!(ledger.contains("action: verified"), "{ledger}");
}

#[test]
fn no_higher_is_met_only_inside_its_tolerance_else_inconclusive_with_exit_3() {
    // An A/A run: within 1000 % is shown by any interval 5 rounds give; within
    // 0.001 % by none, and an A/A interval does not lie above it either.
    let (_t, root) = vm();
    let (id, yaml) =
        swappiness("[{change: no-higher, by: 1000 %}, {change: no-higher, by: 0.001 %}]");
    let m = knobs(&[(id, yaml.as_str())]);
    let o = run(
        &root,
        m.path(),
        &swappiness_args(&["--rounds", "5", "--max-rounds", "5", "--seed", "3"]),
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let ex = v["expectations"].as_array().unwrap();
    assert_eq!(ex[0]["outcome"], "met", "{v}");
    assert_eq!(ex[0]["text"], "p50 no higher, within 1000 %");
    assert_eq!(ex[1]["outcome"], "inconclusive", "{v}");
    let why = ex[1]["why"].as_str().unwrap();
    assert!(
        // The A/A ratio may itself lie past 0.001 %: then no number of rounds
        // would do; on a noisy host the count may be beyond any practical run.
        why.contains("upper bound")
            && why.contains("1.000")
            && (why.contains("more rounds")
                || why.contains("no number of rounds")
                || why.contains("no run verify makes would show it")),
        "{why}"
    );
    // The table says the same, and labels its per-round table with the metric.
    let mut args = swappiness_args(&["--rounds", "5", "--max-rounds", "5", "--seed", "3"]);
    args[3] = "table";
    let o = run(&root, m.path(), &args);
    let t = out(&o);
    assert!(
        t.contains("INCONCLUSIVE") && t.contains("upper bound"),
        "{t}"
    );
    assert!(
        t.contains("p50 per round") && t.contains("as found p50"),
        "{t}"
    );
    assert!(t.contains("geometric mean"), "{t}");
    // stderr is a pipe here, and still a line per round with the time left.
    let e = err(&o);
    assert!(
        e.contains("round 1 of 5 done") && e.contains("left to the look at round 5"),
        "{e}"
    );
    assert!(e.contains("round 5 of 5 done"), "{e}");
    // Not a line per leg: one per round.
    assert_eq!(e.matches(" done (cap 5)").count(), 5, "{e}");
}

#[test]
fn placement_puts_the_sleeper_in_the_target_and_the_waker_away_from_it() {
    use hostknob::cpulist::CpuList;
    use hostknob::verify::placement::{Asked, place};
    let list = |s: &str| CpuList::parse(s).unwrap();
    // adl0: P-cores 0-7 with SMT (L2 shared by 0-1, ...), E-core modules 8-11
    // and 12-15 (one L2 each). The old default, 15 and 14, was one module.
    // Read-only: the unpacked captures themselves.
    let root = hostknob::root::Root::open(&corpus_host("adl0")).unwrap();
    let all = list("0-15");
    let p = place(&root, &all, None, Asked::default(), false).unwrap();
    assert_eq!((p.sleeper, p.waker), (15, 11), "{p:?}");
    assert_eq!(p.sleeper_neighbours, list("12-14"));
    // The shipped knob's target, CPUs 0-7: the sleeper inside, the waker outside.
    let t = list("0-7");
    let p = place(&root, &all, Some(&t), Asked::default(), false).unwrap();
    assert_eq!((p.sleeper, p.waker), (7, 15), "{p:?}");
    assert_eq!(p.sleeper_neighbours, list("6"));
    // A target of one P-core's two threads: the waker is never its sibling.
    let t = list("0-1");
    let p = place(&root, &list("0-1,12-13"), Some(&t), Asked::default(), false).unwrap();
    assert_eq!((p.sleeper, p.waker), (1, 13), "{p:?}");
    let e = place(
        &root,
        &all,
        Some(&t),
        Asked {
            sleeper: Some(5),
            waker: None,
        },
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--sleeper-cpu 5 is outside the knob's target CPUs 0-1"),
        "{e}"
    );
    let p = place(
        &root,
        &all,
        Some(&t),
        Asked {
            sleeper: Some(5),
            waker: None,
        },
        true,
    )
    .unwrap();
    assert_eq!(p.sleeper, 5);
    // Only the sibling is left: named as such.
    let p = place(&root, &list("0-1"), None, Asked::default(), false).unwrap();
    assert_eq!((p.sleeper, p.waker), (1, 0));
    assert!(p.why.contains("shares a core, module or L2"), "{}", p.why);

    // spr1: 2 × 80 cores with SMT (CPU n and n+160 share a core).
    let root = hostknob::root::Root::open(&corpus_host("spr1")).unwrap();
    let all = list("0-319");
    let t = list("0-7,160-167");
    let p = place(&root, &all, Some(&t), Asked::default(), false).unwrap();
    assert_eq!(p.sleeper, 167, "{p:?}");
    assert!(p.sleeper_neighbours.contains(7), "{p:?}");
    assert!(!t.contains(p.waker) && p.waker != 7, "{p:?}");
}

#[test]
fn a_sleeper_outside_the_knobs_target_is_refused_unless_forced() {
    let (_t, root) = vm();
    let m = knobs(&[KNOB]);
    let before = tree(&root);
    let mut probe = FAST.to_vec();
    probe.extend(["--sleeper-cpu", "0"]);
    let o = run(&root, m.path(), &verify_args(&["--rounds", "5"], &probe));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("--sleeper-cpu 0 is outside the knob's target CPUs 1"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "refused");
    // The default: the sleeper on CPU 1 (the target), recorded in the JSON.
    let o = run(
        &root,
        m.path(),
        &verify_args(
            &["--rounds", "5", "--max-rounds", "5", "--seed", "3"],
            &FAST,
        ),
    );
    // Exit 3: under a copy the idle counters never move (not exercised).
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["placement"]["sleeper"], 1, "{v}");
    assert_eq!(v["placement"]["waker"], 0, "{v}");
    assert_eq!(v["placement"]["target_cpus"], "1", "{v}");
    assert_eq!(v["settings"]["sleeper_cpu"], 1, "{v}");
}

/// Issue 32 item 12: the wake/run split says when it does not apply.
#[test]
fn the_wake_split_says_when_the_idle_exit_lands_in_run_delay() {
    let m = knobs(&[IDLE_OFF_CPU1]);
    // The VM as captured (6.x, not RT): the split applies.
    let (_t, root) = vm();
    let v = short_verify(&root, m.path(), "idle-off-cpu1");
    assert!(
        v["wake_split"]["legs"][0].is_object(),
        "{}",
        v["wake_split"]
    );
    assert!(
        v["wake_split"]["not_applicable"].is_null(),
        "{}",
        v["wake_split"]
    );
    // A PREEMPT_RT kernel: no TTWU_QUEUE.
    let (_u, rt) = vm();
    write_files(&rt, &[("sys/kernel/realtime", "1\n")]);
    let v = short_verify(&rt, m.path(), "idle-off-cpu1");
    let why = v["wake_split"]["not_applicable"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("PREEMPT_RT") && why.contains("run delay"),
        "{}",
        v["wake_split"]
    );
    // Before 6.0, with the waker in the sleeper's last-level cache.
    let (_w, old) = vm();
    std::fs::write(old.join("proc/sys/kernel/osrelease"), "5.15.0-91-generic\n").unwrap();
    let llc = "sys/devices/system/cpu/cpu1/cache/index9";
    write_files(
        &old,
        &[
            (&format!("{llc}/level"), "9\n"),
            (&format!("{llc}/shared_cpu_list"), "0-1\n"),
        ],
    );
    let v = short_verify(&old, m.path(), "idle-off-cpu1");
    let why = v["wake_split"]["not_applicable"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("5.15.0-91-generic") && why.contains("(CPU 0)"),
        "{}",
        v["wake_split"]
    );
}

#[test]
fn verify_help_leads_with_how_to_run_it_and_leaves_the_statistics_to_the_docs() {
    let h = ok(&hostknob(&["verify", "--help"]));
    let body: Vec<&str> = h.lines().filter(|l| !l.trim().is_empty()).collect();
    // The first paragraph is how to run it.
    assert!(
        body[0].starts_with("How to run it: `sudo hostknob verify KNOB`"),
        "{h}"
    );
    assert!(h.contains("docs/verify.md"), "{h}");
    for stats in ["Student t", "Bonferroni", "floored at 2 %", "ChaCha8"] {
        assert!(!h.contains(stats), "{stats} belongs in docs/verify.md: {h}");
    }
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/verify.md")).unwrap();
    assert!(doc.contains("Student t") && doc.contains("no complete round"));
}
