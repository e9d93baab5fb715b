//! Issue 35 item 9: one truth about what the audit DaemonSet's pod sees.
//! Every host path the audit (and the pod's loop) asks for, recorded in the
//! root seam (`HOSTKNOB_TEST_OPEN_LOG`) on a copy holding every file it may
//! read, is mounted by the chart or declared unseen in `root::POD_UNSEEN`;
//! and in the pod (`HOSTKNOB_POD=1`, as the chart sets it) a verdict an
//! unseen path could change is `unknown`, naming the path, never what its
//! absence would say.

use crate::fleet_k8s::{one_round_with, rendered};
use crate::support::nic::{ICE, host_with};
use crate::support::*;

use std::collections::BTreeSet;
use std::path::Path;

use hostknob::root::{POD_UNSEEN, entry_of};
use serde_yaml::Value;

/// The host paths the chart mounts (the textfile directory left out).
fn mounted() -> Vec<String> {
    let (_, ds) = rendered();
    let pod = &ds["spec"]["template"]["spec"];
    pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.get("hostPath"))
        .map(|h| h["path"].as_str().unwrap().to_string())
        .filter(|p| p != "/var/lib/prometheus/node-exporter")
        .collect()
}

/// Whether the pod shows `path`: it is mounted, beneath a mount, or a
/// directory the runtime makes to hold a mount (`/`, `/proc`, `/etc`).
pub(crate) fn shown(mounts: &[String], path: &str) -> bool {
    path == "/"
        || mounts.iter().any(|m| {
            path == m || path.starts_with(&format!("{m}/")) || m.starts_with(&format!("{path}/"))
        })
}

/// Every kind of file the audit may read, written into `root`, so that the
/// audit follows each reader to its end instead of stopping at an absent
/// directory.
fn fill(root: &Path) {
    give_debian_grub(root);
    let udev =
        "ACTION==\"add\", SUBSYSTEM==\"cpu\", ATTR{cpufreq/scaling_governor}=\"powersave\"\n";
    let tmpfiles = "w /sys/kernel/mm/transparent_hugepage/enabled - - - - always\n";
    let sysctl = "vm.swappiness = 30\n";
    let conf = "[Manager]\nCPUAffinity=0-1\n";
    let mut files: Vec<(String, &str)> = Vec::new();
    for d in ["etc", "run", "usr/lib", "lib", "usr/local/lib"] {
        files.push((format!("{d}/sysctl.d/50-x.conf"), sysctl));
        files.push((format!("{d}/tmpfiles.d/50-x.conf"), tmpfiles));
        files.push((format!("{d}/udev/rules.d/50-x.rules"), udev));
        files.push((format!("{d}/systemd/system.conf.d/50-x.conf"), conf));
    }
    for (p, t) in [
        ("etc/sysctl.conf", sysctl),
        ("etc/systemd/system.conf", conf),
        ("etc/kernel/cmdline", "root=/dev/sda1 quiet\n"),
        ("etc/default/irqbalance", "IRQBALANCE_BANNED_CPULIST=\n"),
        ("etc/sysconfig/irqbalance", "IRQBALANCE_BANNED_CPULIST=\n"),
        ("etc/hostknob/labels", "rack: a\n"),
        ("etc/machine-id", "0123456789abcdef0123456789abcdef\n"),
        ("etc/os-release", "ID=debian\nVERSION_ID=\"13\"\n"),
        ("etc/hostname", "adl0\n"),
        ("etc/tuned/active_profile", "latency-performance\n"),
        ("etc/tuned/tuned-main.conf", "dynamic_tuning = 0\n"),
        (
            "usr/lib/tuned/profiles/latency-performance/tuned.conf",
            "[cpu]\ngovernor=performance\n",
        ),
        (
            "usr/lib/systemd/system/tuned.service",
            "[Service]\nExecStart=/usr/sbin/tuned\n",
        ),
        (
            "var/lib/power-profiles-daemon/state.ini",
            "[State]\nDriver=intel_pstate\nProfile=performance\n",
        ),
        (
            "usr/share/saptune/notes/1980196",
            "[sysctl]\nvm.swappiness = 10\n",
        ),
        ("etc/sysconfig/saptune", "NOTE_APPLY_ORDER=\"1980196\"\n"),
        ("run/saptune/saved_state/1980196", ""),
        (
            "etc/saptune/override/1980196",
            "[sysctl]\nvm.swappiness = 20\n",
        ),
        (
            "var/lib/saptune/working/notes/1980196",
            "[sysctl]\nvm.swappiness = 10\n",
        ),
        (
            "etc/NetworkManager/system-connections/ens2f0.nmconnection",
            "[connection]\ninterface-name=ens2f0\n[ethtool]\nfeature-gro=true\n",
        ),
        ("proc/1/comm", "systemd\n"),
        ("proc/4242/comm", "tuned\n"),
        ("proc/4243/comm", "irqbalance\n"),
    ] {
        files.push((p.to_string(), t));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    write_files(root, &files);
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    for unit in ["tuned.service", "irqbalance.service"] {
        std::os::unix::fs::symlink(format!("/usr/lib/systemd/system/{unit}"), wants.join(unit))
            .unwrap();
    }
}

/// The shipped manifest, `isolate`'s fragment for the host, and one knob of
/// each kind left whose files are elsewhere (sysctl, PM QoS, MSR, NIC).
fn every_kind(root: &Path) -> tempfile::TempDir {
    let m = knobs(&[
        (
            "swap",
            "persistence: sysctl.d\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
        ),
        ("qos", "persistence: hold\nkind: pm-qos\nset: 20\n"),
        ("c1e-off", "kind: c1e\nset: \"off\"\npersistence: runtime\n"),
        (
            "gro",
            "persistence: link-file\nkind: nic-feature\ntarget: {interfaces: ens2f0}\nset: {gro: off}\n",
        ),
        (
            "channels",
            "persistence: link-file\nkind: nic-channels\ntarget: {driver: ice}\nset: {combined: 8}\n",
        ),
    ]);
    for e in std::fs::read_dir(repo().join("manifest")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, m.path().join(p.file_name().unwrap())).unwrap();
    }
    let iso = tempfile::tempdir().unwrap();
    let out = iso.path().join("isolation");
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "adl0",
        "isolate",
        "--count",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]));
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, m.path().join(p.file_name().unwrap())).unwrap();
    }
    m
}

