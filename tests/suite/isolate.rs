//! `hostknob isolate` (issue 21 item 5) on real captures: the sets it writes
//! are checked against the topology read here, independently, from the
//! tree's own files (sibling lists or /proc/cpuinfo's core ids, NUMA node
//! cpulists, L3 shared_cpu_lists, the hybrid PMUs' cpus); bad input is
//! refused with the reason and nothing written.

use crate::support::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Set = BTreeSet<u32>;

fn parse_list(text: &str) -> Set {
    let mut s = Set::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => s.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => {
                s.insert(part.parse().unwrap());
            }
        }
    }
    s
}

fn read_list(root: &Path, rel: &str) -> Option<Set> {
    std::fs::read_to_string(root.join(rel))
        .ok()
        .map(|t| parse_list(t.trim_matches(|c: char| c.is_whitespace() || c == '\0')))
}

/// The layout, read here without hostknob.
struct Topo {
    online: Set,
    cores: Vec<Set>,
    nodes: Vec<Set>,
    /// L3 instances of packages that hold several.
    split_l3: Vec<Set>,
    pcores: Option<Set>,
}

fn topo(root: &Path) -> Topo {
    let cpu = "sys/devices/system/cpu";
    let online = read_list(root, &format!("{cpu}/online")).unwrap();
    // Cores and packages: sibling lists where captured, else /proc/cpuinfo.
    let mut cores: BTreeMap<(u32, u32), Set> = BTreeMap::new();
    let mut package_of: BTreeMap<u32, u32> = BTreeMap::new();
    let sib = |c: u32| read_list(root, &format!("{cpu}/cpu{c}/topology/thread_siblings_list"));
    if online.iter().all(|&c| sib(c).is_some()) {
        for &c in &online {
            let s: Set = sib(c).unwrap().intersection(&online).copied().collect();
            let first = *s.iter().next().unwrap();
            cores.insert((0, first), s);
            package_of.insert(c, 0);
        }
    } else {
        let info = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap();
        for block in info.split("\n\n").filter(|b| b.contains("processor")) {
            let field = |name: &str| -> u32 {
                block
                    .lines()
                    .find(|l| l.split(':').next().unwrap().trim() == name)
                    .and_then(|l| l.split(':').nth(1))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            };
            let (p, core, id) = (field("processor"), field("core id"), field("physical id"));
            if online.contains(&p) {
                cores.entry((id, core)).or_default().insert(p);
                package_of.insert(p, id);
            }
        }
    }
    let nodes: Vec<Set> = std::fs::read_dir(root.join("sys/devices/system/node"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                .filter_map(|e| read_list(&e.path(), "cpulist"))
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut l3: BTreeSet<Vec<u32>> = BTreeSet::new();
    for &c in &online {
        if let Some(s) = read_list(root, &format!("{cpu}/cpu{c}/cache/index3/shared_cpu_list")) {
            l3.insert(s.into_iter().collect());
        }
    }
    let mut per_package: BTreeMap<u32, usize> = BTreeMap::new();
    for d in &l3 {
        *per_package.entry(package_of[&d[0]]).or_default() += 1;
    }
    let split_l3 = l3
        .iter()
        .filter(|d| per_package[&package_of[&d[0]]] > 1)
        .map(|d| d.iter().copied().collect())
        .collect();
    Topo {
        online,
        cores: cores.into_values().collect(),
        nodes,
        split_l3,
        pcores: read_list(root, "sys/devices/cpu_core/cpus"),
    }
}

fn today() -> String {
    let o = std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The knob files in `dir`, by id.
fn knob_files(dir: &Path) -> BTreeMap<String, serde_yaml::Value> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            assert_eq!(
                e.file_name().to_string_lossy(),
                format!("{id}.yaml"),
                "one file per knob, named by id"
            );
            (id, v)
        })
        .collect()
}

fn set_of(v: &serde_yaml::Value) -> Set {
    parse_list(v.as_str().unwrap())
}

/// `isolate --count 8 --out DIR` on `host`, checked against its topology.
fn eight_on(host: &str) -> (Set, Set, Topo) {
    n_on(host, 8)
}

/// `isolate --count N --out DIR` on HOST, checked: (isolated, housekeeping, topology).
fn n_on(host: &str, n: usize) -> (Set, Set, Topo) {
    n_on_with(host, n, &[])
}

