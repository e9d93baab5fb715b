//! Issue 22 item 1, the typed frequency kinds on copies of real hosts:
//! `cpufreq-min`/`cpufreq-max` ordered by direction (raising the floor over
//! the ceiling writes the ceiling first, lowering the ceiling under the floor
//! writes the floor first, revert the other way round), limits checked
//! against the hardware, `turbo` (intel_pstate's inverted `no_turbo`,
//! cpufreq `boost`, per-policy `boost`), `epb` (names as numbers) and
//! `uncore-freq` (package/die and TPMI layouts); each not-applicable on the
//! VM with its reason.

use std::path::Path;

use crate::support::*;

const POLICY0: &str = "sys/devices/system/cpu/cpufreq/policy0";

/// Runs `args` with the test-only write log on; returns the output and the
/// `(path, value)` lines the command wrote, in order.
fn logged(root: &Path, m: &Path, args: &[&str]) -> (std::process::Output, Vec<(String, String)>) {
    let log = root.parent().unwrap().join("write.log");
    let _ = std::fs::remove_file(&log);
    let o = command(root, m, args)
        .env(hostknob::apply::LOG_VAR, &log)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let lines = text
        .lines()
        .map(|l| {
            let (p, v) = l.split_once('\t').unwrap();
            (p.to_string(), v.trim().to_string())
        })
        .collect();
    (o, lines)
}

