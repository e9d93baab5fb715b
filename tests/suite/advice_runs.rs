//! Issue 49 items 2, 9 and 11 (part): advice hostknob prints runs as
//! printed; nothing said about a knob, probe or host that does not belong to
//! it (tuned where it is not there, residency and idle counters for a knob
//! that does not change idling, a waker for the timer probe); `knobs` says
//! why a knob is unsupported, a caveat said once, `apply -q` without the
//! plan. On copies of the VM capture.

use std::path::Path;

use crate::support::*;

/// THP as the capture has it (`madvise`): in effect as found.
const THP_OK: (&str, &str) = (
    "thp",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
);
/// A knob that changes the capture; it names no probe.
const THP_NEVER: (&str, &str) = (
    "thp-never",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);

fn evidence_detail(root: &Path, m: &Path, id: &str) -> String {
    let (r, _) = audit_json(root, m, Some("vm"));
    let k = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone();
    k["evidence_detail"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The commands between the first pair of backticks, split at `&&`.
fn printed_commands(detail: &str) -> Vec<Vec<String>> {
    let quoted = detail
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("{detail}"));
    quoted
        .split("&&")
        .map(|c| c.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn audits_verify_advice_runs_as_printed() {
    let (_t, root) = vm();
    let m = knobs(&[THP_NEVER]);
    ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "thp-never"],
    ));
    let detail = evidence_detail(&root, m.path(), "thp-never");
    assert!(detail.starts_with("unverified-here"), "{detail}");
    let commands = printed_commands(&detail);
    assert_eq!(commands.len(), 3, "revert, verify, apply: {detail}");
    for words in commands {
        assert_eq!(words[0], "hostknob", "{detail}");
        // As printed (with the --host the audit was given); `run` adds the
        // copy's --root, which a measuring chain does not carry.
        assert!(words.windows(2).any(|w| w == ["--host", "vm"]), "{detail}");
        let mut args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        // Only the probe's length is shortened for the test (its options
        // after `--`, and the rounds): the command is the one printed.
        if words.iter().any(|w| w == "verify") {
            args.extend([
                "--settle",
                "10ms",
                "--rounds",
                "5",
                "--max-rounds",
                "5",
                "--",
                "--samples",
                "20",
                "--gap-us",
                "200..600",
            ]);
        }
        let out = run(&root, m.path(), &args);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{args:?} as printed failed: {}",
            err(&out)
        );
    }
    // A value the host had before hostknob: no command that would be refused.
    let (_t, root) = vm();
    let m = knobs(&[THP_OK]);
    let detail = evidence_detail(&root, m.path(), "thp");
    assert!(detail.starts_with("unverified-here"), "{detail}");
    assert!(!detail.contains("`hostknob"), "{detail}");
    assert!(detail.contains("where audit says `drift`"), "{detail}");
}

