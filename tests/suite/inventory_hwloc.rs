//! Every dump in hwloc's test suite (`tests/corpus/hwloc`, BSD-3-Clause,
//! see LICENSE.hwloc there): hostknob's online CPUs, packages, cores and NUMA
//! nodes against lstopo's own reading of the same files (`NAME.console`), and
//! the CPU named wherever `/proc/cpuinfo` names it.
//!
//! Where hwloc deliberately reads the files differently, the test says which
//! and why, and checks the reason against the files instead of skipping.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::Value as J;

fn hwloc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hwloc")
}

fn dumps() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(hwloc_dir())
        .expect("tests/corpus/hwloc")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".tar.bz2")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// Unpacks a dump once into target/corpus-hwloc/NAME/ and returns its one top directory.
fn unpack(name: &str) -> PathBuf {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let tarball = hwloc_dir().join(format!("{name}.tar.bz2"));
    let dest = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/corpus-hwloc/{name}"));
    if !dest.join(".done").exists() {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir_all(&dest).unwrap();
        let st = Command::new("tar")
            .arg("xjf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dest)
            .status()
            .unwrap();
        assert!(st.success(), "tar failed on {}", tarball.display());
        std::fs::write(dest.join(".done"), "").unwrap();
    }
    let tops: Vec<PathBuf> = std::fs::read_dir(&dest)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.path())
        .collect();
    assert_eq!(tops.len(), 1, "{name}: one top directory expected");
    tops[0].clone()
}

/// lstopo's `depth N: COUNT TYPE` and `Special depth N: COUNT TYPE` lines.
fn console_counts(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let l = line.trim();
        if !(l.starts_with("depth ") || l.starts_with("Special depth ")) {
            continue;
        }
        let Some((_, rest)) = l.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(n), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        // `Group0`, `Group1` are levels of the same type.
        let kind = kind.trim_end_matches(|c: char| c.is_ascii_digit());
        *out.entry(kind.to_string()).or_insert(0) += n.parse::<u64>().unwrap();
    }
    out
}

/// `KEY=value` or `KEY="value"` attributes anywhere in the console.
fn console_attr(text: &str, key: &str) -> Option<String> {
    let at = text.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &text[at..];
    if let Some(q) = rest.strip_prefix('"') {
        Some(q[..q.find('"')?].trim().to_string())
    } else {
        Some(
            rest.split(|c: char| c.is_whitespace() || c == ')')
                .next()?
                .to_string(),
        )
    }
}

fn cpus(v: &J) -> BTreeSet<u32> {
    let text = v.as_str().unwrap_or("");
    let mut out = BTreeSet::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        out.extend(lo.parse::<u32>().unwrap()..=hi.parse::<u32>().unwrap());
    }
    out
}

/// The cpuset cgroup the dump's `/proc/self/cpuset` names (cpus, mems), if
/// the dump holds its files: hwloc restricts its topology to it.
fn cgroup_cpuset(root: &Path) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
    let path = std::fs::read_to_string(root.join("proc/self/cpuset")).ok()?;
    let path = path.trim().trim_start_matches('/');
    if path.is_empty() {
        return None;
    }
    for (dir, prefix) in [
        ("dev/cpuset", ""),
        ("dev/cpuset", "cpuset."),
        ("sys/fs/cgroup/cpuset", "cpuset."),
        ("cgroup", "cpuset."),
    ] {
        let d = root.join(dir).join(path);
        let read = |f: &str| std::fs::read_to_string(d.join(format!("{prefix}{f}"))).ok();
        if let (Some(c), Some(m)) = (read("cpus"), read("mems")) {
            return Some((
                cpus(&J::String(c.trim().into())),
                cpus(&J::String(m.trim().into())),
            ));
        }
    }
    None
}

/// What `/proc/cpuinfo` names: (a vendor, a model).
fn cpuinfo_names(root: &Path) -> (bool, bool) {
    let Ok(text) = std::fs::read_to_string(root.join("proc/cpuinfo")) else {
        return (false, false);
    };
    let keys: BTreeSet<String> = text
        .lines()
        .filter_map(|l| Some(l.split_once(':')?.0.trim().to_ascii_lowercase()))
        .collect();
    let has = |k: &[&str]| k.iter().any(|k| keys.contains(*k));
    let vendor = has(&["vendor_id", "vendor", "cpu implementer", "mvendorid"]);
    // ia64 names its model in `family` when it has no `model name` (Itanium 2).
    let family_name = text.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(k, v)| k.trim() == "family" && v.trim().parse::<u32>().is_err())
    });
    let model = has(&["model name", "cpu", "cpu part", "uarch"])
        || text.contains("machine = ")
        || family_name;
    (vendor, model)
}

struct Got {
    online: BTreeSet<u32>,
    packages: Vec<BTreeSet<u32>>,
    cores: u64,
    multi_thread_cores: Vec<BTreeSet<u32>>,
    numa: Vec<J>,
}

