//! `audit` statuses, exit codes and managers on copies of real hosts, and the
//! shipped catalog.

use std::path::Path;

use crate::support::*;
use hostknob::manifest::ledger::{self, Action, Change, Entry};
use hostknob::schema::Persistence;

/// fc-haltpoll-2cpu booted at btime 1796031636 (2026-11-30T09:40:36Z).
const FC_BOOT: &str = "2026-11-30T09:40:36Z";

const THP_TMPFILES: &str = "id: thp\ntitle: THP madvise\nwhy: w\nhosts: [vm]\npersistence: tmpfiles\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n";

#[test]
fn ok_becomes_drift_when_a_file_in_the_copy_changes() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &host,
        &[(
            "etc/tmpfiles.d/thp.conf",
            "# keep THP on request only\nw /sys/kernel/mm/transparent_hugepage/enabled - - - - madvise\n",
        )],
    );
    let m = manifest(&[("thp.yaml", THP_TMPFILES)]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "thp");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{r:#}");
    assert_eq!(r["host"], "vm");
    assert_eq!(r["boot_time"], FC_BOOT);
    assert_eq!(
        k["persisted_by"],
        format!("{}:2", "/etc/tmpfiles.d/thp.conf")
    );
    assert_eq!(k["current"][0]["value"], "madvise");
    assert!(
        k["managers"][0]["evidence"]
            .as_str()
            .unwrap()
            .contains("/etc/tmpfiles.d/thp.conf:2"),
        "{k:#}"
    );
    assert_eq!(r["summary"]["ok"], 1);

    std::fs::write(
        host.join("sys/kernel/mm/transparent_hugepage/enabled"),
        "[always] madvise never\n",
    )
    .unwrap();
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "thp");
    assert_eq!((k["status"].as_str(), code), (Some("drift"), 2), "{r:#}");
    assert_eq!(k["current"][0]["value"], "always");
    assert_eq!(k["detail"], "is always, should be madvise");
    assert_eq!(r["summary"]["drift"], 1);
    assert_eq!(r["summary"]["ok"], 0);
}

