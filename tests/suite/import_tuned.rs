//! `hostknob import tuned` (issue 23 item 3) on Debian's tuned profiles
//! (/usr/lib/tuned, the `tuned` package), copied into copies of corpus hosts:
//! each import loads and plans there, every option line is accounted for,
//! values per kind, and bad input refused with nothing written.

use std::path::{Path, PathBuf};

use crate::support::*;

/// Every profile Debian's tuned ships (a directory with a tuned.conf).
fn profiles(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| dir.join(n).join("tuned.conf").is_file())
        .collect();
    v.sort();
    v
}

/// tuned's profiles, or one printed line saying why the test skips.
fn tuned_dir() -> Option<PathBuf> {
    let d = PathBuf::from("/usr/lib/tuned");
    if d.join("latency-performance/tuned.conf").exists() {
        Some(d)
    } else {
        println!(
            "skipped: /usr/lib/tuned/latency-performance/tuned.conf absent (install Debian's `tuned` package; .ci/run does)"
        );
        None
    }
}

fn cp(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A host copy with tuned's profiles, and the variables the partitioning
/// profiles need given in /etc/tuned (as an operator does).
fn host_with_tuned(host: &str, isolated: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = copy_host(host);
    cp(Path::new("/usr/lib/tuned"), &root.join("usr/lib/tuned"));
    let vars = format!(
        "isolated_cores={isolated}\nisolate_managed_irq=Y\nmax_power_state=cstate.name:C1|10\n"
    );
    let files: Vec<String> = [
        "cpu-partitioning",
        "cpu-partitioning-powersave",
        "realtime",
        "realtime-virtual-guest",
        "realtime-virtual-host",
    ]
    .iter()
    .map(|p| format!("etc/tuned/{p}-variables.conf"))
    .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|f| (f.as_str(), vars.as_str())).collect();
    write_files(&root, &files);
    (tmp, root)
}

fn import(root: &Path, host: &str, profile: &str, out: &Path) -> std::process::Output {
    import_with(root, profile, out, &["--host", host])
}

/// `hostknob --root ROOT import tuned PROFILE --out OUT EXTRA...`.
fn import_with(root: &Path, profile: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--root",
        root.to_str().unwrap(),
        "import",
        "tuned",
        profile,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    hostknob(&args)
}

/// `hostknob --root ROOT import tuned PROFILE --from FROM --out OUT`.
fn import_from(root: &Path, profile: &str, from: &Path, out: &Path) -> std::process::Output {
    import_with(root, profile, out, &["--from", from.to_str().unwrap()])
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Debian's GRUB files and irqbalance file, as isolate_plan gives them.
fn give_debian_boot_and_irqbalance(root: &Path) {
    give_debian_grub(root);
    write_files(
        root,
        &[("etc/default/irqbalance", "#IRQBALANCE_BANNED_CPULIST=\n")],
    );
}

/// A capture keeps only the sysctls inventory reads; where it has /proc/sys
/// at all (the VM), the ones the knobs name are given this machine's
/// values (read only), as the captured kernel has them too.
fn give_sysctls(root: &Path, dir: &Path) {
    if !root.join("proc/sys").is_dir() {
        return;
    }
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let k: serde_yaml::Value = serde_yaml::from_str(&read(&p)).unwrap();
        if k["kind"] != "sysctl" {
            continue;
        }
        let rel = format!(
            "proc/sys/{}",
            k["target"]["name"].as_str().unwrap().replace('.', "/")
        );
        if !root.join(&rel).exists()
            && let Ok(v) = std::fs::read_to_string(Path::new("/").join(&rel))
        {
            write_files(root, &[(rel.as_str(), v.as_str())]);
        }
    }
}

/// The option lines of a profile file and its includes, counted here from
/// the files themselves.
fn option_lines(files: &[String], root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let text = read(&root.join(f.trim_start_matches('/')));
        let mut in_section = false;
        for (i, l) in text.lines().enumerate() {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            if t.starts_with('[') {
                in_section = true;
            } else if in_section && t.contains('=') {
                out.push(format!("{f}:{}", i + 1));
            }
        }
    }
    out
}