fn file(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

fn limit(kind: &str, cpus: &str, set: &str) -> String {
    format!("persistence: runtime\nkind: {kind}\ntarget: {{cpus: \"{cpus}\"}}\nset: {set}\n")
}

const MIN: &str = "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq";
const MAX: &str = "/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq";

/// Brings policy0 to `(floor, ceiling)` with both knobs (listed in the
/// order that would be wrong), checks the order of the writes, reverts and
/// checks the reverse order and the byte-identical tree.
fn both_ways(host: &str, start: (&str, &str), to: (&str, &str), ceiling_first: bool) {
    let (_tmp, root) = copy_host(host);
    write_files(
        &root,
        &[
            (
                &format!("{POLICY0}/scaling_min_freq"),
                &format!("{}\n", start.0),
            ),
            (
                &format!("{POLICY0}/scaling_max_freq"),
                &format!("{}\n", start.1),
            ),
        ],
    );
    let pristine = tree(&root);
    let floor = ("floor", limit("cpufreq-min", "0", to.0));
    let ceiling = ("ceiling", limit("cpufreq-max", "0", to.1));
    // Listed in the wrong order on purpose: apply orders them.
    let mut docs = [(floor.0, floor.1.as_str()), (ceiling.0, ceiling.1.as_str())];
    if !ceiling_first {
        docs.reverse();
    }
    let m = knobs(&docs);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    let applied = ok(&o);
    let paths: Vec<&str> = writes.iter().map(|(p, _)| p.as_str()).collect();
    let expected = if ceiling_first {
        [MAX, MIN]
    } else {
        [MIN, MAX]
    };
    assert_eq!(paths, expected, "{host} {start:?} -> {to:?}: {applied}");
    assert_eq!(
        journal_paths(&root),
        expected.map(String::from),
        "journal order"
    );
    let (report, _) = audit_json(&root, m.path(), None);
    for id in ["floor", "ceiling"] {
        assert_eq!(
            knob(&report, id)["status"],
            "unpersisted",
            "{id}: {report:#}"
        );
    }
    let (o, restores) = logged(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    let back: Vec<(&str, &str)> = restores
        .iter()
        .map(|(p, v)| (p.as_str(), v.as_str()))
        .collect();
    let mut reverse = expected;
    reverse.reverse();
    let want: Vec<(&str, &str)> = reverse
        .iter()
        .map(|p| (*p, if *p == MIN { start.0 } else { start.1 }))
        .collect();
    assert_eq!(back, want, "{host}: revert in the opposite order");
    assert_tree(&pristine, &root, &format!("{host} after revert"));
}

#[test]
fn floor_over_the_ceiling_and_back_is_ordered_on_spr1_and_genoa0() {
    // Raising: the floor goes above the current ceiling, so the ceiling first.
    both_ways("spr1", ("800000", "2000000"), ("3 GHz", "3500 MHz"), true);
    both_ways("genoa0", ("1500000", "2000000"), ("3 GHz", "3500000"), true);
    // Lowering: the ceiling goes below the current floor, so the floor first.
    both_ways("spr1", ("3000000", "3500000"), ("min", "2 GHz"), false);
    both_ways(
        "genoa0",
        ("3000000", "3500000"),
        ("1.5 GHz", "2 GHz"),
        false,
    );
}

#[test]
fn a_floor_above_the_ceiling_it_leaves_is_refused_at_plan_time() {
    for host in ["spr1", "genoa0"] {
        let (_tmp, root) = copy_host(host);
        write_files(
            &root,
            &[(&format!("{POLICY0}/scaling_max_freq"), "2000000\n")],
        );
        let before = tree(&root);
        let m = knobs(&[("floor", &limit("cpufreq-min", "0", "3 GHz"))]);
        refused(
            &run(&root, m.path(), &["apply", "--all"]),
            &[
                "policy0: the floor 3 GHz (scaling_min_freq, written by knob floor)",
                "above the ceiling 2 GHz (scaling_max_freq, as it is now)",
            ],
        );
        // With both, but a ceiling below the floor: refused too.
        let m = knobs(&[
            ("floor", &limit("cpufreq-min", "0", "3 GHz")),
            ("ceiling", &limit("cpufreq-max", "0", "2.5 GHz")),
        ]);
        refused(
            &run(&root, m.path(), &["apply", "--all"]),
            &["written by knob ceiling"],
        );
        assert_tree(&before, &root, host);
    }
}

#[test]
fn limits_are_checked_against_the_hardware_and_special_values_resolve() {
    let (_tmp, root) = copy_host("spr1");
    let before = tree(&root);
    let m = knobs(&[("ceiling", &limit("cpufreq-max", "0", "4 GHz"))]);
    refused(
        &run(&root, m.path(), &["apply", "--all"]),
        &[
            "4 GHz is outside what /sys/devices/system/cpu/cpufreq/policy0 allows, cpuinfo_min_freq 800 MHz to cpuinfo_max_freq 3.8 GHz",
        ],
    );
    // `base` is base_frequency (2.2 GHz on spr1); `max` cpuinfo_max_freq.
    let m = knobs(&[
        ("floor", &limit("cpufreq-min", "0-1", "base")),
        ("ceiling", &limit("cpufreq-max", "0-1", "max")),
    ]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(plan.contains("+2200000"), "{plan}");
    assert_eq!(
        file(&root, &format!("{POLICY0}/scaling_min_freq")),
        "800000"
    );
    assert_tree(&before, &root, "spr1 after a dry run");
    // acpi-cpufreq has no base_frequency: `base` is refused with the reason.
    let (_tmp2, genoa) = copy_host("genoa0");
    let m = knobs(&[("floor", &limit("cpufreq-min", "0", "base"))]);
    refused(
        &run(&genoa, m.path(), &["apply", "--all"]),
        &[
            "has no base_frequency (driver acpi-cpufreq",
            "give the frequency",
        ],
    );
    // genoa0's ceiling can go to its odd cpuinfo_max_freq exactly.
    let m = knobs(&[("ceiling", &limit("cpufreq-max", "0", "max"))]);
    ok(&run(&genoa, m.path(), &["apply", "--all"]));
    assert_eq!(
        file(&genoa, &format!("{POLICY0}/scaling_max_freq")),
        "3800241"
    );
}

fn turbo(cpus: Option<&str>, set: &str) -> String {
    let target = cpus.map_or(String::new(), |c| format!("target: {{cpus: \"{c}\"}}\n"));
    format!("persistence: runtime\nkind: turbo\n{target}set: {set}\n")
}

#[test]
fn turbo_writes_no_turbo_inverted_boost_and_per_policy_boost() {
    // intel_pstate: off is no_turbo 1; audit reads it back as off.
    let (_tmp, root) = copy_host("spr1");
    let pristine = tree(&root);
    let m = knobs(&[("turbo", &turbo(None, "off"))]);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    ok(&o);
    assert_eq!(
        writes,
        [(
            "/sys/devices/system/cpu/intel_pstate/no_turbo".to_string(),
            "1".to_string()
        )]
    );
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(
        knob(&report, "turbo")["status"],
        "unpersisted",
        "{report:#}"
    );
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "spr1 after turbo revert");
    // Per CPU on intel_pstate: there is no per-policy switch.
    let m = knobs(&[("turbo", &turbo(Some("0-3"), "off"))]);
    refused(
        &run(&root, m.path(), &["apply", "--all"]),
        &["has no per-policy boost"],
    );

    // acpi-cpufreq: the global boost, 0 for off; then per policy.
    let (_tmp, root) = copy_host("genoa0");
    let pristine = tree(&root);
    let m = knobs(&[("turbo", &turbo(None, "off"))]);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    ok(&o);
    assert_eq!(
        writes,
        [(
            "/sys/devices/system/cpu/cpufreq/boost".to_string(),
            "0".to_string()
        )]
    );
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "genoa0 after turbo revert");
    let m = knobs(&[("turbo", &turbo(Some("0-1"), "off"))]);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    ok(&o);
    let paths: Vec<&str> = writes.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/sys/devices/system/cpu/cpufreq/policy0/boost",
            "/sys/devices/system/cpu/cpufreq/policy1/boost"
        ]
    );
    ok(&run(&root, m.path(), &["revert", "--all"]));
    // A policy's boost cannot be turned on while the global one is off.
    write_files(
        &root,
        &[
            "sys/devices/system/cpu/cpufreq/boost",
            "sys/devices/system/cpu/cpufreq/policy0/boost",
        ]
        .map(|p| (p, "0\n")),
    );
    let before = tree(&root);
    let m = knobs(&[("turbo", &turbo(Some("0"), "on"))]);
    refused(
        &run(&root, m.path(), &["apply", "--all"]),
        &["store_local_boost"],
    );
    assert_tree(&before, &root, "genoa0 refused");
}

