//! Inventory of this machine's live `/` against `lscpu`, an independent reader,
//! and the capture round trip (live host and a captured host). Read-only.

use std::collections::BTreeMap;
use std::process::Command;

use crate::support::*;
use hostknob::cpulist::CpuList;
use hostknob::inventory::Inventory;

/// lscpu -J nests some fields under others: flatten to field -> data.
fn flatten(v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    for item in v.as_array().into_iter().flatten() {
        if let (Some(f), Some(d)) = (item["field"].as_str(), item["data"].as_str()) {
            out.insert(f.trim_end_matches(':').to_string(), d.to_string());
        }
        flatten(&item["children"], out);
    }
}

fn lscpu() -> BTreeMap<String, String> {
    let out = Command::new("lscpu")
        .arg("-J")
        .output()
        .expect("lscpu (util-linux) is installed");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut m = BTreeMap::new();
    flatten(&v["lscpu"], &mut m);
    m
}

fn size_kib(s: &str) -> u64 {
    let (n, unit) = s.split_at(s.find(|c: char| c.is_alphabetic()).unwrap_or(s.len()));
    let n: f64 = n.trim().parse().unwrap();
    let mult = match unit.trim() {
        "K" | "KiB" => 1.0,
        "M" | "MiB" => 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0,
        "" | "B" => 1.0 / 1024.0,
        u => panic!("unit {u}"),
    };
    (n * mult).round() as u64
}

fn live_inventory() -> Inventory {
    let out = hostknob(&["--root", "/", "inventory", "--format", "json"]);
    serde_json::from_value(json_of(&out)).expect("inventory JSON deserializes")
}

#[test]
fn live_inventory_agrees_with_lscpu() {
    let inv = live_inventory();
    let l = lscpu();
    let cpu = &inv.cpu;
    assert_eq!(cpu.online_count.to_string(), l["CPU(s)"]);
    assert_eq!(
        cpu.online,
        CpuList::parse(&l["On-line CPU(s) list"]).unwrap()
    );
    assert_eq!(cpu.model_name.as_deref(), Some(l["Model name"].as_str()));
    assert_eq!(cpu.vendor_id.as_deref(), Some(l["Vendor ID"].as_str()));
    assert_eq!(
        cpu.threads_per_core.map(|t| t.to_string()),
        Some(l["Thread(s) per core"].clone())
    );
    let sockets: usize = l["Socket(s)"].parse().unwrap();
    assert_eq!(cpu.packages, Some(sockets));
    let cores_per_socket: usize = l["Core(s) per socket"].parse().unwrap();
    assert_eq!(cpu.cores, Some(cores_per_socket * sockets));
    if let Some(n) = l.get("NUMA node(s)") {
        assert_eq!(inv.numa.nodes.len().to_string(), *n);
    }

    let out = Command::new("lscpu").args(["-C", "-J"]).output().unwrap();
    let caches: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let caches = caches["caches"].as_array().expect("lscpu -C lists caches");
    assert!(!caches.is_empty());
    for c in caches {
        let level = c["level"].as_u64().unwrap() as u32;
        let kind = c["type"].as_str().unwrap();
        let ours: Vec<_> = inv
            .caches
            .iter()
            .filter(|k| k.level == Some(level) && k.kind.as_deref() == Some(kind))
            .collect();
        assert!(!ours.is_empty(), "no L{level} {kind} cache in inventory");
        let total: u64 = ours
            .iter()
            .map(|k| k.size_kib.unwrap() * k.instances as u64)
            .sum();
        assert_eq!(
            total,
            size_kib(c["all-size"].as_str().unwrap()),
            "L{level} {kind} total size"
        );
        assert!(
            ours.iter()
                .any(|k| k.size_kib == Some(size_kib(c["one-size"].as_str().unwrap())))
        );
    }
}

#[test]
fn capture_of_the_live_host_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("capture");
    let out = hostknob(&["capture", "--out", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out_dir.join("hostknob-capture.yaml").is_file());
    let live = live_inventory();
    let captured: Inventory = serde_json::from_value(json_of(&inventory_json(&out_dir))).unwrap();
    assert_eq!(captured.without_counters(), live.without_counters());
    // Symlinks stay symlinks in the capture.
    let net = std::fs::read_dir(out_dir.join("sys/class/net"))
        .unwrap()
        .next();
    if let Some(entry) = net {
        assert!(entry.unwrap().file_type().unwrap().is_symlink());
    }
}

#[test]
fn capture_of_a_capture_is_identical() {
    for host in ["spr1", "fc-haltpoll-2cpu", "adl0"] {
        let src = corpus_host(host);
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join(host);
        let out = hostknob(&[
            "--root",
            src.to_str().unwrap(),
            "capture",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let a = inventory_json(&src);
        let b = inventory_json(&out_dir);
        assert_eq!(json_of(&a), json_of(&b), "{host}: capture differs");
        // pepc captures link cpuN/cpufreq to the policy directory: kept as a link.
        if host == "spr1" {
            let link = out_dir.join("sys/devices/system/cpu/cpu0/cpufreq");
            assert!(
                std::fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
        }
    }
}

#[test]
fn capture_refuses_a_non_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep"), "x").unwrap();
    let src = corpus_host("fc-haltpoll-2cpu");
    let out = hostknob(&[
        "--root",
        src.to_str().unwrap(),
        "capture",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing written"
    );
}
