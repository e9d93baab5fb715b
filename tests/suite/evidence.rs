//! Issue 25 item 11 (the ledger's home: the host's state directory, the
//! manifest only read, collected ledgers merged) and issue 24 item 5
//! (evidence that expires: evidence-stale, unverified-here, facts not
//! recorded), on copies of the VM capture.

use std::path::Path;

use crate::support::*;

/// THP as the capture has it (`madvise`): in effect as found.
const THP_OK: (&str, &str) = (
    "thp",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
);

/// A knob that changes the capture.
const THP_NEVER: (&str, &str) = (
    "thp-never",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);

/// The host's ledger, as these tests read it (the lead may repoint it).
fn host_ledger(root: &Path) -> String {
    ledger_text(root)
}

fn fact(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path))
        .unwrap()
        .trim()
        .to_string()
}

/// A verified entry of `knob` by `host` with the given `facts:` lines
/// (YAML, indented by four), or none.
fn verified(host: &str, knob: &str, ts: &str, facts: &[&str]) -> String {
    let mut s = format!(
        "- timestamp: {ts}\n  host: {host}\n  knob: {knob}\n  action: verified\n  \
         persistence: runtime\n  hostknob: 0.1.0\n  note: light-call floor dropped\n  \
         evidence: {{verdict: improved, ratio: 0.8}}\n"
    );
    if !facts.is_empty() {
        s += "  facts:\n";
        for f in facts {
            s += &format!("    {f}\n");
        }
    }
    s
}

fn collected(m: &Path, host: &str, text: &str) {
    let p = collected_ledger(m, host);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut old = std::fs::read_to_string(&p).unwrap_or_default();
    old += text;
    std::fs::write(p, old).unwrap();
}

fn knob_json(root: &Path, m: &Path) -> serde_json::Value {
    let (r, code) = audit_json(root, m, Some("vm"));
    assert_ne!(code, 1, "{r:#}");
    knob(&r, "thp").clone()
}

#[test]
fn apply_verify_revert_never_write_the_reviewed_manifest() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, root) = vm();
    let m = knobs(&[
        IDLE_OFF_CPU1,
        (
            "thp-never",
            "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
        ),
    ]);
    // The reviewed manifest as a host gets it: read-only (0444 in 0555).
    for e in std::fs::read_dir(m.path()).unwrap() {
        let p = e.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(m.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let ro = tree(m.path());
    ok(&run(
        &root,
        m.path(),
        &["--host", "vm", "apply", "thp-never"],
    ));
    let _ = short_verify(&root, m.path(), "idle-off-cpu1");
    ok(&run(&root, m.path(), &["--host", "vm", "revert", "--all"]));
    assert_tree(&ro, m.path(), "the manifest after apply, verify, revert");
    std::fs::set_permissions(m.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!m.path().join("ledger").exists());
    let text = host_ledger(&root);
    for action in ["applied", "verified", "reverted"] {
        assert!(
            text.contains(&format!("action: {action}")),
            "{action}: {text}"
        );
    }
    // Every entry has its own id.
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  id: "))
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert!(ids.len() >= 3 && unique.len() == ids.len(), "{text}");
}

#[test]
fn a_ledger_in_the_manifest_is_still_read_and_the_move_said_once() {
    let (_t, root) = vm();
    let m = knobs(&[THP_OK, THP_NEVER]);
    let old = verified("vm", "thp", "2026-07-10T09:14:03Z", &[]);
    collected(m.path(), "vm", &old);
    let k = knob_json(&root, m.path());
    assert_eq!(k["evidence"]["timestamp"], "2026-07-10T09:14:03Z", "{k:#}");
    let o = run(&root, m.path(), &["--host", "vm", "apply", "thp-never"]);
    ok(&o);
    let once = "the ledger now lives in the state directory";
    assert!(err(&o).contains(once), "{}", err(&o));
    assert!(err(&o).contains("ledger.yaml"), "{}", err(&o));
    assert!(root.join(STATE_DIR).join("ledger-moved").exists());
    let o = run(&root, m.path(), &["--host", "vm", "revert", "--all"]);
    ok(&o);
    assert!(!err(&o).contains(once), "said once: {}", err(&o));
    assert_eq!(
        std::fs::read_to_string(collected_ledger(m.path(), "vm")).unwrap(),
        old,
        "the manifest's ledger is only read"
    );
    // Collected back (the host's entries appended to the manifest's file):
    // each entry is read once, by its id.
    collected(m.path(), "vm", &host_ledger(&root));
    let o = run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "audit"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["other_machine_entries"], 0, "{v}");
    let k = knob(&v, "thp");
    assert_eq!(k["evidence"]["timestamp"], "2026-07-10T09:14:03Z", "{k:#}");
    // A revert reads the merged history too: nothing journaled, nothing to do.
    ok(&run(&root, m.path(), &["--host", "vm", "revert", "--all"]));
}