#[test]
fn cpu_groups_get_their_own_status() {
    let (_tmp, host) = copy_host("adl0");
    // CPU 3's C10 was disabled by hand; the knob wants C10 disabled everywhere.
    let c10 = |cpu: u32| {
        let dir = host.join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle"));
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| std::fs::read_to_string(p.join("name")).unwrap().trim() == "C10")
            .unwrap()
    };
    std::fs::write(c10(3).join("disable"), "1\n").unwrap();
    std::fs::write(c10(4).join("disable"), "1\n").unwrap();
    let m = manifest(&[(
        "c10.yaml",
        "id: no-c10\ntitle: t\nwhy: w\nhosts: [adl0]\npersistence: runtime\nkind: cpuidle-state\ntarget:\n  cpus: all\n  states: {names: [C10]}\nset: disabled\n",
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!(code, 2);
    let k = knob(&r, "no-c10");
    assert_eq!(k["status"], "drift");
    let groups: Vec<(String, String)> = k["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["cpus"].as_str().unwrap().to_string(),
                g["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            ("0-2,5-15".to_string(), "drift".to_string()),
            ("3-4".to_string(), "unpersisted".to_string())
        ]
    );
    let current: Vec<(String, String)> = k["current"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["cpus"].as_str().unwrap().to_string(),
                g["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        current,
        vec![
            ("0-2,5-15".to_string(), "enabled".to_string()),
            ("3-4".to_string(), "disabled".to_string())
        ]
    );
}

#[test]
fn a_governor_the_host_lacks_is_unsupported() {
    let host = corpus_host("adl0");
    let m = manifest(&[(
        "gov.yaml",
        "id: gov-schedutil\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: tmpfiles\nkind: cpufreq-governor\nset: schedutil\n",
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "gov-schedutil");
    assert_eq!((k["status"].as_str(), code), (Some("unsupported"), 2));
    assert!(k["detail"].as_str().unwrap().contains("not available"));
    assert_eq!(r["summary"]["unsupported"], 1);
}

#[test]
fn a_runtime_knob_in_effect_is_unpersisted_and_passes() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "k.yaml",
        "id: thp-rt\ntitle: t\nwhy: w\nhosts: [vm]\npersistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "thp-rt");
    assert_eq!((k["status"].as_str(), code), (Some("unpersisted"), 0));
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("gone at the next boot")
    );
}

#[test]
fn knobs_for_other_hosts_are_left_out() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[("k.yaml", &THP_TMPFILES.replace("[vm]", "[rpc-ap-*]"))]);
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!(code, 0);
    assert_eq!(r["knobs"].as_array().unwrap().len(), 0);
    assert_eq!(r["other_hosts"], 1);
    let (r, _) = audit_json(&host, m.path(), Some("rpc-ap-7"));
    assert_eq!(r["knobs"].as_array().unwrap().len(), 1);
    assert_eq!(r["host"], "rpc-ap-7");
}

const TIMER_MIGRATION: &str = "id: no-timer-migration\ntitle: Keep timers on their CPU\nwhy: w\nhosts: [vm]\npersistence: runtime\nkind: sysctl\ntarget: {name: kernel.timer_migration}\nset: 0\n";

fn ledger_entry(timestamp: &str, action: Action) -> Entry {
    Entry {
        timestamp: timestamp.into(),
        id: None,
        host: "vm".into(),
        knob: "no-timer-migration".into(),
        action,
        changes: vec![Change {
            path: "/proc/sys/kernel/timer_migration".into(),
            cpus: None,
            before: Some("1".into()),
            after: Some("0".into()),
        }],
        persistence: Persistence::Runtime,
        user: Some("test".into()),
        hostknob: "0.1.0".into(),
        note: None,
        evidence: None,
        facts: None,
        samples: None,
        identity: Default::default(),
    }
}

#[test]
fn lost_on_reboot_when_the_ledger_says_applied_before_this_boot() {
    let host = corpus_host("fc-haltpoll-2cpu");
    // kernel.timer_migration is back at its default, 1.
    assert_eq!(
        std::fs::read_to_string(host.join("proc/sys/kernel/timer_migration"))
            .unwrap()
            .trim(),
        "1"
    );
    let m = manifest(&[("k.yaml", TIMER_MIGRATION)]);
    append_collected(
        m.path(),
        &[ledger_entry("2026-07-10T09:14:03Z", Action::Applied)],
    );
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "no-timer-migration");
    assert_eq!(
        (k["status"].as_str(), code),
        (Some("lost-on-reboot"), 2),
        "{r:#}"
    );
    let detail = k["detail"].as_str().unwrap();
    assert!(detail.contains("ledger 2026-07-10T09:14:03Z"), "{detail}");
    assert!(detail.contains(FC_BOOT), "{detail}");
    assert!(
        detail.contains("back to 1, its value before the apply"),
        "{detail}"
    );
    assert_eq!(r["summary"]["lost-on-reboot"], 1);
}

#[test]
fn drift_when_the_ledger_says_applied_after_this_boot() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[("k.yaml", TIMER_MIGRATION)]);
    append_collected(
        m.path(),
        &[ledger_entry("2026-11-30T10:00:00Z", Action::Applied)],
    );
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "no-timer-migration");
    assert_eq!((k["status"].as_str(), code), (Some("drift"), 2));
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("applied in this boot"),
        "{k:#}"
    );
}

#[test]
fn a_revert_after_the_apply_leaves_plain_drift() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[("k.yaml", TIMER_MIGRATION)]);
    append_collected(
        m.path(),
        &[ledger_entry("2026-07-10T09:14:03Z", Action::Applied)],
    );
    append_collected(
        m.path(),
        &[ledger_entry("2026-07-11T09:00:00Z", Action::Reverted)],
    );
    let (r, _) = audit_json(&host, m.path(), None);
    let k = knob(&r, "no-timer-migration");
    assert_eq!(k["status"], "drift");
    assert_eq!(k["detail"], "is 1, should be 0");
}

#[test]
fn lost_on_reboot_from_the_knobs_own_history() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let with_history = format!(
        "{TIMER_MIGRATION}history:\n  - {{date: 2026-07-10, action: applied, hosts: [vm], note: by hand}}\n"
    );
    let m = manifest(&[("k.yaml", &with_history)]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "no-timer-migration");
    assert_eq!((k["status"].as_str(), code), (Some("lost-on-reboot"), 2));
    assert!(k["detail"].as_str().unwrap().contains("history 2026-07-10"));
    // The same history naming other hosts says nothing about this one.
    let m = manifest(&[(
        "k.yaml",
        &with_history.replace("hosts: [vm], note", "hosts: [rpc-ap-1], note"),
    )]);
    let (r, _) = audit_json(&host, m.path(), None);
    assert_eq!(knob(&r, "no-timer-migration")["status"], "drift");
}

