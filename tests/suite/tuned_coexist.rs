//! Running beside tuned (issue 23 item 4): a copy of the VM capture with
//! Debian's tuned profiles (/usr/lib/tuned, the `tuned` package) and tuned
//! enabled on `latency-performance`; audit says per knob whether tuned's
//! profile agrees or fights, apply refuses a fight without `--force`, and
//! saptune's notes are reported, read only.

use std::path::{Path, PathBuf};

use crate::support::*;

const PROFILE: &str = "latency-performance";

/// tuned's profile file, or one printed line saying why the test skips.
fn tuned_conf() -> Option<PathBuf> {
    let f = PathBuf::from(format!("/usr/lib/tuned/{PROFILE}/tuned.conf"));
    if f.exists() {
        Some(f)
    } else {
        println!(
            "skipped: {} absent (install Debian's `tuned` package; .ci/run does)",
            f.display()
        );
        None
    }
}

/// The profile's line setting `key` (1-based), read from the real file.
fn line_of(conf: &Path, key: &str) -> usize {
    let text = std::fs::read_to_string(conf).unwrap();
    let prefix = format!("{key}=");
    1 + text
        .lines()
        .position(|l| l.trim().starts_with(&prefix))
        .unwrap_or_else(|| panic!("{key} not in {}", conf.display()))
}

/// The VM with tuned's profiles, `active_profile` naming PROFILE and, when
/// `enabled`, tuned.service enabled (the link systemd makes).
fn host(enabled: bool) -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = vm();
    let dest = root.join("usr/lib/tuned");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg("/usr/lib/tuned")
        .arg(&dest)
        .status()
        .unwrap();
    assert!(st.success());
    write_files(
        &root,
        &[("etc/tuned/active_profile", &format!("{PROFILE}\n"))],
    );
    if enabled {
        let wants = root.join("etc/systemd/system/multi-user.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink(
            "/usr/lib/systemd/system/tuned.service",
            wants.join("tuned.service"),
        )
        .unwrap();
    }
    (tmp, root)
}

fn swappiness(value: u32) -> tempfile::TempDir {
    knobs(&[(
        "swappiness",
        &format!(
            "persistence: runtime\nkind: sysctl\ntarget: {{name: vm.swappiness}}\nset: {value}\n"
        ),
    )])
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn tuned_agreeing_knob_is_reported_and_applies() {
    let Some(conf) = tuned_conf() else { return };
    let line = line_of(&conf, "vm.swappiness");
    let (_tmp, root) = host(true);
    // latency-performance sets vm.swappiness=10; the capture reads 60.
    let m = swappiness(10);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(report["tuned"]["profile"], PROFILE, "{report:#}");
    let t = &knob(&report, "swappiness")["tuned"];
    assert_eq!(t["agrees"], true, "{t:#}");
    assert_eq!(t["profile"], PROFILE);
    assert_eq!(t["key"], "vm.swappiness");
    assert_eq!(t["value"], "10");
    assert_eq!(t["line"], line);
    assert_eq!(
        t["file"],
        format!("/usr/lib/tuned/{PROFILE}/tuned.conf"),
        "{t:#}"
    );
    assert_eq!(t["path"], "/proc/sys/vm/swappiness");
    let table = out(&run(&root, m.path(), &["audit"]));
    assert!(
        table.contains(&format!("tuned is active (profile {PROFILE}")),
        "{table}"
    );
    assert!(table.contains("tuned agrees"), "{table}");
    let out = ok(&run(&root, m.path(), &["apply", "swappiness"]));
    assert!(!out.contains("--force"), "{out}");
    assert_eq!(read(&root, "proc/sys/vm/swappiness").trim(), "10");
}

#[test]
fn tuned_fighting_knob_is_refused_with_the_profile_line_and_changes_nothing() {
    let Some(conf) = tuned_conf() else { return };
    let line = line_of(&conf, "vm.swappiness");
    let (_tmp, root) = host(true);
    let m = swappiness(30);
    let (report, _) = audit_json(&root, m.path(), None);
    let t = &knob(&report, "swappiness")["tuned"];
    assert_eq!(t["agrees"], false, "{t:#}");
    assert_eq!(t["sets"], "10", "{t:#}");
    // audit exits 2 (drift); the table names the fight.
    let table = out(&run(&root, m.path(), &["audit"]));
    assert!(table.contains("tuned fights this knob"), "{table}");
    let before = snapshot(&root);
    let at = format!("/usr/lib/tuned/{PROFILE}/tuned.conf:{line}");
    let e = refused(
        &run(&root, m.path(), &["apply", "swappiness"]),
        &[
            "swappiness: tuned profile latency-performance sets vm.swappiness=10",
            &at,
            "this knob sets 30",
            "tuned would undo this on its next reapply",
            "--force",
        ],
    );
    assert!(e.contains("stop tuned, change its profile"), "{e}");
    assert_eq!(snapshot(&root), before, "a refused apply changed the tree");
    assert!(journal(&root).is_empty());
    // A dry run says what apply would refuse, and changes nothing either.
    let dry = ok(&run(&root, m.path(), &["apply", "swappiness", "--dry-run"]));
    assert!(
        dry.contains("apply would refuse: swappiness: tuned profile"),
        "{dry}"
    );
    assert_eq!(snapshot(&root), before);
}

#[test]
fn tuned_fight_with_force_applies_and_says_so() {
    let Some(_) = tuned_conf() else { return };
    let (_tmp, root) = host(true);
    let m = swappiness(30);
    let out = ok(&run(&root, m.path(), &["apply", "swappiness", "--force"]));
    assert!(
        out.contains("--force: overriding tuned: swappiness: tuned profile latency-performance sets vm.swappiness=10"),
        "{out}"
    );
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
    ok(&run(&root, m.path(), &["revert", "swappiness"]));
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "60\n");
    // The JSON outcome lists what --force overrode.
    let o = json_of(&run(
        &root,
        m.path(),
        &["apply", "swappiness", "--force", "--format", "json"],
    ));
    let forced = o["forced"].as_array().expect("forced listed");
    assert_eq!(forced.len(), 1, "{o:#}");
    assert!(forced[0].as_str().unwrap().contains("sets 30"), "{o:#}");
}

