//! Issue 46 item 5: tuned's `[scsi_host] alpm`, `[audio]`, `[video]
//! radeon_powersave`, `[selinux] avc_cache_threshold` and `[net]
//! nf_conntrack_hashsize` imported on the `sysfs` and `module-param` kinds,
//! on a copy of the VM capture given the device files a host with that
//! hardware has (as support::nic gives NICs); where the hardware is absent
//! the line is not imported and says so.

use std::path::Path;

use crate::module_load;
use crate::support::*;

const PROFILE: &str = "[main]\nsummary=d\n[scsi_host]\nalpm=medium_power\n[audio]\ntimeout=10\n\
[video]\nradeon_powersave=dpm-balanced, auto\n[selinux]\navc_cache_threshold=8192\n\
[net]\nnf_conntrack_hashsize=1048576\n[modules]\ncpufreq_conservative=+r\n";

/// The files an AHCI host (host0 with ALPM, host1 without), an HDA sound
/// card, a Radeon card in `power_method` mode `method`, SELinux and a
/// loaded nf_conntrack have, with the kernel's defaults.
fn give_devices(root: &Path, method: &str) {
    write_files(
        root,
        &[
            (
                "sys/class/scsi_host/host0/link_power_management_policy",
                "max_performance\n",
            ),
            ("sys/class/scsi_host/host1/proc_name", "virtio_scsi\n"),
            ("sys/bus/pci/drivers/snd_hda_intel/bind", ""),
            (
                "sys/devices/pci0000:00/0000:00:1b.0/sound/card0/number",
                "0\n",
            ),
            ("sys/module/snd_hda_intel/parameters/power_save", "1\n"),
            (
                "sys/module/snd_hda_intel/parameters/power_save_controller",
                "Y\n",
            ),
            (
                "sys/devices/pci0000:00/0000:01:00.0/power_method",
                &format!("{method}\n"),
            ),
            (
                "sys/devices/pci0000:00/0000:01:00.0/power_profile",
                "default\n",
            ),
            (
                "sys/devices/pci0000:00/0000:01:00.0/power_dpm_state",
                "performance\n",
            ),
            (
                "sys/devices/pci0000:00/0000:01:00.0/drm/card0/dev",
                "226:0\n",
            ),
            ("sys/fs/selinux/avc/cache_threshold", "512\n"),
            ("sys/module/nf_conntrack/parameters/hashsize", "65536\n"),
        ],
    );
    let link = |to: &str, at: &str| {
        let at = root.join(at);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(to, at).unwrap();
    };
    link(
        "../../../bus/pci/drivers/snd_hda_intel",
        "sys/devices/pci0000:00/0000:00:1b.0/driver",
    );
    link(
        "../..",
        "sys/devices/pci0000:00/0000:00:1b.0/sound/card0/device",
    );
    link(
        "../../devices/pci0000:00/0000:00:1b.0/sound/card0",
        "sys/class/sound/card0",
    );
    link(
        "../..",
        "sys/devices/pci0000:00/0000:01:00.0/drm/card0/device",
    );
    link(
        "../../devices/pci0000:00/0000:01:00.0/drm/card0",
        "sys/class/drm/card0",
    );
}

/// Imports `text` as profile `p` from a --from directory onto `root`:
/// (out dir, IMPORTED.md, NOT-IMPORTED.md).
fn import(root: &Path, text: &str) -> (tempfile::TempDir, String, String) {
    let from = tempfile::tempdir().unwrap();
    write_files(from.path(), &[("p/tuned.conf", text)]);
    let out = tempfile::tempdir().unwrap();
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        "p",
        "--from",
        from.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    ok(&o);
    let read = |f: &str| std::fs::read_to_string(out.path().join(f)).unwrap();
    let (imp, not) = (read("IMPORTED.md"), read("NOT-IMPORTED.md"));
    (out, imp, not)
}