#[test]
fn without_a_boot_time_the_story_is_told_but_not_guessed() {
    // pepc captures have no /proc/stat.
    let host = corpus_host("adl0");
    let m = manifest(&[(
        "k.yaml",
        "id: gov\ntitle: t\nwhy: w\nhosts: [adl0]\npersistence: runtime\nkind: cpufreq-governor\nset: performance\nhistory:\n  - {date: 2026-07-10, action: applied, hosts: [adl0]}\n",
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "gov");
    assert_eq!((k["status"].as_str(), code), (Some("drift"), 2));
    assert!(
        k["detail"].as_str().unwrap().contains("cannot be told"),
        "{k:#}"
    );
    assert_eq!(r["boot_time"], serde_json::Value::Null);
}

#[test]
fn managers_that_may_override_are_named() {
    let (_tmp, host) = copy_host("adl0");
    let wants = host.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/tuned.service",
        wants.join("tuned.service"),
    )
    .unwrap();
    write_files(
        &host,
        &[
            ("etc/tuned/active_profile", "throughput-performance\n"),
            (
                "etc/udev/rules.d/50-governor.rules",
                "SUBSYSTEM==\"cpu\", ATTR{cpufreq/scaling_governor}=\"powersave\"\n",
            ),
        ],
    );
    let m = manifest(&[(
        "gov.yaml",
        "id: gov\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: tmpfiles\nkind: cpufreq-governor\nset: performance\n",
    )]);
    let (r, _) = audit_json(&host, m.path(), None);
    let managers = knob(&r, "gov")["managers"].as_array().unwrap().clone();
    let names: Vec<&str> = managers
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["tuned", "udev"], "{managers:#?}");
    let tuned = managers[0]["evidence"].as_str().unwrap();
    assert!(
        tuned.contains("enabled") && tuned.contains("throughput-performance"),
        "{tuned}"
    );
    assert!(
        managers[1]["evidence"]
            .as_str()
            .unwrap()
            .contains("/etc/udev/rules.d/50-governor.rules:1")
    );
}

#[test]
fn sysctl_d_persists_and_is_named() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &host,
        &[("etc/sysctl.d/90-swap.conf", "vm.swappiness = 60\n")],
    );
    let m = manifest(&[(
        "k.yaml",
        "id: swap\ntitle: t\nwhy: w\nhosts: [vm]\npersistence: sysctl.d\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 60\n",
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "swap");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
    assert_eq!(k["persisted_by"], "/etc/sysctl.d/90-swap.conf:1");
    assert_eq!(k["managers"][0]["name"], "sysctl.d");
}

#[test]
fn the_shipped_catalog_on_this_vms_capture() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let (r, code) = audit_json(&host, &catalog, None);
    // The baseline's one finding on this guest: swappiness at the default 60.
    assert_eq!(code, 2, "{r:#}");
    let drifting: Vec<&str> = r["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["status"] == "drift")
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(drifting, ["vm-swappiness-low"], "{r:#}");
    assert_eq!(
        knob(&r, "vm-swappiness-low")["detail"],
        "is 60, should be 10"
    );
    // haltpoll.guest_halt_poll_ns=0 is on the capture's kernel command line.
    let k = knob(&r, "haltpoll-guest-no-poll");
    assert_eq!(k["status"], "ok");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .contains("haltpoll.guest_halt_poll_ns=0")
    );
    assert_eq!(
        knob(&r, "cpufreq-governor-performance")["status"],
        "not-applicable"
    );
    assert_eq!(
        knob(&r, "cpufreq-epp-performance")["status"],
        "not-applicable"
    );
    assert_eq!(knob(&r, "thp-madvise")["status"], "unpersisted");
    // Every knob carries the fields machines rely on.
    for k in r["knobs"].as_array().unwrap() {
        for field in [
            "id",
            "kind",
            "status",
            "desired",
            "current",
            "persistence",
            "caveats",
            "managers",
            "detail",
        ] {
            assert!(k.get(field).is_some(), "{field} missing in {k:#}");
        }
    }
}