/// The audit on `root` with every path it asks for recorded: (paths, report).
fn recorded_audit(root: &Path, manifest: &Path, pod: bool) -> (BTreeSet<String>, Value) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut args = vec!["--host", "adl0", "audit", "--format", "json"];
    if pod {
        args.push("--pod");
    }
    let o = crate::support::apply::command(root, manifest, &args)
        .env("HOSTKNOB_TEST_OPEN_LOG", log.path())
        .output()
        .unwrap();
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 2)),
        "audit exited {code:?}: {}{}",
        out(&o),
        err(&o)
    );
    let report: Value = serde_yaml::from_str(&out(&o)).unwrap();
    let paths = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (paths, report)
}

#[test]
fn every_path_the_audit_asks_for_is_mounted_or_declared_unseen() {
    let (_keep, root) = host_with("adl0", &ICE);
    fill(&root);
    let m = every_kind(&root);
    let mounts = mounted();
    let (on_host, report) = recorded_audit(&root, m.path(), false);
    let (in_pod, _) = recorded_audit(&root, m.path(), true);
    // The pod's own loop, as the chart runs it, on the same copy.
    let pod = tempfile::tempdir().unwrap();
    let loop_log = pod.path().join("opened");
    let (_, stderr, _) = one_round_with(
        &root,
        pod.path(),
        &[("HOSTKNOB_TEST_OPEN_LOG", loop_log.as_path())],
    );
    assert!(!stderr.contains("exited"), "{stderr}");
    let by_loop: BTreeSet<String> = std::fs::read_to_string(&loop_log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    // The recording means something: every knob was audited, and the
    // readers went as deep as the files written for them.
    let n = report["knobs"].as_sequence().unwrap().len();
    assert!(n >= 15, "{n} knobs audited: {report:?}");
    for p in [
        "/sys/devices/system/cpu/online",
        "/etc/sysctl.conf",
        "/run/sysctl.d",
        "/etc/kernel/cmdline",
        "/etc/saptune/override/1980196",
        "/run/saptune/saved_state",
        "/etc/tuned/active_profile",
        "/proc/4242/comm",
    ] {
        assert!(on_host.contains(p), "{p} was not asked for: {on_host:?}");
    }
    // Each path the host's audit, the pod's audit or the pod's loop asks
    // for is in the pod, or declared unseen there.
    let mut stray = Vec::new();
    for p in on_host.iter().chain(&in_pod).chain(&by_loop) {
        if !shown(&mounts, p) && entry_of(POD_UNSEEN, p).is_none() {
            stray.push(p.clone());
        }
    }
    stray.dedup();
    assert!(
        stray.is_empty(),
        "read by the audit, neither mounted by the chart nor in root::POD_UNSEEN: {stray:#?}"
    );
    // The shell's own test of the node's timer reads under the root too.
    let (_, ds) = rendered();
    let script = ds["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap()
        .to_string();
    for word in script.split(|c: char| c.is_whitespace() || c == '"') {
        if let Some(p) = word.strip_prefix("$HOSTKNOB_ROOT") {
            assert!(shown(&mounts, p), "the loop reads {p}, not mounted");
        }
    }
}

#[test]
fn the_declared_unseen_paths_are_not_mounted_and_are_documented() {
    let mounts = mounted();
    let fleet = std::fs::read_to_string(repo().join("docs/fleet.md")).unwrap();
    for u in POD_UNSEEN {
        // A glob's literal head: what a mount would have to cover.
        let head = u.path.split('[').next().unwrap().trim_end_matches('/');
        assert!(
            !mounts
                .iter()
                .any(|m| head == m || head.starts_with(&format!("{m}/"))),
            "{} is declared unseen but mounted",
            u.path
        );
        assert!(
            fleet.contains(&format!("`{}`", u.path)),
            "docs/fleet.md does not name {}",
            u.path
        );
    }
    // The chart makes the pod say so: HOSTKNOB_POD=1.
    let (_, ds) = rendered();
    let env = ds["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_sequence()
        .unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"].as_str() == Some("HOSTKNOB_POD") && e["value"].as_str() == Some("1")),
        "{env:?}"
    );
}

/// A sysctl knob in effect on a copy of the VM, and its audit on the host
/// and in the pod (the chart's variable): (host's knob, pod's knob, pod's report).
fn swap_both_ways(files: &[(&str, &str)]) -> (Value, Value, Value) {
    let (_keep, root) = copy_host("fc-haltpoll-2cpu");
    let now = std::fs::read_to_string(root.join("proc/sys/vm/swappiness")).unwrap();
    write_files(&root, files);
    let m = knobs(&[(
        "swap",
        &format!(
            "persistence: sysctl.d\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: {}\n",
            now.trim()
        ),
    )]);
    let audit = |pod: bool| {
        let mut c = crate::support::apply::command(&root, m.path(), &["audit", "--format", "json"]);
        if pod {
            c.env("HOSTKNOB_POD", "1");
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
        serde_json::from_str::<serde_json::Value>(&out(&o)).unwrap()
    };
    let to_yaml = |v: serde_json::Value| serde_yaml::to_value(v).unwrap();
    let host = to_yaml(audit(false));
    let pod = to_yaml(audit(true));
    (
        host["knobs"][0].clone(),
        pod["knobs"][0].clone(),
        pod.clone(),
    )
}

#[test]
fn in_the_pod_an_unmounted_sysctl_conf_makes_a_sysctl_unknown_not_unpersisted() {
    // Nothing persists it: the host's audit says unpersisted; the pod, which
    // cannot see /etc/sysctl.conf, said the same (an absent file).
    let (host, pod, report) = swap_both_ways(&[]);
    assert_eq!(host["status"], Value::from("unpersisted"), "{host:?}");
    assert_eq!(pod["status"], Value::from("unknown"), "{pod:?}");
    let detail = pod["detail"].as_str().unwrap();
    assert!(
        detail.contains("not mounted in the pod: /etc/sysctl.conf")
            && detail.contains("it would be unpersisted"),
        "{detail}"
    );
    // Named beside the processes of the services that may set it (tuned).
    assert_eq!(
        pod["unseen"],
        serde_yaml::to_value([
            "not mounted in the pod: /proc/PID",
            "not mounted in the pod: /etc/sysctl.conf"
        ])
        .unwrap()
    );
    assert_eq!(
        report["summary"]["unknown"],
        Value::from(1),
        "{:?}",
        report["summary"]
    );
    assert!(
        report["unseen"]
            .as_sequence()
            .unwrap()
            .contains(&Value::from("not mounted in the pod: /etc/sysctl.conf"))
    );
    assert!(
        host.get("unseen").is_none(),
        "the host's audit is unchanged: {host:?}"
    );
}

#[test]
fn in_the_pod_a_sysctl_conf_that_persists_or_competes_is_not_read_as_absent() {
    // /etc/sysctl.conf sets it on the host: persisted there, and a manager.
    let (host, pod, _) = swap_both_ways(&[("etc/sysctl.conf", "vm.swappiness = 1\n")]);
    assert!(
        host["managers"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|m| m["evidence"].as_str().unwrap().contains("/etc/sysctl.conf")),
        "{host:?}"
    );
    // The pod does not read it: no manager claimed, none denied.
    assert_eq!(pod["status"], Value::from("unknown"), "{pod:?}");
    assert!(pod["managers"].as_sequence().unwrap().is_empty(), "{pod:?}");
    assert!(
        pod["detail"]
            .as_str()
            .unwrap()
            .contains("not mounted in the pod: /etc/sysctl.conf"),
        "{pod:?}"
    );
}

#[test]
fn in_the_pod_a_services_unseen_process_is_named_and_its_status_kept() {
    // Drift read from /sys stays drift in the pod; the processes a managing
    // service may run are named as unseen, not reported as none.
    let (_keep, root) = copy_host("adl0");
    write_files(&root, &[("proc/4242/comm", "tuned\n")]);
    let m = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("manifest/cpufreq-governor-performance.yaml"),
        m.path().join("k.yaml"),
    )
    .unwrap();
    let audit = |pod: bool| {
        let mut c = crate::support::apply::command(
            &root,
            m.path(),
            &["--host", "adl0", "audit", "--format", "json"],
        );
        if pod {
            c.env("HOSTKNOB_POD", "1");
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}{}", out(&o), err(&o));
        serde_json::from_str::<serde_json::Value>(&out(&o)).unwrap()
    };
    let (host, pod) = (audit(false), audit(true));
    let k = |r: &serde_json::Value| r["knobs"][0].clone();
    assert_eq!(k(&host)["status"], "drift");
    assert!(
        k(&host)["managers"]
            .to_string()
            .contains("running (PID 4242)"),
        "{}",
        k(&host)
    );
    assert_eq!(k(&pod)["status"], "drift", "{}", k(&pod));
    assert!(!k(&pod)["managers"].to_string().contains("4242"));
    assert_eq!(
        k(&pod)["unseen"],
        serde_json::json!(["not mounted in the pod: /proc/PID"])
    );
}

#[test]
fn a_pods_unknown_reaches_the_textfile_and_the_fleet_report() {
    // The chart's textfile and a collected JSON audit: `unknown` is a status
    // of its own there too, not an unreadable input or a missing series.
    let (_keep, root) = copy_host("fc-haltpoll-2cpu");
    let now = std::fs::read_to_string(root.join("proc/sys/vm/swappiness")).unwrap();
    let m = knobs(&[(
        "swap",
        &format!(
            "persistence: sysctl.d\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: {}\n",
            now.trim()
        ),
    )]);
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("prom");
    std::fs::create_dir(&prom).unwrap();
    let o = crate::support::apply::command(
        &root,
        m.path(),
        &[
            "audit",
            "--pod",
            "--format",
            "json",
            "--textfile",
            prom.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    let audit = dir.path().join("vm.json");
    std::fs::write(&audit, out(&o)).unwrap();
    let metrics = std::fs::read_to_string(prom.join("hostknob.prom")).unwrap();
    assert!(
        metrics
            .contains("hostknob_knob_status{knob=\"swap\",kind=\"sysctl\",status=\"unknown\"} 1")
            && metrics.contains("hostknob_knobs{status=\"unknown\"} 1")
            && metrics.contains("hostknob_knobs{status=\"unpersisted\"} 0"),
        "{metrics}"
    );
    let r = hostknob(&["report", "--format", "json", audit.to_str().unwrap()]);
    let r: serde_json::Value = serde_json::from_str(&ok(&r)).unwrap();
    assert_eq!(r["summary"], serde_json::json!({"unknown": 1}), "{r}");
    assert_eq!(r["unreadable"], serde_json::json!([]), "{r}");
    assert_eq!(r["knobs"][0]["groups"][0]["status"], "unknown", "{r}");
}
