//! Issue 20 items 6 and 20: what `persist` installs runs at boot in the
//! kernel's write order (the governor before EPP, which the performance
//! governor refuses), boot units wait for each other's lock and name the
//! manifest they apply from; files an older hostknob named otherwise are
//! still found by audit and replaced by `--install`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::support::*;

const CPUFREQ: &str = "sys/devices/system/cpu/cpufreq";

fn epp(persistence: &str) -> String {
    format!("persistence: {persistence}\nkind: cpufreq-epp\nset: balance_power\n")
}

fn gov(persistence: &str) -> String {
    format!("persistence: {persistence}\nkind: cpufreq-governor\nset: powersave\n")
}

/// `systemd-tmpfiles --create` as the boot runs it (every tmpfiles.d
/// directory of the tree, files in name order), confined to `root`; the
/// files it wrote, in order, from its debug log.
fn boot_tmpfiles(root: &Path) -> Vec<String> {
    let o = Command::new("systemd-tmpfiles")
        .arg(format!("--root={}", root.display()))
        .arg("--create")
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .output()
        .expect("systemd-tmpfiles (Debian package systemd; .ci/run installs it)");
    let log = err(&o);
    assert!(o.status.success(), "{log}");
    let prefix = root.display().to_string();
    log.lines()
        .filter_map(|l| l.strip_prefix("Writing to \"")?.strip_suffix("\"."))
        .map(|p| p.strip_prefix(&prefix).unwrap_or(p).to_string())
        .collect()
}

/// intel_pstate.rst, Active Mode With HWP: under the performance governor
/// any EPP but performance is refused (EBUSY). Replays `writes` from a boot
/// under the performance governor (CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE)
/// with the values the files now hold; returns the writes refused.
fn refused_at_boot(root: &Path, writes: &[String]) -> Vec<String> {
    let mut governor: HashMap<&str, String> = HashMap::new();
    let mut refused = Vec::new();
    for path in writes {
        let value = std::fs::read_to_string(root.join(path.trim_start_matches('/'))).unwrap();
        let (dir, file) = path.rsplit_once('/').unwrap();
        match file {
            "scaling_governor" => {
                governor.insert(dir, value);
            }
            "energy_performance_preference" => {
                let now = governor.get(dir).map_or("performance", |g| g.as_str());
                if now == "performance" && value != "performance" {
                    refused.push(format!("{path} = {value} under {now}"));
                }
            }
            _ => {}
        }
    }
    refused
}

/// Every policy's governor and EPP file emptied: systemd-tmpfiles writes a
/// `w` line without truncating, which a kernel attribute takes as the whole
/// value and a plain file of a capture does only when empty.
fn empty_cpufreq(root: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(root.join(CPUFREQ)).unwrap() {
        let dir = e.unwrap().path();
        if dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("policy")
        {
            for f in ["scaling_governor", "energy_performance_preference"] {
                std::fs::write(dir.join(f), "").unwrap();
            }
            n += 1;
        }
    }
    n
}