#[test]
fn the_shipped_catalog_on_gnr0_as_an_rpc_host() {
    let host = corpus_host("gnr0");
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let (r, code) = audit_json(&host, &catalog, Some("rpc-1.example"));
    assert_eq!(code, 2);
    let status = |id: &str| knob(&r, id)["status"].as_str().unwrap().to_string();
    // gnr0's deepest state exits in 210 µs: the 300 µs knob selects nothing there.
    assert_eq!(status("cpuidle-no-deep-state"), "not-applicable");
    assert!(
        knob(&r, "cpuidle-no-deep-state")["detail"]
            .as_str()
            .unwrap()
            .contains("C6P 210 µs")
    );
    assert_eq!(status("cpufreq-governor-performance"), "drift");
    assert_eq!(status("cpufreq-epp-performance"), "drift");
    assert_eq!(status("pm-qos-resume-latency-rpc-cores"), "drift");
    assert_eq!(
        status("allocator-rpc-node-background-thread"),
        "not-applicable"
    );
    let gov = knob(&r, "cpufreq-governor-performance");
    assert_eq!(gov["current"][0]["cpus"], "0-511");
    assert_eq!(gov["current"][0]["value"], "powersave");
}

#[test]
fn knobs_lists_desired_current_and_status() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        catalog.to_str().unwrap(),
        "knobs",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = knob(&v, "haltpoll-guest-no-poll");
    assert_eq!(k["desired"], "0");
    assert_eq!(k["current"][0]["value"], "0");
    assert_eq!(k["status"], "ok");
    let table = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        catalog.to_str().unwrap(),
        "knobs",
    ]);
    let text = stdout(&table);
    assert!(text.contains("haltpoll-guest-no-poll"), "{text}");
    assert!(
        text.contains("host vm (from /proc/sys/kernel/hostname)"),
        "{text}"
    );
}

#[test]
fn an_unreadable_root_or_unknown_knob_is_an_error() {
    let m = manifest(&[("k.yaml", THP_TMPFILES)]);
    let out = hostknob(&[
        "--root",
        "/nonexistent/root",
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/root"),
        "{}",
        stderr(&out)
    );
    let host = corpus_host("fc-haltpoll-2cpu");
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
        "no-such-knob",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no knob with id \"no-such-knob\""));
}

#[test]
fn the_spec_example_loads_exactly_as_written() {
    // The manifest reference opens with the product's example knob.
    let spec = std::fs::read_to_string(repo().join("docs/manifest.md")).unwrap();
    let start = spec
        .find("```yaml\n")
        .expect("docs/manifest.md has a yaml block")
        + 8;
    let end = start + spec[start..].find("```").unwrap();
    let example = &spec[start..end];
    assert!(example.contains("id: cpuidle-no-deep-state"));
    // The copy kept in tests/ is the same text, so this test also guards it.
    let kept = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests/spec-example/cpuidle.yaml"),
    )
    .unwrap();
    assert_eq!(kept, example);
    let m = hostknob::manifest::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests/spec-example"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let k = &m.knobs[0];
    assert_eq!(k.id, "cpuidle-no-deep-state");
    assert_eq!(k.spec.desired(), "disabled");
    assert_eq!(k.history.len(), 1);
    assert!(k.hosts.matches("rpc-ap-2") && !k.hosts.matches("rpc-ap-4"));
    let v = k.verify.as_ref().unwrap();
    assert_eq!(v.expect.0.len(), 1);
    assert_eq!(v.expect.0[0].to_string(), "p50 lower by at least 300 µs");
}

#[test]
fn the_host_name_comes_from_the_capture_file() {
    let (_tmp, host) = copy_host("adl0");
    let m = manifest(&[("k.yaml", &THP_TMPFILES.replace("[vm]", "[rpc-ap-9]"))]);
    let (r, _) = audit_json(&host, m.path(), None);
    assert_eq!(r["host"], "adl0");
    assert_eq!(r["host_source"], "hostknob-capture.yaml");
    assert_eq!(r["knobs"].as_array().unwrap().len(), 0);
    write_files(
        &host,
        &[(
            "hostknob-capture.yaml",
            "host: rpc-ap-9\ncaptured_at: 2026-11-30T10:00:00Z\n",
        )],
    );
    let (r, _) = audit_json(&host, m.path(), None);
    assert_eq!(r["host"], "rpc-ap-9");
    assert_eq!(r["host_source"], "hostknob-capture.yaml");
    assert_eq!(r["knobs"].as_array().unwrap().len(), 1);
}

#[test]
fn the_manifest_can_come_from_the_environment() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[("k.yaml", THP_TMPFILES)]);
    let out = hostknob_command(&[
        "--root",
        host.to_str().unwrap(),
        "audit",
        "--format",
        "json",
    ])
    .env("HOSTKNOB_MANIFEST", m.path())
    .output()
    .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["manifest"], m.path().display().to_string());
    assert_eq!(knob(&r, "thp")["status"], "unpersisted");
}

