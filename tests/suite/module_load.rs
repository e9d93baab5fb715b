//! Issue 46 item 5: module options persisted by modprobe.d (`module-param`),
//! the `module` kind (loaded; persisted by modules-load.d) and tuned's
//! `[modules]` imported onto them (tests/suite/import_tuned_devices.rs). On copies of the VM capture, whose kernel
//! has its modules built in (`/sys/module/haltpoll` without `initstate`),
//! given a loaded module's files as kernel/module/sysfs.c makes them
//! (`initstate`, `refcnt`, `parameters/`) and the release's module index
//! (depmod's modules.dep and modules.builtin), as support::nic gives NICs.
//! kmod's own `modprobe --showconfig` reads the file persist writes.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The VM capture's kernel release.
pub(crate) const RELEASE: &str = "6.18.44-fc-v595";

/// A loaded snd_hda_intel (power_save 1, 2 users) and the release's index:
/// cpufreq_conservative loadable but not loaded, cpufreq_ondemand built in.
pub(crate) fn loaded_module(root: &Path) {
    let dep = format!("lib/modules/{RELEASE}/modules.dep");
    let builtin = format!("lib/modules/{RELEASE}/modules.builtin");
    write_files(
        root,
        &[
            ("sys/module/snd_hda_intel/initstate", "live\n"),
            ("sys/module/snd_hda_intel/refcnt", "2\n"),
            ("sys/module/snd_hda_intel/parameters/power_save", "1\n"),
            (
                "sys/module/snd_hda_intel/parameters/power_save_controller",
                "Y\n",
            ),
            (
                &dep,
                "kernel/sound/pci/hda/snd-hda-intel.ko.zst: kernel/sound/core/snd.ko.zst\n\
                 kernel/drivers/cpufreq/cpufreq_conservative.ko.zst:\n\
                 kernel/sound/core/snd.ko.zst:\n",
            ),
            (
                &builtin,
                "kernel/drivers/cpufreq/cpufreq_ondemand.ko\nkernel/drivers/cpuidle/cpuidle-haltpoll.ko\n",
            ),
        ],
    );
}

fn param(module: &str, param: &str, set: &str, persistence: &str) -> String {
    format!(
        "persistence: {persistence}\nkind: module-param\ntarget: {{module: {module}, param: {param}}}\nset: {set}\n"
    )
}

fn module(module: &str, set: &str, persistence: &str) -> String {
    format!("persistence: {persistence}\nkind: module\ntarget: {{module: {module}}}\nset: {set}\n")
}

pub(crate) fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .trim()
        .to_string()
}

#[test]
fn modprobe_d_persists_a_module_option_that_kmod_reads_audit_names_and_revert_removes() {
    let (_t, root) = vm();
    loaded_module(&root);
    let body = param("snd-hda-intel", "power_save", "10", "modprobe.d");
    let m = knobs(&[("hda-power", &body)]);
    ok(&run(&root, m.path(), &["apply", "hda-power"]));
    let file = "sys/module/snd_hda_intel/parameters/power_save";
    assert_eq!(read(&root, file), "10");

    let o = run(&root, m.path(), &["persist", "hda-power"]);
    let printed = ok(&o);
    assert!(
        printed.ends_with("options snd_hda_intel power_save=10\n"),
        "{printed}"
    );
    for says in [
        "next loads snd-hda-intel",
        "initramfs",
        "hostknob never does",
    ] {
        assert!(err(&o).contains(says), "{says}: {}", err(&o));
    }
    let text = ok(&run(
        &root,
        m.path(),
        &["persist", "hda-power", "--install"],
    ));
    assert!(
        text.contains("installed /etc/modprobe.d/hostknob-hda-power.conf"),
        "{text}"
    );
    // kmod reads the file as written.
    let shown = Command::new("modprobe")
        .arg("--showconfig")
        .arg("-C")
        .arg(root.join("etc/modprobe.d"))
        .output()
        .expect("modprobe (Debian package kmod) is needed");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("options snd_hda_intel power_save=10"),
        "{shown}"
    );

    let (r, _) = audit_json(&root, m.path(), None);
    let k = knob(&r, "hda-power");
    assert_eq!(k["status"], "ok", "{k:#}");
    assert_eq!(
        k["persisted_by"],
        "/etc/modprobe.d/hostknob-hda-power.conf:4"
    );
    // A file later in name order gives the module another value: it wins at load.
    write_files(
        &root,
        &[(
            "etc/modprobe.d/zz-sound.conf",
            "options snd-hda-intel power_save=0 model=auto\n",
        )],
    );
    let (r, _) = audit_json(&root, m.path(), None);
    let k = knob(&r, "hda-power");
    assert_ne!(k["status"], "ok", "{k:#}");
    assert!(
        k.to_string()
            .contains("/etc/modprobe.d/zz-sound.conf:1 gives snd_hda_intel power_save=0, not 10"),
        "{k:#}"
    );
    std::fs::remove_file(root.join("etc/modprobe.d/zz-sound.conf")).unwrap();

    let o = run(&root, m.path(), &["revert", "hda-power", "--persisted"]);
    ok(&o);
    assert!(
        !root.join("etc/modprobe.d/hostknob-hda-power.conf").exists(),
        "{}",
        err(&o)
    );
    assert_eq!(read(&root, file), "1");
}

