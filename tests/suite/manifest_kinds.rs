//! Each knob kind reads, plans and validates on copies of real hosts.

use std::path::Path;

use crate::support::*;
use hostknob::cpulist::CpuList;
use hostknob::knob::{Blocker, HostCtx, Plan, Survey, WriteMode};
use hostknob::manifest::{self, Manifest};
use hostknob::root::Root;

const HEAD: &str = "title: t\nwhy: w\npersistence: runtime\nhosts: \"*\"\n";

fn load(knob: &str) -> (tempfile::TempDir, Manifest) {
    let dir = manifest(&[("k.yaml", &format!("id: k\n{HEAD}{knob}"))]);
    let m = manifest::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, m)
}

fn survey(host: &Path, knob: &str) -> Survey {
    let (_d, m) = load(knob);
    let root = Root::open(host).unwrap();
    let ctx = HostCtx::new(&root, "t".into());
    m.knobs[0].spec.survey(&ctx).unwrap()
}

fn plan(host: &Path, knob: &str) -> Plan {
    let (_d, m) = load(knob);
    let root = Root::open(host).unwrap();
    let ctx = HostCtx::new(&root, "t".into());
    let p = m.knobs[0].spec.plan(&ctx).unwrap();
    assert_eq!(m.knobs[0].spec.validate(&ctx).unwrap(), p.blocked);
    p
}

fn union(cpus: impl Iterator<Item = CpuList>) -> CpuList {
    cpus.flat_map(|c| c.as_slice().to_vec()).collect()
}

/// cpu0's idle states from the corpus's independent reader: (name, latency µs).
fn expected_states(host: &str) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(corpus_dir().join(format!("{host}.expected.yaml"))).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    doc["cpuidle"]["cpu0_states"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["latency_us"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cpuidle_by_exit_latency_on_spr1_is_exactly_c6_on_all_320_cpus() {
    let host = corpus_host("spr1");
    // The independent reader agrees on which states qualify.
    let deep: Vec<String> = expected_states("spr1")
        .into_iter()
        .filter(|(_, l)| *l >= 200)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(deep, vec!["C6"]);

    let knob = "kind: cpuidle-state\ntarget:\n  cpus: all\n  states: {min_exit_latency_us: 200}\nset: disabled\n";
    let s = survey(&host, knob);
    assert_eq!(s.targets.len(), 320);
    assert!(s.targets.iter().all(|t| t.label.as_deref() == Some("C6")));
    assert!(s.targets.iter().all(|t| t.blocker.is_none()));
    let cpus = union(s.targets.iter().map(|t| t.cpus.clone().unwrap()));
    assert_eq!(cpus.to_string(), "0-319");

    let p = plan(&host, knob);
    assert_eq!(p.writes.len(), 320);
    assert!(p.blocked.is_empty());
    for w in &p.writes {
        let cpu = w.cpus.as_ref().unwrap().first().unwrap();
        assert_eq!(
            w.path,
            format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state3/disable")
        );
        assert_eq!((w.before.as_deref(), w.after.as_str()), (Some("0"), "1"));
        assert_eq!(w.mode, WriteMode::Attribute);
    }
    let (_d, m) = load(knob);
    let root = Root::open(&host).unwrap();
    let ctx = HostCtx::new(&root, "t".into());
    let read = m.knobs[0].spec.read(&ctx).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].cpus.as_ref().unwrap().to_string(), "0-319");
    assert_eq!(read[0].value.as_deref(), Some("enabled"));
    let back = m.knobs[0].spec.read_back(&ctx, &p.writes[0].path).unwrap();
    assert_eq!(back.as_deref(), Some("enabled"));
}

#[test]
fn cpuidle_by_name_follows_each_cpus_own_table() {
    let host = corpus_host("adl0");
    let p = plan(
        &host,
        "kind: cpuidle-state\ntarget:\n  cpus: 0-3,12\n  states: {names: [C10, C8]}\nset: disabled\n",
    );
    assert_eq!(p.writes.len(), 10);
    for w in &p.writes {
        // The state directory the write names really is the labelled state on that CPU.
        let dir = Path::new(&w.path).parent().unwrap();
        let name = std::fs::read_to_string(host.join(dir.strip_prefix("/").unwrap()).join("name"))
            .unwrap();
        assert_eq!(Some(name.trim()), w.label.as_deref(), "{}", w.path);
    }
    // Already disabled would plan nothing; enabling what is enabled plans nothing too.
    let p = plan(
        &host,
        "kind: cpuidle-state\ntarget:\n  states: {names: [C10]}\nset: enabled\n",
    );
    assert!(p.writes.is_empty());
}