#[test]
fn a_capture_applied_under_root_does_not_make_the_live_host_drift() {
    // Issue 11: the VM capture's hostname is `vm`, like this machine's. An
    // apply under --root COPY wrote ledger entries that the live host's audit
    // read as its own ("applied in this boot and changed since by something
    // else"). The manifest (and its ledger) is a temporary copy; the live
    // host is only read.
    let (_t, root) = vm();
    let m = knobs(&VM_KNOBS);
    ok(&run(&root, m.path(), &["--host", "vm", "apply", "--all"]));
    let text = ledger_text(&root);
    let canon = std::fs::canonicalize(&root).unwrap();
    assert!(text.contains("root: capture"), "{text}");
    assert!(
        text.contains(&format!("capture: {}", canon.display())),
        "{text}"
    );
    let entries: Vec<ledger::Entry> = serde_yaml::from_str(&text).unwrap();
    assert_eq!(entries.len(), 5);
    // Collected into the manifest repository, as collect-ledgers.yml does.
    append_collected(m.path(), &entries);

    let live = hostknob(&[
        "--host",
        "vm",
        "--manifest",
        m.path().to_str().unwrap(),
        "--format",
        "json",
        "audit",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&live)).unwrap();
    assert_eq!(v["other_machine_entries"], 5, "{v}");
    for k in v["knobs"].as_array().unwrap() {
        let detail = k["detail"].as_str().unwrap_or("");
        assert!(!detail.contains("applied in this boot"), "{k}");
        assert!(k["evidence"].is_null(), "{k}");
    }
    let table = hostknob(&[
        "--host",
        "vm",
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
    ]);
    assert!(
        stdout(&table)
            .contains("5 ledger entries under the name vm are from another machine or a capture"),
        "{}",
        stdout(&table)
    );
    // Under the copy itself they are its history.
    let o = run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "audit"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["other_machine_entries"], 0, "{v}");
    assert_eq!(
        (
            v["summary"]["unpersisted"].as_u64(),
            v["summary"]["ok"].as_u64()
        ),
        (Some(4), Some(1)),
        "{v}"
    );
}

#[test]
fn an_unreadable_knob_file_is_unreadable_and_exits_1() {
    // Issue 11: bytes that are not UTF-8 (as an I/O error) read as
    // not-applicable, exit 0.
    let (_t, host) = copy_host("fc-haltpoll-2cpu");
    std::fs::write(
        host.join("sys/kernel/mm/transparent_hugepage/enabled"),
        b"always [madv\xffise] never\n",
    )
    .unwrap();
    let m = manifest(&[("thp.yaml", THP_TMPFILES)]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "thp");
    assert_eq!(
        (k["status"].as_str(), code),
        (Some("unreadable"), 1),
        "{r:#}"
    );
    assert!(k["detail"].as_str().unwrap().contains("not UTF-8"), "{k:#}");
    assert_eq!(r["summary"]["unreadable"], 1);
}

#[test]
fn a_disabled_idle_state_under_the_haltpoll_governor_is_not_honoured() {
    // Issue 11: on the VM (governor haltpoll) a disabled `haltpoll idle`
    // read back 1 and audited ok, though the state was still entered.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let m = knobs(&[(
        "idle-off",
        "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: \"1\", states: {names: [haltpoll idle]}}\nset: disabled\n",
    )]);
    ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "idle-off"],
    ));
    let (r, code) = audit_json(&root, m.path(), Some("vm"));
    let k = knob(&r, "idle-off");
    assert_eq!(
        (k["status"].as_str(), code),
        (Some("not-honoured"), 2),
        "{k:#}"
    );
    let d = k["detail"].as_str().unwrap();
    assert!(
        d.contains("`haltpoll`, which ignores per-state disable") && d.contains("usage "),
        "{d}"
    );
    // The same state under `menu`, which honours it: unpersisted, exit 0.
    for f in ["current_governor", "current_governor_ro"] {
        std::fs::write(
            root.join("sys/devices/system/cpu/cpuidle").join(f),
            "menu\n",
        )
        .unwrap();
    }
    let (r, code) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(
        (knob(&r, "idle-off")["status"].as_str(), code),
        (Some("unpersisted"), 0)
    );
}
