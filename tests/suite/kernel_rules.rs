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
    // spr1 reads balance_performance: a knob set to 128 is in effect.
    let spr1 = corpus_host("spr1");
    let m = knobs(&[("epp", &epp("128"))]);
    let (report, _) = audit_json(&spr1, m.path(), Some("spr1"));
    // In effect; only not persisted (it was drift: "is balance_performance, should be 128").
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
