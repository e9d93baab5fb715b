//! Issue 10 cases the first tests left open, found in review: a rollback
//! (not only a revert) of governor + EPP restores in the order intel_pstate
//! accepts, and persisting a cpufreq knob through tmpfiles.d says its `w`
//! lines may meet no file at boot.

use std::collections::HashMap;
use std::path::Path;

use crate::support::*;

/// intel_pstate.rst, Active Mode With HWP: under the performance governor
/// any EPP but performance (0) is refused. Replays `log` (`path<TAB>value`
/// per write, in order) from the governors of `pristine` and returns the
/// writes the kernel would have refused.
fn refused_under_performance(pristine: &Path, log: &str) -> Vec<String> {
    let mut governor: HashMap<String, String> = HashMap::new();
    let mut refused = Vec::new();
    for line in log.lines() {
        let (path, value) = line.split_once('\t').unwrap();
        let dir = path.rsplit_once('/').unwrap().0.to_string();
        if path.ends_with("/scaling_governor") {
            governor.insert(dir, value.to_string());
        } else if path.ends_with("/energy_performance_preference") {
            let now = governor.get(&dir).cloned().unwrap_or_else(|| {
                let file = pristine
                    .join(dir.trim_start_matches('/'))
                    .join("scaling_governor");
                std::fs::read_to_string(file).unwrap().trim().to_string()
            });
            if now == "performance" && !["performance", "0"].contains(&value) {
                refused.push(format!("{path} = {value} under {now}"));
            }
        }
    }
    refused
}

#[test]
fn a_rollback_restores_the_governor_before_the_epp_it_allows() {
    // adl0: intel_pstate active, powersave and balance_performance on 16
    // policies. The apply writes 16 governors, then 16 EPPs; the last EPP
    // write fails, so 31 writes are rolled back. In plain reverse order the
    // EPPs would go back to balance_performance under performance: refused.
    let (_tmp, root) = copy_host("adl0");
    let pristine = tree(&root);
    let m = knobs(&[
        (
            "epp",
            "persistence: runtime\nkind: cpufreq-epp\nset: performance\n",
        ),
        (
            "gov",
            "persistence: runtime\nkind: cpufreq-governor\nset: performance\n",
        ),
    ]);
    let log = tempfile::NamedTempFile::new().unwrap();
    let gate = tempfile::tempdir().unwrap();
    let last = 31;
    open_gate(gate.path(), last);
    let child = command(&root, m.path(), &["apply", "--all"])
        .env(hostknob::apply::GATE_VAR, gate.path())
        .env(hostknob::apply::LOG_VAR, log.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&gate.path().join(format!("at-{last}")));
    // The one EPP file not written yet is the last write: make it fail.
    let written = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(written.lines().count(), last, "{written}");
    let cpufreq = root.join("sys/devices/system/cpu/cpufreq");
    let pending: Vec<_> = std::fs::read_dir(&cpufreq)
        .unwrap()
        .map(|e| e.unwrap().path().join("energy_performance_preference"))
        .filter(|p| {
            let logical = format!("/{}", p.strip_prefix(&root).unwrap().display());
            p.exists() && !written.contains(&format!("{logical}\t"))
        })
        .collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let target = &pending[0];
    let aside = target.with_extension("aside");
    std::fs::rename(target, &aside).unwrap();
    std::fs::create_dir(target).unwrap();
    std::fs::write(gate.path().join(format!("go-{last}")), "").unwrap();
    let o = child.wait_with_output().unwrap();
    std::fs::remove_dir(target).unwrap();
    std::fs::rename(&aside, target).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("the 31 files already written were restored"),
        "{}",
        err(&o)
    );
    let log = std::fs::read_to_string(log.path()).unwrap();
    // 31 writes, the one that failed (logged as it is tried), 31 restores.
    assert_eq!(log.lines().count(), 32 + 31, "{log}");
    let refused = refused_under_performance(&corpus_host("adl0"), &log);
    assert!(
        refused.is_empty(),
        "{:#?}",
        &refused[..refused.len().min(3)]
    );
    assert_tree(&pristine, &root, "adl0 after the rollback");
}

#[test]
fn tmpfiles_lines_for_cpufreq_say_the_files_may_be_missing_at_boot() {
    let (_tmp, root) = copy_host("spr1");
    let m = knobs(&[(
        "gov",
        "persistence: tmpfiles\nkind: cpufreq-governor\nset: performance\n",
    )]);
    let o = run(&root, m.path(), &["persist", "gov"]);
    let lines = ok(&o);
    assert!(
        lines.contains("w /sys/devices/system/cpu/cpufreq/policy0/scaling_governor"),
        "{lines}"
    );
    let hints = err(&o);
    assert!(
        hints.contains("exist only once the cpufreq driver has loaded")
            && hints.contains("a `w` line for a path missing at boot is skipped")
            && hints.contains("`persistence: boot`"),
        "{hints}"
    );
    // The hint is about cpufreq paths: a CPU's resume-latency line gets none.
    let m = knobs(&[(
        "resume",
        "persistence: tmpfiles\nkind: pm-qos-resume-latency\ntarget: {cpus: \"0\"}\nset: 20\n",
    )]);
    let o = run(&root, m.path(), &["persist", "resume"]);
    ok(&o);
    assert!(!err(&o).contains("cpufreq driver"), "{}", err(&o));
}