#[test]
fn tuned_inactive_gives_no_field_and_no_refusal() {
    let Some(_) = tuned_conf() else { return };
    // active_profile is there, but tuned neither runs nor is enabled.
    let (_tmp, root) = host(false);
    let m = swappiness(30);
    let (report, _) = audit_json(&root, m.path(), None);
    assert!(report["tuned"].is_null(), "{report:#}");
    assert!(knob(&report, "swappiness")["tuned"].is_null());
    let table = out(&run(&root, m.path(), &["audit"]));
    assert!(!table.contains("tuned is active"), "{table}");
    ok(&run(&root, m.path(), &["apply", "swappiness"]));
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
}

/// A note in saptune-note(5)'s format (saptune 3): `[version]`, `[sysctl]`
/// `key = value`, `[vm]` `THP=`, a tagged section (skipped: its tags are not
/// evaluated) and an `[rpm]` section of lines without `=`.
const NOTE: &str = "\
# 941735 - SAP memory management system for 64-bit Linux systems
[version]
# SAP-NOTE=941735 CATEGORY=LINUX VERSION=11 DATE=14.01.2022 NAME=\"test note\"

[sysctl]
# Discourage swapping
vm.swappiness = 15
vm.zone_reclaim_mode = 0

[sysctl:os=15-SP1:arch=ppc64le]
vm.swappiness = 99

[vm]
THP=never

[rpm]
glibc 15 2.22-51.6
";