fn includes(root: &Path, profile: &str) -> Vec<String> {
    let f = format!("/usr/lib/tuned/{profile}/tuned.conf");
    let text = read(&root.join(f.trim_start_matches('/')));
    let mut v = vec![f];
    if let Some(mut inc) = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("include")
            .map(|r| r.trim_start_matches([' ', '=']).trim().to_string())
    }) {
        // openshift: ${f:virt_check:GUEST:BARE}, by the hypervisor CPU flag.
        if let Some(args) = inc
            .strip_prefix("${f:virt_check:")
            .and_then(|a| a.strip_suffix('}'))
        {
            let guest = read(&root.join("proc/cpuinfo")).contains(" hypervisor");
            let (g, b) = args.split_once(':').unwrap();
            inc = if guest { g } else { b }.to_string();
        }
        v.extend(includes(root, &inc));
    }
    v
}

fn plans(host: &str, isolated: &str) {
    let Some(_) = tuned_dir() else { return };
    let (_tmp, root) = host_with_tuned(host, isolated);
    give_debian_boot_and_irqbalance(&root);
    let outs = tempfile::tempdir().unwrap();
    let all = profiles(&root.join("usr/lib/tuned"));
    assert!(all.len() >= 30, "{all:?}");
    for profile in &all {
        let profile = profile.as_str();
        let dir = outs.path().join(profile);
        let o = import(&root, host, profile, &dir);
        ok(&o);
        // Every option line: imported or not imported, with a reason.
        let imported = read(&dir.join("IMPORTED.md"));
        let not = read(&dir.join("NOT-IMPORTED.md"));
        let lines = option_lines(&includes(&root, profile), &root);
        let mut n_imp = 0;
        for l in &lines {
            let cell = format!("| {l} |");
            let (a, b) = (imported.contains(&cell), not.contains(&cell));
            assert!(
                a != b,
                "{host} {profile}: {l} in IMPORTED {a}, NOT-IMPORTED {b}"
            );
            n_imp += a as usize;
            if b {
                let row = not.lines().find(|r| r.starts_with(&cell)).unwrap();
                assert!(
                    row.split('|').nth(3).is_some_and(|r| r.trim().len() > 10),
                    "no reason: {row}"
                );
                assert!(stderr(&o).contains(l), "{l} not on stderr");
            }
        }
        let pct = 100 * n_imp / lines.len();
        println!(
            "{host} {profile}: {n_imp} of {} option lines imported ({pct}%)",
            lines.len()
        );
        match profile {
            // cpu-partitioning: 47 of 52; not [script] script, the initrd_*
            // lines and the ${f:exec} variable feeding them.
            "latency-performance" | "network-latency" | "realtime" | "cpu-partitioning" => {
                assert!(pct >= 90, "{profile}: {pct}%")
            }
            _ => {}
        }
        // No command line over the kernel's 2048 characters (x86).
        let cmdline = dir.join(format!("tuned-{profile}-bootloader-cmdline.yaml"));
        if cmdline.exists() {
            let add = cmdline_words(&dir, &format!("tuned-{profile}-bootloader-cmdline"));
            assert!(add.len() < 1024, "{host} {profile}: {add}");
        }
        give_sysctls(&root, &dir);
        if ids(&dir).is_empty() {
            // tuned's `default` sets nothing: nothing to load or plan.
            assert!(
                not_knob_free(&dir),
                "{host} {profile}: no knob, yet imported lines"
            );
            continue;
        }
        // Loads and plans on the host.
        let state = format!("/{STATE_DIR}");
        let o = run(
            &root,
            &dir,
            &[
                "--host",
                host,
                "--state-dir",
                &state,
                "apply",
                "--all",
                "--dry-run",
            ],
        );
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert!(
            o.status.success(),
            "{host} {profile}: dry run failed:\n{text}"
        );
        // The imported knobs are one profile, applied by its name.
        let slug = profile.replace('_', "-");
        let listed = read(&dir.join("profiles").join(format!("{slug}.yaml")));
        let ids: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let n = e.unwrap().file_name().into_string().unwrap();
                n.strip_suffix(".yaml").map(str::to_string)
            })
            .collect();
        assert!(!ids.is_empty());
        for id in &ids {
            assert!(
                listed.contains(&format!("- {id}\n")),
                "{slug}.yaml lacks {id}:\n{listed}"
            );
        }
        let o = run(
            &root,
            &dir,
            &[
                "--host",
                host,
                "--state-dir",
                &state,
                "apply",
                "--profile",
                &slug,
                "--dry-run",
            ],
        );
        assert!(
            o.status.success(),
            "{host} {profile}: apply --profile {slug} --dry-run failed:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(stdout(&o).contains(&ids[0]), "{}", stdout(&o));
        // Twice: the same bytes.
        let again = outs.path().join(format!("{profile}-again"));
        ok(&import(&root, host, profile, &again));
        let names = |d: &Path| {
            let mut v: Vec<PathBuf> = Vec::new();
            for sub in ["", "profiles"] {
                for e in std::fs::read_dir(d.join(sub)).unwrap() {
                    let e = e.unwrap();
                    if e.file_type().unwrap().is_file() {
                        v.push(Path::new(sub).join(e.file_name()));
                    }
                }
            }
            v.sort();
            v
        };
        assert_eq!(names(&dir), names(&again));
        for n in names(&dir) {
            assert_eq!(
                read(&dir.join(&n)),
                read(&again.join(&n)),
                "{n:?} differs between two runs"
            );
        }
    }
}