#[test]
fn evidence_from_another_kernel_is_stale_naming_the_change() {
    let (_t, root) = vm();
    let release = fact(&root, "proc/sys/kernel/osrelease");
    let m = knobs(&[THP_OK]);
    collected(
        m.path(),
        "vm",
        &verified("vm", "thp", "2026-07-10T09:14:03Z", &["kernel: 6.1.0"]),
    );
    let k = knob_json(&root, m.path());
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert_eq!(k["evidence_status"], "evidence-stale", "{k:#}");
    assert_eq!(
        k["evidence_detail"],
        format!("evidence-stale: kernel 6.1.0 -> {release}"),
        "{k:#}"
    );
    // The exit code is the status's, not the evidence's.
    let (_, code) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(code, 0);
    let table = out(&run(&root, m.path(), &["--host", "vm", "audit"]));
    assert!(
        table.contains(&format!("thp: evidence-stale: kernel 6.1.0 -> {release}")),
        "{table}"
    );
    // knobs says it too.
    let v = json_of(&run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "knobs"],
    ));
    assert_eq!(v["knobs"][0]["evidence_status"], "evidence-stale", "{v}");
    // And the host document.
    let doc = out(&run(
        &root,
        m.path(),
        &["--host", "vm", "doc", "--out", "-"],
    ));
    assert!(doc.contains("evidence-stale: kernel 6.1.0 -> "), "{doc}");
}

#[test]
fn a_microcode_update_makes_evidence_stale_and_equal_facts_keep_it_current() {
    let (_t, root) = vm();
    let release = fact(&root, "proc/sys/kernel/osrelease");
    let m = knobs(&[THP_OK]);
    collected(
        m.path(),
        "vm",
        &verified(
            "vm",
            "thp",
            "2026-07-10T09:14:03Z",
            &[
                &format!("kernel: {release}"),
                "microcode: '0x1000060'",
                "idle_driver: haltpoll",
            ],
        ),
    );
    let k = knob_json(&root, m.path());
    assert_eq!(k["evidence_status"], "evidence-stale", "{k:#}");
    assert_eq!(
        k["evidence_detail"], "evidence-stale: microcode 0x1000060 -> 0x1000065",
        "{k:#}"
    );
    collected(
        m.path(),
        "vm",
        &verified(
            "vm",
            "thp",
            "2026-07-11T09:14:03Z",
            &[&format!("kernel: {release}"), "microcode: '0x1000065'"],
        ),
    );
    let k = knob_json(&root, m.path());
    assert_eq!(k["evidence_status"], "current", "{k:#}");
}

#[test]
fn an_entry_without_facts_says_so_and_is_not_stale() {
    let (_t, root) = vm();
    let m = knobs(&[THP_OK]);
    collected(
        m.path(),
        "vm",
        &verified("vm", "thp", "2026-07-10T09:14:03Z", &[]),
    );
    let k = knob_json(&root, m.path());
    assert_eq!(k["evidence_status"], "facts-not-recorded", "{k:#}");
    let d = k["evidence_detail"].as_str().unwrap();
    assert!(d.starts_with("facts not recorded"), "{d}");
    assert!(!d.contains("stale"), "{d}");
}

#[test]
fn a_knob_in_effect_without_evidence_for_its_class_is_unverified_here() {
    let (_t, root) = vm();
    let m = knobs(&[THP_OK]);
    let k = knob_json(&root, m.path());
    assert_eq!(k["status"], "unpersisted", "in effect, runtime only");
    assert_eq!(k["evidence_status"], "unverified-here", "{k:#}");
    let d = k["evidence_detail"].as_str().unwrap();
    assert!(
        d.starts_with("unverified-here: in effect on AuthenticAMD 25/17") && d.contains("haltpoll"),
        "{d}"
    );
    // Verified on another class (intel_idle): still unverified here.
    collected(
        m.path(),
        "spr9",
        &verified(
            "spr9",
            "thp",
            "2026-07-10T09:14:03Z",
            &[
                "vendor: GenuineIntel",
                "cpu_model: 6/143",
                "idle_driver: intel_idle",
            ],
        ),
    );
    assert_eq!(
        knob_json(&root, m.path())["evidence_status"],
        "unverified-here"
    );
    // Verified on another host of this class: that evidence counts, named.
    collected(
        m.path(),
        "amd7",
        &verified(
            "amd7",
            "thp",
            "2026-07-10T09:14:03Z",
            &[
                "vendor: AuthenticAMD",
                "cpu_model: 25/17",
                "idle_driver: haltpoll",
                "kernel: 6.1.0",
            ],
        ),
    );
    let k = knob_json(&root, m.path());
    assert_eq!(k["evidence_status"], "evidence-stale", "{k:#}");
    let d = k["evidence_detail"].as_str().unwrap();
    assert!(
        d.contains("kernel 6.1.0 -> ") && d.contains("evidence from amd7"),
        "{d}"
    );
    // A knob not in effect and never verified: nothing to say.
    let m = knobs(&[(
        "thp",
        "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
    )]);
    assert!(knob_json(&root, m.path())["evidence_status"].is_null());
}