#[test]
fn modprobe_d_is_refused_for_a_built_in_module_naming_the_command_line() {
    let (_t, root) = vm();
    loaded_module(&root);
    let before = tree(&root);
    let m = knobs(&[
        (
            "haltpoll",
            &param("haltpoll", "guest_halt_poll_ns", "0", "modprobe.d"),
        ),
        (
            "ondemand",
            &param("cpufreq_ondemand", "ignore_nice", "1", "modprobe.d"),
        ),
    ]);
    for (id, evidence, arg) in [
        (
            "haltpoll",
            "/sys/module/haltpoll has no initstate",
            "haltpoll.guest_halt_poll_ns=0",
        ),
        (
            "ondemand",
            "modules.builtin lists kernel/drivers/cpufreq/cpufreq_ondemand.ko",
            "cpufreq_ondemand.ignore_nice=1",
        ),
    ] {
        let o = run(&root, m.path(), &["persist", id, "--install"]);
        assert!(!o.status.success(), "{id}: {}", out(&o));
        for says in [
            "is built into the kernel here",
            evidence,
            "persistence: cmdline",
            arg,
        ] {
            assert!(err(&o).contains(says), "{id}: {says}: {}", err(&o));
        }
    }
    assert_tree(&before, &root, "a refused persist writes nothing");
}

#[test]
fn the_module_kind_reads_loaded_built_in_and_absent_and_loads_nothing() {
    let (_t, root) = vm();
    loaded_module(&root);
    let m = knobs(&[
        ("hda", &module("snd-hda-intel", "{loaded: true}", "runtime")),
        ("haltpoll", &module("haltpoll", "{loaded: true}", "runtime")),
        (
            "conservative",
            &module("cpufreq_conservative", "{loaded: true}", "runtime"),
        ),
        ("nosuch", &module("nosuch", "{loaded: true}", "runtime")),
    ]);
    let (r, _) = audit_json(&root, m.path(), None);
    for (id, status) in [
        ("hda", "unpersisted"),
        ("haltpoll", "unpersisted"),
        ("conservative", "not-applicable"),
        ("nosuch", "not-applicable"),
    ] {
        assert_eq!(knob(&r, id)["status"], status, "{id}: {:#}", knob(&r, id));
    }
    let c = knob(&r, "conservative").to_string();
    for says in [
        "cpufreq_conservative.ko.zst",
        "is not loaded here",
        "hostknob loads no module",
        "`modprobe cpufreq_conservative`",
        "persistence: modules-load.d",
    ] {
        assert!(c.contains(says), "{says}: {c}");
    }
    assert!(
        knob(&r, "nosuch")
            .to_string()
            .contains("no module nosuch for this kernel"),
        "{:#}",
        knob(&r, "nosuch")
    );
    // Apply writes nothing for any of them: the kernel's files stay.
    let before = tree(&root.join("sys"));
    let o = run(&root, m.path(), &["apply", "--all"]);
    assert_tree(&before, &root.join("sys"), &out(&o));
    assert!(
        out(&o).contains("modprobe cpufreq_conservative"),
        "{}",
        out(&o)
    );
}

#[test]
fn a_module_reload_is_refused_naming_its_users() {
    let (_t, root) = vm();
    loaded_module(&root);
    let m = knobs(&[(
        "hda",
        &module("snd-hda-intel", "{loaded: true, reload: true}", "runtime"),
    )]);
    let before = tree(&root);
    let o = run(&root, m.path(), &["apply", "hda"]);
    assert!(!o.status.success(), "{}", out(&o));
    for says in [
        "reload: true",
        "snd-hda-intel has 2 users now (refcnt)",
        "modprobe -r snd-hda-intel && modprobe snd-hda-intel",
    ] {
        assert!(err(&o).contains(says), "{says}: {}", err(&o));
    }
    assert_tree(&before, &root, "a refused reload changes nothing");
}

#[test]
fn modules_load_d_persists_a_module_and_refuses_one_the_kernel_lacks() {
    let (_t, root) = vm();
    loaded_module(&root);
    let m = knobs(&[
        (
            "hda",
            &module("snd-hda-intel", "{loaded: true}", "modules-load.d"),
        ),
        (
            "nosuch",
            &module("nosuch", "{loaded: true}", "modules-load.d"),
        ),
    ]);
    let text = ok(&run(&root, m.path(), &["persist", "hda", "--install"]));
    assert!(
        text.contains("installed /etc/modules-load.d/hostknob-hda.conf"),
        "{text}"
    );
    let conf = read(&root, "etc/modules-load.d/hostknob-hda.conf");
    assert!(conf.ends_with("\nsnd-hda-intel"), "{conf}");
    let (r, _) = audit_json(&root, m.path(), None);
    let k = knob(&r, "hda");
    assert_eq!(k["status"], "ok", "{k:#}");
    assert_eq!(k["persisted_by"], "/etc/modules-load.d/hostknob-hda.conf:4");
    ok(&run(&root, m.path(), &["persist", "hda", "--remove"]));
    assert!(!root.join("etc/modules-load.d/hostknob-hda.conf").exists());

    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "nosuch", "--install"]);
    assert!(!o.status.success(), "{}", out(&o));
    assert!(
        err(&o).contains("systemd-modules-load.service would fail at every boot"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "a refused persist writes nothing");
}
