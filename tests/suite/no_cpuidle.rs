//! Issue 44 item 14 and issue 49 item 9: on a host where no cpuidle driver
//! runs, the idle loop uses the architecture's default idle
//! (kernel/sched/idle.c: cpuidle_not_available -> default_idle_call) and
//! reads no PM QoS latency request: apply says so at plan time, audit calls
//! the knobs `not-applicable` with the reason (not `drift`), and verify
//! calls them not honoured. On a copy of the 2-CPU VM capture whose driver
//! reads `none` and whose per-CPU cpuidle directories are gone, as the
//! kernel shows it without a driver.

use std::path::{Path, PathBuf};

use crate::support::*;

fn resume(set: &str) -> (&'static str, String) {
    (
        "resume",
        format!(
            "persistence: runtime\nkind: pm-qos-resume-latency\ntarget: {{cpus: \"1\"}}\nset: \"{set}\"\n\
             verify: {{probe: wakeup, note: p50 lower}}\n"
        ),
    )
}

/// What tuned's `force_latency=20` imports as.
const FORCE_LATENCY: (&str, &str) = (
    "force-latency",
    "persistence: hold\nkind: pm-qos\nset: 20\n",
);

/// The VM capture with no cpuidle driver, and its PM QoS device (no request).
fn without_cpuidle() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = copy_host("fc-haltpoll-2cpu");
    let cpu = root.join("sys/devices/system/cpu");
    std::fs::write(cpu.join("cpuidle/current_driver"), "none\n").unwrap();
    for f in ["current_governor", "current_governor_ro"] {
        std::fs::write(cpu.join("cpuidle").join(f), "menu\n").unwrap();
    }
    for c in 0..2 {
        std::fs::remove_dir_all(cpu.join(format!("cpu{c}/cpuidle"))).unwrap();
    }
    with_pm_qos_device(&root);
    (t, root)
}

fn with_pm_qos_device(root: &Path) {
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::fs::write(
        root.join("dev/cpu_dma_latency"),
        2_000_000_000i32.to_ne_bytes(),
    )
    .unwrap();
}

#[test]
fn without_cpuidle_apply_says_at_plan_time_that_the_kernel_ignores_the_limit() {
    let (_t, root) = without_cpuidle();
    let (id, body) = resume("20");
    let m = knobs(&[(id, &body)]);
    let before = tree(&root);
    let text = ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", id, "--dry-run"],
    ));
    assert!(
        text.contains("NOT HONOURED") && text.contains("no cpuidle driver runs here"),
        "{text}"
    );
    assert!(
        text.contains("warning: resume: would be written but not honoured")
            && text.contains(" audit resume` will say `not-applicable`"),
        "{text}"
    );
    assert_tree(&before, &root, "a dry run");
    let v = json_of(&run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "apply", id, "--dry-run"],
    ));
    let why = v["knobs"][0]["not_honoured"].as_str().unwrap();
    assert!(why.contains("kernel/sched/idle.c"), "{why}");
    // With the capture's own driver, a 20 µs limit over a 1 µs halt is honoured.
    let (_t2, vm) = copy_host("fc-haltpoll-2cpu");
    let text = ok(&run(
        &vm,
        m.path(),
        &["--host", "vm", "apply", id, "--dry-run"],
    ));
    assert!(!text.contains("NOT HONOURED"), "{text}");
}

#[test]
fn without_cpuidle_audit_calls_resume_latency_and_force_latency_not_applicable() {
    let (_t, root) = without_cpuidle();
    let (id, body) = resume("20");
    let m = knobs(&[(id, &body), FORCE_LATENCY]);
    let (r, code) = audit_json(&root, m.path(), Some("vm"));
    for k in [id, FORCE_LATENCY.0] {
        let k = knob(&r, k);
        assert_eq!(k["status"], "not-applicable", "{k:#}");
        let detail = k["detail"].as_str().unwrap();
        assert!(
            detail.contains("the kernel ignores it here")
                && detail.contains("no cpuidle driver")
                && detail.contains("cpuidle_not_available"),
            "{detail}"
        );
    }
    assert_eq!(code, 0, "{r:#}");
    // Set, it is still not-applicable: nothing reads it.
    ok(&run(&root, m.path(), &["--host", "vm", "apply", id]));
    let (r, _) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(knob(&r, id)["status"], "not-applicable", "{r:#}");
    let text = out(&run(&root, m.path(), &["--host", "vm", "audit"]));
    assert!(!text.contains("drift"), "{text}");
    // Where a driver runs, the same knobs drift as before.
    let (_t2, vm) = copy_host("fc-haltpoll-2cpu");
    with_pm_qos_device(&vm);
    let (r, code) = audit_json(&vm, m.path(), Some("vm"));
    assert_eq!(knob(&r, id)["status"], "drift", "{r:#}");
    assert_eq!(knob(&r, FORCE_LATENCY.0)["status"], "drift", "{r:#}");
    assert_eq!(code, 2);
}

#[test]
fn without_cpuidle_verify_calls_the_limit_not_honoured() {
    let (_t, root) = without_cpuidle();
    let (id, body) = resume("20");
    let m = knobs(&[(id, &body)]);
    let v = short_verify(&root, m.path(), id);
    let h = &v["honoured"];
    assert_eq!(h["status"], "not-honoured", "{h:#}");
    let f = h["findings"][0].as_str().unwrap();
    assert!(
        f.contains("the kernel ignores resume here") && f.contains("default_idle_call"),
        "{f}"
    );
    // Restored as found.
    assert_eq!(
        std::fs::read_to_string(
            root.join("sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us")
        )
        .unwrap(),
        "0\n"
    );
}