fn knob(dir: &Path, id: &str) -> serde_yaml::Value {
    let p = dir.join(format!("{id}.yaml"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml::from_str(&text).unwrap()
}

fn sysfs_of(k: &serde_yaml::Value) -> (&str, &str, &str) {
    (
        k["kind"].as_str().unwrap(),
        k["target"]["path"].as_str().unwrap_or_default(),
        k["set"].as_str().unwrap(),
    )
}

fn param_of(k: &serde_yaml::Value) -> (&str, &str, &str, &str) {
    (
        k["kind"].as_str().unwrap(),
        k["target"]["module"].as_str().unwrap(),
        k["target"]["param"].as_str().unwrap(),
        k["set"].as_str().unwrap(),
    )
}

#[test]
fn import_tuned_device_plugins_become_sysfs_and_module_param_knobs() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    give_devices(&root, "profile");
    let (out, imp, not) = import(&root, PROFILE);
    let d = out.path();
    let k = knob(d, "tuned-p-scsi-host-alpm");
    assert_eq!(
        sysfs_of(&k),
        (
            "sysfs",
            "/sys/class/scsi_host/host*/link_power_management_policy",
            "medium_power"
        )
    );
    assert!(k["why"].as_str().unwrap().contains("here host0"), "{k:?}");
    // timeout, and tuned's default reset_controller=false beside it.
    let t = knob(d, "tuned-p-audio-snd-hda-intel-power-save");
    assert_eq!(
        param_of(&t),
        ("module-param", "snd_hda_intel", "power_save", "10")
    );
    let c = knob(d, "tuned-p-audio-snd-hda-intel-power-save-controller");
    assert_eq!(
        param_of(&c),
        (
            "module-param",
            "snd_hda_intel",
            "power_save_controller",
            "N"
        )
    );
    assert!(
        c["why"]
            .as_str()
            .unwrap()
            .contains("default reset_controller=false"),
        "{c:?}"
    );
    // dpm-balanced fails in the kernel; `auto` is what tuned sets.
    let m = knob(d, "tuned-p-video-radeon-power-method");
    assert_eq!(
        sysfs_of(&m),
        (
            "sysfs",
            "/sys/class/drm/card0/device/power_method",
            "profile"
        )
    );
    let p = knob(d, "tuned-p-video-radeon-power-profile");
    assert_eq!(
        sysfs_of(&p),
        ("sysfs", "/sys/class/drm/card0/device/power_profile", "auto")
    );
    let s = knob(d, "tuned-p-selinux-avc-cache-threshold");
    assert_eq!(
        sysfs_of(&s),
        ("sysfs", "/sys/fs/selinux/avc/cache_threshold", "8192")
    );
    let h = knob(d, "tuned-p-net-nf-conntrack-hashsize");
    assert_eq!(
        param_of(&h),
        ("module-param", "nf_conntrack", "hashsize", "1048576")
    );
    for opt in [
        "alpm",
        "timeout",
        "radeon_powersave",
        "avc_cache_threshold",
        "nf_conntrack_hashsize",
    ] {
        assert!(imp.contains(&format!("| `{opt}` |")), "{opt}: {imp}");
    }
    // [modules] `+r`: a module knob (tests/suite/module_load.rs), not-applicable
    // on this copy (cpufreq_conservative is not loaded), so apply goes on.
    assert!(!not.contains("cpufreq_conservative"), "{not}");
    assert_eq!(
        knob(d, "tuned-p-modules-cpufreq-conservative")["kind"],
        "module"
    );
    // Applied on the copy: each file holds tuned's value.
    let state = format!("/{STATE_DIR}");
    ok(&run(&root, d, &["--state-dir", &state, "apply", "--all"]));
    let file = |rel: &str| {
        std::fs::read_to_string(root.join(rel))
            .unwrap()
            .trim()
            .to_string()
    };
    for (rel, want) in [
        (
            "sys/class/scsi_host/host0/link_power_management_policy",
            "medium_power",
        ),
        ("sys/module/snd_hda_intel/parameters/power_save", "10"),
        (
            "sys/module/snd_hda_intel/parameters/power_save_controller",
            "N",
        ),
        (
            "sys/devices/pci0000:00/0000:01:00.0/power_method",
            "profile",
        ),
        ("sys/devices/pci0000:00/0000:01:00.0/power_profile", "auto"),
        ("sys/fs/selinux/avc/cache_threshold", "8192"),
        ("sys/module/nf_conntrack/parameters/hashsize", "1048576"),
    ] {
        assert_eq!(file(rel), want, "{rel}");
    }
    assert!(
        !root
            .join("sys/class/scsi_host/host1/link_power_management_policy")
            .exists()
    );
}

#[test]
fn import_tuned_device_plugins_say_which_hardware_is_absent() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let (out, imp, not) = import(&root, PROFILE);
    for (opt, why) in [
        ("alpm", "no SCSI host with ALPM"),
        (
            "timeout",
            "no sound card driven by snd_hda_intel or snd_ac97_codec on this host",
        ),
        ("radeon_powersave", "no Radeon card"),
        ("avc_cache_threshold", "SELinux is not enabled on this host"),
    ] {
        assert!(not.contains(&format!("| `{opt}` | {why}")), "{opt}: {not}");
    }
    // nf_conntrack is a module, not hardware: a knob, not-applicable until it loads.
    assert!(
        imp.contains("| `nf_conntrack_hashsize` | knob `tuned-p-net-nf-conntrack-hashsize` |"),
        "{imp}"
    );
    let state = format!("/{STATE_DIR}");
    let text = ok(&run(
        &root,
        out.path(),
        &["--state-dir", &state, "apply", "--all", "--dry-run"],
    ));
    assert!(text.contains("nf_conntrack is not loaded here"), "{text}");
}

