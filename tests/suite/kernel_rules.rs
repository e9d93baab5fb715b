//! The kernel's rules per kind (issue 10), on copies of real hosts: a
//! captured tree takes any write and echoes it back, so each test checks what
//! the kernel documents it would do instead: refuse an EPP write under the
//! performance governor, print a preset's name, print bools as Y/N, treat
//! `-` and `_` in module names alike, swap `.` and `/` in sysctl.d names.

use std::collections::HashMap;
use std::path::Path;

use crate::support::*;

const GOVERNOR_POWERSAVE: &str = "persistence: runtime\nkind: cpufreq-governor\nset: powersave\n";
const GOVERNOR_PERFORMANCE: &str =
    "persistence: runtime\nkind: cpufreq-governor\nset: performance\n";

fn epp(value: &str) -> String {
    format!("persistence: runtime\nkind: cpufreq-epp\nset: {value}\n")
}

/// intel_pstate.rst, Active Mode With HWP: under the performance governor
/// any EPP but performance (0) is rejected. Replays `log` (path, value per
/// write, in order) from the governors the tree held and returns every write
/// the kernel would have refused.
fn refused_by_intel_pstate(root: &Path, log: &str) -> Vec<String> {
    let mut governor: HashMap<String, String> = HashMap::new();
    let mut refused = Vec::new();
    for line in log.lines() {
        let (path, value) = line.split_once('\t').unwrap();
        let dir = path.rsplit_once('/').unwrap().0.to_string();
        if path.ends_with("/scaling_governor") {
            governor.insert(dir, value.to_string());
        } else if path.ends_with("/energy_performance_preference") {
            let now = governor.get(&dir).cloned().unwrap_or_else(|| {
                std::fs::read_to_string(
                    root.join(dir.trim_start_matches('/'))
                        .join("scaling_governor"),
                )
                .unwrap()
                .trim()
                .to_string()
            });
            if now == "performance" && !["performance", "0"].contains(&value) {
                refused.push(format!("{path} = {value} under {now}"));
            }
        }
    }
    refused
}

