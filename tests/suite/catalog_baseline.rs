//! Issue 49 item 3: the shipped catalog answers "is this host badly tuned for
//! a latency-sensitive service?". Every corpus capture (and this machine) is
//! audited with it, and each knob's verdict is checked against what the
//! tree's own files say, read here without hostknob: a condition that fails
//! is `not-applicable` naming it, a finding (`drift`) is one the host can act
//! on, and nothing is `unsupported` or `not-honoured`.

use std::path::Path;

use crate::support::*;

/// What the tree's files say a knob's verdict must be.
#[derive(Debug)]
enum Want {
    /// not-applicable, the detail containing this.
    NotHere(String),
    Drift,
    InEffect,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel))
        .ok()
        .map(|t| t.trim().to_string())
}

/// `cpu0`, `cpu1`, ... under sys/devices/system/cpu.
fn cpu_dirs(root: &Path) -> Vec<std::path::PathBuf> {
    let dir = root.join("sys/devices/system/cpu");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                let n = e.file_name().to_str()?.to_string();
                let num = n.strip_prefix("cpu")?;
                (!num.is_empty() && num.bytes().all(|b| b.is_ascii_digit())).then(|| e.path())
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn policies(root: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(root.join("sys/devices/system/cpu/cpufreq"))
        .map(|d| {
            d.filter_map(|e| {
                let p = e.ok()?.path();
                p.file_name()?.to_str()?.starts_with("policy").then_some(p)
            })
            .collect()
        })
        .unwrap_or_default()
}

fn cpu_count(text: &str) -> usize {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.trim().split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// The `when:` facts the catalog names, read from the tree: `Err(why)`
/// when the condition fails (the detail starts `when: `).
fn condition(root: &Path, id: &str) -> Result<(), String> {
    let cpu = "sys/devices/system/cpu";
    let fails = |c: &str| Err(format!("when: {c}"));
    match id {
        "numa-balancing-off" => {
            let nodes = std::fs::read_dir(root.join("sys/devices/system/node"))
                .map(|d| {
                    d.filter(|e| {
                        let n = e.as_ref().unwrap().file_name();
                        let n = n.to_str().unwrap();
                        n.starts_with("node") && n[4..].bytes().all(|b| b.is_ascii_digit())
                    })
                    .count()
                })
                .unwrap_or(0);
            if nodes > 1 {
                Ok(())
            } else {
                fails("numa_nodes > 1")
            }
        }
        "timer-migration-off" | "nmi-watchdog-off" => {
            let lists: Vec<String> = ["isolated", "nohz_full"]
                .iter()
                .filter_map(|f| read(root, &format!("{cpu}/{f}")))
                .collect();
            // Overlap is not counted twice by hostknob; the corpus has none.
            if lists.iter().map(|l| cpu_count(l)).sum::<usize>() > 0 {
                Ok(())
            } else {
                fails("isolated_cpus > 0")
            }
        }
        "busy-poll-50" | "busy-read-50" => match read(root, "proc/cpuinfo") {
            Some(t)
                if !t.lines().any(|l| {
                    l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor")
                }) =>
            {
                Ok(())
            }
            _ => fails("virtualized == false"),
        },
        "cpuidle-deep-states-off" => {
            let g = read(root, &format!("{cpu}/cpuidle/current_governor"))
                .or_else(|| read(root, &format!("{cpu}/cpuidle/current_governor_ro")));
            match g.as_deref() {
                Some(g) if !g.is_empty() && g != "haltpoll" => Ok(()),
                _ => fails("idle_governor != haltpoll"),
            }
        }
        "haltpoll-guest-no-poll" => {
            match read(root, &format!("{cpu}/cpuidle/current_driver")).as_deref() {
                Some("haltpoll") => Ok(()),
                _ => fails("idle_driver == haltpoll"),
            }
        }
        _ => Ok(()),
    }
}

/// The sysctl knobs of the catalog: (id, name, value, optional).
const SYSCTLS: &[(&str, &str, &str, bool)] = &[
    ("vm-swappiness-low", "vm.swappiness", "10", false),
    ("vm-dirty-ratio-low", "vm.dirty_ratio", "10", true),
    (
        "vm-dirty-background-ratio-low",
        "vm.dirty_background_ratio",
        "3",
        true,
    ),
    ("numa-balancing-off", "kernel.numa_balancing", "0", true),
    ("timer-migration-off", "kernel.timer_migration", "0", true),
    ("nmi-watchdog-off", "kernel.nmi_watchdog", "0", true),
    ("busy-poll-50", "net.core.busy_poll", "50", true),
    ("busy-read-50", "net.core.busy_read", "50", true),
];

/// Every knob of the catalog meant for every host.
const BASELINE: &[&str] = &[
    "thp-madvise",
    "cpuidle-deep-states-off",
    "cpufreq-governor-performance",
    "cpufreq-epp-performance",
    "haltpoll-guest-no-poll",
    "nic-adaptive-rx-off",
    "vm-swappiness-low",
    "vm-dirty-ratio-low",
    "vm-dirty-background-ratio-low",
    "numa-balancing-off",
    "timer-migration-off",
    "nmi-watchdog-off",
    "busy-poll-50",
    "busy-read-50",
];

/// What `id`'s verdict must be on `root`, from its files alone. `live`:
/// NIC values are not files there (the ioctl), so the NIC knob is not judged.
fn want(root: &Path, id: &str, live: bool) -> Option<Want> {
    if let Err(why) = condition(root, id) {
        return Some(Want::NotHere(why));
    }
    if let Some((_, name, value, optional)) = SYSCTLS.iter().find(|s| s.0 == id) {
        if !root.join("proc/sys").is_dir() {
            return Some(Want::NotHere("no /proc/sys".into()));
        }
        let path = format!("proc/sys/{}", name.replace('.', "/"));
        return Some(match read(root, &path) {
            None => {
                assert!(optional, "{id}: {path} absent and the knob is not optional");
                Want::NotHere(format!("no sysctl {name} on this host"))
            }
            Some(v) if v.split_whitespace().collect::<Vec<_>>().join(" ") == *value => {
                Want::InEffect
            }
            Some(_) => Want::Drift,
        });
    }
    Some(match id {
        "thp-madvise" => match read(root, "sys/kernel/mm/transparent_hugepage/enabled") {
            None => Want::NotHere("no transparent huge pages".into()),
            Some(t) if t.contains("[madvise]") => Want::InEffect,
            Some(_) => Want::Drift,
        },
        "cpuidle-deep-states-off" => {
            let (mut deep, mut states) = (Vec::new(), 0);
            for c in cpu_dirs(root) {
                for s in std::fs::read_dir(c.join("cpuidle")).into_iter().flatten() {
                    let s = s.unwrap().path();
                    states += 1;
                    let lat: u64 = match std::fs::read_to_string(s.join("latency")) {
                        Ok(t) => t.trim().parse().unwrap(),
                        Err(_) => continue,
                    };
                    if lat >= 20 {
                        deep.push(std::fs::read_to_string(s.join("disable")).unwrap());
                    }
                }
            }
            if states == 0 {
                Want::NotHere("no idle states".into())
            } else if deep.is_empty() {
                Want::NotHere("no idle state with exit latency ≥ 20 µs".into())
            } else if deep.iter().any(|d| d.trim() == "0") {
                Want::Drift
            } else {
                Want::InEffect
            }
        }
        "cpufreq-governor-performance" | "cpufreq-epp-performance" => {
            let (file, list) = if id == "cpufreq-governor-performance" {
                ("scaling_governor", "scaling_available_governors")
            } else {
                (
                    "energy_performance_preference",
                    "energy_performance_available_preferences",
                )
            };
            let values: Vec<(String, String)> = policies(root)
                .iter()
                .filter_map(|p| {
                    let v = std::fs::read_to_string(p.join(file)).ok()?;
                    let l = std::fs::read_to_string(p.join(list)).unwrap_or_default();
                    Some((v.trim().to_string(), l))
                })
                .collect();
            if values.is_empty() {
                let why = if policies(root).is_empty() {
                    "no cpufreq"
                } else {
                    ""
                };
                return Some(Want::NotHere(why.into()));
            }
            if values.iter().all(|(v, _)| v == "performance") {
                Want::InEffect
            } else {
                // A finding the host can act on: the value is on offer.
                for (_, l) in &values {
                    assert!(
                        l.split_whitespace().any(|w| w == "performance"),
                        "{id} on {}: performance is not available ({l})",
                        root.display()
                    );
                }
                Want::Drift
            }
        }
        "haltpoll-guest-no-poll" => {
            match read(root, "sys/module/haltpoll/parameters/guest_halt_poll_ns").as_deref() {
                None => Want::NotHere("haltpoll".into()),
                Some("0") => Want::InEffect,
                Some(_) => Want::Drift,
            }
        }
        "nic-adaptive-rx-off" => {
            let nics: Vec<String> = std::fs::read_dir(root.join("sys/class/net"))
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    let e = e.ok()?;
                    e.path()
                        .join("device")
                        .exists()
                        .then(|| e.file_name().to_str().unwrap().to_string())
                })
                .collect();
            if nics.is_empty() {
                Want::NotHere(String::new())
            } else if live {
                return None;
            } else {
                let states: Vec<Option<String>> = nics
                    .iter()
                    .map(|n| read(root, &format!("hostknob-capture/ethtool/{n}.yaml")))
                    .collect();
                if states.iter().any(Option::is_none) {
                    Want::NotHere("no ethtool state".into())
                } else if states
                    .iter()
                    .flatten()
                    .any(|t| t.contains("adaptive-rx: 1"))
                {
                    Want::Drift
                } else {
                    Want::InEffect
                }
            }
        }
        other => panic!("{other}: a baseline knob this test does not know"),
    })
}