#[test]
fn verify_records_the_facts_and_audit_calls_them_current() {
    let (_t, root) = vm();
    let release = fact(&root, "proc/sys/kernel/osrelease");
    let m = knobs(&[IDLE_OFF_CPU1]);
    let _ = short_verify(&root, m.path(), "idle-off-cpu1");
    let entries: Vec<serde_yaml::Value> = serde_yaml::from_str(&host_ledger(&root)).unwrap();
    let f = &entries.last().unwrap()["facts"];
    assert_eq!(f["kernel"].as_str(), Some(release.as_str()), "{f:?}");
    assert_eq!(f["microcode"].as_str(), Some("0x1000065"), "{f:?}");
    assert_eq!(f["vendor"].as_str(), Some("AuthenticAMD"), "{f:?}");
    assert_eq!(f["cpu_model"].as_str(), Some("25/17"), "{f:?}");
    assert_eq!(f["idle_driver"].as_str(), Some("haltpoll"), "{f:?}");
    assert_eq!(f["idle_governor"].as_str(), Some("menu"), "{f:?}");
    assert_eq!(f["probe"].as_str(), Some("wakeup"), "{f:?}");
    assert!(f["probe_options"].is_mapping(), "{f:?}");
    assert_eq!(f["hostknob"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    let (r, _) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(
        knob(&r, "idle-off-cpu1")["evidence_status"],
        "current",
        "{r:#}"
    );
    // The kernel is updated: the same entry is now stale.
    std::fs::write(root.join("proc/sys/kernel/osrelease"), "6.19.0\n").unwrap();
    let (r, _) = audit_json(&root, m.path(), Some("vm"));
    assert_eq!(
        knob(&r, "idle-off-cpu1")["evidence_detail"],
        format!("evidence-stale: kernel {release} -> 6.19.0")
    );
}

#[test]
fn firmware_cmdline_and_stepping_are_recorded_and_date_the_evidence() {
    let (_t, root) = vm();
    write_files(
        &root,
        &[
            ("sys/class/dmi/id/bios_version", "1.16.2-1\n"),
            ("sys/class/dmi/id/bios_date", "04/01/2014\n"),
            (
                "proc/cmdline",
                "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro nohz_full=1 quiet\n",
            ),
        ],
    );
    let m = knobs(&[IDLE_OFF_CPU1]);
    let _ = short_verify(&root, m.path(), "idle-off-cpu1");
    let entries: Vec<serde_yaml::Value> = serde_yaml::from_str(&host_ledger(&root)).unwrap();
    let f = &entries.last().unwrap()["facts"];
    assert_eq!(f["bios_version"].as_str(), Some("1.16.2-1"), "{f:?}");
    assert_eq!(f["bios_date"].as_str(), Some("04/01/2014"), "{f:?}");
    assert_eq!(f["cmdline"].as_str(), Some("nohz_full=1"), "{f:?}");
    assert!(f["cpu_stepping"].as_str().is_some(), "{f:?}");
    let status = |root: &Path| {
        let (r, _) = audit_json(root, m.path(), Some("vm"));
        knob(&r, "idle-off-cpu1").clone()
    };
    assert_eq!(status(&root)["evidence_status"], "current");
    // A root= change is not latency: still current.
    std::fs::write(root.join("proc/cmdline"), "root=/dev/vda2 nohz_full=1\n").unwrap();
    assert_eq!(status(&root)["evidence_status"], "current");
    // A firmware update and a new isolcpus=: stale, naming both.
    std::fs::write(root.join("sys/class/dmi/id/bios_version"), "1.17.0\n").unwrap();
    std::fs::write(root.join("proc/cmdline"), "nohz_full=1 isolcpus=1\n").unwrap();
    let k = status(&root);
    assert_eq!(k["evidence_status"], "evidence-stale", "{k:#}");
    assert_eq!(
        k["evidence_detail"],
        "evidence-stale: BIOS version 1.16.2-1 -> 1.17.0; kernel command line nohz_full=1 -> nohz_full=1 isolcpus=1"
    );
}

#[test]
fn report_lists_stale_and_unverified_hosts() {
    let (_t, root) = vm();
    let m = knobs(&[THP_OK]);
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        &root,
        m.path(),
        &["--host", "vm", "--format", "json", "audit"],
    );
    std::fs::write(dir.path().join("vm.json"), stdout(&o)).unwrap();
    collected(
        m.path(),
        "vm2",
        &verified("vm2", "thp", "2026-07-10T09:14:03Z", &["kernel: 6.1.0"]),
    );
    let o = run(
        &root,
        m.path(),
        &["--host", "vm2", "--format", "json", "audit"],
    );
    std::fs::write(dir.path().join("vm2.json"), stdout(&o)).unwrap();
    let o = hostknob(&["report", "--format", "json", dir.path().to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let k = &v["knobs"][0];
    assert_eq!(k["unverified_here"], serde_json::json!(["vm"]), "{k:#}");
    assert!(
        k["evidence_stale"]["vm2"]
            .as_str()
            .unwrap()
            .starts_with("kernel 6.1.0 -> "),
        "{k:#}"
    );
    let o = hostknob(&["report", dir.path().to_str().unwrap()]);
    assert!(
        stdout(&o).contains("Evidence stale or missing"),
        "{}",
        stdout(&o)
    );
}