fn tmpfiles_dir(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("etc/tmpfiles.d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn tmpfiles_files_are_named_by_phase_so_the_boot_writes_the_governor_before_epp() {
    // adl0: intel_pstate active, powersave, 16 policies. By id, a-epp's file
    // would sort (and be written at boot) before z-gov's.
    let (_t, root) = copy_host("adl0");
    let m = knobs(&[("a-epp", &epp("tmpfiles")), ("z-gov", &gov("tmpfiles"))]);
    for id in ["a-epp", "z-gov"] {
        ok(&run(&root, m.path(), &["persist", id, "--install"]));
    }
    assert_eq!(
        tmpfiles_dir(&root),
        ["hostknob-10-z-gov.conf", "hostknob-30-a-epp.conf"]
    );
    let policies = empty_cpufreq(&root);
    assert_eq!(policies, 16);
    let writes = boot_tmpfiles(&root);
    assert_eq!(writes.len(), 2 * policies, "{writes:#?}");
    assert_eq!(refused_at_boot(&root, &writes), Vec::<String>::new());
    let first_epp = writes.iter().position(|w| w.ends_with("preference"));
    assert_eq!(
        first_epp,
        Some(policies),
        "every governor first: {writes:#?}"
    );
    for p in 0..policies {
        let dir = root.join(CPUFREQ).join(format!("policy{p}"));
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("scaling_governor"), "powersave");
        assert_eq!(read("energy_performance_preference"), "balance_power");
    }

    // The same lines under the names an older hostknob gave them: the boot
    // writes EPP first, and the kernel refuses it. The check above means something.
    let dir = root.join("etc/tmpfiles.d");
    for (new, old) in [
        ("hostknob-10-z-gov.conf", "hostknob-z-gov.conf"),
        ("hostknob-30-a-epp.conf", "hostknob-a-epp.conf"),
    ] {
        std::fs::rename(dir.join(new), dir.join(old)).unwrap();
    }
    empty_cpufreq(&root);
    let writes = boot_tmpfiles(&root);
    assert_eq!(
        refused_at_boot(&root, &writes).len(),
        policies,
        "{writes:#?}"
    );

    // persist --install moves them to the phase names (and says so first).
    let o = run(&root, m.path(), &["persist", "a-epp"]);
    assert!(
        err(&o).contains("--install replaces /etc/tmpfiles.d/hostknob-a-epp.conf"),
        "{}",
        err(&o)
    );
    for id in ["a-epp", "z-gov"] {
        ok(&run(&root, m.path(), &["persist", id, "--install"]));
    }
    assert_eq!(
        tmpfiles_dir(&root),
        ["hostknob-10-z-gov.conf", "hostknob-30-a-epp.conf"]
    );
    let ledger = ledger_text(&root);
    assert!(
        ledger.contains("/etc/tmpfiles.d/hostknob-a-epp.conf"),
        "{ledger}"
    );
}

#[test]
fn audit_finds_a_file_installed_under_the_old_name_and_install_replaces_only_its_own() {
    let (_t, root) = vm();
    let idle = VM_KNOBS[0]
        .1
        .replace("persistence: runtime", "persistence: tmpfiles");
    let m = knobs(&[("idle", &idle)]);
    ok(&run(&root, m.path(), &["apply", "idle"]));
    let text = ok(&run(&root, m.path(), &["persist", "idle"]));
    let dir = root.join("etc/tmpfiles.d");
    std::fs::create_dir_all(&dir).unwrap();
    // What an older hostknob installed: the same file under hostknob-ID.conf.
    std::fs::write(dir.join("hostknob-idle.conf"), &text).unwrap();
    let (r, code) = audit_json(&root, m.path(), None);
    let k = knob(&r, "idle");
    assert_eq!((k["status"].as_str(), code), (Some("ok"), 0), "{k:#}");
    let by = k["persisted_by"].as_str().unwrap();
    assert!(
        by.starts_with("/etc/tmpfiles.d/hostknob-idle.conf (2 lines)")
            && by.contains("older hostknob's name")
            && by.contains(" persist idle --install"),
        "{by}"
    );
    assert!(
        !k["managers"].to_string().contains("hostknob-idle.conf"),
        "its own file is no other manager: {k:#}"
    );

    let o = ok(&run(&root, m.path(), &["persist", "idle", "--install"]));
    assert!(
        o.contains("idle: installed /etc/tmpfiles.d/hostknob-20-idle.conf"),
        "{o}"
    );
    assert_eq!(tmpfiles_dir(&root), ["hostknob-20-idle.conf"]);
    let (r, _) = audit_json(&root, m.path(), None);
    assert_eq!(
        knob(&r, "idle")["persisted_by"],
        "/etc/tmpfiles.d/hostknob-20-idle.conf (2 lines)"
    );

    // A file of that name that hostknob did not write is left alone.
    let hand = "w /sys/devices/system/cpu/cpu0/cpuidle/state1/disable - - - - 1\n";
    std::fs::write(dir.join("hostknob-idle.conf"), hand).unwrap();
    ok(&run(&root, m.path(), &["persist", "idle", "--remove"]));
    assert_eq!(tmpfiles_dir(&root), ["hostknob-idle.conf"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("hostknob-idle.conf")).unwrap(),
        hand
    );
    // Its own, under the old name alone: --remove takes it, and says which.
    std::fs::write(dir.join("hostknob-idle.conf"), &text).unwrap();
    let o = ok(&run(&root, m.path(), &["persist", "idle", "--remove"]));
    assert!(
        o.contains("idle: removed /etc/tmpfiles.d/hostknob-idle.conf"),
        "{o}"
    );
    assert_eq!(tmpfiles_dir(&root), Vec::<String>::new());
}

