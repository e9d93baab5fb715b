//! Malformed manifests under tests/bad-manifests/: each error names the file,
//! the line and the field, exits 1, and changes nothing (neither the host
//! tree nor the manifest directory).

use std::path::Path;

use crate::support::*;

/// (case directory, file, line, field, part of the message)
const CASES: &[(&str, &str, usize, &str, &str)] = &[
    (
        "profile-include-cycle",
        "profiles/a.yaml",
        2,
        "include[0]",
        "include cycle a -> b -> a: a includes b at",
    ),
    (
        "profile-conflict",
        "profiles/p2.yaml",
        5,
        "overrides.thp-madvise.set",
        "conflict: knob thp-madvise set is set differently by profile p1 at",
    ),
    (
        "profile-override-bad-value",
        "profiles/p.yaml",
        5,
        "overrides.thp-madvise.set",
        "without brackets (override of thp knob thp-madvise, defined at",
    ),
    (
        "yaml-syntax-unclosed-list",
        "thp.yaml",
        7,
        "hosts",
        "is not closed (noticed at line 8)",
    ),
    (
        "yaml-syntax-bad-indent",
        "thp.yaml",
        6,
        "target.set",
        "did not find expected key",
    ),
    (
        "yaml-syntax-tab",
        "thp.yaml",
        5,
        "target.setting",
        "cannot start any token",
    ),
    (
        "unknown-field-top",
        "thp.yaml",
        10,
        "owner",
        "unknown field `owner`",
    ),
    (
        "unknown-field-target",
        "cpuidle.yaml",
        6,
        "target.states.deepest",
        "unknown field `deepest`",
    ),
    (
        "unknown-field-history",
        "thp.yaml",
        14,
        "history[0].who",
        "unknown field `who`",
    ),
    (
        "unknown-kind",
        "thp.yaml",
        3,
        "kind",
        "unknown kind \"cstate\"; known kinds: cpuidle-state",
    ),
    (
        "duplicate-id-two-files",
        "b.yaml",
        1,
        "id",
        "duplicate id \"thp-madvise\" (first defined at",
    ),
    (
        "duplicate-id-one-file",
        "thp.yaml",
        11,
        "id",
        "duplicate id \"thp-madvise\"",
    ),
    (
        "irq-affinity-no-target",
        "irq.yaml",
        4,
        "target",
        "names no IRQs",
    ),
    (
        "irq-affinity-bad-set",
        "irq.yaml",
        6,
        "set",
        "\"0-\" is not a CPU list",
    ),
    (
        "irq-affinity-tmpfiles",
        "irq.yaml",
        8,
        "persistence",
        "tmpfiles cannot hold a irq-affinity knob",
    ),
    (
        "irqbalance-bad-set",
        "irqbalance.yaml",
        4,
        "set",
        "\"one\" is not a CPU list",
    ),
    (
        "thread-affinity-bad-pattern",
        "threads.yaml",
        5,
        "target.exclude",
        "\"^dpdk(\" is not a regular expression",
    ),
    (
        "thread-affinity-empty-set",
        "threads.yaml",
        6,
        "set",
        "empty CPU list: a thread needs a CPU to run on",
    ),
    (
        "bad-cpu-list",
        "cpuidle.yaml",
        5,
        "target.cpus",
        "\"0-x\" is not a CPU list",
    ),
    (
        "bad-cpu-list-descending",
        "resume.yaml",
        5,
        "target.cpus",
        "descending range \"7-3\"",
    ),
    (
        "empty-cpu-list",
        "resume.yaml",
        5,
        "target.cpus",
        "empty CPU list",
    ),
    (
        "sysfs-dotdot",
        "sysfs.yaml",
        5,
        "target.path",
        "contains `..`",
    ),
    (
        "sysfs-outside-sys",
        "sysfs.yaml",
        5,
        "target.path",
        "is not under /sys",
    ),
    (
        "sysfs-directory",
        "sysfs.yaml",
        5,
        "target.path",
        "is a directory, not an attribute",
    ),
    (
        "sysctl-nonexistent",
        "sysctl.yaml",
        5,
        "target.name",
        "no sysctl vm.swapiness on this host",
    ),
    (
        "sysctl-bad-name",
        "sysctl.yaml",
        5,
        "target.name",
        "is not a sysctl name",
    ),
    (
        "negative-latency",
        "cpuidle.yaml",
        6,
        "target.states.min_exit_latency_us",
        "-5 is negative",
    ),
    (
        "negative-resume-latency",
        "resume.yaml",
        6,
        "set",
        "-1 is negative",
    ),
    ("empty-hosts", "thp.yaml", 7, "hosts", "empty list"),
    (
        "hosts-bare-name",
        "thp.yaml",
        7,
        "hosts",
        "give a list of host names ([vm])",
    ),
    ("missing-why", "thp.yaml", 1, "why", "missing field `why`"),
    ("missing-set", "thp.yaml", 1, "set", "missing field `set`"),
    (
        "states-by-index",
        "cpuidle.yaml",
        6,
        "target.states.index",
        "never by index",
    ),
    (
        "states-names-and-latency",
        "cpuidle.yaml",
        6,
        "target.states",
        "not both",
    ),
    (
        "cpuidle-bad-set",
        "cpuidle.yaml",
        7,
        "set",
        "unknown variant `off`",
    ),
    (
        "bad-persistence",
        "thp.yaml",
        8,
        "persistence",
        "unknown variant `forever`",
    ),
    (
        "persistence-wrong-for-kind",
        "cpuidle.yaml",
        9,
        "persistence",
        "sysctl.d cannot hold a cpuidle-state knob",
    ),
    (
        "cmdline-without-form",
        "sysctl.yaml",
        8,
        "persistence",
        "no kernel command-line form",
    ),
    (
        "bad-history-date",
        "thp.yaml",
        12,
        "history[1].date",
        "\"2026-13-45\" is not a date",
    ),
    (
        "bad-history-action",
        "thp.yaml",
        12,
        "history[0].action",
        "unknown variant `exploded`",
    ),
    (
        "bad-verify-probe",
        "thp.yaml",
        11,
        "verify.probe",
        "unknown variant `magic`",
    ),
    (
        "verify-command-regex-two-groups",
        "thp.yaml",
        14,
        "verify.probe.metric.regex",
        "has 2 groups: it needs exactly one",
    ),
    (
        "verify-command-json-path",
        "thp.yaml",
        14,
        "verify.probe.metric.json",
        "\"latency..p99\" is not a dotted path",
    ),
    (
        "verify-command-no-metric",
        "thp.yaml",
        14,
        "verify.probe.metric",
        "say where the number is",
    ),
    ("bad-id", "thp.yaml", 1, "id", "is not a knob id"),
    (
        "verify-expect-prose",
        "thp.yaml",
        11,
        "verify",
        "`p50 no higher than 120 µs` is prose, which verify cannot check; write it as `{metric: p50",
    ),
    (
        "verify-expect-missing-by",
        "thp.yaml",
        11,
        "verify",
        "`change: lower` needs `by:`",
    ),
    (
        "allocator-bad-conf",
        "alloc.yaml",
        6,
        "set",
        "is not key:value",
    ),
    (
        "allocator-not-a-service",
        "alloc.yaml",
        5,
        "target.service",
        "is not a service unit name",
    ),
    (
        "module-param-path-in-name",
        "haltpoll.yaml",
        5,
        "target.module",
        "is not a module name",
    ),
    (
        "module-param-nonexistent",
        "haltpoll.yaml",
        6,
        "target.param",
        "has no parameter guest_halt_poll_nanos",
    ),
    (
        "module-unknown-field",
        "mod.yaml",
        8,
        "set.options",
        "unknown field `options`",
    ),
    (
        "module-empty-name",
        "mod.yaml",
        5,
        "target.module",
        "\"\" is not a module name",
    ),
    (
        "module-path-in-name",
        "mod.yaml",
        5,
        "target.module",
        "\"../../lib/x\" is not a module name",
    ),
    (
        "module-dot-dot",
        "mod.yaml",
        5,
        "target.module",
        "\"..\" is not a module name",
    ),
    (
        "module-not-loaded",
        "mod.yaml",
        6,
        "set.loaded",
        "only `true`: hostknob unloads no module",
    ),
    (
        "module-persistence-modprobe-d",
        "mod.yaml",
        8,
        "persistence",
        "modprobe.d cannot hold a module knob; use one of: runtime, modules-load.d",
    ),
    (
        "module-param-value-newline",
        "param.yaml",
        7,
        "set",
        "give one non-empty value",
    ),
    (
        "module-param-equals-in-name",
        "param.yaml",
        6,
        "target.param",
        "\"down_threshold=30 x\" is not a parameter name",
    ),
    ("thp-brackets", "thp.yaml", 6, "set", "without brackets"),
    (
        "thp-size-defrag",
        "thp.yaml",
        6,
        "target.size",
        "defrag has no per-size file",
    ),
    (
        "thp-size-not-a-page-size",
        "thp.yaml",
        6,
        "target.size",
        "not a huge page size",
    ),
    ("epp-two-words", "epp.yaml", 6, "set", "expected one word"),
    (
        "pm-qos-with-cpus",
        "pmqos.yaml",
        5,
        "target.cpus",
        "no target fields",
    ),
    (
        "missing-target",
        "cpuidle.yaml",
        1,
        "target",
        "missing: give target.states",
    ),
    ("empty-title", "thp.yaml", 2, "title", "empty"),
    (
        "caveats-not-a-list",
        "thp.yaml",
        10,
        "caveats",
        "expected a sequence",
    ),
    (
        "workqueue-empty-cpu-list",
        "wq.yaml",
        4,
        "set",
        "empty CPU list",
    ),
    (
        "workqueue-hex-mask",
        "wq.yaml",
        4,
        "set",
        "is not a CPU list",
    ),
    (
        "workqueue-path-in-glob",
        "wq.yaml",
        5,
        "target.workqueues",
        "is not a workqueue name or glob",
    ),
    (
        "systemd-affinity-allowedcpus-system",
        "affinity.yaml",
        5,
        "target.property",
        "AllowedCPUs is a unit's cgroup setting",
    ),
    (
        "systemd-affinity-bad-property",
        "affinity.yaml",
        6,
        "target.property",
        "expected CPUAffinity or AllowedCPUs",
    ),
    (
        "systemd-affinity-not-a-service",
        "affinity.yaml",
        5,
        "target.units",
        "is not a service unit name",
    ),
    (
        "cpufreq-min-unknown-unit",
        "floor.yaml",
        6,
        "set",
        "unknown unit \"THz\"",
    ),
    (
        "cpufreq-max-fraction-of-khz",
        "ceiling.yaml",
        6,
        "set",
        "is not a whole number of kHz",
    ),
    (
        "turbo-not-on-off",
        "turbo.yaml",
        6,
        "set",
        "turbo is `on` or `off`",
    ),
    (
        "epb-out-of-range",
        "epb.yaml",
        6,
        "set",
        "EPB is a number from 0",
    ),
    (
        "uncore-not-100mhz",
        "uncore.yaml",
        6,
        "set",
        "not a multiple of 100 MHz",
    ),
    (
        "uncore-bad-bound",
        "uncore.yaml",
        5,
        "target.bound",
        "the bound is `min`",
    ),
    (
        "uncore-base",
        "uncore.yaml",
        6,
        "set",
        "\"base\" is not offered here",
    ),
    (
        "msr-c1e-not-on-off",
        "c1e.yaml",
        5,
        "set",
        "is not `on` or `off`",
    ),
    (
        "msr-pkg-limit-unknown",
        "pkgc.yaml",
        4,
        "set",
        "is not a package C-state limit",
    ),
    (
        "msr-hwp-out-of-range",
        "hwp.yaml",
        4,
        "set",
        "is not an HWP performance level: give 0-255",
    ),
    (
        "msr-prefetcher-unknown",
        "pf.yaml",
        4,
        "target.prefetcher",
        "is not a prefetcher; give one of l2-hw",
    ),
    (
        "msr-prefetcher-unnamed",
        "pf.yaml",
        1,
        "target",
        "name the prefetcher",
    ),
    (
        "msr-persistence-tmpfiles",
        "c1e.yaml",
        6,
        "persistence",
        "tmpfiles cannot hold a c1e knob; use one of: runtime, boot",
    ),
    // A file without a knob has no field to name.
    ("empty-file", "empty.yaml", 1, "", "no knob in this file"),
    (
        "kernel-cmdline-twice",
        "cmdline.yaml",
        9,
        "set.remove[0]",
        "nohz_full is given twice (first at set.add[1])",
    ),
    (
        "kernel-cmdline-bad-param",
        "cmdline.yaml",
        7,
        "set.add[1]",
        "'$' is not taken in a value",
    ),
    (
        "when-unknown-fact",
        "thp.yaml",
        10,
        "when.cpu_vendor",
        "unknown fact `cpu_vendor`; known facts: vendor, family, model, microarchitecture",
    ),
    (
        "when-bad-comparison",
        "thp.yaml",
        9,
        "when.kernel[1]",
        "\"=>5.15\" is not a comparison: write one of ==, !=, <, <=, >, >=",
    ),
    (
        "when-ordered-name",
        "thp.yaml",
        10,
        "when.idle_driver",
        "idle_driver is a name, compared only with == or !=",
    ),
    (
        "when-memory-without-unit",
        "thp.yaml",
        10,
        "when.memory",
        "give a size with its unit",
    ),
    (
        "when-unknown-model-name",
        "thp.yaml",
        10,
        "when.model",
        "\"saphirerapids\" is not a model name hostknob knows; did you mean \"sapphirerapids\"?",
    ),
    (
        "when-not-a-mapping",
        "thp.yaml",
        8,
        "when",
        "give a mapping of facts to conditions",
    ),
    (
        "nic-unknown-field-target",
        "nic.yaml",
        5,
        "target.interface",
        "unknown field `interface`; did you mean \"interfaces\"?",
    ),
    (
        "nic-channels-zero",
        "nic.yaml",
        8,
        "set.rx",
        "combined 0 and rx 0 leave the NIC no receive channel",
    ),
    (
        "nic-channels-too-large",
        "nic.yaml",
        7,
        "set.combined",
        "1099511627776 is above 4294967295, the largest value ethtool takes",
    ),
    (
        "block-unknown-setting",
        "block.yaml",
        8,
        "set.elevator",
        "unknown field `elevator`, expected one of `scheduler`",
    ),
    (
        "block-name-quote",
        "block.yaml",
        5,
        "target.name",
        "no `/`, no quote, blank or newline, which would end a udev rule's value or line",
    ),
    (
        "block-name-newline",
        "block.yaml",
        5,
        "target.name",
        "is not a block device name or glob",
    ),
    (
        "block-bound-udev-rule",
        "block.yaml",
        9,
        "persistence",
        "udev-rule cannot hold a block knob (a bound is judged against the value each boot has; \
         a file of fixed lines (sysctl.d, tmpfiles.d, a udev rule's ATTR assignment) would write \
         it even where the host boots beyond it); use one of: runtime, boot",
    ),
    (
        "bound-not-a-number",
        "sysctl.yaml",
        7,
        "set.at-least",
        "\"lots\" is not a whole number: a bound compares numbers",
    ),
    (
        "nic-coalesce-unknown-field",
        "nic.yaml",
        8,
        "set.rx-usec",
        "unknown coalesce field; did you mean \"rx-usecs\"?",
    ),
    (
        "nic-feature-unknown",
        "nic.yaml",
        7,
        "set.rx-gor",
        "\"rx-gor\" is not a feature name the kernel has; did you mean \"rx-gro\"?",
    ),
    (
        "rps-mask-syntax",
        "rps.yaml",
        7,
        "set.cpus",
        "\"0x3\" is not a CPU list",
    ),
    (
        "xps-mask-syntax",
        "xps.yaml",
        7,
        "set.cpus",
        "\"0x3\" is not a CPU list",
    ),
    (
        "xps-unknown-field",
        "xps.yaml",
        7,
        "set.rxq",
        "unknown field `rxq`; did you mean \"rxqs\"?",
    ),
    (
        "thread-policy-unknown-policy",
        "policy.yaml",
        7,
        "set.policy",
        "\"fifa\" is not a policy: give one of fifo, rr, other, batch, idle; did you mean \"fifo\"?",
    ),
    (
        "thread-policy-priority-out-of-range",
        "policy.yaml",
        8,
        "set.priority",
        "100 is outside 1-99, the real-time priorities of fifo",
    ),
    (
        "thread-policy-priority-for-other",
        "policy.yaml",
        8,
        "set.priority",
        "batch takes no priority (5 given)",
    ),
    (
        "thread-policy-nice-out-of-range",
        "policy.yaml",
        8,
        "set.nice",
        "20 is outside -20..19",
    ),
    (
        "thread-policy-nice-for-fifo",
        "policy.yaml",
        9,
        "set.nice",
        "nice does not weigh a rr thread",
    ),
    (
        "sched-tunable-unknown-name",
        "sched.yaml",
        5,
        "target.name",
        "\"migration_cost\" is not a scheduler tunable of kernel/sched/debug.c: give one of latency_ns, min_granularity_ns",
    ),
    (
        "sched-tunable-out-of-range",
        "sched.yaml",
        6,
        "set",
        "3 is outside 0..2, what the kernel takes for tunable_scaling",
    ),
];