#[test]
fn cpuidle_without_a_matching_state_or_any_state_is_not_applicable() {
    let spr1 = corpus_host("spr1");
    let s = survey(
        &spr1,
        "kind: cpuidle-state\ntarget:\n  states: {names: [C8]}\nset: disabled\n",
    );
    assert_eq!(s.targets.len(), 1);
    match &s.targets[0].blocker {
        Some(Blocker::NotApplicable(r)) => {
            assert!(r.contains("no idle state named C8"), "{r}");
            assert!(r.contains("C6 290 µs"), "{r}");
        }
        other => panic!("{other:?}"),
    }
    let cwf0 = corpus_host("cwf0");
    let s = survey(
        &cwf0,
        "kind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 1}\nset: disabled\n",
    );
    match &s.targets[0].blocker {
        Some(Blocker::NotApplicable(r)) => {
            assert!(r.contains("no idle states on this host"), "{r}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.targets[0].cpus.as_ref().unwrap().len(), 576);
}

/// Issue 36: CPUs are not searched for states past the first CPU's table
/// (one system call per CPU) unless the kernel may give each CPU a driver of
/// its own, which it shows with `cpuN/cpuidle/driver` (arm64's PSCI idle
/// driver): a CPU with one more state is then found, by inventory and by the
/// knob. With one driver for all CPUs the kernel gives every CPU the same
/// states, so such a tree is not a kernel's and the extra state is not looked for.
#[test]
fn a_cpu_with_more_idle_states_is_found_where_cpus_have_their_own_driver() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let cpu = |n: u32| root.join(format!("sys/devices/system/cpu/cpu{n}/cpuidle"));
    let extra = cpu(1).join("state2");
    std::fs::create_dir(&extra).unwrap();
    for (f, v) in [
        ("name", "C9\n"),
        ("latency", "500\n"),
        ("residency", "900\n"),
    ] {
        std::fs::write(extra.join(f), v).unwrap();
    }
    for (f, v) in [("disable", "0\n"), ("usage", "3\n"), ("time", "4\n")] {
        std::fs::write(extra.join(f), v).unwrap();
    }
    let deep =
        "kind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 400}\nset: disabled\n";
    let tables = |inv: &serde_json::Value| inv["idle"]["state_tables"].clone();

    for n in [0, 1] {
        std::fs::create_dir(cpu(n).join("driver")).unwrap();
        std::fs::write(cpu(n).join("driver/name"), "psci_idle\n").unwrap();
    }
    let inv = json_of(&inventory_json(&root));
    let t = tables(&inv);
    assert_eq!(t[1]["cpus"], "1", "{t}");
    assert!(
        t[1]["value"].as_str().unwrap().ends_with("C9 500/900"),
        "{t}"
    );
    let s = survey(&root, deep);
    let paths: Vec<&str> = s.targets.iter().map(|t| t.path.as_str()).collect();
    assert!(
        paths.contains(&"/sys/devices/system/cpu/cpu1/cpuidle/state2/disable"),
        "{paths:?}"
    );

    for n in [0, 1] {
        std::fs::remove_dir_all(cpu(n).join("driver")).unwrap();
    }
    let inv = json_of(&inventory_json(&root));
    assert!(tables(&inv).is_null(), "{}", tables(&inv));
    let s = survey(&root, deep);
    assert!(
        matches!(s.targets[0].blocker, Some(Blocker::NotApplicable(_))),
        "{:?}",
        s.targets
    );
}

#[test]
fn cpufreq_knobs_are_not_applicable_without_cpufreq() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "cpufreq.yaml",
        &format!(
            "id: gov\n{HEAD}kind: cpufreq-governor\nset: performance\n---\nid: epp\n{HEAD}kind: cpufreq-epp\nset: performance\n"
        ),
    )]);
    let (report, code) = audit_json(&host, m.path(), None);
    assert_eq!(code, 0, "{report:#}");
    for id in ["gov", "epp"] {
        let k = knob(&report, id);
        assert_eq!(k["status"], "not-applicable");
        assert!(
            k["detail"].as_str().unwrap().contains("no cpufreq"),
            "{k:#}"
        );
    }
}