fn unit(root: &Path, id: &str) -> String {
    let p = root.join(format!("etc/systemd/system/hostknob-boot@{id}.service"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn enable(root: &Path, unit: &str) {
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{unit}"), wants.join(unit)).unwrap();
}

#[test]
fn boot_units_wait_for_the_lock_run_in_phase_order_and_name_their_manifest() {
    let (_t, root) = copy_host("adl0");
    let idle = "persistence: boot\nkind: cpuidle-state\ntarget:\n  states: {names: [C10]}\nset: disabled\n";
    let m = knobs(&[
        ("a-epp", &epp("boot")),
        ("z-gov", &gov("boot")),
        ("idle", idle),
    ]);
    let dir = m.path().display().to_string();
    for id in ["a-epp", "z-gov", "idle"] {
        let o = ok(&run(&root, m.path(), &["persist", id, "--install"]));
        assert!(
            o.contains(&format!(
                "{id}: installed /etc/systemd/system/hostknob-boot@{id}.service"
            )) && o.contains(&format!("systemctl enable hostknob-boot@{id}.service"))
                && o.contains(&format!("reads the manifest at {dir}, outside --root")),
            "{o}"
        );
    }
    let (e, g, i) = (
        unit(&root, "a-epp"),
        unit(&root, "z-gov"),
        unit(&root, "idle"),
    );
    for (id, u) in [("a-epp", &e), ("z-gov", &g), ("idle", &i)] {
        assert!(
            u.contains(&format!(
                "\nExecStart=hostknob apply --wait --manifest {dir} {id}\n"
            )) && u.contains("\nType=oneshot\n"),
            "{u}"
        );
    }
    // Phases (src/knob/rules/mod.rs kind_phase): governor 1, cpuidle 2, EPP 3.
    assert!(
        e.contains("\nAfter=hostknob-boot@z-gov.service hostknob-boot@idle.service\n")
            && !e.contains("Before=hostknob-boot"),
        "{e}"
    );
    assert!(
        g.contains("\nBefore=hostknob-boot@a-epp.service hostknob-boot@idle.service\n")
            && !g.contains("After=hostknob-boot"),
        "{g}"
    );
    assert!(
        i.contains("\nAfter=hostknob-boot@z-gov.service\nBefore=hostknob-boot@a-epp.service\n"),
        "{i}"
    );
    analyze(&root, &["a-epp", "z-gov", "idle"]);

    // Installed and enabled, in effect: ok, by the unit.
    ok(&run(&root, m.path(), &["apply", "z-gov", "a-epp", "idle"]));
    for id in ["a-epp", "z-gov", "idle"] {
        enable(&root, &format!("hostknob-boot@{id}.service"));
    }
    let (r, code) = audit_json(&root, m.path(), None);
    assert_eq!(code, 0, "{r:#}");
    let k = knob(&r, "a-epp");
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .starts_with("/etc/systemd/system/hostknob-boot@a-epp.service ("),
        "{k:#}"
    );

    // The same knobs audited from another manifest: the unit would not apply those.
    let other = knobs(&[
        ("a-epp", &epp("boot")),
        ("z-gov", &gov("boot")),
        ("idle", idle),
    ]);
    let (r, _) = audit_json(&root, other.path(), None);
    let k = knob(&r, "a-epp");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("runs a-epp from the manifest {dir}, not from")),
        "{k:#}"
    );

    // An older hostknob's template alone (no --manifest, no --wait): found, not trusted.
    std::fs::remove_file(root.join("etc/systemd/system/hostknob-boot@a-epp.service")).unwrap();
    std::fs::write(
        root.join("etc/systemd/system/hostknob-boot@.service"),
        "[Service]\nType=oneshot\nExecStart=hostknob apply %i\n",
    )
    .unwrap();
    let (r, _) = audit_json(&root, m.path(), None);
    let k = knob(&r, "a-epp");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    let detail = k["detail"].as_str().unwrap();
    assert!(
        detail.contains("an older hostknob's template")
            && detail.contains("no --wait")
            && detail.contains(" persist a-epp --install"),
        "{detail}"
    );
}

