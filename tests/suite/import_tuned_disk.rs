//! Issue 46 items 1 and 3: tuned disk units limited by `devices=` become
//! block knobs chosen by name, as tuned gives each disk to one disk instance
//! in the profile's order (plugins/base.py assign_free_devices); and the
//! scheduler plugin's `runtime` and `cgroup_ps_blacklist`.

use std::path::Path;

use crate::support::*;

/// Imports `text` as profile `p` (with `more` profiles beside it) onto a
/// copy of the VM: (out dir, IMPORTED.md, NOT-IMPORTED.md).
fn import(text: &str, more: &[(&str, &str)]) -> (tempfile::TempDir, String, String) {
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    let mut files = vec![("p/tuned.conf", text)];
    files.extend_from_slice(more);
    write_files(from.path(), &files);
    import_from(&root, "p", from.path())
}

fn import_from(root: &Path, profile: &str, from: &Path) -> (tempfile::TempDir, String, String) {
    let out = tempfile::tempdir().unwrap();
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        profile,
        "--from",
        from.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]));
    let read = |f: &str| std::fs::read_to_string(out.path().join(f)).unwrap();
    let (imp, not) = (read("IMPORTED.md"), read("NOT-IMPORTED.md"));
    (out, imp, not)
}

fn knob(dir: &Path, id: &str) -> serde_yaml::Value {
    let p = dir.join(format!("{id}.yaml"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml::from_str(&text).unwrap()
}

const UNITS: &str = "[main]\nsummary=d\n\
[disk-sas]\ntype=disk\ndevices = sd*\nelevator = mq-deadline\nreadahead = 0\n\
[disk-nvme]\ntype=disk\ndevices = nvme*\nelevator = none\n\
[disk-some]\ntype=disk\ndevices = vd*, !vda\nreadahead = 64\n\
[disk-sdb]\ntype=disk\ndevices = sdb\nreadahead = 64\n";

#[test]
fn disk_units_limited_by_devices_become_block_knobs_chosen_by_name() {
    let (out, imp, not) = import(UNITS, &[]);
    let d = out.path();
    let e = knob(d, "tuned-p-disk-sas-elevator");
    assert_eq!(e["kind"], "block");
    assert_eq!(e["target"]["name"], "sd*", "{e:?}");
    assert_eq!(e["set"]["scheduler"], "mq-deadline");
    let r = knob(d, "tuned-p-disk-sas-readahead");
    assert_eq!(r["target"]["name"], "sd*");
    assert_eq!(r["set"]["read_ahead_kb"], "0");
    let n = knob(d, "tuned-p-disk-nvme-elevator");
    assert_eq!(n["target"]["name"], "nvme*");
    assert_eq!(n["set"]["scheduler"], "none");
    assert!(imp.contains("devices: the disks named sd*"), "{imp}");
    // `!vda` cannot be said; sdb is sd*'s, which [disk-sas] took first.
    assert!(not.contains("`!vda` leaves disks out"), "{not}");
    assert!(
        not.contains("[disk-sas] (")
            && not.contains("takes the disks sd*, which may be some of sdb"),
        "{not}"
    );
    assert!(!not.contains("hostknob cannot match"), "{not}");
}

#[test]
fn a_disk_unit_after_one_that_takes_every_disk_tunes_none() {
    let parent = "[main]\nsummary=parent\n[disk]\nreadahead=>4096\n";
    let child = "[main]\nsummary=child\ninclude=parent\n\
                 [disk-sas]\ntype=disk\ndevices = sd*\nelevator = mq-deadline\nreadahead = 0\n";
    let (out, _imp, not) = import(child, &[("parent/tuned.conf", parent)]);
    let all = knob(out.path(), "tuned-p-disk-readahead");
    assert_eq!(all["target"]["all"], true, "{all:?}");
    assert!(
        not.contains("comes first and takes every disk")
            && not.contains("so [disk-sas] tunes none"),
        "{not}"
    );
    assert!(!out.path().join("tuned-p-disk-sas-elevator.yaml").exists());
}

/// Debian's spectrumscale-ece: its [disk-sas] and [disk-nvme] follow
/// throughput-performance's [disk], which takes every disk.
#[test]
fn spectrumscale_ece_disk_units_are_accounted_for_by_tuneds_order() {
    let from = Path::new("/usr/lib/tuned");
    if !from.join("spectrumscale-ece/tuned.conf").exists() {
        println!("skipped: /usr/lib/tuned/spectrumscale-ece absent (Debian's `tuned` package)");
        return;
    }
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let (_out, _imp, not) = import_from(&root, "spectrumscale-ece", from);
    for opt in ["elevator", "readahead", "devices"] {
        assert!(not.contains(&format!("| `{opt}` |")), "{opt}: {not}");
    }
    assert!(
        not.contains("[disk] (/usr/lib/tuned/throughput-performance/tuned.conf:"),
        "{not}"
    );
    assert!(!not.contains("hostknob cannot match"), "{not}");
    assert!(!not.contains("udev device matching"), "{not}");
}

#[test]
fn openshift_scheduler_runtime_is_used_and_cgroup_ps_blacklist_affects_nothing() {
    let from = Path::new("/usr/lib/tuned");
    if !from.join("openshift/tuned.conf").exists() {
        println!("skipped: /usr/lib/tuned/openshift absent (Debian's `tuned` package)");
        return;
    }
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let (_out, imp, not) = import_from(&root, "openshift", from);
    assert!(
        imp.contains("runtime=0: tuned applies its thread rules once"),
        "{imp}"
    );
    assert!(
        not.contains("cgroup_ps_blacklist without isolated_cores")
            && not.contains("here it affects nothing"),
        "{not}"
    );
    assert!(!not.contains("no hostknob kind"), "{not}");
}

#[test]
fn cgroup_ps_blacklist_with_isolated_cores_becomes_exclude_cgroup() {
    let (out, _imp, not) = import(
        "[main]\nsummary=d\n[scheduler]\nisolated_cores=1\n\
         cgroup_ps_blacklist=/kubepods\\.slice/;:/daemons\\b\nruntime=1\n",
        &[],
    );
    let k = knob(out.path(), "tuned-p-scheduler-threads");
    assert_eq!(k["kind"], "thread-affinity");
    let ex: Vec<&str> = k["target"]["exclude-cgroup"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(ex, ["/kubepods\\.slice/", ":/daemons\\b"], "{k:?}");
    assert!(
        not.contains("runtime=1: tuned watches new processes"),
        "{not}"
    );
}