/// [`n_on`] with more `isolate` arguments.
fn n_on_with(host: &str, n: usize, extra: &[&str]) -> (Set, Set, Topo) {
    let count = n.to_string();
    let root = corpus_host(host);
    let before = snapshot(&root);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("isolation");
    let o = hostknob(
        &[
            "--root",
            root.to_str().unwrap(),
            "--host",
            host,
            "isolate",
            "--count",
            &count,
            "--out",
            dir.to_str().unwrap(),
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    );
    let text = ok(&o);
    assert!(snapshot(&root) == before, "{host}: the tree changed");
    let knobs = knob_files(&dir);
    let kinds: BTreeSet<&str> = knobs
        .values()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "irq-affinity",
            "irqbalance",
            "kernel-cmdline",
            "systemd-cpu-affinity",
            "thread-affinity",
            "workqueue-cpumask"
        ]
        .into_iter()
        .collect(),
        "{host}"
    );
    for (id, k) in &knobs {
        assert!(text.contains(&format!(
            "wrote {}",
            dir.join(format!("{id}.yaml")).display()
        )));
        for field in ["title", "why", "persistence"] {
            assert!(
                k[field].as_str().is_some_and(|s| !s.is_empty()),
                "{id}.{field}"
            );
        }
        assert!(!k["caveats"].as_sequence().unwrap().is_empty(), "{id}");
        assert_eq!(k["hosts"][0].as_str(), Some(host));
        assert_eq!(
            k["history"][0]["date"].as_str(),
            Some(today().as_str()),
            "{id}: dated today"
        );
    }
    let args: Vec<&str> = knobs["isolate-kernel-cmdline"]["set"]["add"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let arg = |key: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(key))
            .unwrap_or_else(|| panic!("{host}: no {key} in {args:?}"))
    };
    let iso = parse_list(arg("nohz_full="));
    let hk = parse_list(arg("irqaffinity="));
    // --isolcpus managed_irq, the default: no `domain`; nohz=on beside nohz_full=.
    assert_eq!(parse_list(arg("isolcpus=managed_irq,")), iso);
    assert!(args.contains(&"nohz=on"), "{host}: {args:?}");
    assert_eq!(parse_list(arg("rcu_nocbs=")), iso);
    assert_eq!(set_of(&knobs["isolate-irqbalance"]["set"]), iso);
    for id in [
        "isolate-irq-affinity",
        "isolate-workqueue-cpumask",
        "isolate-systemd-cpu-affinity",
        "isolate-thread-affinity",
    ] {
        assert_eq!(set_of(&knobs[id]["set"]), hk, "{host}: {id}");
    }
    let irq = &knobs["isolate-irq-affinity"]["target"];
    assert_eq!(
        (irq["all"].as_bool(), irq["default"].as_bool()),
        (Some(true), Some(true))
    );

    let t = topo(&root);
    assert_eq!(iso.len(), n, "{host}: {iso:?}");
    assert!(iso.is_disjoint(&hk), "{host}");
    assert_eq!(iso.union(&hk).copied().collect::<Set>(), t.online, "{host}");
    for core in &t.cores {
        assert!(
            core.is_subset(&iso) || core.is_disjoint(&iso),
            "{host}: core {core:?} is split by {iso:?}"
        );
        if core.contains(&0) {
            assert!(
                core.is_subset(&hk),
                "{host}: CPU 0's core {core:?} isolated"
            );
        }
    }
    for node in &t.nodes {
        assert!(
            !node.is_subset(&iso),
            "{host}: node {node:?} has no housekeeping"
        );
    }
    // The housekeeping minimum: one core per node and 1 in 16 CPUs.
    assert!(hk.len() >= t.online.len().div_ceil(16), "{host}: {hk:?}");
    (iso, hk, t)
}

#[test]
fn isolate_gnr0_eight_cpus_whole_cores_housekeeping_on_both_nodes() {
    let (iso, _, t) = eight_on("gnr0");
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.cores.iter().filter(|c| c.is_subset(&iso)).count(), 4);
}

#[test]
fn isolate_spr1_eight_cpus_whole_cores_housekeeping_on_four_nodes() {
    let (_, hk, t) = eight_on("spr1");
    assert_eq!(t.nodes.len(), 4);
    assert!(t.nodes.iter().all(|n| !n.is_disjoint(&hk)));
}

