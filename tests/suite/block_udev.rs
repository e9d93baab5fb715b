//! Issue 46 item 1: `persistence: udev-rule` for the block kind, on a VM copy
//! with block devices built in (support/block.rs): the rule persist writes
//! (exact), audit reading it back (in place, shadowed by a later rule,
//! nothing applying it), the refusal where no udev runs, and removal.

use std::path::Path;

use crate::support::block::{DISKS, add_disks};
use crate::support::*;

const KNOB: &str = "persistence: udev-rule\nkind: block\ntarget: {name: 'vd*'}\n\
                    set: {scheduler: kyber, read_ahead_kb: 0, nr_requests: 64}\n";

const RULE: &str = "/etc/udev/rules.d/61-hostknob-vdq.rules";

const LINES: [&str; 2] = [
    r#"ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", KERNEL=="vd*", TEST=="mq", ATTR{queue/scheduler}="kyber", ATTR{queue/nr_requests}="64""#,
    r#"ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", KERNEL=="vd*", ATTR{queue/read_ahead_kb}="0""#,
];

fn vm_with_disks(udev: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    add_disks(&root, &DISKS);
    if udev {
        write_files(&root, &[("run/udev/control", "")]);
    } else {
        let _ = std::fs::remove_file(root.join("run/udev/control"));
    }
    (tmp, root)
}

fn rule_path(root: &Path) -> std::path::PathBuf {
    root.join(RULE.trim_start_matches('/'))
}

fn audit_of(root: &Path, m: &Path) -> serde_json::Value {
    let (report, _) = audit_json(root, m, None);
    knob(&report, "vdq").clone()
}

#[test]
fn a_block_knob_persisted_by_a_udev_rule_is_written_exactly_audited_and_removed() {
    let (_tmp, root) = vm_with_disks(true);
    let m = knobs(&[("vdq", KNOB)]);
    ok(&run(&root, m.path(), &["apply", "vdq"]));
    let printed = ok(&run(&root, m.path(), &["persist", "vdq", "--install"]));
    assert!(printed.contains(RULE), "{printed}");
    let text = std::fs::read_to_string(rule_path(&root)).unwrap();
    assert!(
        text.starts_with("# hostknob persist: vdq (block) for host "),
        "{text}"
    );
    let rules: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rules, LINES, "{text}");
    match std::process::Command::new("udevadm")
        .arg("verify")
        .arg(rule_path(&root))
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("udevadm verify: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => println!("udevadm verify not run: udevadm is not installed here ({e})"),
    }
    let k = audit_of(&root, m.path());
    assert_eq!(k["status"], "ok", "{k:#}");
    assert!(k.to_string().contains(RULE), "{k:#}");
    // A rule for other disks changes nothing; one run later for vda shadows ours.
    write_files(
        &root,
        &[(
            "etc/udev/rules.d/70-sd.rules",
            "ACTION==\"add\", SUBSYSTEM==\"block\", KERNEL==\"sd*\", ATTR{queue/scheduler}=\"bfq\"\n",
        )],
    );
    assert_eq!(audit_of(&root, m.path())["status"], "ok");
    write_files(
        &root,
        &[(
            "etc/udev/rules.d/99-local.rules",
            "# the site's own\nACTION==\"add|change\", KERNEL==\"vd[a-z]\", \\\n  ATTR{queue/scheduler}=\"mq-deadline\"\n",
        )],
    );
    let k = audit_of(&root, m.path());
    assert_ne!(k["status"], "ok", "{k:#}");
    assert!(
        k.to_string()
            .contains("shadowed: /etc/udev/rules.d/99-local.rules:2 sets queue/scheduler of vda"),
        "{k:#}"
    );
    std::fs::remove_file(root.join("etc/udev/rules.d/99-local.rules")).unwrap();
    // The rule edited by hand is not the knob's.
    std::fs::write(rule_path(&root), text.replace("kyber", "bfq")).unwrap();
    let k = audit_of(&root, m.path());
    assert!(
        k.to_string().contains("is not the rule of the knob"),
        "{k:#}"
    );
    std::fs::write(rule_path(&root), &text).unwrap();
    // No udev here any more: the rule is never applied.
    std::fs::remove_file(root.join("run/udev/control")).unwrap();
    let k = audit_of(&root, m.path());
    assert!(k.to_string().contains("is never applied"), "{k:#}");
    write_files(&root, &[("run/udev/control", "")]);
    ok(&run(&root, m.path(), &["persist", "vdq", "--remove"]));
    assert!(!rule_path(&root).exists());
}

#[test]
fn without_udev_the_rule_is_refused_naming_why_and_nothing_is_written() {
    let (_tmp, root) = vm_with_disks(false);
    let m = knobs(&[("vdq", KNOB)]);
    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "vdq", "--install"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let e = err(&o);
    assert!(
        e.contains("a udev rule would never run here") && e.contains("no udev runs"),
        "{e}"
    );
    assert_tree(&before, &root, "after a refused install");
}

#[test]
fn every_disk_becomes_keys_for_removable_and_empty_devices_and_rotational() {
    let (_tmp, root) = vm_with_disks(true);
    let m = knobs(&[(
        "vdq",
        "persistence: udev-rule\nkind: block\ntarget: {transport: nvme, rotational: false}\n\
         set: {nomerges: 2}\n",
    )]);
    let printed = ok(&run(&root, m.path(), &["persist", "vdq"]));
    assert!(
        printed.contains(
            r#"ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", ATTR{removable}=="0", ATTR{size}!="0", KERNEL=="nvme*", ATTR{queue/rotational}=="0", ATTR{queue/nomerges}="2""#
        ),
        "{printed}"
    );
}
