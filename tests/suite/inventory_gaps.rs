//! What a host does not expose is said as such (issue 14, item 8): `null` in
//! JSON, never an empty list that reads as "none"; a capture without
//! `/dev/cpu_dma_latency` says "not exposed", not "root only"; and a capture's
//! host name comes from the tree, never from the directory it was copied to.

use crate::support::*;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn inventory_value(root: &Path) -> Value {
    json_of(&inventory_json(root))
}

/// Every path in `v` holding `[]` or `{}`.
fn empty_containers(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Array(a) if a.is_empty() => out.push(path.to_string()),
        Value::Object(o) if o.is_empty() => out.push(path.to_string()),
        Value::Array(a) => {
            for x in a {
                empty_containers(x, &format!("{path}[]"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                empty_containers(x, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn facts_a_host_does_not_expose_are_null_not_empty_lists() {
    // genoa0 (amd-pstate) has no base_frequency, no EPP and no EPB files.
    let inv = inventory_value(&corpus_host("genoa0"));
    let f = &inv["frequency"];
    for key in ["base_khz", "epp", "energy_perf_bias"] {
        assert!(f[key].is_null(), "genoa0 frequency.{key}: {}", f[key]);
    }
    assert!(
        f["governors"].is_array() && f["max_khz"].is_array(),
        "{f:#}"
    );
    // Neither /sys/class/net nor the vulnerabilities directory were captured.
    assert!(inv["network"].is_null(), "{}", inv["network"]);
    assert!(
        inv["vulnerabilities"].is_null(),
        "{}",
        inv["vulnerabilities"]
    );
    // gnr0 (intel_pstate) exposes all three: lists with values.
    let inv = inventory_value(&corpus_host("gnr0"));
    for key in ["base_khz", "epp", "energy_perf_bias"] {
        let v = &inv["frequency"][key];
        assert!(
            v.as_array().is_some_and(|a| !a.is_empty()),
            "gnr0 frequency.{key}: {v}"
        );
    }
    // cwf0 was captured without cpuidle: its idle states are not exposed.
    let inv = inventory_value(&corpus_host("cwf0"));
    assert!(inv["idle"]["states"].is_null(), "{}", inv["idle"]["states"]);
}

#[test]
fn no_empty_list_stands_for_not_exposed_on_several_hosts() {
    // Where an empty list is itself the fact: no balloon driver, no CPU with
    // SMT siblings, an interface without IRQs (lo), nothing warned about.
    let facts = [
        ".memory.balloon",
        ".cpu.smt.sibling_lists",
        ".network[].irqs",
        ".warnings",
    ];
    for host in ["genoa0", "gnr0", "cwf0", "adl0", "spr1", "fc-haltpoll-2cpu"] {
        let inv = inventory_value(&corpus_host(host));
        let mut empty = Vec::new();
        empty_containers(&inv, "", &mut empty);
        empty.retain(|p| !facts.contains(&p.as_str()));
        assert!(
            empty.is_empty(),
            "{host}: empty where null was due: {empty:?}"
        );
    }
}

#[test]
fn a_capture_without_the_pm_qos_device_says_not_exposed() {
    let root = corpus_host("spr1");
    assert!(!root.join("dev/cpu_dma_latency").exists());
    let inv = inventory_value(&root);
    assert!(inv["pm_qos"]["cpu_dma_latency_us"].is_null());
    let gaps = inv["not_exposed"].as_array().unwrap();
    assert!(
        gaps.iter()
            .any(|g| g["what"] == "PM QoS request" && g["path"] == "/dev/cpu_dma_latency"),
        "{gaps:?}"
    );
    let table = ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "idle",
    ]));
    assert!(
        table.contains("not exposed (no /dev/cpu_dma_latency)"),
        "{table}"
    );
    assert!(!table.contains("root only"), "{table}");
}

fn audit(root: &Path, manifest: &Path) -> Value {
    let (r, _) = audit_json(root, manifest, None);
    r
}

fn apply_all(root: &Path, manifest: &Path) -> Output {
    hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "apply",
        "--all",
    ])
}

#[test]
fn a_capture_is_named_by_its_metadata_or_hostname_never_by_its_directory() {
    let m = manifest(&[(
        "thp.yaml",
        "id: thp\ntitle: THP madvise\nwhy: w\nhosts: [spr1, web7, rpc-ap-9]\npersistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: madvise\n",
    )]);
    // A dump with neither names no host, whatever its directory is called.
    let (_tmp, root) = copy_host("spr1");
    std::fs::remove_file(root.join("hostknob-capture.yaml")).unwrap();
    let r = audit(&root, m.path());
    assert_eq!(r["host"], "(unnamed)", "{r:#}");
    assert!(
        r["host_source"]
            .as_str()
            .unwrap()
            .contains("no /proc/sys/kernel/hostname"),
        "{}",
        r["host_source"]
    );
    assert_eq!(r["knobs"].as_array().unwrap().len(), 0, "{r:#}");
    // Commands that write under the host's name refuse, saying what to do,
    // and change nothing.
    let before = tree(&root);
    let o = apply_all(&root, m.path());
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("no host name") && err(&o).contains("--host NAME"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "apply on an unnamed tree");
    // --host names it.
    let (r, _) = audit_json(&root, m.path(), Some("spr1"));
    assert_eq!(
        (r["host"].as_str(), r["knobs"].as_array().unwrap().len()),
        (Some("spr1"), 1)
    );

    // The capture's metadata names it, in a directory called something else.
    let renamed = root.with_file_name("copied-elsewhere");
    std::fs::rename(&root, &renamed).unwrap();
    write_files(&renamed, &[("hostknob-capture.yaml", "host: rpc-ap-9\n")]);
    let r = audit(&renamed, m.path());
    assert_eq!(r["host"], "rpc-ap-9");
    assert_eq!(r["host_source"], "hostknob-capture.yaml");
    // The tree's own hostname file comes first.
    write_files(&renamed, &[("proc/sys/kernel/hostname", "web7\n")]);
    let r = audit(&renamed, m.path());
    assert_eq!(r["host"], "web7");
    assert_eq!(r["host_source"], "/proc/sys/kernel/hostname");
    // A name that cannot name files is still refused by the one rule.
    write_files(&renamed, &[("proc/sys/kernel/hostname", "../etc\n")]);
    let o = apply_all(&renamed, m.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("/proc/sys/kernel/hostname"), "{}", err(&o));
}