#[test]
fn isolate_adl0_chooses_the_performance_cores_first() {
    let (iso, _, t) = n_on("adl0", 10);
    let p = t.pcores.clone().expect("adl0 is hybrid");
    // Every P-core but CPU 0's is isolated before any E-core is.
    for core in t
        .cores
        .iter()
        .filter(|c| c.is_subset(&p) && !c.contains(&0))
    {
        assert!(core.is_subset(&iso), "P-core {core:?} left out of {iso:?}");
    }
    // The efficient cores came as one whole L2 cluster.
    let e: Set = iso.difference(&p).copied().collect();
    assert_eq!(e, parse_list("8-11"), "{iso:?}");
}

/// Issue 44 item 15: every even size from 2 to 14 on adl0 (P-cores 0-7 with
/// SMT, E-clusters of 4 sharing an L2) is a combination of whole cores and
/// whole clusters, with as many CPUs of the preferred type as any has.
#[test]
fn isolate_adl0_reaches_every_even_size_preferring_the_kind_asked() {
    let root = corpus_host("adl0");
    let t = topo(&root);
    let p = t.pcores.clone().expect("adl0 is hybrid");
    // The E-cores' L2 clusters, from the tree's own cache files.
    let clusters: BTreeSet<Vec<u32>> = t
        .online
        .iter()
        .filter(|c| !p.contains(c))
        .map(|c| {
            let rel = format!("sys/devices/system/cpu/cpu{c}/cache/index2/shared_cpu_list");
            read_list(&root, &rel).unwrap().into_iter().collect()
        })
        .collect();
    assert_eq!(clusters.len(), 2, "{clusters:?}");
    // P-cores other than CPU 0's, and the sizes any split could take.
    let p_free = t
        .cores
        .iter()
        .filter(|c| c.is_subset(&p) && !c.contains(&0))
        .count();
    for prefer in ["performance", "efficient"] {
        for n in (2..=14).step_by(2) {
            let (iso, _, _) = n_on_with("adl0", n, &["--prefer", prefer]);
            for cl in &clusters {
                let cl: Set = cl.iter().copied().collect();
                assert!(
                    cl.is_subset(&iso) || cl.is_disjoint(&iso),
                    "--cpus {n}: cluster {cl:?} split by {iso:?}"
                );
            }
            // The most CPUs of the preferred type any whole-unit split of n has.
            let best = (0..=p_free)
                .flat_map(|pc| (0..=clusters.len()).map(move |ec| (2 * pc, 4 * ec)))
                .filter(|(pn, en)| pn + en == n)
                .map(|(pn, en)| if prefer == "performance" { pn } else { en })
                .max()
                .unwrap();
            let p_iso = iso.intersection(&p).count();
            let got = if prefer == "performance" {
                p_iso
            } else {
                n - p_iso
            };
            assert_eq!(got, best, "--cpus {n} --prefer {prefer}: {iso:?}");
        }
    }
}

/// Issue 31 item 10: no "housekeeping core per L3" rule (no kernel basis):
/// a whole L3 away from CPU 0's is isolated first, and genoa0 gives more
/// than 96 of its 128 CPUs.
#[test]
fn isolate_genoa0_isolates_whole_l3_domains_and_more_than_96() {
    let (iso, _, t) = eight_on("genoa0");
    assert!(t.split_l3.len() > 2, "genoa0 has several L3 per package");
    assert!(t.split_l3.contains(&iso), "{iso:?} is not one whole L3");
    assert!(!iso.contains(&0) && !iso.contains(&1));
    let (iso, hk, _) = n_on("genoa0", 112);
    assert_eq!((iso.len(), hk.len()), (112, 16));
}