#[test]
fn epb_names_are_written_as_numbers_and_compared_as_numbers() {
    let (_tmp, root) = copy_host("spr1");
    let pristine = tree(&root);
    let m = knobs(&[(
        "epb",
        "persistence: runtime\nkind: epb\ntarget: {cpus: 0-3}\nset: balance-power\n",
    )]);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    ok(&o);
    assert_eq!(writes.len(), 4);
    assert!(
        writes
            .iter()
            .all(|(p, v)| p.ends_with("/power/energy_perf_bias") && v == "8"),
        "{writes:?}"
    );
    // The file holds a number with leading zeros: still 8.
    write_files(
        &root,
        &[("sys/devices/system/cpu/cpu0/power/energy_perf_bias", "08\n")],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    assert_eq!(knob(&report, "epb")["status"], "unpersisted", "{report:#}");
    write_files(
        &root,
        &[("sys/devices/system/cpu/cpu0/power/energy_perf_bias", "8")],
    );
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "spr1 after epb revert");
    // AMD has no EPB: not-applicable with the reason.
    let (_tmp, genoa) = copy_host("genoa0");
    let (report, _) = audit_json(&genoa, m.path(), None);
    let k = knob(&report, "epb");
    assert_eq!(k["status"], "not-applicable");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("no energy_perf_bias"),
        "{k:#}"
    );
}

fn uncore(bound: &str, packages: &str, set: &str) -> String {
    format!(
        "persistence: runtime\nkind: uncore-freq\ntarget: {{bound: {bound}, packages: \"{packages}\"}}\nset: {set}\n"
    )
}