#[test]
fn import_tuned_device_plugins_refuse_what_tuned_refuses() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    give_devices(&root, "dpm");
    let (out, imp, not) = import(
        &root,
        "[main]\nsummary=d\n[scsi_host]\nalpm=\n[audio]\ntimeout=-1\nreset_controller=maybe\n\
         [video]\nradeon_powersave=dpm-battery, auto\n[selinux]\navc_cache_threshold=lots\n\
         [net]\nnf_conntrack_hashsize=-5\n",
    );
    for (opt, why) in [
        ("alpm", "an empty policy"),
        ("timeout", "`-1` is negative: tuned writes nothing"),
        ("reset_controller", "`maybe` is not a boolean"),
        ("radeon_powersave", "the Radeon cards here (card0) run DPM"),
        ("avc_cache_threshold", "`lots` is not an integer"),
        ("nf_conntrack_hashsize", "`-5` is negative"),
    ] {
        assert!(not.contains(&format!("| `{opt}` | {why}")), "{opt}: {not}");
    }
    assert!(!imp.contains("| knob `"), "{imp}");
    let yaml = std::fs::read_dir(out.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(yaml, 0);
}

/// `[modules]` as tuned's plugin_modules.py reads it: options become
/// module-param knobs persisted by modprobe.d, `+r` a module knob.
#[test]
fn import_tuned_modules_become_module_and_module_param_knobs() {
    let (_t, root) = vm();
    module_load::loaded_module(&root);
    let (outd, _imp, not) = import(
        &root,
        "[main]\nsummary=m\n[modules]\nsnd-hda-intel=+r, power_save=10 power_save_controller=N\n\
         cpufreq_conservative=+r\nnetrom=nr_ndevs=2\ncpufreq_ondemand=oops\nsnd=\n",
    );
    let d = outd.path();
    let k = knob(d, "tuned-p-modules-snd-hda-intel");
    assert_eq!(k["kind"], "module");
    assert_eq!(k["target"]["module"], "snd-hda-intel");
    assert_eq!(k["set"]["loaded"], true);
    assert_eq!(k["persistence"], "modules-load.d");
    for (id, p, v) in [
        (
            "tuned-p-modules-snd-hda-intel-power-save",
            "power_save",
            "10",
        ),
        (
            "tuned-p-modules-snd-hda-intel-power-save-controller",
            "power_save_controller",
            "N",
        ),
    ] {
        let k = knob(d, id);
        assert_eq!(
            (
                k["kind"].as_str(),
                k["target"]["param"].as_str(),
                k["set"].as_str()
            ),
            (Some("module-param"), Some(p), Some(v)),
            "{k:?}"
        );
        assert_eq!(k["persistence"], "modprobe.d");
    }
    assert_eq!(
        knob(d, "tuned-p-modules-cpufreq-conservative")["kind"],
        "module"
    );
    for (opt, why) in [
        (
            "netrom",
            &format!(
                "no module netrom for the kernel {} on this host",
                module_load::RELEASE
            )[..],
        ),
        ("cpufreq_ondemand", "option `oops` is not PARAM=VALUE"),
        ("snd", "with no options and no `+r`: tuned writes nothing"),
    ] {
        assert!(
            not.contains(&format!("| `{opt}` |")) && not.contains(why),
            "{opt}: {not}"
        );
    }
    // Applied on the copy: the loaded module's parameters take tuned's values.
    let state = format!("/{STATE_DIR}");
    ok(&run(&root, d, &["--state-dir", &state, "apply", "--all"]));
    assert_eq!(
        module_load::read(&root, "sys/module/snd_hda_intel/parameters/power_save"),
        "10"
    );
    assert_eq!(
        module_load::read(
            &root,
            "sys/module/snd_hda_intel/parameters/power_save_controller"
        ),
        "N"
    );
}