#[test]
fn import_tuned_profiles_load_and_plan_on_spr1() {
    plans("spr1", "4-11");
}

#[test]
fn import_tuned_profiles_load_and_plan_on_genoa0() {
    plans("genoa0", "4-11");
}

#[test]
fn import_tuned_profiles_load_and_plan_on_the_vm() {
    plans("fc-haltpoll-2cpu", "1");
}

fn knob(dir: &Path, id: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&read(&dir.join(format!("{id}.yaml")))).unwrap()
}

/// force_latency=cstate.id_no_zero:1|3 lands on cpu0's state1 when its
/// exit latency is not 0, else state3: read independently from the tree.
fn force_latency_on(host: &str) {
    let Some(_) = tuned_dir() else { return };
    let (_tmp, root) = host_with_tuned(host, "4-11");
    let dir = tempfile::tempdir().unwrap();
    ok(&import(&root, host, "latency-performance", dir.path()));
    let st = |i: u32, a: &str| {
        read(&root.join(format!("sys/devices/system/cpu/cpu0/cpuidle/state{i}/{a}")))
            .trim()
            .to_string()
    };
    let idx = if st(1, "latency") != "0" { 1 } else { 3 };
    let (name, lat) = (st(idx, "name"), st(idx, "latency"));
    let k = knob(dir.path(), "tuned-latency-performance-cpu-force-latency");
    assert_eq!(k["kind"], "pm-qos");
    assert_eq!(k["set"].as_u64().unwrap().to_string(), lat);
    let why = k["why"].as_str().unwrap();
    assert!(
        why.contains(&format!("state{idx} on this host's cpu0: {name} ")),
        "{host}: {why}"
    );
}

#[test]
fn import_tuned_force_latency_names_the_state_on_spr1() {
    force_latency_on("spr1");
}

#[test]
fn import_tuned_force_latency_names_the_state_on_genoa0() {
    force_latency_on("genoa0");
}

