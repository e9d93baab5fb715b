//! Live `hostknob tune` (issue 48 item 10): a benchmark command whose time
//! depends on `kernel.msgmax` (it reads the value and prints a time 30 %
//! lower at 65536), a space of msgmax values, THP defrag values and the
//! host's own defrag value (a sham); and a null space (THP defrag only,
//! which the command never reads) over 20 seeds. Guards write every value
//! back on every path; run under `flock /work/helpers/live.lock`.

use std::path::Path;

use super::support::*;
use super::{LIVE, Restore, live_allowed};

const MSGMAX: &str = "/proc/sys/kernel/msgmax";
const DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";

/// The bench: reads msgmax, prints `took V ms` with ±5 % noise, 0.7x at 65536.
fn bench(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("bench.sh");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nr=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')\nf=1\n\
             [ \"$(cat {MSGMAX})\" = 65536 ] && f=0.7\n\
             awk -v r=$r -v f=$f 'BEGIN {{ printf \"took %.3f ms\\n\", 100 * f * (1 + 0.05 * (2 * r / 65535 - 1)) }}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The host's own defrag choice (the bracketed word).
fn defrag_now() -> String {
    let t = std::fs::read_to_string(DEFRAG).unwrap();
    t.split_whitespace()
        .find(|w| w.starts_with('['))
        .unwrap()
        .trim_matches(['[', ']'])
        .to_string()
}

fn tune(
    dir: &Path,
    space: &str,
    seed: &str,
    cmd: &Path,
) -> (std::process::Output, serde_json::Value) {
    let sp = dir.join(format!("space-{seed}.yaml"));
    std::fs::write(&sp, space).unwrap();
    let out = dir.join(format!("out-{seed}"));
    let state = dir.join("state");
    let m = dir.join("m");
    std::fs::create_dir_all(&m).unwrap();
    let c = cmd.display().to_string();
    let o = run(
        Path::new("/"),
        &m,
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "--host",
            "live",
            "--format",
            "json",
            "tune",
            "--space",
            sp.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--budget",
            "3m",
            "--seed",
            seed,
            "--settle",
            "5ms",
            "--probe",
            "command",
            "--metric",
            "regex:took ([0-9.]+) ms",
            "--",
            &c,
        ],
    );
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (o, v)
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_tune_finds_the_planted_msgmax_accepts_no_sham_and_restores() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live_allowed().unwrap();
    let (_m, _d) = (Restore::of(MSGMAX), Restore::of(DEFRAG));
    let (msgmax, defrag) = (
        std::fs::read_to_string(MSGMAX).unwrap(),
        std::fs::read_to_string(DEFRAG).unwrap(),
    );
    let own = defrag_now();
    let t = tempfile::tempdir().unwrap();
    let cmd = bench(t.path());
    // The host's own defrag (a sham) and two others, whichever it has.
    let mut defrags = vec![own.clone()];
    defrags.extend(
        ["never", "madvise", "defer"]
            .iter()
            .filter(|d| **d != own)
            .take(2)
            .map(|d| d.to_string()),
    );
    let space = format!(
        "knobs:\n  - kind: sysctl\n    target: {{name: kernel.msgmax}}\n    values: [{}, 65536]\n  \
         - kind: thp\n    target: {{setting: defrag}}\n    values: [{}]\n",
        if msgmax.trim() == "8192" {
            "16384"
        } else {
            "8192"
        },
        defrags.join(", ")
    );
    let (o, v) = tune(t.path(), &space, "1", &cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(MSGMAX).unwrap(),
        msgmax,
        "msgmax as found"
    );
    assert_eq!(
        std::fs::read_to_string(DEFRAG).unwrap(),
        defrag,
        "defrag as found"
    );
    assert_eq!(v["restored"], true);
    let shipped = v["outcome"]["shipped"].as_array().unwrap();
    assert!(
        shipped
            .iter()
            .any(|s| s["knob"] == "tune-sysctl-name-kernel-msgmax" && s["value"] == "65536"),
        "{}",
        v["outcome"]["shipped"]
    );
    assert!(
        !shipped
            .iter()
            .any(|s| s["knob"] != "tune-sysctl-name-kernel-msgmax"),
        "{shipped:?}"
    );
    assert!(
        v["outcome"]["shams"]["claimed"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{}",
        v["outcome"]["shams"]
    );
    let r = hostknob_command(&[
        "tune",
        "--replay",
        t.path().join("out-1").to_str().unwrap(),
        "--format",
        "json",
    ])
    .output()
    .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_null_tune_ships_nothing_in_19_of_20_seeds() {
    let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live_allowed().unwrap();
    let _d = Restore::of(DEFRAG);
    let defrag = std::fs::read_to_string(DEFRAG).unwrap();
    let t = tempfile::tempdir().unwrap();
    let cmd = bench(t.path());
    let space = "knobs:\n  - kind: thp\n    target: {setting: defrag}\n    values: [never, madvise, defer]\n";
    let mut shipped = 0;
    for seed in 1..=20 {
        let (o, v) = tune(t.path(), space, &seed.to_string(), &cmd);
        assert_eq!(o.status.code(), Some(0), "seed {seed}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(DEFRAG).unwrap(),
            defrag,
            "seed {seed}: defrag as found"
        );
        shipped += !v["outcome"]["shipped"].as_array().unwrap().is_empty() as usize;
    }
    assert!(shipped <= 1, "{shipped} of 20 null searches shipped a knob");
}