/// `systemd-analyze verify` on the installed units, `hostknob` pointed at the
/// built binary (systemd looks a bare name up in its own directories).
fn analyze(root: &Path, ids: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for id in ids {
        let name = format!("./hostknob-boot@{id}.service");
        let text = unit(root, id).replace("ExecStart=hostknob ", &format!("ExecStart={} ", bin()));
        std::fs::write(dir.path().join(&name), text).unwrap();
        units.push(name);
    }
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .current_dir(dir.path())
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
        .output()
        .expect("systemd-analyze (Debian package systemd; .ci/run installs it)");
    let said = err(&o);
    let about_ours: Vec<&str> = said.lines().filter(|l| l.contains("hostknob")).collect();
    assert!(o.status.success() && about_ours.is_empty(), "{said}");
}

#[test]
fn a_unit_names_the_manifest_as_the_booted_tree_sees_it_or_is_refused() {
    // The manifest inside the tree: named by its path there.
    let (_t, root) = copy_host("adl0");
    let inside = root.join("etc/hostknob/manifest");
    std::fs::create_dir_all(&inside).unwrap();
    let m = knobs(&[("z-gov", &gov("boot"))]);
    std::fs::copy(m.path().join("knobs.yaml"), inside.join("knobs.yaml")).unwrap();
    let o = run(&root, &inside, &["persist", "z-gov", "--install"]);
    assert!(!err(&o).contains("outside --root"), "{}", err(&o));
    ok(&o);
    assert!(
        unit(&root, "z-gov").contains(
            "\nExecStart=hostknob apply --wait --manifest /etc/hostknob/manifest z-gov\n"
        ),
        "{}",
        unit(&root, "z-gov")
    );
    ok(&run(&root, &inside, &["apply", "z-gov"]));
    enable(&root, "hostknob-boot@z-gov.service");
    let (r, _) = audit_json(&root, &inside, None);
    assert_eq!(knob(&r, "z-gov")["status"], "ok", "{r:#}");

    // A path a unit's command line cannot hold: refused, nothing written.
    let (_t2, root) = copy_host("adl0");
    let spaced = tempfile::tempdir().unwrap();
    let odd = spaced.path().join("my manifest");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::copy(m.path().join("knobs.yaml"), odd.join("knobs.yaml")).unwrap();
    let before = tree(&root);
    refused(
        &run(&root, &odd, &["persist", "z-gov", "--install"]),
        &[
            "z-gov: the manifest directory",
            "my manifest cannot be named in a unit's command line",
            "nothing was changed",
        ],
    );
    assert_tree(&before, &root, "a manifest the unit cannot name");
}

#[test]
fn a_tmpfiles_epp_line_is_said_to_run_before_a_governor_applied_by_a_boot_unit() {
    let (_t, root) = copy_host("adl0");
    let m = knobs(&[("a-epp", &epp("tmpfiles")), ("z-gov", &gov("boot"))]);
    let o = run(&root, m.path(), &["persist", "a-epp"]);
    ok(&o);
    assert!(
        err(&o).contains(
            "a-epp: these lines run early in boot, before the unit of z-gov (`persistence: boot`) \
             sets the cpufreq-governor they must follow"
        ),
        "{}",
        err(&o)
    );
    let m = knobs(&[("a-epp", &epp("tmpfiles")), ("z-gov", &gov("tmpfiles"))]);
    let o = run(&root, m.path(), &["persist", "a-epp"]);
    assert!(!err(&o).contains("run early in boot"), "{}", err(&o));
}

#[test]
fn the_hold_unit_names_its_manifest_too() {
    let (_t, root) = vm();
    let m = knobs(&[("qos", "persistence: hold\nkind: pm-qos\nset: 20\n")]);
    let o = ok(&run(&root, m.path(), &["persist", "qos"]));
    assert!(
        o.contains(&format!(
            "\nExecStart=hostknob hold --manifest {} qos\n",
            m.path().display()
        )) && o.contains("\nType=exec\n"),
        "{o}"
    );
}