#[test]
fn a_verify_shows_only_what_belongs_to_its_probe_and_knob() {
    let (_t, root) = vm();
    let m = knobs(&[THP_NEVER]);
    let verify = |probe: &str, opts: &[&str]| {
        let mut args = vec![
            "--host",
            "vm",
            "verify",
            "thp-never",
            "--probe",
            probe,
            "--settle",
            "10ms",
            "--rounds",
            "5",
            "--max-rounds",
            "5",
            "--",
        ];
        args.extend(opts);
        let out = run(&root, m.path(), &args);
        assert!(matches!(out.status.code(), Some(0 | 3)), "{}", err(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wakeup = verify("wakeup", &["--samples", "20", "--gap-us", "200..600"]);
    assert!(wakeup.contains("sleeper CPU"), "{wakeup}");
    // THP does not change idling: no residency, not even its absence.
    assert!(!wakeup.contains("hardware residency"), "{wakeup}");
    let timer = verify("timer", &["--loops", "50", "--interval", "200"]);
    // A timer has no waker: no waker CPU, no sleeper CPU.
    assert!(!timer.contains("waker CPU"), "{timer}");
    assert!(!timer.contains("sleeper CPU"), "{timer}");
}

#[test]
fn imported_knobs_mention_tuned_only_where_it_is_there() {
    let from = tempfile::tempdir().unwrap();
    write_files(
        from.path(),
        &[(
            "lat/tuned.conf",
            "[main]\nsummary=s\n[sysctl]\nvm.swappiness=10\n",
        )],
    );
    let caveats = |root: &Path| {
        let out = tempfile::tempdir().unwrap();
        ok(&hostknob(&[
            "--root",
            root.to_str().unwrap(),
            "import",
            "tuned",
            "lat",
            "--from",
            from.path().to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ]));
        let text = std::fs::read_to_string(out.path().join("tuned-lat-sysctl-vm-swappiness.yaml"))
            .unwrap();
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        doc["caveats"]
            .as_sequence()
            .map(|s| {
                s.iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    assert!(
        caveats(&root).iter().all(|c| !c.contains("tuned")),
        "no tuned here"
    );
    write_files(&root, &[("usr/sbin/tuned", "#!/usr/bin/python3\n")]);
    let c = caveats(&root).join("\n");
    assert!(c.contains("installed (/usr/sbin/tuned)"), "{c}");
    assert!(!c.contains("every start"), "not running, not enabled: {c}");
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/tuned.service",
        wants.join("tuned.service"),
    )
    .unwrap();
    let c = caveats(&root).join("\n");
    assert!(
        c.contains("enabled") && c.contains("reapplies its profile at every start"),
        "{c}"
    );
}

#[test]
fn knobs_says_why_a_knob_is_unsupported() {
    // genoa0's acpi-cpufreq offers no ondemand governor.
    let (_t, root) = copy_host("genoa0");
    let m = knobs(&[(
        "gov",
        "persistence: runtime\nkind: cpufreq-governor\ntarget: {cpus: all}\nset: ondemand\n",
    )]);
    let out = run(&root, m.path(), &["--host", "genoa0", "knobs"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("unsupported"), "{text}{}", err(&out));
    assert!(text.contains("Unsupported here"), "{text}");
    assert!(text.contains("not available here"), "{text}");
    let out = run(
        &root,
        m.path(),
        &["--host", "genoa0", "--format", "json", "knobs"],
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = j["knobs"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("not available here"), "{j:#}");
}

#[test]
fn a_caveat_that_says_the_value_is_lost_at_boot_is_said_once() {
    let (_t, root) = vm();
    let m = knobs(&[(
        "thp-never",
        "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n\
         caveats: [sysfs writes do not survive a reboot]\n",
    )]);
    let text = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "--dry-run", "--all"],
    ));
    assert!(text.contains("do not survive a reboot"), "{text}");
    assert!(
        !text.contains("lost at the next boot"),
        "said twice: {text}"
    );
    assert!(text.contains("to make it permanent"), "{text}");
}

#[test]
fn quiet_apply_and_revert_print_what_happened_not_the_plan() {
    let (_t, root) = vm();
    let m = knobs(&[THP_NEVER]);
    let loud = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "--dry-run", "--all"],
    ));
    assert!(loud.contains("+never") || loud.contains("never"), "{loud}");
    let quiet = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "-q", "apply", "--all"],
    ));
    assert!(quiet.contains("wrote and read back"), "{quiet}");
    assert!(!quiet.contains("thp-never (thp)"), "the plan: {quiet}");
    assert!(!quiet.contains("caveats:"), "{quiet}");
    let quiet = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "-q", "revert", "--all"],
    ));
    assert!(quiet.contains("restored and read back"), "{quiet}");
    assert!(!quiet.contains("+++") && !quiet.contains("@@"), "{quiet}");
}

#[test]
fn commands_md_lists_each_status_once() {
    let text = std::fs::read_to_string(repo().join("docs/commands.md")).unwrap();
    for status in [
        "ok",
        "unpersisted",
        "pending-reboot",
        "not-applicable",
        "not-honoured",
        "unknown",
        "unreadable",
        "drift",
        "unsupported",
        "lost-on-reboot",
    ] {
        let n = text.matches(&format!("\n- `{status}`: ")).count();
        assert_eq!(n, 1, "docs/commands.md lists `{status}` {n} times");
    }
}