#[test]
fn import_tuned_values_per_kind() {
    let Some(_) = tuned_dir() else { return };
    let (_tmp, root) = host_with_tuned("spr1", "4-11");
    let dir = tempfile::tempdir().unwrap();
    ok(&import(&root, "spr1", "network-latency", dir.path()));
    let g = knob(dir.path(), "tuned-network-latency-cpu-governor");
    assert_eq!(
        (g["kind"].as_str(), g["set"].as_str()),
        (Some("cpufreq-governor"), Some("performance"))
    );
    let t = knob(dir.path(), "tuned-network-latency-vm-transparent-hugepages");
    assert_eq!(t["kind"], "thp");
    assert_eq!(t["target"]["setting"], "enabled");
    assert_eq!(t["set"], "never");
    let s = knob(dir.path(), "tuned-network-latency-sysctl-vm-swappiness");
    assert_eq!(
        (
            s["kind"].as_str(),
            s["target"]["name"].as_str(),
            s["set"].as_str()
        ),
        (Some("sysctl"), Some("vm.swappiness"), Some("10"))
    );
    assert!(
        s["why"]
            .as_str()
            .unwrap()
            .contains("latency-performance/tuned.conf:34")
    );
    let c = knob(dir.path(), "tuned-network-latency-bootloader-cmdline");
    assert_eq!(c["set"]["add"][0], "skew_tick=1");
    // cpu-partitioning: the isolated CPUs from the variables file.
    let cp_dir = tempfile::tempdir().unwrap();
    ok(&import(&root, "spr1", "cpu-partitioning", cp_dir.path()));
    let i = knob(
        cp_dir.path(),
        "tuned-cpu-partitioning-irqbalance-banned-cpus",
    );
    assert_eq!(i["set"], "4-11");
    let w = knob(
        cp_dir.path(),
        "tuned-cpu-partitioning-sysfs-devices-virtual-workqueue-cpumask",
    );
    assert_eq!(w["kind"], "workqueue-cpumask");
    let online = read(&root.join("sys/devices/system/cpu/online"))
        .trim()
        .to_string();
    assert!(online.starts_with("0-"), "{online}");
    assert!(
        w["set"].as_str().unwrap().starts_with("0-3,12-"),
        "{:?}",
        w["set"]
    );
    // [scheduler] isolated_cores with ps_blacklist: the threads, each
    // pattern of the line (split at `;`) excluded, kept on the other CPUs.
    let th = knob(cp_dir.path(), "tuned-cpu-partitioning-scheduler-threads");
    assert_eq!(th["kind"], "thread-affinity");
    assert_eq!(th["set"], w["set"]);
    assert_eq!(th["persistence"], "runtime");
    let conf = read(&root.join("usr/lib/tuned/cpu-partitioning/tuned.conf"));
    let line = conf
        .lines()
        .find_map(|l| l.strip_prefix("ps_blacklist="))
        .unwrap();
    let want: Vec<&str> = line.split(';').collect();
    let got: Vec<&str> = th["target"]["exclude"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(got, want);
    let irq = knob(
        cp_dir.path(),
        "tuned-cpu-partitioning-scheduler-isolated-cores",
    );
    assert_eq!(
        (irq["kind"].as_str(), &irq["set"]),
        (Some("irq-affinity"), &w["set"])
    );
    let imported = read(&cp_dir.path().join("IMPORTED.md"));
    assert!(
        imported.contains("| `ps_blacklist` | knob `tuned-cpu-partitioning-scheduler-threads` |"),
        "{imported}"
    );
    assert!(
        imported.contains("| `no_balance_cores_expanded` | variable, here empty"),
        "{imported}"
    );
}

/// Issue 38 item 5: history is dated by the import, as every writer dates it;
/// the profile file's own date is only in the note.
#[test]
fn import_tuned_dates_history_with_the_import_not_the_profile() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    write_files(
        from.path(),
        &[(
            "old/tuned.conf",
            "[main]\nsummary=old\n[sysctl]\nvm.swappiness=10\n",
        )],
    );
    let conf = from.path().join("old/tuned.conf");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_676_592_000); // 2023-02-17
    std::fs::File::options()
        .write(true)
        .open(&conf)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let before = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let out = tempfile::tempdir().unwrap();
    ok(&import_from(&root, "old", from.path(), out.path()));
    let after = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let k = knob(out.path(), "tuned-old-sysctl-vm-swappiness");
    let h = &k["history"][0];
    let date = h["date"].as_str().unwrap();
    assert!(
        date == &before[..10] || date == &after[..10],
        "{date}, not today"
    );
    assert!(
        h["note"]
            .as_str()
            .unwrap()
            .contains("(modified 2023-02-17)"),
        "{h:?}"
    );
}