#[test]
fn governor_and_epp_in_one_apply_plan_against_the_governor_the_apply_leaves() {
    // gnr3 runs performance: EPP balance_power is fine once the same apply
    // has set powersave (it used to be refused against the current governor).
    let gnr3 = corpus_host("gnr3");
    let m = knobs(&[("epp", &epp("balance_power")), ("gov", GOVERNOR_POWERSAVE)]);
    let text = ok(&run(&gnr3, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(
        text.contains("dry run: 512 files would be written"),
        "{text}"
    );
    // spr1 runs powersave: setting performance and balance_power together is
    // what the kernel refuses; it is refused at plan time with the order that works.
    let spr1 = corpus_host("spr1");
    let m = knobs(&[
        ("epp", &epp("balance_power")),
        ("gov", GOVERNOR_PERFORMANCE),
    ]);
    let o = run(&spr1, m.path(), &["apply", "--all", "--dry-run"]);
    let msg = refused(
        &o,
        &["epp", "sets the governor to performance first", "powersave"],
    );
    assert!(msg.contains("intel_pstate.rst"), "{msg}");
}

#[test]
fn revert_restores_the_governor_before_the_epp_it_allows() {
    // adl0: intel_pstate active, powersave, balance_performance on 16 policies.
    let (_tmp, root) = copy_host("adl0");
    let pristine = tree(&root);
    let m = knobs(&[("epp", &epp("performance")), ("gov", GOVERNOR_PERFORMANCE)]);
    let log = tempfile::NamedTempFile::new().unwrap();
    let with_log = |args: &[&str]| {
        let o = command(&root, m.path(), args)
            .env(hostknob::apply::LOG_VAR, log.path())
            .output()
            .unwrap();
        ok(&o)
    };
    with_log(&["apply", "--all"]);
    with_log(&["revert", "--all"]);
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(log.lines().count(), 4 * 16, "{log}");
    let refused = refused_by_intel_pstate(&corpus_host("adl0"), &log);
    assert!(
        refused.is_empty(),
        "{:#?}",
        &refused[..refused.len().min(3)]
    );
    assert_tree(&pristine, &root, "adl0 after revert");
}

#[test]
fn epp_presets_read_back_as_their_numbers_and_default_is_refused() {
    // spr1 reads balance_performance, which is 32 on Sapphire Rapids
    // (intel_epp_default[]): a knob set to 32 is in effect (128 is not:
    // kernel_rules_epp).
    let spr1 = corpus_host("spr1");
    let m = knobs(&[("epp", &epp("32"))]);
    let (report, _) = audit_json(&spr1, m.path(), Some("spr1"));
    // In effect; only not persisted.
    assert_eq!(knob(&report, "epp")["status"], "unpersisted", "{report:#}");
    let text = ok(&run(&spr1, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(text.contains("nothing to write"), "{text}");
    // `default` is written but never read back: refused, with what to set instead.
    let m = knobs(&[("epp", &epp("default"))]);
    let o = run(&spr1, m.path(), &["apply", "--all", "--dry-run"]);
    refused(&o, &["never reads it back", "preset or number"]);
}

#[test]
fn a_survey_after_a_write_reads_the_value_fresh() {
    use hostknob::knob::{HostCtx, KindName, build};
    let (_tmp, root) = copy_host("spr1");
    let r = hostknob::root::Root::open(&root).unwrap();
    let host = HostCtx::new(&r, "spr1".into());
    let knob = build(
        KindName::CpufreqGovernor,
        "id: g\ntitle: g\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: cpufreq-governor\nset: performance\n",
    ).ok().unwrap();
    let before = knob.read(&host).unwrap();
    assert_eq!(before[0].value.as_deref(), Some("powersave"));
    std::fs::write(
        root.join("sys/devices/system/cpu/cpufreq/policy0/scaling_governor"),
        "performance\n",
    )
    .unwrap();
    let after = knob.read(&host).unwrap();
    assert_eq!(after[0].value.as_deref(), Some("performance"), "{after:?}");
}

#[test]
fn module_params_compare_bools_as_bools_and_dashes_as_underscores() {
    let (_tmp, root) = vm();
    let m = knobs(&[
        (
            "shrink",
            "persistence: runtime\nkind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_allow_shrink}\nset: true\n",
        ),
        (
            "force",
            "persistence: runtime\nkind: module-param\ntarget: {module: cpuidle-haltpoll, param: force}\nset: yes\n",
        ),
    ]);
    // The kernel prints bools as Y: `true` and `yes` are in effect, not drift;
    // `cpuidle-haltpoll` is /sys/module/cpuidle_haltpoll, not absent.
    let (report, _) = audit_json(&root, m.path(), None);
    for id in ["shrink", "force"] {
        assert_eq!(
            knob(&report, id)["status"],
            "unpersisted",
            "{id}: {report:#}"
        );
    }
    let text = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(text.contains("nothing to write"), "{text}");
    // Set to false, it writes the kernel's own word and reads it back.
    let pristine = tree(&root);
    let off = knobs(&[(
        "shrink",
        "persistence: runtime\nkind: module-param\ntarget: {module: haltpoll, param: guest_halt_poll_allow_shrink}\nset: false\n",
    )]);
    ok(&run(&root, off.path(), &["apply", "shrink"]));
    let file = root.join("sys/module/haltpoll/parameters/guest_halt_poll_allow_shrink");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "N");
    let (report, _) = audit_json(&root, off.path(), None);
    assert_eq!(knob(&report, "shrink")["status"], "unpersisted");
    ok(&run(&root, off.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "vm after revert");
}

#[test]
fn sysctl_d_names_swap_dots_and_slashes_in_knobs_and_in_audit() {
    let (_tmp, root) = vm();
    write_files(
        &root,
        &[
            ("proc/sys/net/ipv4/conf/eth0.100/rp_filter", "0\n"),
            (
                "etc/sysctl.d/50-vlan.conf",
                "net.ipv4.conf.eth0/100.rp_filter = 1\n",
            ),
        ],
    );
    let m = knobs(&[(
        "rp",
        "persistence: sysctl.d\nkind: sysctl\ntarget: {name: net.ipv4.conf.eth0/100.rp_filter}\nset: 1\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "rp"]));
    assert_eq!(
        std::fs::read_to_string(root.join("proc/sys/net/ipv4/conf/eth0.100/rp_filter")).unwrap(),
        "1"
    );
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "rp");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
    assert_eq!(k["persisted_by"], "/etc/sysctl.d/50-vlan.conf:1");
}

#[test]
fn a_persisted_value_with_a_percent_sign_audits_as_persisted() {
    let (_tmp, root) = vm();
    let m = knobs(&[(
        "grow",
        "persistence: tmpfiles\nkind: sysfs\ntarget: {path: /sys/module/haltpoll/parameters/guest_halt_poll_grow}\nset: \"50%\"\n",
    )]);
    let text = ok(&run(&root, m.path(), &["persist", "grow", "--install"]));
    assert!(text.contains("installed"), "{text}");
    let conf = std::fs::read_to_string(root.join("etc/tmpfiles.d/hostknob-20-grow.conf")).unwrap();
    assert!(conf.contains(" 50%%\n"), "{conf}");
    ok(&run(&root, m.path(), &["apply", "grow"]));
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "grow");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
}

#[test]
fn hostknobs_own_persistence_is_no_other_manager_and_others_are_grouped() {
    let (_tmp, root) = copy_host("spr1");
    let m = knobs(&[(
        "gov",
        "persistence: tmpfiles\nkind: cpufreq-governor\nset: performance\n",
    )]);
    ok(&run(&root, m.path(), &["persist", "gov", "--install"]));
    ok(&run(&root, m.path(), &["apply", "gov"]));
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "gov");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
    assert_eq!(k["managers"].as_array().map_or(0, Vec::len), 0, "{k:#}");
    // Another tool's file with a line per policy is one finding, not 320.
    let lines: String = (0..320)
        .map(|p| {
            format!(
                "w /sys/devices/system/cpu/cpufreq/policy{p}/scaling_governor - - - - powersave\n"
            )
        })
        .collect();
    write_files(&root, &[("etc/tmpfiles.d/vendor-tuning.conf", &lines)]);
    let (report, _) = audit_json(&root, m.path(), None);
    let managers = knob(&report, "gov")["managers"].as_array().unwrap().clone();
    assert_eq!(managers.len(), 1, "{managers:#?}");
    let evidence = managers[0]["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with(
            "/etc/tmpfiles.d/vendor-tuning.conf:1-320 (320 lines) writes \"powersave\""
        ),
        "{evidence}"
    );
}

#[test]
fn a_pm_qos_knob_is_held_by_hold_not_failed_by_apply() {
    let (_tmp, root) = vm();
    // A PM QoS device as the kernel shows it: the aggregate, 4 bytes (no request).
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let device = root.join("dev/cpu_dma_latency");
    std::fs::write(&device, 2_000_000_000i32.to_ne_bytes()).unwrap();
    let m = knobs(&[("qos", "persistence: hold\nkind: pm-qos\nset: 20\n")]);
    // apply --all used to fail ("apply cannot hold it"); it writes nothing and says what holds it.
    let before = tree(&root);
    let text = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(text.contains(" hold qos` holds 20 µs"), "{text}");
    assert_tree(&before, &root, "apply of a pm-qos knob");
    // persist writes the hold unit, named as the hold command's instance.
    let unit = ok(&run(&root, m.path(), &["persist", "qos"]));
    assert!(
        unit.contains("ExecStart=hostknob hold --manifest "),
        "{unit}"
    );
    // hold: writes the value, reports the aggregate, waits; SIGTERM ends it cleanly.
    let mut child = command(&root, m.path(), &["hold", "qos"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(
        first.contains("/dev/cpu_dma_latency held at 20 µs; the kernel's aggregate reads 20 µs"),
        "{first}"
    );
    assert_eq!(std::fs::read(&device).unwrap(), 20i32.to_ne_bytes());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains("released on SIGTERM"), "{rest}");
    // Only pm-qos knobs can be held.
    let m = knobs(&VM_KNOBS[..1]);
    let o = run(&root, m.path(), &["hold", "idle"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("hold takes pm-qos knobs only"),
        "{}",
        err(&o)
    );
}

#[test]
fn the_allocator_drop_in_sorts_after_override_conf_and_is_checked_in_effect() {
    let (_tmp, root) = vm();
    // `systemctl edit` wrote an override that sets the same variable.
    write_files(
        &root,
        &[(
            "etc/systemd/system/rpc-node.service.d/override.conf",
            "[Service]\nEnvironment=\"_RJEM_MALLOC_CONF=narenas:2\"\n",
        )],
    );
    let m = knobs(&VM_KNOBS[4..]);
    ok(&run(&root, m.path(), &["apply", "jemalloc"]));
    let dropins: Vec<String> =
        std::fs::read_dir(root.join("etc/systemd/system/rpc-node.service.d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
    let ours = dropins.iter().find(|n| n.contains("hostknob")).unwrap();
    assert!(ours.as_str() > "override.conf", "{dropins:?}");
    // The effective environment (drop-ins in name order) is ours: in effect.
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "jemalloc")["status"], "ok", "{report:#}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    // A drop-in that sorts after ours wins: apply's read-back says so and rolls back.
    write_files(
        &root,
        &[(
            "etc/systemd/system/rpc-node.service.d/zzz-late.conf",
            "[Service]\nEnvironment=\"_RJEM_MALLOC_CONF=narenas:2\"\n",
        )],
    );
    let before = tree(&root);
    let o = run(&root, m.path(), &["apply", "jemalloc"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err(&o).contains("overrides it"), "{}", err(&o));
    assert_tree(&before, &root, "after the rolled-back apply");
}

#[test]
fn a_prefix_drop_in_directory_counts_in_the_effective_environment() {
    let (_tmp, root) = vm();
    // systemd.unit(5): rpc-node.service also reads rpc-.service.d/ and service.d/;
    // drop-ins from all of them apply in file-name order.
    write_files(
        &root,
        &[(
            "etc/systemd/system/rpc-.service.d/zzzz-fleet.conf",
            "[Service]\nEnvironment=\"_RJEM_MALLOC_CONF=narenas:2\"\n",
        )],
    );
    let m = knobs(&VM_KNOBS[4..]);
    let before = tree(&root);
    let o = run(&root, m.path(), &["apply", "jemalloc"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err(&o).contains("overrides it"), "{}", err(&o));
    assert_tree(&before, &root, "after the rolled-back apply");
    // A same-named file in the unit's own directory is the more specific one and wins.
    write_files(
        &root,
        &[(
            "etc/systemd/system/rpc-node.service.d/zzzz-fleet.conf",
            "[Service]\n",
        )],
    );
    ok(&run(&root, m.path(), &["apply", "jemalloc"]));
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "jemalloc")["status"], "ok", "{report:#}");
}

#[test]
fn an_environment_file_overrides_the_allocator_drop_in() {
    let (_tmp, root) = vm();
    // systemd.exec(5): a variable from EnvironmentFile= wins over Environment=,
    // whatever the drop-ins' order.
    write_files(
        &root,
        &[
            (
                "etc/systemd/system/rpc-node.service.d/10-env.conf",
                "[Service]\nEnvironmentFile=-/etc/default/rpc-node\n",
            ),
            (
                "etc/default/rpc-node",
                "# from the package\n_RJEM_MALLOC_CONF=\"narenas:2\"\n",
            ),
        ],
    );
    let m = knobs(&VM_KNOBS[4..]);
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "jemalloc");
    assert_eq!(k["status"], "drift", "{report:#}");
    assert!(k.to_string().contains("narenas:2"), "{k:#}");
    let before = tree(&root);
    let o = run(&root, m.path(), &["apply", "jemalloc"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err(&o).contains("EnvironmentFile"), "{}", err(&o));
    assert_tree(&before, &root, "after the rolled-back apply");
    // Without the file (the `-` lets it be missing) the drop-in takes effect.
    std::fs::remove_file(root.join("etc/default/rpc-node")).unwrap();
    ok(&run(&root, m.path(), &["apply", "jemalloc"]));
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "jemalloc")["status"], "ok", "{report:#}");
}

#[test]
fn cpuidle_knobs_persist_by_a_boot_unit_and_tmpfiles_says_what_it_pins() {
    let (_tmp, root) = vm();
    let idle = |persistence: &str| {
        VM_KNOBS[0].1.replace(
            "persistence: runtime",
            &format!("persistence: {persistence}"),
        )
    };
    let m = knobs(&[("idle", &idle("tmpfiles"))]);
    let o = run(&root, m.path(), &["persist", "idle"]);
    assert!(
        out(&o).contains("cpu1/cpuidle/state1/disable"),
        "{}",
        out(&o)
    );
    let hints = err(&o);
    assert!(
        hints.contains("pin idle-state indexes (state1) for haltpoll idle")
            && hints.contains("`persistence: boot`"),
        "{hints}"
    );
    // A runtime knob is told the boot unit first.
    let m = knobs(&[("idle", &idle("runtime"))]);
    let text = ok(&run(&root, m.path(), &["apply", "idle", "--dry-run"]));
    assert!(text.contains("`persistence: boot | tmpfiles`"), "{text}");
    // persistence: boot installs the knob's unit; audit wants it enabled too.
    let m = knobs(&[("idle", &idle("boot"))]);
    ok(&run(&root, m.path(), &["persist", "idle", "--install"]));
    let unit = std::fs::read_to_string(root.join("etc/systemd/system/hostknob-boot@idle.service"))
        .unwrap();
    assert!(
        unit.contains("ExecStart=hostknob apply --wait --manifest ")
            && unit.contains("Type=oneshot"),
        "{unit}"
    );
    ok(&run(&root, m.path(), &["apply", "idle"]));
    let (report, _) = audit_json(&root, m.path(), None);
    let k = knob(&report, "idle");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("hostknob-boot@idle.service is not enabled"),
        "{k:#}"
    );
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "../hostknob-boot@idle.service",
        wants.join("hostknob-boot@idle.service"),
    )
    .unwrap();
    let (report, code) = audit_json(&root, m.path(), None);
    assert_eq!(
        (knob(&report, "idle")["status"].as_str(), code),
        (Some("ok"), 0),
        "{report:#}"
    );
}

/// Whether the host's driver pins EPP under the performance governor
/// (intel_pstate active, amd-pstate-epp), read from the tree.
fn pins_epp(root: &Path) -> bool {
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p))
            .map(|t| t.trim().to_string())
            .ok()
    };
    let driver = read("sys/devices/system/cpu/cpufreq/policy0/scaling_driver");
    match driver.as_deref() {
        Some("intel_pstate") => {
            read("sys/devices/system/cpu/intel_pstate/status").as_deref() == Some("active")
        }
        Some("amd-pstate-epp") => true,
        _ => false,
    }
}