#[test]
fn uncore_writes_per_die_or_per_tpmi_domain_in_bound_order() {
    const UNC: &str = "/sys/devices/system/cpu/intel_uncore_frequency";
    // spr1: the package/die layout. Floor above the current ceiling: ceiling first.
    let (_tmp, root) = copy_host("spr1");
    let m = knobs(&[
        ("floor", &uncore("min", "0", "2.2 GHz")),
        ("ceiling", &uncore("max", "0", "max")),
    ]);
    let dir = format!("{UNC}/package_00_die_00");
    write_files(
        &root,
        &[(
            "sys/devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz",
            "2000000\n",
        )],
    );
    let pristine_low = tree(&root);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    ok(&o);
    let initial_max = file(
        &root,
        "sys/devices/system/cpu/intel_uncore_frequency/package_00_die_00/initial_max_freq_khz",
    );
    assert_eq!(
        writes,
        [
            (format!("{dir}/max_freq_khz"), initial_max),
            (format!("{dir}/min_freq_khz"), "2200000".to_string())
        ]
    );
    let (o, back) = logged(&root, m.path(), &["revert", "--all"]);
    ok(&o);
    assert_eq!(back[0].0, format!("{dir}/min_freq_khz"), "floor back first");
    assert_tree(&pristine_low, &root, "spr1 uncore revert");
    // Not a ratio of 100 MHz would read back as another value: refused at load.
    let m = knobs(&[("u", &uncore("max", "0", "2150 MHz"))]);
    let e = err(&run(&root, m.path(), &["audit"]));
    assert!(e.contains("not a multiple of 100 MHz"), "{e}");

    // gnr0: TPMI domains of package 1 only (uncore05-09), never the root domain.
    let (_tmp, root) = copy_host("gnr0");
    let pristine = tree(&root);
    let m = knobs(&[("ceiling", &uncore("max", "1", "2 GHz"))]);
    let (o, writes) = logged(&root, m.path(), &["apply", "--all"]);
    let out = ok(&o);
    let paths: Vec<String> = writes.iter().map(|(p, _)| p.clone()).collect();
    let want: Vec<String> = (5..10)
        .map(|n| format!("{UNC}/uncore{n:02}/max_freq_khz"))
        .collect();
    assert_eq!(paths, want, "{out}");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "gnr0 uncore revert");
    // 2.4 GHz is above the compute domains' initial_max_freq_khz (2.2 GHz).
    let m = knobs(&[("ceiling", &uncore("max", "0", "2.4 GHz"))]);
    refused(
        &run(&root, m.path(), &["apply", "--all"]),
        &["2.4 GHz is outside what /sys/devices/system/cpu/intel_uncore_frequency/uncore00 allows"],
    );
}

#[test]
fn on_the_vm_every_frequency_kind_is_not_applicable_with_a_reason() {
    let m = knobs(&[
        ("floor", &limit("cpufreq-min", "0", "2 GHz")),
        ("ceiling", &limit("cpufreq-max", "all", "max")),
        ("turbo", &turbo(None, "on")),
        ("epb", "persistence: runtime\nkind: epb\nset: 6\n"),
        ("uncore", &uncore("min", "all", "min")),
    ]);
    let vm = corpus_host("fc-haltpoll-2cpu");
    let (report, _) = audit_json(&vm, m.path(), None);
    for (id, reason) in [
        ("floor", "no cpufreq on this host"),
        ("ceiling", "no cpufreq on this host"),
        ("turbo", "no cpufreq on this host"),
        ("epb", "no energy_perf_bias"),
        ("uncore", "no intel_uncore_frequency"),
    ] {
        let k = knob(&report, id);
        assert_eq!(k["status"], "not-applicable", "{id}: {k:#}");
        assert!(
            k["detail"].as_str().unwrap().contains(reason),
            "{id}: {k:#}"
        );
    }
}