/// Audits `root` with the shipped catalog and checks every baseline knob's
/// verdict; returns (ok, drift, not-applicable) counts.
fn check_host(name: &str, root: &Path, live: bool) -> (usize, usize, usize) {
    let catalog = repo().join("manifest");
    let (r, code) = audit_json(root, &catalog, None);
    let knobs = r["knobs"].as_array().unwrap();
    let ids: Vec<&str> = knobs.iter().map(|k| k["id"].as_str().unwrap()).collect();
    for id in BASELINE {
        assert!(ids.contains(id), "{name}: {id} is not audited: {ids:?}");
    }
    let (mut ok, mut drift, mut na) = (0, 0, 0);
    for k in knobs {
        let id = k["id"].as_str().unwrap();
        let status = k["status"].as_str().unwrap();
        let detail = k["detail"].as_str().unwrap_or_default();
        // Nothing the host cannot act on: no unsupported, not-honoured,
        // unreadable or unknown verdict from the baseline.
        assert!(
            ["ok", "unpersisted", "drift", "not-applicable"].contains(&status),
            "{name}: {id} is {status}: {detail}"
        );
        match status {
            "drift" => drift += 1,
            "not-applicable" => na += 1,
            _ => ok += 1,
        }
        let Some(w) = want(root, id, live) else {
            continue;
        };
        match w {
            Want::NotHere(why) => {
                assert_eq!(status, "not-applicable", "{name}: {id}: {detail}");
                assert!(
                    !detail.is_empty() && detail.contains(&why),
                    "{name}: {id}: detail {detail:?} does not say {why:?}"
                );
                if why.starts_with("when: ") {
                    let c = &k["conditions"];
                    assert!(
                        c.as_array().unwrap().iter().any(|c| c["holds"] == false),
                        "{name}: {id}: {c:#}"
                    );
                }
            }
            Want::Drift => {
                assert_eq!(status, "drift", "{name}: {id}: {detail}");
                // The reason: what it is and what it should be, and why.
                assert!(
                    detail.contains("should be") || detail.contains("enabled"),
                    "{name}: {id}: {detail}"
                );
            }
            Want::InEffect => assert!(
                ["ok", "unpersisted"].contains(&status),
                "{name}: {id} is {status}: {detail}"
            ),
        }
    }
    assert_eq!(code, if drift > 0 { 2 } else { 0 }, "{name}: {r:#}");
    (ok, drift, na)
}

