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
    tune_command(root, m, args, cmd).output().unwrap()
}

fn tune_command(root: &Path, m: &Path, args: &[&str], cmd: &Path) -> std::process::Command {
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
    command(root, m, &a)
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

/// Runs `tune` on the one-knob space, calls `midway` once the plan's lines
/// are out (the search proper has begun), and returns its output.
fn tune_interrupted(
    root: &Path,
    m: &Path,
    args: &[&str],
    cmd: &Path,
    midway: impl FnOnce(u32),
) -> (std::process::Output, std::time::Duration) {
    use std::io::{BufRead, Read};
    let started = std::time::Instant::now();
    let mut child = tune_command(root, m, args, cmd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut midway = Some(midway);
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if line.contains("false-step rate")
            && let Some(f) = midway.take()
        {
            f(child.id());
        }
        seen.push_str(&line);
        line.clear();
    }
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(midway.is_none(), "the plan never printed:\n{seen}");
    (
        std::process::Output {
            status,
            stdout,
            stderr: seen.into_bytes(),
        },
        started.elapsed(),
    )
}

const ONE_KNOB: &str = "knobs:
  - kind: sysctl
    target: {name: kernel.msgmax}
    values: [8192, 32768, 65536]
";

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("tune-report.json")).unwrap()).unwrap()
}

fn replays_the_same(dir: &Path) {
    let r = hostknob_command(&[
        "tune",
        "--replay",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ])
    .output()
    .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}\n{}", err(&r), out(&r));
    let rv: serde_json::Value = serde_json::from_str(&out(&r)).unwrap();
    assert_eq!(rv["replay"]["same"], true, "{}", rv["replay"]);
}

#[test]
fn ctrl_c_mid_search_restores_the_tree_and_writes_a_partial_report_that_replays() {
    let (t, root) = host();
    let cmd = bench(t.path(), &root);
    let sp = space(t.path(), ONE_KNOB);
    let m = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("advice");
    let before = tree(&root);
    let args = [
        "--space",
        sp.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--budget",
        "10m",
        "--seed",
        "3",
    ];
    let (o, _) = tune_interrupted(&root, m.path(), &args, &cmd, |pid| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
    });
    let e = err(&o);
    assert_eq!(o.status.code(), Some(130), "{e}\n{}", out(&o));
    assert_tree(&before, &root, "after Ctrl-C");
    let v = report(&out_dir);
    assert_eq!(v["outcome"]["partial"], true, "{v}");
    assert_eq!(v["outcome"]["stopped"], "a signal");
    assert_eq!(v["interrupted"], "SIGINT");
    assert_eq!(v["restored"], true);
    assert!(v["outcome"]["shipped"].as_array().unwrap().is_empty());
    assert!(
        v["caveats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().starts_with("PARTIAL: a signal stopped")),
        "{}",
        v["caveats"]
    );
    // No knob file: nothing is advised from a cut search.
    assert!(!out_dir.join("tune-sysctl-name-kernel-msgmax.yaml").exists());
    replays_the_same(&out_dir);
}

#[test]
fn the_time_budget_is_a_deadline_when_legs_slow_down_after_the_pilot() {
    use std::os::unix::fs::PermissionsExt;
    let (t, root) = host();
    let fast = bench(t.path(), &root);
    // The same benchmark, 0.4 s slower per run once the flag file exists:
    // the pilot measures fast legs, the search meets slow ones.
    let flag = t.path().join("slow");
    let cmd = t.path().join("slowing.sh");
    std::fs::write(
        &cmd,
        format!(
            "#!/bin/sh\n[ -e {} ] && sleep 0.4\nexec {}\n",
            flag.display(),
            fast.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cmd, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sp = space(t.path(), ONE_KNOB);
    let m = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("advice");
    let before = tree(&root);
    let budget = 6.0;
    let args = [
        "--space",
        sp.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--budget",
        "6s",
        "--seed",
        "5",
    ];
    let (o, took) = tune_interrupted(&root, m.path(), &args, &cmd, |_| {
        std::fs::write(&flag, "").unwrap();
    });
    let e = err(&o);
    assert_eq!(o.status.code(), Some(0), "{e}\n{}", out(&o));
    assert_tree(&before, &root, "after the deadline");
    let v = report(&out_dir);
    // Without the deadline the search runs its legs to the end (about a
    // minute of 0.4 s legs here) and is not partial.
    assert_eq!(v["outcome"]["partial"], true, "{e}");
    assert_eq!(v["outcome"]["stopped"], "the time budget ran out");
    assert!(v["interrupted"].is_null(), "{}", v["interrupted"]);
    assert!(
        v["caveats"].as_array().unwrap().iter().any(|c| c
            .as_str()
            .unwrap()
            .starts_with("PARTIAL: the time budget ran out")),
        "{}",
        v["caveats"]
    );
    // It stops within a round of the budget (a round here: up to 4 legs of 0.4 s),
    // with slack for a loaded machine.
    assert!(
        took.as_secs_f64() < budget + 15.0,
        "took {took:?} on a {budget} s budget"
    );
    replays_the_same(&out_dir);
}

#[test]
fn a_step_that_breaks_a_guard_is_not_accepted() {
    let (t, root) = host();
    let cmd = bench(t.path(), &root);
    let sp = space(t.path(), ONE_KNOB);
    let m = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("advice");
    let before = tree(&root);
    // msgmax=65536 lowers the time by 30 %: a guard that p50 must not fall
    // by more than 5 % is broken by the very improvement.
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
            "--guard",
            "p50:no-lower:5%",
            "--format",
            "json",
        ],
        &cmd,
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(0), "{e}\n{}", out(&o));
    assert_tree(&before, &root, "after the guarded search");
    let v = crate::fleet_schemas::check("tune", &o, &mut Default::default());
    assert!(
        v["outcome"]["shipped"].as_array().unwrap().is_empty(),
        "{}",
        v["outcome"]["shipped"]
    );
    assert!(v["outcome"]["accepted"].as_array().unwrap().is_empty());
    let steps = v["outcome"]["stages"][0]["comparisons"].as_array().unwrap();
    let step = steps
        .iter()
        .find(|c| c["label"].as_str().unwrap().ends_with("=65536"))
        .unwrap_or_else(|| panic!("{steps:?}"));
    assert_eq!(step["verdict"], "improved", "{step}");
    assert_eq!(step["guards"][0]["guard"], "p50:no-lower:5%");
    assert_eq!(step["guards"][0]["outcome"], "not-met", "{step}");
    assert!(v["outcome"]["stages"][0]["accepted"].is_null());
    // The replay applies the same guard.
    replays_the_same(&out_dir);
    // A malformed guard is refused before anything runs.
    let o = tune(
        &root,
        m.path(),
        &[
            "--space",
            sp.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--guard",
            "p50:sideways:5%",
        ],
        &cmd,
    );
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        err(&o).contains("--guard p50:sideways:5%: give METRIC:no-higher:PCT"),
        "{}",
        err(&o)
    );
}
