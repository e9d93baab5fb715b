//! Issue 20 items 1 and 7: EPP preset names stand for different numbers per
//! CPU model (intel_pstate.c `intel_epp_default[]`, amd-pstate.c
//! `epp_values[]`), and amd-pstate-epp lists its preferences by the policy in
//! force. On copies of real hosts, whose `/proc/cpuinfo` names the model.

use std::path::Path;

use crate::support::*;

fn epp(value: &str) -> String {
    format!("persistence: runtime\nkind: cpufreq-epp\nset: \"{value}\"\n")
}

const GOVERNOR_POWERSAVE: &str = "persistence: runtime\nkind: cpufreq-governor\nset: powersave\n";
const GOVERNOR_PERFORMANCE: &str =
    "persistence: runtime\nkind: cpufreq-governor\nset: performance\n";

/// audit's status and detail of one EPP knob set to `value` on `root`.
fn audit_epp(root: &Path, value: &str) -> (String, String) {
    let m = knobs(&[("epp", &epp(value))]);
    let (report, _) = audit_json(root, m.path(), Some("h"));
    let k = knob(&report, "epp");
    (
        k["status"].as_str().unwrap().to_string(),
        k["detail"].as_str().unwrap().to_string(),
    )
}

/// Every host reads `balance_performance` on every policy under powersave.
/// (host, the number balance_performance is there, the kernel's default that is not it)
const MODELS: [(&str, &str); 5] = [
    ("spr1", "32"),
    ("emr0", "32"),
    ("gnr0", "32"),
    ("adl0", "102"),
    ("mtl-m-2", "64"),
];

#[test]
fn epp_numbers_audit_against_each_models_kernel_values() {
    for (host, bp) in MODELS {
        let root = corpus_host(host);
        // The number this model's kernel prints as balance_performance is in effect.
        let (status, detail) = audit_epp(&root, bp);
        assert_eq!(status, "unpersisted", "{host}: {bp}: {detail}");
        // The name is in effect, as a name.
        let (status, detail) = audit_epp(&root, "balance_performance");
        assert_eq!(status, "unpersisted", "{host}: {detail}");
        // 128 is the generic balance_performance, not this model's: the
        // kernel would print 128, not the name.
        let (status, detail) = audit_epp(&root, "128");
        assert_eq!(status, "drift", "{host}: 128 read as in effect: {detail}");
        assert!(
            detail.contains("is balance_performance, should be 128"),
            "{host}: {detail}"
        );
        // Other presets are not in effect, by name or by number.
        let (status, _) = audit_epp(&root, "balance_power");
        assert_eq!(status, "drift", "{host}");
        let (status, _) = audit_epp(&root, "0");
        assert_eq!(status, "drift", "{host}");
    }
}

#[test]
fn the_issue_repro_128_on_spr1_is_drift_and_apply_writes_it() {
    let (_tmp, root) = copy_host("spr1");
    let m = knobs(&[("epp", &epp("128"))]);
    let (report, code) = audit_json(&root, m.path(), Some("spr1"));
    assert_eq!(
        (knob(&report, "epp")["status"].as_str(), code),
        (Some("drift"), 2),
        "{report:#}"
    );
    // 32 is balance_performance on Sapphire Rapids: nothing to write.
    let m32 = knobs(&[("epp", &epp("32"))]);
    let text = ok(&run(&root, m32.path(), &["apply", "--all", "--dry-run"]));
    assert!(text.contains("nothing to write"), "{text}");
    // 128 is written to all 320 policies and confirmed (the copy echoes it).
    let text = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(text.contains("320"), "{text}");
    let now = std::fs::read_to_string(
        root.join("sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference"),
    )
    .unwrap();
    assert_eq!(now.trim(), "128");
    ok(&run(&root, m.path(), &["revert", "--all"]));
}

