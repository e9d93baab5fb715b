//! Live sweeps and bundles (issue 24 items 2 and 3): a resume-latency sweep
//! of CPU 1 states a knee, and a bundle of the resume `n/a` knob with THP
//! defrag gives the effect to the resume knob. Guards write back both files
//! on every path; run under `flock /work/helpers/live.lock`.

use std::path::Path;

use super::support::*;
use super::{LIVE, Restore, journal_of, live_target, resume_file};

const DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";

fn verify_live(m: &Path, state: &Path, args: &[&str]) -> (serde_json::Value, std::process::Output) {
    let mut a = vec![
        "--state-dir",
        state.to_str().unwrap(),
        "--host",
        "live",
        "--format",
        "json",
        "verify",
    ];
    a.extend(args);
    a.extend([
        "--settle",
        "200ms",
        "--",
        "--samples",
        "100",
        "--gap-us",
        "2000..4000",
    ]);
    let o = run(Path::new("/"), m, &a);
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (v, o)
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_sweep_of_resume_latency_on_cpu1_states_a_knee_and_restores() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(why) = live_target() {
        eprintln!("live test skipped: {why}");
        return;
    }
    let file = resume_file();
    let _g = Restore::of(&file);
    let original = _g.original.clone();
    let state = tempfile::tempdir().unwrap();
    let m = knobs(&[(
        "resume-cpu1",
        "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {cpus: \"1\"}\nset: n/a\n\
         verify: {probe: wakeup, note: x}\n",
    )]);
    let (v, o) = verify_live(
        m.path(),
        state.path(),
        &[
            "resume-cpu1",
            "--sweep",
            "0,5,20,100,n/a",
            "--rounds",
            "6",
            // Undecided values stop at 12 rounds, not 24: the decided one is far.
            "--max-rounds",
            "12",
            "--seed",
            "1",
        ],
    );
    eprintln!("live sweep: {}", v["knee"]["words"]);
    for p in v["points"].as_array().unwrap() {
        eprintln!("  {}: {}", p["value"], p["verdict_words"]);
    }
    assert_eq!(v["restored"], true, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    assert!(journal_of(state.path()).is_empty());
    assert_eq!(v["placement"]["sleeper"], 1, "{v}");
    assert!(stderr(&o).contains("6 legs per round"), "{}", stderr(&o));
    assert!(
        v["knee"]["value"].is_string(),
        "no knee: {}",
        v["knee"]["words"]
    );
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_bundle_of_resume_na_and_thp_defrag_gives_the_effect_to_resume() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(why) = live_target() {
        eprintln!("live test skipped: {why}");
        return;
    }
    let file = resume_file();
    let _g = Restore::of(&file);
    let _d = Restore::of(DEFRAG);
    let (original, defrag) = (_g.original.clone(), _d.original.clone());
    // An inert change: another defrag setting than the current one.
    let other = if defrag.contains("[never]") {
        "madvise"
    } else {
        "never"
    };
    let thp = format!(
        "persistence: runtime\nkind: thp\ntarget: {{setting: defrag}}\nset: {other}\nverify: {{probe: wakeup, note: x}}\n"
    );
    let state = tempfile::tempdir().unwrap();
    let m = knobs(&[
        (
            "resume-na-cpu1",
            "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {cpus: \"1\"}\nset: n/a\n\
             verify: {probe: wakeup, note: x}\n",
        ),
        ("thp-defrag", thp.as_str()),
    ]);
    let seed = std::env::var("HOSTKNOB_LIVE_SEED").unwrap_or_else(|_| "1".into());
    let (v, o) = verify_live(
        m.path(),
        state.path(),
        &[
            "resume-na-cpu1",
            "thp-defrag",
            "--rounds",
            "6",
            // Undecided values stop at 12 rounds, not 24: the decided one is far.
            "--max-rounds",
            "12",
            "--seed",
            &seed,
        ],
    );
    eprintln!("live bundle (seed {seed}): {}", v["together_words"]);
    for s in v["shares"].as_array().unwrap() {
        eprintln!("  {}", s["words"]);
    }
    eprintln!("  drop: {}", v["drop_candidates"]);
    assert_eq!(v["restored"], true, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    assert_eq!(std::fs::read_to_string(DEFRAG).unwrap(), defrag);
    assert!(journal_of(state.path()).is_empty());
    assert!(stderr(&o).contains("4 legs per round"), "{}", stderr(&o));
    assert_eq!(v["shares"][0]["verdict"], "improved", "{v}");
    assert_ne!(v["shares"][1]["verdict"], "improved", "{v}");
}