/// Cases with a test of their own below (not refused by `knobs`, which
/// reads no host file).
const OWN_TESTS: [&str; 5] = [
    "sysfs-symlink-out",
    // tests/suite/block.rs, on a copy with block devices.
    "block-scheduler-not-offered",
    "block-max-sectors-above-hw",
    "rps-mask-beyond-possible",
    "xps-mask-beyond-possible",
];

fn cases_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad-manifests")
}

/// Runs `command` with a copy of the case over a copy of the VM's capture;
/// returns stderr after checking exit 1, no output and no change.
fn run_bad(
    case: &str,
    host: &Path,
    command: &str,
) -> (String, std::path::PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(case);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(cases_dir().join(case))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    let before = (snapshot(host), snapshot(&dir));
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        dir.to_str().unwrap(),
        command,
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{case}: {err}");
    // What only this host makes wrong (a sysctl it lacks, a mask beyond its
    // CPUs, a path that resolves out of /sys) is that knob's `not-applicable`
    // verdict (issue 47 item 2: one knob never blinds the audit): the report
    // is printed, still exit 1 and the one line on stderr.
    let printed = stdout(&out);
    assert!(
        printed.is_empty() || printed.contains("not-applicable"),
        "{case}: printed {printed}"
    );
    assert_eq!(before.0, snapshot(host), "{case}: the host tree changed");
    assert_eq!(before.1, snapshot(&dir), "{case}: the manifest changed");
    (err, dir, tmp)
}