#[test]
fn import_tuned_dirty_bytes_percent_is_the_ratio_tuned_writes() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    write_files(
        from.path(),
        &[(
            "vmtest/tuned.conf",
            "[main]\nsummary=test\n[vm]\ndirty_bytes=10%\ndirty_background_bytes=1048576\n",
        )],
    );
    let out = tempfile::tempdir().unwrap();
    ok(&import_from(&root, "vmtest", from.path(), out.path()));
    let k = knob(out.path(), "tuned-vmtest-vm-dirty-bytes");
    assert_eq!(
        (k["target"]["name"].as_str(), k["set"].as_str()),
        (Some("vm.dirty_ratio"), Some("10"))
    );
    let b = knob(out.path(), "tuned-vmtest-vm-dirty-background-bytes");
    assert_eq!(
        (b["target"]["name"].as_str(), b["set"].as_str()),
        (Some("vm.dirty_background_bytes"), Some("1048576"))
    );
}

fn refused(files: &[(&str, &str)], profile: &str, wants: &[&str]) {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    write_files(from.path(), files);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("m");
    let o = import_from(&root, profile, from.path(), &dir);
    assert!(!o.status.success());
    let e = stderr(&o);
    for w in wants {
        assert!(e.contains(w), "{w:?} not in: {e}");
    }
    assert!(!dir.exists(), "something was written");
}

#[test]
fn import_tuned_bad_input_is_refused_naming_the_line() {
    refused(
        &[("a/tuned.conf", "[main]\nsummary=x\n")],
        "missing",
        &["\"missing\" not found"],
    );
    refused(
        &[
            ("a/tuned.conf", "[main]\ninclude=b\n"),
            ("b/tuned.conf", "[main]\n\ninclude=a\n"),
        ],
        "a",
        &["b/tuned.conf:3", "include cycle"],
    );
    refused(
        &[(
            "a/tuned.conf",
            "[main]\nsummary=x\n[sysctl]\nvm.swappiness 10\n",
        )],
        "a",
        &["a/tuned.conf:4", "malformed line"],
    );
    refused(
        &[(
            "a/tuned.conf",
            "[variables]\nx=${f:assertion:x is set:1:2}\n",
        )],
        "a",
        &["a/tuned.conf:2", "assertion 'x is set' failed"],
    );
}

/// Imports `[scheduler]` TEXT as profile `sched` from a --from directory on
/// the VM capture (2 CPUs, CPU 1 isolated): (the out dir, IMPORTED.md,
/// NOT-IMPORTED.md).
fn import_scheduler(text: &str) -> (tempfile::TempDir, String, String) {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    let conf = format!("[main]\nsummary=s\n[scheduler]\nisolated_cores=1\n{text}");
    write_files(from.path(), &[("sched/tuned.conf", conf.as_str())]);
    let out = tempfile::tempdir().unwrap();
    ok(&import_from(&root, "sched", from.path(), out.path()));
    let imp = read(&out.path().join("IMPORTED.md"));
    let not = read(&out.path().join("NOT-IMPORTED.md"));
    (out, imp, not)
}

#[test]
fn import_tuned_thread_moves_are_never_wider_than_tuneds() {
    let threads = "tuned-sched-scheduler-threads.yaml";
    // Patterns as tuned splits them: `\;` is a literal semicolon.
    let (out, _, _) = import_scheduler("ps_blacklist=^a\\;b$;pmd\nps_whitelist=.*\n");
    let k = knob(out.path(), "tuned-sched-scheduler-threads");
    assert_eq!(k["target"]["exclude"][0], "^a;b$");
    assert_eq!(k["target"]["exclude"][1], "pmd");
    assert_eq!(k["target"]["include"][0], ".*");
    assert_eq!(k["set"], "0");
    // cgroup_ps_blacklist: the threads of matching cgroups stay where they
    // are, as `target.exclude-cgroup` (issue 46; before, no thread knob).
    let (out, _, _) =
        import_scheduler("ps_blacklist=pmd\ncgroup_ps_blacklist=/kubepods\\.slice/\n");
    let k = knob(out.path(), "tuned-sched-scheduler-threads");
    assert_eq!(k["target"]["exclude"][0], "pmd");
    assert_eq!(k["target"]["exclude-cgroup"][0], "/kubepods\\.slice/");
    assert!(
        out.path()
            .join("tuned-sched-scheduler-isolated-cores.yaml")
            .exists()
    );
    // A pattern the regex crate reads otherwise than Python: no thread knob.
    let (out, _, not) = import_scheduler("ps_blacklist=(?<=x)pmd\n");
    assert!(!out.path().join(threads).exists());
    assert!(
        not.contains("is not one hostknob reads the way Python's re does"),
        "{not}"
    );
    // An empty pattern matches every name: tuned moves no thread at all.
    let (out, imp, _) = import_scheduler("ps_blacklist=pmd;\n");
    assert!(!out.path().join(threads).exists());
    assert!(
        imp.contains("tuned moves no thread, so no thread-affinity knob"),
        "{imp}"
    );
}