#[test]
fn governor_plans_per_policy_and_refuses_one_the_host_lacks() {
    let host = corpus_host("adl0");
    let p = plan(&host, "kind: cpufreq-governor\nset: performance\n");
    assert_eq!(p.writes.len(), 16);
    let w = &p.writes[0];
    assert_eq!(
        w.path,
        "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"
    );
    assert_eq!(
        (w.before.as_deref(), w.after.as_str()),
        (Some("powersave"), "performance")
    );
    assert_eq!(w.cpus.as_ref().unwrap().to_string(), "0");

    let p = plan(&host, "kind: cpufreq-governor\nset: schedutil\n");
    assert!(p.writes.is_empty());
    assert_eq!(p.blocked.len(), 16);
    match &p.blocked[0].blocker {
        Blocker::Unsupported(r) => {
            assert!(r.contains("schedutil is not available"), "{r}");
            assert!(r.contains("performance powersave"), "{r}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn epp_is_checked_against_the_list_and_the_performance_pin() {
    let adl0 = corpus_host("adl0");
    let p = plan(&adl0, "kind: cpufreq-epp\nset: performance\n");
    assert_eq!(p.writes.len(), 16);
    assert_eq!(
        p.writes[0].path,
        "/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference"
    );
    let p = plan(&adl0, "kind: cpufreq-epp\nset: fastest\n");
    assert!(matches!(&p.blocked[0].blocker, Blocker::Unsupported(r) if r.contains("not accepted")));

    // gnr3: intel_pstate active, governor performance: the kernel would answer EBUSY.
    let gnr3 = corpus_host("gnr3");
    let p = plan(&gnr3, "kind: cpufreq-epp\nset: balance_power\n");
    assert!(p.writes.is_empty());
    assert!(!p.blocked.is_empty());
    assert!(p.blocked.iter().all(|b| matches!(&b.blocker,
        Blocker::Unsupported(r) if r.contains("rejects EPP balance_power while the governor is performance"))));
    // Asking for what the pin holds is fine.
    let p = plan(&gnr3, "kind: cpufreq-epp\nset: performance\n");
    assert!(p.writes.is_empty() && p.blocked.is_empty());
}

#[test]
fn resume_latency_per_cpu_with_missing_cpus_not_applicable() {
    let host = corpus_host("spr1");
    let s = survey(
        &host,
        "kind: pm-qos-resume-latency\ntarget:\n  cpus: 316-330\nset: 20\n",
    );
    let writable: Vec<_> = s.targets.iter().filter(|t| t.blocker.is_none()).collect();
    assert_eq!(writable.len(), 4);
    assert!(
        writable
            .iter()
            .all(|t| t.current.as_deref() == Some("0") && t.write.as_deref() == Some("20"))
    );
    let missing: Vec<_> = s.targets.iter().filter(|t| t.blocker.is_some()).collect();
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].cpus.as_ref().unwrap().to_string(), "320-330");
    // "n/a" is a value of its own (no latency at all), written as such.
    let p = plan(
        &host,
        "kind: pm-qos-resume-latency\ntarget:\n  cpus: 0\nset: n/a\n",
    );
    assert_eq!(p.writes.len(), 1);
    assert_eq!(p.writes[0].after, "n/a");
}

#[test]
fn thp_reads_the_bracketed_choice() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let s = survey(
        &host,
        "kind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    );
    assert_eq!(s.targets[0].current.as_deref(), Some("madvise"));
    assert!(s.targets[0].in_effect);
    let p = plan(
        &host,
        "kind: thp\ntarget: {setting: defrag}\nset: defer+madvise\n",
    );
    assert_eq!(p.writes.len(), 1);
    assert_eq!(
        p.writes[0].path,
        "/sys/kernel/mm/transparent_hugepage/defrag"
    );
    assert_eq!(p.writes[0].before.as_deref(), Some("madvise"));
    assert_eq!(p.writes[0].after, "defer+madvise");
    let p = plan(
        &host,
        "kind: thp\ntarget: {setting: enabled}\nset: sometimes\n",
    );
    assert!(
        matches!(&p.blocked[0].blocker, Blocker::Unsupported(r) if r.contains("always madvise never"))
    );
    // pepc captures carry no THP files.
    let s = survey(
        &corpus_host("spr1"),
        "kind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    );
    assert!(matches!(
        &s.targets[0].blocker,
        Some(Blocker::NotApplicable(_))
    ));
}

#[test]
fn sysctl_maps_the_dotted_name() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let p = plan(
        &host,
        "kind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
    );
    assert_eq!(p.writes.len(), 1);
    assert_eq!(p.writes[0].path, "/proc/sys/vm/swappiness");
    assert_eq!(p.writes[0].before.as_deref(), Some("60"));
    let s = survey(
        &corpus_host("spr1"),
        "kind: sysctl\ntarget: {name: vm.swappiness}\nset: 10\n",
    );
    assert!(
        matches!(&s.targets[0].blocker, Some(Blocker::NotApplicable(r)) if r.contains("no /proc/sys"))
    );
}

#[test]
fn sysfs_globs_group_per_cpu_and_follow_links_inside_sys() {
    let host = corpus_host("spr1");
    let s = survey(
        &host,
        "kind: sysfs\ntarget: {path: \"/sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us\"}\nset: 0\n",
    );
    assert_eq!(s.targets.len(), 320);
    assert!(s.targets.iter().all(|t| t.in_effect));
    let cpus = union(s.targets.iter().map(|t| t.cpus.clone().unwrap()));
    assert_eq!(cpus.to_string(), "0-319");
    // cpu0/cpufreq is a link to ../cpufreq/policy0: inside /sys, accepted.
    let p = plan(
        &host,
        "kind: sysfs\ntarget: {path: /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor}\nset: performance\n",
    );
    assert_eq!(p.writes.len(), 1);
    assert_eq!(p.writes[0].before.as_deref(), Some("powersave"));
    let s = survey(
        &host,
        "kind: sysfs\ntarget: {path: \"/sys/nothing/*/x\"}\nset: 1\n",
    );
    assert!(
        matches!(&s.targets[0].blocker, Some(Blocker::NotApplicable(r)) if r.contains("nothing matches"))
    );
}

#[test]
fn module_param_reads_haltpoll_and_is_not_applicable_without_the_module() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let knob =
        "kind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_ns}\nset: 200000\n";
    let p = plan(&host, knob);
    assert_eq!(p.writes.len(), 1);
    assert_eq!(
        p.writes[0].path,
        "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
    );
    assert_eq!(p.writes[0].before.as_deref(), Some("0"));
    let s = survey(&corpus_host("spr1"), knob);
    assert!(
        matches!(&s.targets[0].blocker, Some(Blocker::NotApplicable(r)) if r.contains("not loaded"))
    );
}