/// Issue 31 item 10: a split below the housekeeping minimum is refused
/// with the reason unless --allow-small-housekeeping; --isolcpus chooses
/// the flags.
#[test]
fn isolate_refuses_small_housekeeping_and_takes_the_isolcpus_mode() {
    let spr = corpus_host("spr1");
    let r = spr.to_str().unwrap();
    // spr1: 320 CPUs on 4 nodes: at least 20 housekeeping CPUs (1 in 16).
    refused(&spr, &["--count", "310"], "at least 20 CPU(s)");
    refused(
        &spr,
        &[
            "--cpus",
            "1-39,41-79,81-119,121-159,161-199,201-239,241-279,281-319",
        ],
        "it leaves 8 housekeeping CPU(s), fewer than the minimum",
    );
    let o = hostknob(&[
        "--root",
        r,
        "--host",
        "h",
        "isolate",
        "--count",
        "310",
        "--allow-small-housekeeping",
        "--format",
        "json",
    ]);
    let v = json_of(&o);
    assert_eq!(v["request"]["allow_small_housekeeping"], true);
    assert!(
        v["warnings"]
            .to_string()
            .contains("--allow-small-housekeeping: 10 housekeeping CPU(s)"),
        "{v:#}"
    );
    let cmdline = |mode: &str| {
        let v = json_of(&hostknob(&[
            "--root",
            r,
            "--host",
            "h",
            "isolate",
            "--count",
            "8",
            "--isolcpus",
            mode,
            "--format",
            "json",
        ]));
        let doc = v["knobs"][0]["document"].as_str().unwrap().to_string();
        assert_eq!(v["request"]["isolcpus"], mode);
        let k: serde_yaml::Value = serde_yaml::from_str(&doc).unwrap();
        let add: Vec<String> = k["set"]["add"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        add.join(" ")
    };
    assert!(cmdline("domain").contains("isolcpus=managed_irq,domain,"));
    assert!(!cmdline("none").contains("isolcpus="));
    assert!(cmdline("managed_irq").contains("isolcpus=managed_irq,"));
    assert!(cmdline("managed_irq").contains("nohz=on nohz_full="));
}

#[test]
fn isolate_the_two_cpu_vm_isolates_one_and_says_so() {
    let root = corpus_host("fc-haltpoll-2cpu");
    let r = root.to_str().unwrap();
    let o = hostknob(&[
        "--root", r, "--host", "vm", "isolate", "--count", "1", "--format", "json",
    ]);
    let v = json_of(&o);
    assert_eq!(
        (v["isolated"].as_str(), v["housekeeping"].as_str()),
        (Some("1"), Some("0"))
    );
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("one CPU isolated, one for housekeeping"),
        "{warnings}"
    );
    // The fragment on stdout: seven YAML documents, the six of every host
    // and eth0's queue interrupts (virtio2-input.0, virtio2-output.0) in a
    // knob of their own; eth0 has no queues/ in this capture, so no rps.
    let o = hostknob(&["--root", r, "--host", "vm", "isolate", "--count", "1"]);
    let text = ok(&o);
    assert_eq!(
        serde_yaml::Deserializer::from_str(&text).count(),
        7,
        "{text}"
    );
    assert!(text.contains("id: isolate-nic-irq-affinity"), "{text}");
    assert!(
        err(&o).contains("one CPU isolated, one for housekeeping"),
        "{}",
        err(&o)
    );
    // More than it has: refused with the most it can give.
    let o = hostknob(&["--root", r, "--host", "vm", "isolate", "--count", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("at most 1 of the 2 online CPUs"),
        "{}",
        err(&o)
    );
}

/// Runs `isolate` with `args` into a fresh --out and checks it is refused
/// with `expect` in the message and nothing written.
fn refused(root: &Path, args: &[&str], expect: &str) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("isolation");
    let mut all = vec!["--root", root.to_str().unwrap(), "--host", "h", "isolate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", dir.to_str().unwrap()]);
    let o = hostknob(&all);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", out_text(&o));
    assert!(err(&o).contains(expect), "{args:?}: {}", err(&o));
    assert!(!dir.exists(), "{args:?}: something was written");
}