#[test]
fn tuned_saptune_note_setting_the_same_file_is_reported_read_only() {
    let (_tmp, root) = vm();
    write_files(
        &root,
        &[
            ("usr/share/saptune/notes/941735", NOTE),
            (
                "etc/sysconfig/saptune",
                "TUNE_FOR_SOLUTIONS=\"\"\nTUNE_FOR_NOTES=\"941735\"\nNOTE_APPLY_ORDER=\"941735\"\n",
            ),
        ],
    );
    let m = knobs(&[
        (
            "swappiness",
            "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 30\n",
        ),
        (
            "no-thp",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
        ),
    ]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(report["saptune_notes"], serde_json::json!(["941735"]));
    let s = knob(&report, "swappiness")["saptune"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(s.len(), 1, "{s:#?}");
    assert_eq!(s[0]["note"], "941735");
    assert_eq!(s[0]["file"], "/usr/share/saptune/notes/941735");
    assert_eq!(s[0]["line"], 7, "the untagged section's line: {s:#?}");
    assert_eq!(s[0]["value"], "15");
    assert_eq!(s[0]["agrees"], false);
    let thp = knob(&report, "no-thp")["saptune"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(thp.len(), 1, "{thp:#?}");
    assert_eq!(thp[0]["key"], "THP");
    assert_eq!(thp[0]["agrees"], true, "{thp:#?}");
    let table = out(&run(&root, m.path(), &["audit"]));
    assert!(table.contains("saptune notes active: 941735"), "{table}");
    assert!(
        table.contains("saptune note 941735 differs: [sysctl] vm.swappiness = 15"),
        "{table}"
    );
    // An override replaces the note's value; saptune never stops an apply.
    write_files(
        &root,
        &[(
            "etc/saptune/override/941735",
            "[sysctl]\nvm.swappiness = 30\n",
        )],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let s = &knob(&report, "swappiness")["saptune"][0];
    assert_eq!(s["file"], "/etc/saptune/override/941735");
    assert_eq!(s["agrees"], true, "{s:#}");
    ok(&run(&root, m.path(), &["apply", "swappiness"]));
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
}

#[test]
fn tuned_profile_that_cannot_be_read_is_named_and_nothing_is_compared() {
    let Some(_) = tuned_conf() else { return };
    let (_tmp, root) = host(true);
    write_files(&root, &[("etc/tuned/active_profile", "no-such-profile\n")]);
    let m = swappiness(30);
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(report["tuned"]["profile"], "no-such-profile");
    let why = report["tuned"]["unreadable"]
        .as_str()
        .expect("unreadable said");
    assert!(
        why.contains("tuned profile \"no-such-profile\" not found"),
        "{why}"
    );
    assert!(knob(&report, "swappiness")["tuned"].is_null());
    let table = out(&run(&root, m.path(), &["audit"]));
    assert!(
        table.contains("its profile could not be read, so no knob is compared with it"),
        "{table}"
    );
    // Nothing known to fight: apply goes ahead.
    ok(&run(&root, m.path(), &["apply", "swappiness"]));
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
}

/// The VM with tuned enabled on an operator's profile `hk` in /etc/tuned
/// (TEXT), its sysctls given values.
fn host_with_profile(text: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = host(true);
    write_files(
        &root,
        &[
            ("etc/tuned/hk/tuned.conf", text),
            ("etc/tuned/active_profile", "hk\n"),
            ("proc/sys/vm/dirty_ratio", "20\n"),
        ],
    );
    (tmp, root)
}

const HK: &str = "[main]\nsummary=hk\n[sysctl]\nvm.swappiness=10\nvm.dirty_ratio=10\n\
[systemd]\ncpu_affinity=0\n[scheduler]\nisolated_cores=1\nirq_process=false\n\
[bootloader]\ncmdline_hk=skew_tick=1 tsc=reliable\n";

/// Issue 31 item 6: no false fights. tuned only adds its own words to the
/// command line; systemd reads a hostknob drop-in after tuned's
/// CPUAffinity=; reapply_sysctl=1 has tuned write /etc/sysctl.d (a
/// sysctl.d knob's file) after its profile; irq_process=false moves no IRQ.
#[test]
fn tuned_fights_only_where_tuneds_write_stands() {
    let Some(_) = tuned_conf() else { return };
    let (_tmp, root) = host_with_profile(HK);
    let m = knobs(&[
        (
            "words",
            "persistence: cmdline\nkind: kernel-cmdline\nset: {add: [nosoftlockup]}\n",
        ),
        (
            "tsc",
            "persistence: cmdline\nkind: kernel-cmdline\nset: {add: [tsc=unstable]}\n",
        ),
        (
            "skew",
            "persistence: cmdline\nkind: kernel-cmdline\nset: {add: [skew_tick=1]}\n",
        ),
        (
            "services",
            "persistence: systemd-dropin\nkind: systemd-cpu-affinity\nset: \"1\"\n",
        ),
        (
            "swap-file",
            "persistence: sysctl.d\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 30\n",
        ),
        (
            "swap-now",
            "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 30\n",
        ),
        (
            "irqs",
            "persistence: runtime\nkind: irq-affinity\ntarget: {all: true}\nset: 0-1\n",
        ),
    ]);
    let (report, _) = audit_json(&root, m.path(), None);
    let t = |id: &str| knob(&report, id)["tuned"].clone();
    assert!(t("words").is_null(), "{:#}", t("words"));
    assert!(t("irqs").is_null(), "{:#}", t("irqs"));
    assert_eq!(t("skew")["agrees"], true, "{:#}", t("skew"));
    assert_eq!(
        (t("tsc")["agrees"].as_bool(), t("tsc")["sets"].as_str()),
        (Some(false), Some("tsc=reliable"))
    );
    // tuned's own drop-in is another file: never a fight.
    assert_ne!(t("services")["agrees"], false, "{:#}", t("services"));
    assert!(
        t("services").is_null()
            || t("services")["sets"]
                .as_str()
                .unwrap()
                .contains("drop-in overrides")
    );
    assert_eq!(t("swap-file")["agrees"], true, "{:#}", t("swap-file"));
    assert_eq!(t("swap-now")["agrees"], false, "{:#}", t("swap-now"));
    // tuned >= 2.28 writes its own drop-in; hostknob's sorts after it.
    write_files(
        &root,
        &[(
            "etc/systemd/system.conf.d/00-tuned.conf",
            "[Manager]\nCPUAffinity=0\n",
        )],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    assert_ne!(knob(&report, "services")["tuned"]["agrees"], false);
    // reapply_sysctl=0: tuned's value stands.
    write_files(
        &root,
        &[("etc/tuned/tuned-main.conf", "reapply_sysctl = 0\n")],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "swap-file")["tuned"]["agrees"], false);
    let o = run(&root, m.path(), &["apply", "words", "skew", "--dry-run"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!text.contains("tuned profile hk"), "{text}");
}

/// `--force=KNOB` overrides that knob's fight only; an unknown name is refused.
#[test]
fn tuned_force_one_named_knob() {
    let Some(_) = tuned_conf() else { return };
    let (_tmp, root) = host_with_profile(HK);
    let m = knobs(&[
        (
            "swap",
            "persistence: runtime\nkind: sysctl\ntarget: {name: vm.swappiness}\nset: 30\n",
        ),
        (
            "dirty",
            "persistence: runtime\nkind: sysctl\ntarget: {name: vm.dirty_ratio}\nset: 30\n",
        ),
    ]);
    let before = snapshot(&root);
    refused(
        &run(&root, m.path(), &["apply", "swap", "dirty", "--force=swap"]),
        &[
            "dirty: tuned profile hk sets vm.dirty_ratio=10",
            "--force=KNOB",
        ],
    );
    refused(
        &run(&root, m.path(), &["apply", "swap", "--force=nope"]),
        &["--force=nope: no knob of this apply is named nope"],
    );
    assert_eq!(snapshot(&root), before);
    let out = ok(&run(&root, m.path(), &["apply", "swap", "--force=swap"]));
    assert!(
        out.contains("overriding tuned: swap: tuned profile hk"),
        "{out}"
    );
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
    // Plain --force, as before: every fight.
    ok(&run(&root, m.path(), &["apply", "dirty", "--force"]));
    assert_eq!(read(&root, "proc/sys/vm/dirty_ratio"), "30");
}

/// irqbalance's evidence on an irq-affinity knob keeping IRQs off CPU 1.
fn irqbalance_evidence(root: &Path) -> String {
    let m = knobs(&[(
        "irqs",
        "persistence: runtime\nkind: irq-affinity\ntarget: {all: true}\nset: \"0\"\n",
    )]);
    let (report, _) = audit_json(root, m.path(), None);
    let ms = knob(&report, "irqs")["managers"]
        .as_array()
        .unwrap()
        .clone();
    let i = ms
        .iter()
        .find(|m| m["name"] == "irqbalance")
        .expect("irqbalance named");
    i["evidence"].as_str().unwrap().to_string()
}

/// Issue 31 item 7: audit judges irqbalance's banned CPUs as irqbalance
/// does (cputree.c setup_banned_cpus): the IRQBALANCE_BANNED_CPUS mask
/// first, and with no list the isolated and nohz_full CPUs banned itself.
#[test]
fn tuned_irqbalance_banned_cpus_read_as_irqbalance_does() {
    let (_tmp, root) = vm();
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/irqbalance.service",
        wants.join("irqbalance.service"),
    )
    .unwrap();
    // tuned 2.20's mask beside an empty list: the mask counts.
    write_files(
        &root,
        &[(
            "etc/default/irqbalance",
            "IRQBALANCE_BANNED_CPUS=00000002\nIRQBALANCE_BANNED_CPULIST=\n",
        )],
    );
    let e = irqbalance_evidence(&root);
    assert!(
        e.contains("its banned list covers") && e.contains("IRQBALANCE_BANNED_CPUS=\"00000002\""),
        "{e}"
    );
    // No list: irqbalance bans the isolated CPUs itself.
    write_files(
        &root,
        &[
            ("etc/default/irqbalance", "#IRQBALANCE_BANNED_CPULIST=\n"),
            ("sys/devices/system/cpu/isolated", "1\n"),
        ],
    );
    let e = irqbalance_evidence(&root);
    assert!(
        e.contains("its banned list covers") && e.contains("bans the kernel's isolated CPUs (1)"),
        "{e}"
    );
    // An empty list set: irqbalance bans nothing, isolated or not.
    write_files(
        &root,
        &[("etc/default/irqbalance", "IRQBALANCE_BANNED_CPULIST=\n")],
    );
    let e = irqbalance_evidence(&root);
    assert!(e.contains("does not cover CPUs 1"), "{e}");
}