#[test]
fn global_pm_qos_is_read_where_the_device_is() {
    // Captures carry no /dev/cpu_dma_latency.
    let s = survey(&corpus_host("fc-haltpoll-2cpu"), "kind: pm-qos\nset: 20\n");
    assert!(
        matches!(&s.targets[0].blocker, Some(Blocker::NotApplicable(r)) if r.contains("/dev/cpu_dma_latency"))
    );
    // On the live host it is readable only by root; either way it never fails the read.
    let root = Root::open(Path::new("/")).unwrap();
    let ctx = HostCtx::new(&root, "t".into());
    let (_d, m) = load("kind: pm-qos\nset: 20\n");
    let s = m.knobs[0].spec.survey(&ctx).unwrap();
    assert_eq!(s.targets.len(), 1);
    let t = &s.targets[0];
    if t.blocker.is_none() {
        let v: i64 = t.current.as_deref().unwrap().parse().unwrap();
        assert!((0..=2_000_000_000).contains(&v));
        assert_eq!(t.mode, WriteMode::Hold);
    }
}

#[test]
fn allocator_reads_unit_drop_ins_and_plans_a_drop_in() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let knob = "kind: allocator\ntarget: {service: rpc-node.service, variable: _RJEM_MALLOC_CONF}\nset: background_thread:true\n";
    let doc = format!("id: k\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: systemd-dropin\n{knob}");
    let m = manifest(&[("k.yaml", &doc)]);
    // No such unit: not applicable.
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!((knob_status(&r), code), ("not-applicable".to_string(), 0));

    write_files(
        &host,
        &[(
            "etc/systemd/system/rpc-node.service",
            "[Unit]\nDescription=rpc\n[Service]\nExecStart=/usr/bin/rpc-node\nEnvironment=\"_RJEM_MALLOC_CONF=dirty_decay_ms:5000\"\n",
        )],
    );
    let manifest = manifest::load(m.path()).unwrap();
    let root = Root::open(&host).unwrap();
    let ctx = HostCtx::new(&root, "vm".into());
    let p = manifest.knobs[0].spec.plan(&ctx).unwrap();
    assert_eq!(p.writes.len(), 1);
    let w = &p.writes[0];
    assert_eq!(
        w.path,
        "/etc/systemd/system/rpc-node.service.d/zz-hostknob-rjem_malloc_conf.conf"
    );
    assert_eq!(w.mode, WriteMode::File);
    assert_eq!(w.before, None);
    assert!(
        w.after.contains(
            "Environment=\"_RJEM_MALLOC_CONF=dirty_decay_ms:5000,background_thread:true\""
        ),
        "{}",
        w.after
    );
    assert!(
        p.notes.iter().any(|n| n.contains("not running")),
        "{:?}",
        p.notes
    );
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!((knob_status(&r), code), ("drift".to_string(), 2));

    // The drop-in apply would write: now in effect and persisted by it.
    write_files(&host, &[(w.path.trim_start_matches('/'), w.after.as_str())]);
    let back = manifest.knobs[0]
        .spec
        .read_back(&ctx, &w.path)
        .unwrap()
        .unwrap();
    assert!(
        manifest.knobs[0].spec.confirms(&w.expect, &back),
        "{back:?}"
    );
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!((knob_status(&r), code), ("ok".to_string(), 0), "{r:#}");
}