#[test]
fn every_bad_manifest_names_file_line_and_field_exits_1_and_changes_nothing() {
    let on_disk: Vec<String> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !OWN_TESTS.contains(&n.as_str()))
        .collect();
    assert!(CASES.len() >= 30);
    for name in &on_disk {
        assert!(
            CASES.iter().any(|c| c.0 == name),
            "{name} has no expectation"
        );
    }
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    for &(case, file, line, field, fragment) in CASES {
        for command in ["audit", "knobs"] {
            let (err, dir, _t) = run_bad(case, &host, command);
            let want = match field {
                "" => format!("{}:{line}: ", dir.join(file).display()),
                _ => format!("{}:{line}: {field}: ", dir.join(file).display()),
            };
            assert!(err.contains(&want), "{case}: expected {want:?} in\n{err}");
            assert!(
                err.contains(fragment),
                "{case}: expected {fragment:?} in\n{err}"
            );
            assert_eq!(
                err.lines().count(),
                1,
                "{case}: one problem, one line:\n{err}"
            );
        }
    }
}

#[test]
fn an_rps_or_xps_mask_beyond_the_hosts_possible_cpus_is_refused_naming_the_line() {
    // The VM has CPUs 0-1 (its /sys/devices/system/cpu/possible); eth0 has
    // one tx queue, so no xps_cpus: the mask is refused before that.
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    for (kind, store) in [("rps", "store_rps_map"), ("xps", "xps_cpus_store")] {
        let case = format!("{kind}-mask-beyond-possible");
        let (err, dir, _t) = run_bad(&case, &host, "audit");
        let want = format!(
            "{}:7: set.cpus: ",
            dir.join(format!("{kind}.yaml")).display()
        );
        assert!(err.contains(&want), "{kind}: {err}");
        // One message for both kinds, naming the kernel function that refuses.
        let message = format!(
            "CPUs 2-7 are beyond this host's possible CPUs 0-1 \
             (/sys/devices/system/cpu/possible): the kernel refuses the {kind} mask \
             ({store} in net/core/net-sysfs.c)"
        );
        assert!(err.contains(&message), "{kind}: {err}");
    }
}