/// The words a kernel-cmdline knob of an import adds, joined as on the line.
fn cmdline_words(dir: &Path, id: &str) -> String {
    let k = knob(dir, id);
    k["set"]["add"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Issue 31 item 3: on spr1 (320 CPUs) with the isolated CPUs given one by
/// one, as tuned's calc_isolated_cores gave them before 2.25, the CPU lists
/// are packed into ranges and the command line fits the kernel's
/// COMMAND_LINE_SIZE (2048 on x86) with the capture's own line.
#[test]
fn import_tuned_cpu_lists_are_packed_so_the_command_line_fits_on_spr1() {
    let Some(_) = tuned_dir() else { return };
    let one_by_one: Vec<String> = (2..160).chain(162..320).map(|c| c.to_string()).collect();
    let (_tmp, root) = host_with_tuned("spr1", &one_by_one.join(","));
    let current = std::fs::read_to_string(root.join("proc/cmdline")).unwrap_or_default();
    let outs = tempfile::tempdir().unwrap();
    for profile in ["cpu-partitioning", "realtime-virtual-host"] {
        let dir = outs.path().join(profile);
        ok(&import(&root, "spr1", profile, &dir));
        let add = cmdline_words(&dir, &format!("tuned-{profile}-bootloader-cmdline"));
        let nohz = add
            .split(' ')
            .find_map(|w| w.strip_prefix("nohz_full="))
            .unwrap();
        assert!(nohz.contains('-') && !nohz.contains(",2,3,"), "{nohz}");
        let line = current.trim().len() + 1 + add.len();
        assert!(line < 2048, "{profile}: {line} characters: {add}");
        println!("spr1 {profile}: command line {line} characters");
    }
}

/// Imports the profile `p` (TEXT) from a --from directory on the VM capture
/// and dry-runs it there: the out directory.
fn import_and_plan(text: &str) -> tempfile::TempDir {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let from = tempfile::tempdir().unwrap();
    write_files(from.path(), &[("p/tuned.conf", text)]);
    let out = tempfile::tempdir().unwrap();
    ok(&import_from(&root, "p", from.path(), out.path()));
    give_sysctls(&root, out.path());
    let state = format!("/{STATE_DIR}");
    let o = run(
        &root,
        out.path(),
        &["--state-dir", &state, "apply", "--all", "--dry-run"],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    out
}

/// An import without knobs imported no line as a knob either.
fn not_knob_free(dir: &Path) -> bool {
    !read(&dir.join("IMPORTED.md")).contains("| knob `")
}

fn ids(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".yaml").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// Issue 31 item 5: `[cpu] boost` is the turbo kind (tuned >= 2.24 writes
/// policyN/boost and intel_pstate/no_turbo); `irq_process=false`,
/// `kthread_process=false` and `default_irq_smp_affinity` change what is
/// emitted; `cmdline_X=-word` is folded into the merged line, never a knob
/// the loader rejects.
#[test]
fn import_tuned_boost_irq_process_kthread_process_and_cmdline_removal() {
    // As OpenShift's openshift-node-performance sets them.
    let out = import_and_plan(
        "[main]\nsummary=s\n[cpu]\nboost=0\n[scheduler]\nisolated_cores=1\nirq_process=false\n\
         kthread_process=false\n[bootloader]\ncmdline_a=+nosoftlockup\ncmdline_b=-nosoftlockup\n",
    );
    let b = knob(out.path(), "tuned-p-cpu-boost");
    assert_eq!(
        (b["kind"].as_str(), b["set"].as_str()),
        (Some("turbo"), Some("off"))
    );
    assert_eq!(ids(out.path()), vec!["tuned-p-cpu-boost"]);
    let imp = read(&out.path().join("IMPORTED.md"));
    assert!(imp.contains("tuned moves no IRQ"), "{imp}");
    assert!(
        imp.contains("no word is left, so no kernel-cmdline knob"),
        "{imp}"
    );
    let not = read(&out.path().join("NOT-IMPORTED.md"));
    assert!(
        not.contains("| `kthread_process` | thread moves not imported: kthread_process=false"),
        "{not}"
    );
    // default_irq_smp_affinity=ignore: the IRQs move, the default stays.
    let out = import_and_plan(
        "[main]\nsummary=s\n[scheduler]\nisolated_cores=1\ndefault_irq_smp_affinity=ignore\n",
    );
    let k = knob(out.path(), "tuned-p-scheduler-isolated-cores");
    assert_eq!(k["target"]["all"], true);
    assert!(k["target"].get("default").is_none(), "{k:?}");
    // A list: the default mask as given, beside the IRQs.
    let out = import_and_plan(
        "[main]\nsummary=s\n[scheduler]\nisolated_cores=1\ndefault_irq_smp_affinity=0-1\n",
    );
    let d = knob(out.path(), "tuned-p-scheduler-default-irq-smp-affinity");
    assert_eq!(
        (d["target"]["default"].as_bool(), d["set"].as_str()),
        (Some(true), Some("0-1"))
    );
    assert!(d["target"].get("all").is_none());
    let k = knob(out.path(), "tuned-p-scheduler-isolated-cores");
    assert!(k["target"].get("default").is_none(), "{k:?}");
}

/// realtime's `[net] channels=combined ${f:check_net_queue_count:...}`: the
/// count given, or tuned's `nproc` (the CPUs isolcpus= leaves it), on every
/// physical NIC; it plans on the hand-built ice.
#[test]
fn import_tuned_realtime_imports_its_channels_line() {
    let Some(_) = tuned_dir() else { return };
    for (count, want) in [(None, "16"), (Some("4"), "4")] {
        let (_tmp, root) = host_with_tuned("adl0", "2-3");
        crate::support::nic::add(&root, &crate::support::nic::ICE);
        give_debian_boot_and_irqbalance(&root);
        if let Some(n) = count {
            let f = root.join("etc/tuned/realtime-variables.conf");
            let text = read(&f) + &format!("netdev_queue_count={n}\n");
            std::fs::write(&f, text).unwrap();
        }
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("rt");
        ok(&import(&root, "adl0", "realtime", &dir));
        let line = "| /usr/lib/tuned/realtime/tuned.conf:39 |";
        assert!(read(&dir.join("IMPORTED.md")).contains(line));
        assert!(!read(&dir.join("NOT-IMPORTED.md")).contains(line));
        let id = ids(&dir)
            .into_iter()
            .find(|i| read(&dir.join(format!("{i}.yaml"))).contains("kind: nic-channels"))
            .expect("a nic-channels knob");
        let knob = read(&dir.join(format!("{id}.yaml")));
        assert!(knob.contains("physical: true"), "{knob}");
        assert!(knob.contains(&format!("combined: '{want}'")), "{knob}");
        let state = format!("/{STATE_DIR}");
        let o = run(
            &root,
            &dir,
            &[
                "--host",
                "adl0",
                "--state-dir",
                &state,
                "apply",
                &id,
                "--dry-run",
            ],
        );
        let text = ok(&o);
        // ice has 16 combined channels: 16 is in effect, 4 is a write on ens2f0.
        let says = if want == "16" {
            "already in effect"
        } else {
            "ens2f0"
        };
        assert!(text.contains(&id) && text.contains(says), "{text}");
    }
}