fn knob_status(r: &serde_json::Value) -> String {
    r["knobs"][0]["status"].as_str().unwrap().to_string()
}

#[test]
fn allocator_reads_a_running_process_environment() {
    // A real process on the live host, found by its name; nothing is written.
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("hk-alloc-test");
    // A link, not a copy: the name becomes the process's comm, and no file
    // open for writing can race a fork in another test thread (ETXTBSY).
    std::os::unix::fs::symlink("/bin/sleep", &exe).unwrap();
    let mut child = std::process::Command::new(&exe)
        .arg("30")
        .env("MALLOC_CONF", "background_thread:true,narenas:2")
        .spawn()
        .unwrap();
    // Until the child has exec'd, its comm and environ are the test's own;
    // during exec the comm changes before the new environment is mapped.
    let comm = format!("/proc/{}/comm", child.id());
    let environ = format!("/proc/{}/environ", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let execd = || {
        std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "hk-alloc-test")
            && std::fs::read(&environ).is_ok_and(|e| e.windows(11).any(|w| w == b"MALLOC_CONF"))
    };
    while !execd() {
        assert!(std::time::Instant::now() < deadline, "child never exec'd");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let m = manifest(&[(
        "k.yaml",
        "id: k\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: systemd-dropin\nkind: allocator\ntarget: {service: hk-alloc-test.service, process: hk-alloc-test}\nset: background_thread:true\n",
    )]);
    let manifest = manifest::load(m.path()).unwrap();
    let root = Root::open(Path::new("/")).unwrap();
    let ctx = HostCtx::new(&root, "t".into());
    let s = manifest.knobs[0].spec.survey(&ctx);
    child.kill().unwrap();
    child.wait().unwrap();
    let s = s.unwrap();
    let procs: Vec<_> = s
        .targets
        .iter()
        .filter(|t| t.path == format!("/proc/{}/environ", child.id()))
        .collect();
    assert_eq!(procs.len(), 1, "{:#?}", s.targets);
    assert_eq!(
        procs[0].current.as_deref(),
        Some("background_thread:true,narenas:2")
    );
    assert!(procs[0].in_effect);
    assert!(
        procs[0].write.is_none(),
        "a process environment is observed, never written"
    );
    // No unit carries it: the drop-in target is not in effect.
    let unit = s
        .targets
        .iter()
        .find(|t| t.mode == WriteMode::File && t.write.is_some())
        .unwrap();
    assert!(!unit.in_effect);
}

/// What apply (issue 4) will do with a plan, done by hand on a copy: every
/// write's `after` goes in, `read_back` confirms it, a second plan is empty,
/// and writing every `before` back restores the tree exactly.
fn write_read_back_restore(host_name: &str, knobs: &[&str]) {
    let (_tmp, host) = copy_host(host_name);
    let pristine = snapshot(&host);
    let docs: Vec<String> = knobs
        .iter()
        .enumerate()
        .map(|(i, k)| format!("id: k{i}\n{HEAD}{k}"))
        .collect();
    let m = manifest(&[("k.yaml", &docs.join("---\n"))]);
    let manifest = manifest::load(m.path()).unwrap_or_else(|e| panic!("{e}"));
    let root = Root::open(&host).unwrap();
    assert!(!root.is_live());
    let mut written = std::collections::BTreeSet::new();
    for knob in &manifest.knobs {
        let ctx = HostCtx::new(&root, "t".into());
        let plan = knob.spec.plan(&ctx).unwrap();
        assert!(!plan.writes.is_empty(), "{}: nothing to write", knob.id);
        for w in &plan.writes {
            match w.mode {
                WriteMode::Attribute => root.write_existing(&w.path, w.after.as_bytes()).unwrap(),
                WriteMode::File => {
                    write_files(&host, &[(w.path.trim_start_matches('/'), &w.after)])
                }
                WriteMode::Hold => unreachable!("captures hold no /dev/cpu_dma_latency"),
                WriteMode::Msr => unreachable!("no MSR knob here: tests/suite/msr_knobs.rs"),
                WriteMode::Affinity | WriteMode::Sched => {
                    unreachable!(
                        "captures keep no threads: tests/suite/thread_affinity.rs, thread_policy.rs"
                    )
                }
            }
            let back = knob.spec.read_back(&ctx, &w.path).unwrap().unwrap();
            assert!(
                knob.spec.confirms(&w.expect, &back),
                "{}: {} read back {back:?}, expected {:?}",
                knob.id,
                w.path,
                w.expect
            );
            written.insert(host.join(w.path.trim_start_matches('/')));
        }
        let again = knob.spec.plan(&HostCtx::new(&root, "t".into())).unwrap();
        assert!(
            again.writes.is_empty(),
            "{}: still plans {:?}",
            knob.id,
            again.writes
        );
        for w in &plan.writes {
            match &w.before {
                Some(b) => {
                    root.write_existing(&w.path, b.as_bytes()).unwrap();
                    // A capture's file is plain text, not the kernel's attribute: compare
                    // in the knob's words (`always [madvise] never` is `madvise`).
                    let back = knob.spec.read_back(&ctx, &w.path).unwrap().unwrap();
                    assert_eq!(back, knob.spec.normalize(b), "{}: {}", knob.id, w.path);
                }
                None => std::fs::remove_file(host.join(w.path.trim_start_matches('/'))).unwrap(),
            }
        }
    }
    assert!(!written.is_empty());
    // Nothing else was touched.
    let now = snapshot(&host);
    let untouched = |s: &std::collections::BTreeMap<
        std::path::PathBuf,
        (Vec<u8>, Option<std::time::SystemTime>),
    >| {
        s.iter()
            .filter(|(p, _)| !written.contains(*p) && !p.to_string_lossy().contains(".service.d"))
            .map(|(p, c)| (p.clone(), c.clone()))
            .collect::<Vec<_>>()
    };
    let (a, b) = (untouched(&pristine), untouched(&now));
    assert_eq!(a.len(), b.len());
    if let Some((x, y)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        panic!("changed: {} vs {}", x.0.display(), y.0.display());
    }
}

#[test]
fn plans_write_read_back_and_restore_on_adl0() {
    write_read_back_restore(
        "adl0",
        &[
            "kind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 100}\nset: disabled\n",
            "kind: cpufreq-governor\nset: performance\n",
            "kind: cpufreq-epp\ntarget: {cpus: 0-7}\nset: balance_power\n",
            "kind: pm-qos-resume-latency\ntarget: {cpus: 8-15}\nset: n/a\n",
            "kind: sysfs\ntarget: {path: \"/sys/devices/system/cpu/cpu*/power/energy_perf_bias\"}\nset: 0\n",
        ],
    );
}

#[test]
fn plans_write_read_back_and_restore_on_the_vm() {
    write_read_back_restore(
        "fc-haltpoll-2cpu",
        &[
            "kind: thp\ntarget: {setting: enabled}\nset: never\n",
            "kind: sysctl\ntarget: {name: kernel.timer_migration}\nset: 0\n",
            "kind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_ns}\nset: 200000\n",
        ],
    );
}