#[test]
fn a_sysfs_symlink_leading_out_of_sys_is_refused() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let link = host.join("sys/kernel/hostknob-escape");
    for target in ["../../etc", "/etc"] {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        // The file behind it is real (the capture's /etc/os-release).
        assert!(link.join("os-release").exists());
        let (err, dir, _t) = run_bad("sysfs-symlink-out", &host, "audit");
        let want = format!("{}:5: target.path: ", dir.join("sysfs.yaml").display());
        assert!(err.contains(&want), "{target}: {err}");
        assert!(
            err.contains("/sys/kernel/hostknob-escape/os-release resolves to /etc/os-release, outside /sys: refused"),
            "{target}: {err}"
        );
    }
}

#[test]
fn problems_in_several_files_are_all_reported() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let m = tempfile::tempdir().unwrap();
    for case in ["bad-cpu-list", "unknown-kind", "negative-latency"] {
        for e in std::fs::read_dir(cases_dir().join(case)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(
                e.path(),
                m.path()
                    .join(format!("{case}-{}", e.file_name().to_string_lossy())),
            )
            .unwrap();
        }
    }
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bad-cpu-list-cpuidle.yaml:5: target.cpus"),
        "{err}"
    );
    assert!(err.contains("unknown-kind-thp.yaml:3: kind"), "{err}");
    assert!(
        err.contains("negative-latency-cpuidle.yaml:6: target.states.min_exit_latency_us"),
        "{err}"
    );
    assert!(err.contains("3 problems in the manifest"), "{err}");
}