#[test]
fn the_shipped_catalog_plans_or_refuses_with_a_reason_on_every_corpus_host() {
    let manifest = repo().join("manifest");
    let (mut planned, mut refusals) = (0, 0);
    for name in corpus_hosts() {
        let root = corpus_host(&name);
        let o = run(
            &root,
            &manifest,
            &["apply", "--all", "--dry-run", "--format", "json"],
        );
        match o.status.code() {
            Some(0) => planned += 1,
            Some(1) => {
                let e = err(&o);
                assert!(
                    e.trim().lines().count() == 1 && e.trim().ends_with("nothing was changed"),
                    "{name}: a refusal is one line with its reason: {e}"
                );
                refusals += 1;
                continue;
            }
            other => panic!("{name}: exit {other:?}: {}", err(&o)),
        }
        let plan: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
        let groups: Vec<&serde_json::Value> = plan["knobs"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|k| k["changes"].as_array().unwrap())
            .collect();
        let afters = |leaf: &str| -> Vec<String> {
            groups
                .iter()
                .filter(|g| g["path"].as_str().unwrap().ends_with(leaf))
                .map(|g| g["after"].as_str().unwrap_or("").to_string())
                .collect()
        };
        let mut governors = afters("/scaling_governor");
        if governors.is_empty() {
            let dir = root.join("sys/devices/system/cpu/cpufreq");
            for e in std::fs::read_dir(&dir).into_iter().flatten() {
                if let Ok(g) = std::fs::read_to_string(e.unwrap().path().join("scaling_governor")) {
                    governors.push(g.trim().to_string());
                }
            }
        }
        let epp = afters("/energy_performance_preference");
        let refused_by_kernel = pins_epp(&root)
            && governors.iter().any(|g| g == "performance")
            && epp.iter().any(|v| v != "performance" && v != "0");
        assert!(
            !refused_by_kernel,
            "{name}: EPP {epp:?} under governor performance: the kernel refuses that"
        );
    }
    assert!(
        planned > 0,
        "no corpus host planned: the test checks nothing"
    );
    eprintln!("shipped catalog: {planned} hosts planned, {refusals} refused with a reason");
}