#[test]
fn a_number_that_reads_back_as_this_models_preset_name_is_confirmed() {
    // The kernel prints 179 as balance_power on Meteor Lake. The copy holds
    // what the kernel would print after the write; audit and a dry run agree
    // the knob 179 is in effect, and 192 (balance_power elsewhere) is not.
    let (_tmp, root) = copy_host("mtl-m-2");
    let dir = root.join("sys/devices/system/cpu/cpufreq");
    for e in std::fs::read_dir(&dir).unwrap() {
        let f = e.unwrap().path().join("energy_performance_preference");
        if f.exists() {
            std::fs::write(&f, "balance_power\n").unwrap();
        }
    }
    let (status, detail) = audit_epp(&root, "179");
    assert_eq!(status, "unpersisted", "{detail}");
    let (status, detail) = audit_epp(&root, "192");
    assert_eq!(status, "drift", "{detail}");
}

#[test]
fn performance_under_the_performance_governor_is_refused_where_it_is_not_zero() {
    // Meteor Lake: performance = 16 > 0, so intel_pstate answers EBUSY under
    // the performance governor; 0 is what the kernel takes there.
    let mtl = corpus_host("mtl-m-2");
    let m = knobs(&[("epp", &epp("performance")), ("gov", GOVERNOR_PERFORMANCE)]);
    let o = run(&mtl, m.path(), &["apply", "--all", "--dry-run"]);
    let msg = refused(&o, &["epp", "performance", "16", "METEORLAKE_L"]);
    assert!(msg.contains("only 0"), "{msg}");
    let m = knobs(&[("epp", &epp("0")), ("gov", GOVERNOR_PERFORMANCE)]);
    ok(&run(&mtl, m.path(), &["apply", "--all", "--dry-run"]));
    // Alder Lake-L: performance is 0 there, taken under performance.
    let adl = corpus_host("adl0");
    let m = knobs(&[("epp", &epp("performance")), ("gov", GOVERNOR_PERFORMANCE)]);
    ok(&run(&adl, m.path(), &["apply", "--all", "--dry-run"]));
    // A number above 0 is refused there too, with the governor named.
    let m = knobs(&[("epp", &epp("32")), ("gov", GOVERNOR_PERFORMANCE)]);
    let o = run(&adl, m.path(), &["apply", "--all", "--dry-run"]);
    refused(&o, &["epp", "sets the governor to performance first"]);
}

#[test]
fn amd_pstate_epp_plans_epp_against_the_governor_the_apply_leaves() {
    // turin0: amd-pstate-epp under performance lists only `performance`.
    let turin = corpus_host("turin0");
    let available =
        std::fs::read_to_string(turin.join(
            "sys/devices/system/cpu/cpufreq/policy0/energy_performance_available_preferences",
        ))
        .unwrap();
    assert_eq!(available.trim(), "performance");
    // EPP alone under performance: refused, saying why (the governor).
    let m = knobs(&[("epp", &epp("balance_performance"))]);
    let o = run(&turin, m.path(), &["apply", "--all", "--dry-run"]);
    refused(
        &o,
        &["amd-pstate-epp", "governor is performance", "powersave"],
    );
    // With governor powersave in the same apply: planned against the list
    // the kernel shows under powersave.
    let m = knobs(&[
        ("epp", &epp("balance_performance")),
        ("gov", GOVERNOR_POWERSAVE),
    ]);
    let text = ok(&run(&turin, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(text.contains("balance_performance"), "{text}");
    // A real apply and revert on a copy: governor first, then EPP; revert
    // restores the governor before EPP goes back to performance.
    let (_tmp, root) = copy_host("turin0");
    let pristine = tree(&root);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let p0 = root.join("sys/devices/system/cpu/cpufreq/policy0");
    let read = |f: &str| {
        std::fs::read_to_string(p0.join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(read("scaling_governor"), "powersave");
    assert_eq!(read("energy_performance_preference"), "balance_performance");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&pristine, &root, "turin0 after revert");
    // A name amd-pstate does not list, and a number it does not take, stay refused.
    let m = knobs(&[("epp", &epp("100")), ("gov", GOVERNOR_POWERSAVE)]);
    let o = run(&turin, m.path(), &["apply", "--all", "--dry-run"]);
    refused(&o, &["EPP 100 is not accepted here"]);
}