#[test]
fn a_malformed_ledger_is_an_error_naming_its_line() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let m = manifest(&[
        (
            "thp.yaml",
            "id: thp\ntitle: t\nwhy: w\nhosts: [vm]\npersistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
        ),
        (
            "ledger/vm.yaml",
            "- timestamp: 2026-07-10T09:14:03Z\n  host: vm\n  knob: thp\n  action: applied\n  persistence: runtime\n  hostknob: 0.1.0\n- timestamp: yesterday\n  host: vm\n  knob: thp\n  action: applied\n  persistence: runtime\n  hostknob: 0.1.0\n",
        ),
    ]);
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        m.path().to_str().unwrap(),
        "audit",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("ledger/vm.yaml:7: [1].timestamp: \"yesterday\""),
        "{err}"
    );
}

#[test]
fn a_missing_manifest_directory_is_an_error() {
    let host = corpus_host("fc-haltpoll-2cpu");
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        "/nonexistent/manifest",
        "audit",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("/nonexistent/manifest: no such manifest directory"));
}

/// Runs `command` (and its extra arguments) with manifest `m` over `host`;
/// returns stderr after checking exit 1, no output, and that neither the
/// tree nor the manifest changed.
fn refused_unchanged(host: &Path, m: &Path, args: &[&str]) -> String {
    let before = (snapshot(host), snapshot(m));
    let mut all = vec![
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        m.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = hostknob(&all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}: printed {}", stdout(&out));
    assert_eq!(before.0, snapshot(host), "{args:?}: the host tree changed");
    assert_eq!(before.1, snapshot(m), "{args:?}: the manifest changed");
    err
}

/// Each `(line, field, part of the message)` is reported as `file:line: field: `.
fn assert_reported(err: &str, file: &Path, want: &[(usize, &str, &str)]) {
    for &(line, field, fragment) in want {
        let at = format!("{}:{line}: {field}: ", file.display());
        assert!(
            err.lines().any(|l| l.contains(&at) && l.contains(fragment)),
            "expected {at}...{fragment} in\n{err}"
        );
    }
    assert!(
        err.contains(&format!("{} problems in the manifest", want.len())),
        "exactly {} problems expected:\n{err}",
        want.len()
    );
}

#[test]
fn three_problems_in_one_knob_are_reported_in_one_run() {
    // Issue 14 item 8: validation stopped at the first problem of a knob
    // (here the unknown persistence), so fixing a file took one run per problem.
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "idle.yaml",
        "id: Idle_Off\ntitle: Three problems\nkind: cpuidle-state\ntarget:\n  cpus: \"0-x\"\n  states: {names: [haltpoll idle]}\nset: disabled\nhosts: [vm]\npersistence: sometimes\nwhy: w\n",
    )]);
    let file = m.path().join("idle.yaml");
    for args in [&["audit"][..], &["knobs"], &["apply", "--all"]] {
        let err = refused_unchanged(&host, m.path(), args);
        assert_reported(
            &err,
            &file,
            &[
                (1, "id", "\"Idle_Off\" is not a knob id"),
                (5, "target.cpus", "\"0-x\" is not a CPU list"),
                (9, "persistence", "unknown variant `sometimes`"),
            ],
        );
    }
}