fn out_text(o: &std::process::Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

#[test]
fn isolate_refuses_bad_counts_and_lists_with_the_reason() {
    let gnr = corpus_host("gnr0");
    refused(&gnr, &["--count", "0"], "--count 0: nothing to isolate");
    refused(&gnr, &["--count", "1000"], "at most");
    refused(&gnr, &["--count", "7"], "ask for 6 or 8");
    refused(&gnr, &["--cpus", "1-4"], "splits core 1,257");
    refused(&gnr, &["--cpus", "600-601"], "CPU 600 does not exist");
    refused(&gnr, &["--cpus", "0,256"], "CPU 0's core");
    refused(&gnr, &["--cpus", "x"], "not a CPU number");
    let spr = corpus_host("spr1");
    refused(
        &spr,
        &["--cpus", "40-79,200-239"],
        "NUMA node 1 (CPUs 40-79,200-239) would keep no housekeeping CPU",
    );
    // CPU 0's core is accepted when asked for.
    let o = hostknob(&[
        "--root",
        gnr.to_str().unwrap(),
        "--host",
        "h",
        "isolate",
        "--cpus",
        "0,256",
        "--allow-cpu0",
        "--format",
        "json",
    ]);
    assert_eq!(json_of(&o)["isolated"], "0,256");
}

#[test]
fn isolate_refuses_a_list_naming_offline_cpus() {
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    std::fs::write(root.join("sys/devices/system/cpu/online"), "0\n").unwrap();
    std::fs::write(root.join("sys/devices/system/cpu/cpu1/online"), "0\n").unwrap();
    refused(&root, &["--cpus", "1-1"], "CPU 1 is offline");
}

#[test]
fn isolate_out_refuses_to_overwrite_unless_forced() {
    let root = corpus_host("genoa0");
    let out = tempfile::tempdir().unwrap();
    let d = out.path().to_str().unwrap();
    let existing = out.path().join("isolate-irqbalance.yaml");
    std::fs::write(&existing, "mine\n").unwrap();
    let args = [
        "--root",
        root.to_str().unwrap(),
        "--host",
        "g",
        "isolate",
        "--count",
        "8",
        "--out",
        d,
    ];
    let o = hostknob(&args);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("isolate-irqbalance.yaml") && err(&o).contains("--force"));
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        1,
        "nothing written"
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine\n");
    let mut forced = args.to_vec();
    forced.push("--force");
    ok(&hostknob(&forced));
    assert_eq!(knob_files(out.path()).len(), 6);
}

// Item 6, first half: the wakeup and timer probes run on an isolated CPU
// when the knob's target has one.

#[test]
fn isolate_placement_puts_the_sleeper_on_an_isolated_target_cpu() {
    use hostknob::cpulist::CpuList;
    use hostknob::verify::placement::{Asked, place};
    let list = |s: &str| CpuList::parse(s).unwrap();
    let (_tmp, copy) = copy_host("adl0");
    let all = list("0-15");
    let target = list("0-7");
    let root = hostknob::root::Root::open(&copy).unwrap();
    // No isolated CPUs: the last target CPU, as before.
    let p = place(&root, &all, Some(&target), Asked::default(), false).unwrap();
    assert_eq!(p.sleeper, 7, "{p:?}");
    assert!(!p.sleeper_isolated);
    std::fs::write(copy.join("sys/devices/system/cpu/isolated"), "2-5\n").unwrap();
    // Isolated CPUs are outside this process's default affinity on a real
    // host: the sleeper goes there even when `allowed` lacks them.
    let housekeeping = list("0-1,6-15");
    let p = place(&root, &housekeeping, Some(&target), Asked::default(), false).unwrap();
    assert_eq!(p.sleeper, 5, "{p:?}");
    assert!(p.sleeper_isolated, "{p:?}");
    assert!(p.why.contains("isolated CPU 5"), "{}", p.why);
    assert!(!target.contains(p.waker) && p.waker != 4, "{p:?}");
    // A target without isolated CPUs is placed as before.
    let p = place(&root, &all, Some(&list("8-11")), Asked::default(), false).unwrap();
    assert_eq!(p.sleeper, 11);
    assert!(!p.sleeper_isolated);
}

const IDLE_KNOB: (&str, &str) = (
    "idle-off-both",
    "persistence: runtime\nkind: cpuidle-state\ntarget: {cpus: \"0-1\", states: {names: [haltpoll idle]}}\nset: disabled\n",
);

/// verify of a knob on CPUs 0-1 of the VM copy whose kernel isolates CPU 0:
/// the probe runs there, and the report says so.
fn verify_on_isolated(probe: &str, probe_args: &[&str]) -> serde_json::Value {
    let (_t, root) = vm();
    std::fs::write(root.join("sys/devices/system/cpu/isolated"), "0\n").unwrap();
    let m = knobs(&[IDLE_KNOB]);
    let before = tree(&root);
    let mut args = vec![
        "--host",
        "vm",
        "--format",
        "json",
        "verify",
        "idle-off-both",
        "--probe",
        probe,
        "--settle",
        "10ms",
        "--rounds",
        "5",
        "--max-rounds",
        "5",
        "--seed",
        "7",
        "--",
    ];
    args.extend_from_slice(probe_args);
    let o = run(&root, m.path(), &args);
    // Exit 3: under a copy the idle counters never move (not exercised).
    assert!(matches!(o.status.code(), Some(0 | 2 | 3)), "{}", err(&o));
    assert_tree(&before, &root, "verify restores the copy");
    serde_json::from_str(&out(&o)).unwrap()
}

