//! Issue 22 item 5: verify records hardware C-state residency per leg. On a
//! copy of spr1 with its MSR dump materialized plus the residency MSRs, a
//! leg gate (`HOSTKNOB_TEST_LEG_GATE`) lets the test advance the counters
//! inside each leg, as the CPU would; the VM capture exposes none.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

const TSC: u32 = 0x10;
const CORE_C6: u32 = 0x3fd;
const PKG_C2: u32 = 0x60d;
const PKG_C6: u32 = 0x3f9;
/// A client's package C10 (MSR_PKG_C10_RESIDENCY), added to the copy.
const PKG_C10: u32 = 0x632;

/// A copy of spr1 with pepc's dump and the residency MSRs on every CPU.
fn spr1_with_residency() -> (tempfile::TempDir, PathBuf, Vec<u32>) {
    let (tmp, root) = copy_host("spr1");
    let mut dump = msr_dump("spr1").expect("spr1's MSR dump");
    let cpus: Vec<u32> = dump[&0x1fc].keys().copied().collect();
    for (reg, start) in [
        (TSC, 1u64 << 40),
        (CORE_C6, 1 << 30),
        (PKG_C2, 1 << 30),
        (PKG_C6, 1 << 30),
        (PKG_C10, 1 << 30),
    ] {
        dump.insert(reg, cpus.iter().map(|&c| (c, start)).collect());
    }
    materialize_msrs(&root, &dump);
    (tmp, root, cpus)
}

fn bump(root: &Path, cpu: u32, reg: u32, by: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("dev/cpu/{cpu}/msr")))
        .unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, reg as u64 * 8).unwrap();
    let v = u64::from_le_bytes(b) + by;
    f.write_all_at(&v.to_le_bytes(), reg as u64 * 8).unwrap();
}

/// Runs verify of a `package-cstate-limit: PC2` knob, advancing in each leg
/// the TSC by 1e6, core C6 by 20 %, package C2 by 10 % and package C6 by 30 %
/// as found and `applied_pc6` ticks in the applied legs.
fn gated_verify(applied_pc6: u64) -> (serde_json::Value, String) {
    let (tmp, root, cpus) = spr1_with_residency();
    let m = knobs(&[(
        "pkgc-pc2",
        "kind: package-cstate-limit\nset: PC2\npersistence: runtime\nverify: {probe: wakeup}\n",
    )]);
    let gate = tmp.path().join("gate");
    std::fs::create_dir(&gate).unwrap();
    let args = |format: &'static str| {
        vec![
            "--host",
            "spr1",
            "--format",
            format,
            "verify",
            "pkgc-pc2",
            "--rounds",
            "5",
            "--max-rounds",
            "5",
            "--settle",
            "1ms",
            "--seed",
            "7",
            "--",
            "--samples",
            "5",
            "--gap-us",
            "100..200",
            "--sleeper-cpu",
            "1",
            "--waker-cpu",
            "0",
        ]
    };
    let mut outs = Vec::new();
    for format in ["json", "table"] {
        // Each run's legs count from 0 again. Cleared before the run, never
        // at the end of the last: verify may not have seen its last `go` yet.
        for i in 0..10 {
            let _ = std::fs::remove_file(gate.join(format!("go-{i}")));
        }
        let child = command(&root, m.path(), &args(format))
            .env("HOSTKNOB_TEST_LEG_GATE", &gate)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let run = format!("{format}-");
        // Each leg: wait for its gate, advance the counters, let it go on.
        let handle = {
            let gate = gate.clone();
            let root = root.clone();
            let cpus = cpus.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    let end = Instant::now() + Duration::from_secs(60);
                    let leg = loop {
                        let found = ["applied", "as-found"]
                            .into_iter()
                            .find(|l| gate.join(format!("leg-{i}-{l}")).exists());
                        if let Some(l) = found {
                            break l;
                        }
                        assert!(Instant::now() < end, "leg {i} never reached its gate");
                        std::thread::sleep(Duration::from_millis(2));
                    };
                    for &cpu in &cpus {
                        bump(&root, cpu, TSC, 1_000_000);
                        bump(&root, cpu, CORE_C6, 200_000);
                        bump(&root, cpu, PKG_C2, 100_000);
                        bump(
                            &root,
                            cpu,
                            PKG_C6,
                            if leg == "applied" {
                                applied_pc6
                            } else {
                                300_000
                            },
                        );
                    }
                    std::fs::remove_file(gate.join(format!("leg-{i}-{leg}"))).unwrap();
                    std::fs::write(gate.join(format!("go-{i}")), "").unwrap();
                }
            })
        };
        let o = child.wait_with_output().unwrap();
        handle.join().unwrap();
        assert!(o.status.code().is_some_and(|c| c != 1), "{run}{}", err(&o));
        outs.push(out(&o));
    }
    (serde_json::from_str(&outs[0]).unwrap(), outs[1].clone())
}

fn percent(v: &serde_json::Value, leg: usize, scope: &str, cpu: u64, state: &str) -> f64 {
    v["hardware"]["legs"][leg]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["scope"] == scope && c["cpu"] == cpu && c["state"] == state)
        .unwrap_or_else(|| panic!("no {scope} {state} on CPU {cpu}: {}", v["hardware"]))["percent"]
        .as_f64()
        .unwrap()
}