fn read_inventory(root: &Path) -> (J, Got) {
    let out = inventory_json(root);
    let inv = json_of(&out);
    let c = &inv["cpu"];
    let got = Got {
        online: cpus(&c["online"]),
        packages: c["topology"]["package_cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| cpus(&p["cpus"]))
            .collect(),
        cores: c["cores"].as_u64().unwrap_or(0),
        multi_thread_cores: c["smt"]["sibling_lists"]
            .as_array()
            .unwrap()
            .iter()
            .map(cpus)
            .collect(),
        numa: inv["numa"]["nodes"].as_array().cloned().unwrap_or_default(),
    };
    (inv, got)
}

/// Counts of the topology restricted to `allowed` CPUs and `mems` nodes, as
/// hwloc restricts it to a cgroup: it keeps a package whose CPUs are all
/// disallowed when it holds an allowed NUMA node.
fn restricted(got: &Got, allowed: &BTreeSet<u32>, mems: &BTreeSet<u32>) -> [u64; 4] {
    let r: BTreeSet<u32> = got.online.intersection(allowed).copied().collect();
    let node_cpus: BTreeSet<u32> = got
        .numa
        .iter()
        .filter(|n| mems.contains(&(n["id"].as_u64().unwrap() as u32)))
        .flat_map(|n| cpus(&n["cpus"]))
        .collect();
    let packages = got
        .packages
        .iter()
        .filter(|p| !p.is_disjoint(&r) || !p.is_disjoint(&node_cpus))
        .count();
    let in_multi: BTreeSet<u32> = got.multi_thread_cores.iter().flatten().copied().collect();
    // No core files at all: neither hostknob nor hwloc knows cores.
    let cores = if got.cores == 0 {
        0
    } else {
        got.multi_thread_cores
            .iter()
            .filter(|c| !c.is_disjoint(&r))
            .count()
            + r.difference(&in_multi).count()
    };
    let numa = got
        .numa
        .iter()
        .filter(|n| mems.contains(&(n["id"].as_u64().unwrap() as u32)))
        .count();
    [r.len() as u64, packages as u64, cores as u64, numa as u64]
}

fn check(name: &str) -> Vec<String> {
    let mut fails = Vec::new();
    let root = unpack(name);
    let (inv, got) = read_inventory(&root);
    let cpu = &inv["cpu"];

    // Identity: named wherever /proc/cpuinfo names it.
    let (says_vendor, says_model) = cpuinfo_names(&root);
    if says_vendor && cpu["vendor_id"].is_null() {
        fails.push(format!(
            "{name}: /proc/cpuinfo names a vendor, inventory has none"
        ));
    }
    if says_model && cpu["model_name"].is_null() {
        fails.push(format!(
            "{name}: /proc/cpuinfo names a model, inventory has none"
        ));
    }

    let console_path = hwloc_dir().join(format!("{name}.console"));
    let Ok(console) = std::fs::read_to_string(&console_path) else {
        // 8 dumps have an XML target only; identity above still applies.
        return fails;
    };
    let test = std::fs::read_to_string(hwloc_dir().join(format!("{name}.test"))).unwrap();

    // The names lstopo read from the same files.
    let model = cpu["model_name"].as_str().map(str::trim);
    if let Some(want) = console_attr(&console, "CPUModel")
        && cpu["architecture"] != "arm"
        && model != Some(want.as_str())
    {
        fails.push(format!("{name}: model {model:?}, lstopo CPUModel={want:?}"));
    }
    if let Some(want) = console_attr(&console, "CPUVendor")
        && cpu["vendor_id"].as_str() != Some(want.as_str())
    {
        fails.push(format!(
            "{name}: vendor {}, lstopo CPUVendor={want}",
            cpu["vendor_id"]
        ));
    }
    if let (Some(imp), Some(part)) = (
        console_attr(&console, "CPUImplementer"),
        console_attr(&console, "CPUPart"),
    ) {
        // lscpu's names for the two pairs in this corpus.
        let want = match (imp.as_str(), part.as_str()) {
            ("0x48", "0xd01") => ("HiSilicon", "Kunpeng-920"),
            ("0x41", "0xc09") => ("ARM", "Cortex-A9"),
            other => panic!("{name}: add lscpu's names for {other:?}"),
        };
        let have = (cpu["vendor_id"].as_str().unwrap_or(""), model.unwrap_or(""));
        if have != want {
            fails.push(format!(
                "{name}: ARM {imp}/{part} named {have:?}, lscpu says {want:?}"
            ));
        }
    }

    let lstopo = console_counts(&console);
    let want = |k: &str| lstopo.get(k).copied().unwrap_or(0);
    let mut want = [want("PU"), want("Package"), want("Core"), want("NUMANode")];
    let mut have = [
        got.online.len() as u64,
        got.packages.len() as u64,
        got.cores,
        got.numa.len() as u64,
    ];

    // hwloc restricts the topology to the cpuset cgroup it ran in (and says
    // which in `LinuxCgroup=`); hostknob describes the whole host, so compare
    // hostknob's topology restricted to the same cgroup.
    if let Some((allowed, mems)) = cgroup_cpuset(&root) {
        assert!(
            console.contains("LinuxCgroup=/") && !console.contains("LinuxCgroup=/ "),
            "{name}: a cgroup cpuset in the dump but lstopo ran unrestricted"
        );
        have = restricted(&got, &allowed, &mems);
    }
    if got.numa.is_empty() && !root.join("sys/devices/system/node").exists() {
        // No node directory: hwloc still shows the machine's memory as one node.
        want[3] = want[3].min(1);
        have[3] = 1;
    }
    if test.contains("--filter all:structure") {
        // lstopo was told to drop levels that add no structure: single-PU cores.
        assert!(got.multi_thread_cores.is_empty());
        have[2] = 0;
    }
    match name {
        "40intel64-4n10c+pci-conflicts" => {
            // The dump's 4th package has a cpuset conflicting with the rest
            // and hwloc drops it; the kernel's physical_package_id says 4.
            assert!(test.contains("4th socket conflicts, ignored"));
            want[1] += 1;
        }
        "64amd64-4s2n4ca2co" => {
            // Bulldozer: the kernel lists a module's two cores as thread
            // siblings (thread_siblings_list 0-1) while giving them distinct
            // core_id; hwloc counts 64 cores, hostknob and lscpu follow the
            // sibling lists: 32 cores of 2 threads.
            assert!(test.contains("AMD bulldozer"));
            assert_eq!(got.multi_thread_cores.len(), 32);
            want[2] /= 2;
        }
        "8em64t-2s2ca2c-buggynuma" => {
            // 8 nodes that all claim every CPU: hwloc merges them into one.
            assert!(test.contains("get merged"));
            let lists: BTreeSet<String> = got.numa.iter().map(|n| n["cpus"].to_string()).collect();
            assert_eq!(
                lists.len(),
                1,
                "{name}: nodes should all list the same CPUs"
            );
            have[3] = 1;
        }
        "fakememinitiators-1np2c+1npp+gi" => {
            // hwloc hides CPU-only nodes (0-3) and the generic initiator (4),
            // keeping the memory-only nodes 5-10.
            assert!(test.contains("hide CPU-only nodes"));
            have[3] = got
                .numa
                .iter()
                .filter(|n| cpus(&n["cpus"]).is_empty() && n["id"].as_u64().unwrap() > 4)
                .count() as u64;
        }
        "nvidiagpunumanodes" => {
            // The V100 GPUs' memory is NUMA nodes without CPUs; hwloc attaches
            // them to the GPUs, not to the machine.
            assert!(test.contains("V100 NUMA nodes, ignored"));
            have[3] = got
                .numa
                .iter()
                .filter(|n| !cpus(&n["cpus"]).is_empty())
                .count() as u64;
        }
        _ => {}
    }
    for (i, what) in ["online CPUs", "packages", "cores", "NUMA nodes"]
        .iter()
        .enumerate()
    {
        if have[i] != want[i] {
            fails.push(format!(
                "{name}: {what}: hostknob {}, lstopo {}",
                have[i], want[i]
            ));
        }
    }
    fails
}

#[test]
fn every_hwloc_dump_matches_lstopo() {
    let names = dumps();
    assert!(
        names.len() >= 42,
        "expected the 42 hwloc dumps, found {}",
        names.len()
    );
    let fails: Vec<String> = names.iter().flat_map(|n| check(n)).collect();
    assert!(
        fails.is_empty(),
        "{} mismatches:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn architecture_words_and_levels_on_the_odd_dumps() {
    let inv = |n: &str| {
        json_of(&hostknob(&[
            "--root",
            unpack(n).to_str().unwrap(),
            "inventory",
            "--format",
            "json",
        ]))
    };
    let s390 = inv("20s390-2g6s4c");
    assert_eq!(s390["cpu"]["architecture"], "s390x");
    assert_eq!(s390["cpu"]["books"], 4);
    assert_eq!(s390["cpu"]["drawers"], 2);
    let arm = inv("128arm-2pa2n8cluster4co");
    assert_eq!(arm["cpu"]["clusters"], 32);
    assert!(arm["cpu"]["dies"].is_null(), "die_id -1 means no dies");
    let gb10 = inv("nvidia-dgx-gb10");
    let types: Vec<&str> = gb10["cpu"]["core_types"]
        .as_array()
        .expect("big.LITTLE core types")
        .iter()
        .map(|t| t["model"].as_str().unwrap())
        .collect();
    assert_eq!(types.len(), 2, "{types:?}");
    assert!(types.contains(&"Cortex-X925") && types.contains(&"Cortex-A725"));

    // The table speaks the architecture's words.
    let table = |n: &str| {
        let out = hostknob(&["--root", unpack(n).to_str().unwrap(), "inventory"]);
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let t = table("20s390-2g6s4c");
    assert!(t.contains("drawers") && t.contains("books"), "{t}");
    assert!(table("128arm-2pa2n8cluster4co").contains("clusters"));
    assert!(table("nvidia-dgx-gb10").contains("Cortex-A725"));
}