#[test]
fn isolate_verify_runs_the_wakeup_probe_on_the_isolated_cpu() {
    let v = verify_on_isolated("wakeup", &["--samples", "20", "--gap-us", "200..600"]);
    assert_eq!(v["placement"]["sleeper"], 0, "{v}");
    assert_eq!(v["placement"]["sleeper_isolated"], true, "{v}");
    assert_eq!(v["settings"]["sleeper_cpu"], 0, "{v}");
    assert!(
        v["placement"]["why"]
            .as_str()
            .unwrap()
            .contains("isolated CPU 0"),
        "{v}"
    );
}

#[test]
fn isolate_verify_runs_the_timer_probe_on_the_isolated_cpu() {
    let v = verify_on_isolated("timer", &["--loops", "20", "--interval", "500"]);
    assert_eq!(v["placement"]["sleeper"], 0, "{v}");
    assert_eq!(v["placement"]["sleeper_isolated"], true, "{v}");
    assert_eq!(v["settings"]["cpu"], 0, "{v}");
}

#[test]
fn isolate_help_teaches_the_choice_and_the_flow() {
    let o = hostknob(&["isolate", "--help"]);
    let h = ok(&o);
    for needle in [
        "whole cores",
        "every NUMA node",
        "L3",
        "--allow-cpu0",
        "performance cores are isolated first",
        "8-8",
        "skew_tick=1",
        "review, commit, apply",
        "pending-reboot",
        "--force",
        "changes nothing",
    ] {
        assert!(h.contains(needle), "isolate --help lacks {needle:?}:\n{h}");
    }
}

#[test]
fn isolate_accepts_a_list_filling_an_l3_or_choosing_e_cores_with_a_warning() {
    let json_for = |host: &str, cpus: &str| {
        let root = corpus_host(host);
        json_of(&hostknob(&[
            "--root",
            root.to_str().unwrap(),
            "--host",
            host,
            "isolate",
            "--cpus",
            cpus,
            "--format",
            "json",
        ]))
    };
    // genoa0: CPUs 4-7,68-71 are one whole L3 (a CCX).
    let v = json_for("genoa0", "4-7,68-71");
    assert_eq!(v["isolated"], "4-7,68-71");
    let r = v["reasons"].to_string();
    assert!(r.contains("isolated whole: 4-7,68-71"), "{r}");
    assert!(v["warnings"].as_array().unwrap().is_empty(), "{v:#}");
    // adl0: E-cores 12-15 while P-cores 2-7 stay housekeeping.
    let v = json_for("adl0", "12-15");
    let w = v["warnings"].to_string();
    assert!(w.contains("efficient cores while performance cores"), "{w}");
    assert_eq!(v["topology"]["performance_cores"], "0-7");
}

#[test]
fn isolate_out_writes_all_knob_files_or_none() {
    // A directory where the fourth knob file would go: that write fails,
    // and the files written before it are removed again.
    let root = corpus_host("spr1");
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir(out.path().join("isolate-workqueue-cpumask.yaml")).unwrap();
    let o = hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        "spr1",
        "isolate",
        "--count",
        "8",
        "--out",
        out.path().to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", out_text(&o));
    assert!(
        err(&o).contains("isolate-workqueue-cpumask.yaml"),
        "{}",
        err(&o)
    );
    let left: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["isolate-workqueue-cpumask.yaml".to_string()]);
}