#[test]
fn every_problem_of_a_file_with_several_knobs_is_reported() {
    // A document serde refuses (unknown field) is read again field by field:
    // its other problems, each history entry's included, are found too; the
    // file's other documents are checked as well.
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "thp.yaml",
        "id: thp-a\ntitle: \" \"\nkind: thp\ntarget: {setting: enabled, extra: 1}\nset: madvise\nhosts: vm\npersistence: runtime\nowner: me\nhistory:\n  - {date: yesterday, action: applied, hosts: \"*\"}\n  - {date: 2026-01-01, action: applied, hosts: \"*\", who: x}\n\
         ---\nid: thp-b\ntitle: t\nkind: cstate\nset: 1\nhosts: \"*\"\npersistence: runtime\nwhy: w\n\
         ---\nid: thp-c\ntitle: t\nkind: thp\ntarget: {setting: enabled}\nset: \"[madvise]\"\nhosts: []\npersistence: runtime\nwhy: \"\"\n",
    )]);
    let file = m.path().join("thp.yaml");
    let err = refused_unchanged(&host, m.path(), &["audit"]);
    assert_reported(
        &err,
        &file,
        &[
            (1, "why", "missing field `why`"),
            (2, "title", "empty"),
            (4, "target.extra", "unknown field `extra`"),
            (6, "hosts", "give a list of host names"),
            (8, "owner", "unknown field `owner`"),
            (10, "history[0].date", "\"yesterday\" is not a date"),
            (11, "history[1].who", "unknown field `who`"),
            (15, "kind", "unknown kind \"cstate\""),
            (25, "set", "without brackets"),
            (26, "hosts", "empty list"),
            (28, "why", "empty"),
        ],
    );
    // Sorted by line within the file, one problem per line.
    let lines: Vec<usize> = err
        .lines()
        .filter_map(|l| l.split(".yaml:").nth(1)?.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(lines.len(), 11, "{err}");
    assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{lines:?}");
}