#[test]
fn residency_per_leg_from_msrs_and_a_package_state_past_the_limit_is_not_honoured() {
    let (v, table) = gated_verify(50_000);
    let hw = &v["hardware"];
    assert_eq!(hw["status"], "measured", "{hw}");
    assert_eq!(hw["source"], "msr", "{hw}");
    // Core counters on every watched CPU, package counters once per package.
    assert_eq!(percent(&v, 0, "core", 1, "C6"), 20.0);
    assert_eq!(percent(&v, 1, "core", 1, "C6"), 20.0);
    assert_eq!(percent(&v, 0, "package", 1, "PC2"), 10.0);
    assert_eq!(percent(&v, 0, "package", 1, "PC6"), 30.0);
    assert_eq!(percent(&v, 1, "package", 1, "PC6"), 5.0);
    // The client counters PC8-PC10 are read where they exist (PC10 here).
    assert_eq!(percent(&v, 0, "package", 1, "PC10"), 0.0);
    assert_eq!(percent(&v, 1, "package", 1, "PC10"), 0.0);
    let legs = hw["legs"][1].as_array().unwrap();
    assert_eq!(
        legs.iter()
            .filter(|c| c["scope"] == "package" && c["state"] == "PC6")
            .count(),
        1,
        "{hw}"
    );
    // Five rounds of 1e6 TSC ticks each.
    assert_eq!(legs[0]["tsc"], 5_000_000, "{hw}");
    assert_eq!(v["honoured"]["status"], "not-honoured", "{}", v["honoured"]);
    let f = v["honoured"]["findings"][0].as_str().unwrap();
    assert!(
        f.contains("package C-state limit PC2 but PC6 residency rose to 5.00% of the TSC")
            && f.contains("MSR 0x3f9"),
        "{f}"
    );
    assert!(table.contains("Hardware residency (msr;"), "{table}");
    assert!(
        table.contains("30.00%") && table.contains("5.00%"),
        "{table}"
    );
}

#[test]
fn no_package_residency_past_the_limit_is_no_finding() {
    let (v, _) = gated_verify(0);
    assert_eq!(percent(&v, 1, "package", 1, "PC6"), 0.0);
    assert_eq!(percent(&v, 0, "package", 1, "PC6"), 30.0);
    assert_ne!(v["honoured"]["status"], "not-honoured", "{}", v["honoured"]);
    assert_eq!(v["honoured"]["findings"], serde_json::json!([]));
}

#[test]
fn every_msr_idle_knob_is_not_exercised_when_the_sleeper_never_idled() {
    // Under a copy the cpuidle counters never move: CPU 1 never idled as
    // found, so none of these knobs could act (they were decided by noise).
    let (_t, root, _) = spr1_with_residency();
    let kinds = [
        ("c1e", ["on", "off"]),
        ("package-cstate-limit", ["PC2", "PC6"]),
        ("c1-demotion", ["on", "off"]),
        ("c1-undemotion", ["on", "off"]),
    ];
    let mut bodies = Vec::new();
    for (kind, values) in kinds {
        for v in values {
            bodies.push((
                format!("{kind}-{}", v.to_lowercase()),
                format!(
                    "kind: {kind}\nset: \"{v}\"\npersistence: runtime\nverify: {{probe: wakeup}}\n"
                ),
            ));
        }
    }
    let all: Vec<(&str, &str)> = bodies
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let m = knobs(&all);
    let before = tree(&root);
    for (kind, values) in kinds {
        // Each kind's value that is not in effect on the copy.
        let mut ran = false;
        for v in values {
            let id = format!("{kind}-{}", v.to_lowercase());
            let o = run(
                &root,
                m.path(),
                &[
                    "--host",
                    "spr1",
                    "--format",
                    "json",
                    "verify",
                    &id,
                    "--rounds",
                    "5",
                    "--max-rounds",
                    "5",
                    "--settle",
                    "1ms",
                    "--",
                    "--samples",
                    "5",
                    "--gap-us",
                    "100..200",
                    "--sleeper-cpu",
                    "1",
                    "--waker-cpu",
                    "0",
                ],
            );
            if err(&o).contains("already in effect") {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(&out(&o)).unwrap_or_else(|e| panic!("{id}: {e}: {}", err(&o)));
            assert_eq!(
                v["decision"], "not-exercised",
                "{id}: {}",
                v["verdict_words"]
            );
            assert_eq!(o.status.code(), Some(3), "{id}");
            assert_tree(&before, &root, &id);
            ran = true;
        }
        assert!(ran, "{kind}: every value already in effect");
    }
}

#[test]
fn a_host_without_residency_counters_says_not_exposed_never_zero() {
    let (_t, root) = vm();
    let m = knobs(&[IDLE_OFF_CPU1]);
    let v = short_verify(&root, m.path(), "idle-off-cpu1");
    let hw = &v["hardware"];
    assert_eq!(hw["status"], "not-exposed", "{hw}");
    assert!(hw["source"].is_null(), "{hw}");
    let why = hw["reason"].as_str().unwrap();
    assert!(
        why.starts_with("hardware residency not exposed:") && why.contains("no /dev/cpu/msr-index"),
        "{why}"
    );
    assert_eq!(hw["legs"], serde_json::json!([[], []]));
    let o = run(
        &root,
        m.path(),
        &[
            "--host",
            "vm",
            "verify",
            "idle-off-cpu1",
            "--rounds",
            "5",
            "--max-rounds",
            "5",
            "--settle",
            "1ms",
            "--",
            "--samples",
            "5",
            "--gap-us",
            "100..200",
        ],
    );
    let table = out(&o);
    assert!(table.contains("hardware residency not exposed"), "{table}");
    assert!(!table.contains("Hardware residency ("), "{table}");
}