/// Issue 49 item 2: the verify commands isolate prints run as printed: they
/// carry the root the plan read and the directory its knobs went to.
#[test]
fn isolates_printed_verify_commands_run_as_printed() {
    let (_t, root) = vm();
    let dir = tempfile::tempdir().unwrap();
    let r = root.to_str().unwrap();
    let d = dir.path().join("frag dir");
    let d = d.to_str().unwrap();
    let o = hostknob(&[
        "--root", r, "--host", "vm", "--format", "json", "isolate", "--count", "1", "--out", d,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let plan: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let lines: Vec<&str> = plan["verify"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let verify = lines
        .iter()
        .filter_map(|l| l.split('`').nth(1))
        .find(|c| c.contains(" verify "))
        .unwrap_or_else(|| panic!("no verify command: {lines:?}"));
    assert!(
        verify.contains(&format!("--manifest '{d}' verify ")),
        "{verify}"
    );
    // Not --root: verify's noise probe measures the machine it runs on, and
    // refuses a tree; the command is for the host itself.
    assert!(!verify.contains("--root"), "{verify}");
    // What was missing: the knob's directory. The printed options find it.
    let (head, tail) = verify.split_once(" verify ").unwrap();
    let id = tail.split_whitespace().next().unwrap();
    let cmd = format!(
        "{} --root {r} knobs {id}",
        head.replacen("hostknob", bin(), 1)
    );
    let o = std::process::Command::new("sh")
        .args(["-c", &cmd])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{cmd}: {}", err(&o));
    assert!(out(&o).contains(id), "{cmd}: {}", out(&o));
    // Without --out the lines name DIR, and the summary says what DIR is.
    let o = hostknob(&["--root", r, "--host", "vm", "isolate", "--count", "1"]);
    assert!(err(&o).contains("--out DIR writes"), "{}", err(&o));
    assert!(err(&o).contains("--manifest DIR verify"), "{}", err(&o));
}

/// Issue 49 item 8: a count and a CPU list under names that cannot be
/// confused. `--count 8` and `--cpus 8-8` are distinct; the old `--cpus 8`
/// still plans a count (what scripts written for it expect), with a note
/// naming both new spellings; the fragment records the new spelling.
#[test]
fn isolate_takes_a_count_and_a_list_under_two_names_and_the_old_spelling_with_a_note() {
    let gnr = corpus_host("gnr0");
    let r = gnr.to_str().unwrap();
    let plan = |how: &[&str]| {
        let mut args = vec!["--root", r, "--host", "gnr0", "--format", "json", "isolate"];
        args.extend(how);
        let o = hostknob(&args);
        (json_of(&o), err(&o))
    };
    let (count, quiet) = plan(&["--count", "8"]);
    assert!(!quiet.contains("old spelling"), "{quiet}");
    let (old, note) = plan(&["--cpus", "8"]);
    assert_eq!(count["isolated"], old["isolated"], "--cpus 8 still a count");
    assert!(
        note.contains("--cpus 8 (a count) is an old spelling")
            && note.contains("--count 8")
            && note.contains("--cpus 8-8"),
        "{note}"
    );
    let shown = serde_json::to_string(&old["knobs"]).unwrap();
    assert!(shown.contains("hostknob isolate --count 8"), "{shown}");
    assert!(!shown.contains("isolate --cpus 8"), "{shown}");
    // Both at once is a usage error, neither names both.
    let o = hostknob(&["--root", r, "isolate", "--count", "8", "--cpus", "8-15"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("cannot be used with"), "{}", err(&o));
    let o = hostknob(&["--root", r, "isolate"]);
    assert!(
        err(&o).contains("required arguments were not provided") && err(&o).contains("--count <N>"),
        "{}",
        err(&o)
    );
    let o = hostknob(&["--root", r, "isolate", "--count", "4-11"]);
    assert!(
        err(&o)
            .contains("--count \"4-11\": not a number of CPUs; for these CPUs write --cpus 4-11"),
        "{}",
        err(&o)
    );
}

/// Issue 49 item 8: `capture --out DIR`, as `doc`, `man`, `isolate` and
/// `import` spell it; `capture DIR` still works, with a note.
#[test]
fn capture_takes_out_and_the_old_positional_with_a_note() {
    let src = corpus_host("fc-haltpoll-2cpu");
    let dir = tempfile::tempdir().unwrap();
    let (new, old) = (dir.path().join("new"), dir.path().join("old"));
    let r = src.to_str().unwrap();
    let o = hostknob(&["--root", r, "capture", "--out", new.to_str().unwrap()]);
    ok(&o);
    assert!(!err(&o).contains("old spelling"), "{}", err(&o));
    assert!(new.join("hostknob-capture.yaml").is_file());
    let o = hostknob(&["--root", r, "capture", old.to_str().unwrap()]);
    ok(&o);
    assert!(old.join("hostknob-capture.yaml").is_file());
    assert!(
        err(&o).contains("is an old spelling, still taken for now: write `capture --out"),
        "{}",
        err(&o)
    );
    let help = ok(&hostknob(&["capture", "--help"]));
    assert!(help.contains("--out <DIR>"), "{help}");
}
