//! `hostknob tune` (issue 48) on copies of the VM capture: a fake benchmark
//! (a script the test writes) reads a sysctl file of the copy and prints a
//! metric, so the planted effect is known; the legs' writes go to the copy
//! through apply's own machinery. Bad space files, the plan, the search,
//! the output directory as a manifest, and the replay.

use std::path::{Path, PathBuf};

use crate::support::*;

const MSGMAX: &str = "proc/sys/kernel/msgmax";

/// The VM copy with the SysV IPC sysctls the space names.
fn host() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = vm();
    write_files(
        &root,
        &[(MSGMAX, "8192\n"), ("proc/sys/kernel/msgmnb", "16384\n")],
    );
    (t, root)
}

/// A benchmark printing `took V ms`: 100 ms with ±5 % uniform noise, 0.7x
/// while the copy's msgmax reads 65536.
fn bench(dir: &Path, root: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("bench.sh");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nr=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')\nf=1\n\
             [ \"$(cat {m})\" = 65536 ] && f=0.7\n\
             awk -v r=$r -v f=$f 'BEGIN {{ printf \"took %.3f ms\\n\", 100 * f * (1 + 0.05 * (2 * r / 65535 - 1)) }}'\n",
            m = root.join(MSGMAX).display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

const SPACE: &str = "knobs:
  - kind: sysctl
    target: {name: kernel.msgmax}
    values: [8192, 32768, 65536]
  - kind: sysctl
    target: {name: kernel.msgmnb}
    range: {from: 16384, to: 49152, step: 16384}
  - kind: thp
    target: {setting: defrag}
    values: [madvise, never]
  - kind: kernel-cmdline
    values: [nohz_full=1]
";

fn space(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("space.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

fn tune(root: &Path, m: &Path, args: &[&str], cmd: &Path) -> std::process::Output {
    let mut a = vec!["--host", "vm", "tune"];
    a.extend_from_slice(args);
    let c = cmd.display().to_string();
    a.extend_from_slice(&[
        "--probe",
        "command",
        "--metric",
        "regex:took ([0-9.]+) ms",
        "--settle",
        "1ms",
        "--",
        &c,
    ]);
    run(root, m, &a)
}

#[test]
fn a_planted_sysctl_is_found_advised_replayed_and_the_tree_restored() {
    let (t, root) = host();
    let cmd = bench(t.path(), &root);
    let sp = space(t.path(), SPACE);
    let m = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("advice");
    let before = tree(&root);
    let o = tune(
        &root,
        m.path(),
        &[
            "--space",
            sp.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--budget",
            "10m",
            "--seed",
            "7",
            "--svg",
            "--format",
            "json",
        ],
        &cmd,
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(0), "{e}\n{}", out(&o));
    assert_tree(&before, &root, "after the search");
    // Valid against its JSON Schema (`hostknob schema tune`).
    let v = crate::fleet_schemas::check("tune", &o, &mut Default::default());
    let shipped = v["outcome"]["shipped"].as_array().unwrap();
    assert_eq!(shipped.len(), 1, "{}", v["outcome"]["shipped"]);
    assert_eq!(shipped[0]["knob"], "tune-sysctl-name-kernel-msgmax");
    assert_eq!(shipped[0]["value"], "65536");
    assert!(
        v["outcome"]["shams"]["claimed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(v["restored"], true);
    // The kernel command line is listed, not searched, not dropped.
    assert_eq!(
        v["not_searched"][0]["reason"],
        "needs a reboot: kernel command line"
    );
    assert!(e.contains("not searched: kernel-cmdline"), "{e}");
    // The plan's first lines and one line per decided comparison with the time.
    assert!(
        e.contains("false-step rate of the whole search at most 0.50 %"),
        "{e}"
    );
    assert!(e.contains("is found 80 % of the time"), "{e}");
    assert!(
        e.contains("improved") && e.contains("used,") && e.contains("left"),
        "{e}"
    );
    // The output directory: the knob file, the report, the samples, the path.
    let knob =
        std::fs::read_to_string(out_dir.join("tune-sysctl-name-kernel-msgmax.yaml")).unwrap();
    assert!(
        knob.contains("set: '65536'") || knob.contains("set: 65536"),
        "{knob}"
    );
    assert!(
        knob.contains("action: verified") && knob.contains("change: lower"),
        "{knob}"
    );
    for f in [
        "tune-report.json",
        "tune-report.txt",
        "tune-samples.json",
        "tune-path.svg",
    ] {
        assert!(out_dir.join(f).exists(), "{f}");
    }
    let svg = std::fs::read_to_string(out_dir.join("tune-path.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("msgmax=65536"),
        "{svg}"
    );
    // It loads and plans as any manifest.
    let dir = out_dir.to_str().unwrap();
    let k = hostknob_command(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "vm",
        "--manifest",
        dir,
        "knobs",
    ])
    .output()
    .unwrap();
    assert_eq!(k.status.code(), Some(0), "{}", err(&k));
    assert!(
        out(&k).contains("tune-sysctl-name-kernel-msgmax"),
        "{}",
        out(&k)
    );
    let a = hostknob_command(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "vm",
        "--manifest",
        dir,
        "apply",
        "--all",
        "--dry-run",
    ])
    .output()
    .unwrap();
    assert_eq!(a.status.code(), Some(0), "{}", err(&a));
    assert!(out(&a).contains("65536"), "{}", out(&a));
    assert_tree(&before, &root, "after the dry run");
    // The replay derives every decision again, without the host.
    let r = hostknob_command(&["tune", "--replay", dir, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", err(&r));
    let rv: serde_json::Value = serde_json::from_str(&out(&r)).unwrap();
    assert_eq!(rv["replay"]["same"], true, "{}", rv["replay"]);
    assert_eq!(rv["outcome"]["shipped"], v["outcome"]["shipped"]);
    // A changed sample is a changed decision, and the replay says so.
    let samples = out_dir.join("tune-samples.json");
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&samples).unwrap()).unwrap();
    let last = rec["rounds"].as_array().unwrap().len() - 1;
    rec["rounds"][last]["samples"][0][0] = serde_json::json!(1.0);
    std::fs::write(&samples, rec.to_string()).unwrap();
    let r = hostknob_command(&["tune", "--replay", dir])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(1), "{}", out(&r));
    assert!(out(&r).contains("replay: DIFFERENT"), "{}", out(&r));
}

#[test]
fn the_plan_runs_the_pilot_only_and_says_what_the_budget_finds() {
    let (t, root) = host();
    let cmd = bench(t.path(), &root);
    let sp = space(t.path(), SPACE);
    let m = tempfile::tempdir().unwrap();
    let before = tree(&root);
    let o = tune(
        &root,
        m.path(),
        &["--space", sp.to_str().unwrap(), "--plan", "--budget", "10m"],
        &cmd,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("pilot (as found twice, nothing written)"),
        "{text}"
    );
    assert!(
        text.contains("knob tune-sysctl-name-kernel-msgmax: 3 values (the host has 8192)"),
        "{text}"
    );
    assert!(
        text.contains("legs per round: 4 (current, sham, each value)"),
        "{text}"
    );
    assert!(text.contains("is found 80 % of the time"), "{text}");
    assert!(text.contains("5 steps and 3 shams"), "{text}");
    assert_tree(&before, &root, "after --plan");
    // A budget too small for the smallest search is refused before spending it.
    let o = tune(
        &root,
        m.path(),
        &[
            "--space",
            sp.to_str().unwrap(),
            "--plan",
            "--budget",
            "10ms",
        ],
        &cmd,
    );
    // (1 s fitted on a quiet machine: the legs' length is measured by the pilot.)
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        err(&o).contains("the smallest search of this space") && err(&o).contains("--budget"),
        "{}",
        err(&o)
    );
}

#[test]
fn bad_space_files_are_refused_naming_file_line_and_field() {
    let (t, root) = host();
    let cmd = bench(t.path(), &root);
    let m = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("never");
    let before = tree(&root);
    let cases = [
        ("knobs: []\nextra: 1\n", ":2", "unknown field `extra`"),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n    values: [1]\n    step: 2\n",
            ":5",
            "unknown field `step`",
        ),
        (
            "knobs:\n  - kind: sysctls\n    values: [1]\n",
            "knobs[0].kind",
            "unknown kind",
        ),
        (
            "knobs:\n  - kind: thp\n    target: {setting: defrag}\n    values: [madvise, sometimes]\n",
            ":2: knobs[0].values[1]",
            "sometimes is not a choice",
        ),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n    range: {from: 10, to: 1, step: 1}\n",
            "knobs[0].range",
            "above",
        ),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n    range: {from: 1, to: 100, step: 1}\n",
            "knobs[0].range",
            "at most 12",
        ),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n    values: [1, 1]\n",
            "knobs[0].values[1]",
            "given twice",
        ),
        (
            "knobs:\n  - id: nope\n    values: [1]\n",
            "knobs[0].id",
            "no knob nope",
        ),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n    values: [1]\n    range: {from: 1, to: 2, step: 1}\n",
            "knobs[0].range",
            "not both",
        ),
        (
            "knobs:\n  - kind: sysctl\n    target: {name: kernel.msgmax}\n",
            "knobs[0].values",
            "candidate values",
        ),
    ];
    for (text, where_, what) in cases {
        let sp = space(t.path(), text);
        let o = tune(
            &root,
            m.path(),
            &[
                "--space",
                sp.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &cmd,
        );
        let e = err(&o);
        assert_eq!(o.status.code(), Some(1), "{text}: {e}");
        assert!(
            e.contains("space.yaml") && e.contains(where_) && e.contains(what),
            "{text}:\n{e}"
        );
        assert!(!out_dir.exists(), "{text}: nothing written");
    }
    // A sysctl the host does not have: refused at the entry's line before any write.
    let sp = space(
        t.path(),
        "knobs:\n  - kind: sysctl\n    target: {name: kernel.nope}\n    values: [1]\n",
    );
    let o = tune(
        &root,
        m.path(),
        &[
            "--space",
            sp.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &cmd,
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("space.yaml:2: knobs[0]: ") && e.contains("no sysctl kernel.nope"),
        "{e}"
    );
    assert!(!out_dir.exists());
    assert_tree(&before, &root, "after the refusals");
}