#[test]
fn the_shipped_catalog_names_what_each_corpus_host_can_act_on() {
    let started = std::time::Instant::now();
    let mut rows = Vec::new();
    let hosts = corpus_hosts();
    assert!(hosts.len() >= 47, "{hosts:?}");
    for name in &hosts {
        let (ok, drift, na) = check_host(name, &corpus_host(name), false);
        rows.push(format!("{name:<24} {ok:>3} {drift:>3} {na:>3}"));
    }
    eprintln!(
        "capture                   ok drift n/a ({:.1} s)\n{}",
        started.elapsed().as_secs_f64(),
        rows.join("\n")
    );
    // The baseline finds something on the servers the corpus holds: spr1's
    // governor, EPP and C6 (290 µs) are all findings.
    let (_, drift, _) = check_host("spr1", &corpus_host("spr1"), false);
    assert!(drift >= 3, "{drift}");
}

#[test]
fn the_shipped_catalog_names_what_this_machine_can_act_on() {
    // Read only: audit writes nothing.
    let (ok, drift, na) = check_host("this machine", Path::new("/"), true);
    eprintln!("this machine: {ok} ok, {drift} drift, {na} not-applicable");
}

/// A sysctl some kernels lack: `optional: true` makes it not-applicable
/// where it is absent; without it, absent stays an error (a typo), and the
/// error names the way out.
#[test]
fn an_optional_sysctl_absent_here_is_not_applicable() {
    // fc-haltpoll-2cpu's capture has vm.swappiness but no vm.dirty_ratio.
    let host = corpus_host("fc-haltpoll-2cpu");
    let doc = |id: &str, optional: &str| {
        format!(
            "id: {id}\ntitle: t\nkind: sysctl\ntarget: {{name: vm.dirty_ratio{optional}}}\nset: 10\nhosts: \"*\"\npersistence: sysctl.d\nwhy: w\n"
        )
    };
    let m = manifest(&[("a.yaml", &doc("a", ", optional: true"))]);
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!(code, 0, "{r:#}");
    let k = knob(&r, "a");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("no sysctl vm.dirty_ratio on this host"),
        "{k:#}"
    );
    let m = manifest(&[("a.yaml", &doc("a", ""))]);
    let o = run(&host, m.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains("a.yaml:4: target.name: no sysctl vm.dirty_ratio on this host")
            && e.contains("`optional: true`"),
        "{e}"
    );
    // A value that is not a boolean is refused at its line.
    let m = manifest(&[("a.yaml", &doc("a", ", optional: maybe"))]);
    let o = run(&host, m.path(), &["audit"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("a.yaml:4: target"), "{}", err(&o));
    // Present, it is judged as any sysctl (vm.swappiness is 60 there).
    let m = manifest(&[(
        "a.yaml",
        &doc("a", ", optional: true").replace("vm.dirty_ratio", "vm.swappiness"),
    )]);
    let (r, code) = audit_json(&host, m.path(), None);
    assert_eq!(code, 2);
    assert_eq!(knob(&r, "a")["detail"], "is 60, should be 10");
}
