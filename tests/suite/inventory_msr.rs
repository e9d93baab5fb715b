//! Issue 22 items 3 and 4: MSRs in captures and in the inventory. Every
//! corpus host with pepc's MSR dump is checked against values decoded here,
//! independently, from the dump's raw lines (pepc's per-model tables,
//! transcribed for this test); a register that was not captured, or cannot
//! be read, says why and is never 0.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as J;

use crate::support::*;

/// `0-3,8` -> [0, 1, 2, 3, 8].
fn cpus_of(list: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

/// Vendor, family, model and flags of the tree's first CPU.
fn cpu_id(tree: &Path) -> (String, u32, u32, Vec<String>) {
    let text = std::fs::read_to_string(tree.join("proc/cpuinfo")).unwrap();
    let block = text.split("\n\n").next().unwrap();
    let field = |name: &str| {
        block
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    (
        field("vendor_id"),
        field("cpu family").parse().unwrap(),
        field("model").parse().unwrap(),
        field("flags")
            .split_whitespace()
            .map(String::from)
            .collect(),
    )
}

/// pepc `PCStateConfigCtl._PKG_CST_LIMITS` for the corpus models: the limit
/// field's top bit and its names.
fn pkg_limits(model: u32) -> Option<(u32, &'static [(u64, &'static str)])> {
    const ICX: &[(u64, &str)] = &[(0, "PC0"), (1, "PC2"), (2, "PC6"), (7, "unlimited")];
    const SKX: &[(u64, &str)] = &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC6"),
        (3, "PC6R"),
        (7, "unlimited"),
    ];
    const HSX: &[(u64, &str)] = &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC3"),
        (3, "PC6"),
        (7, "unlimited"),
    ];
    const BDWD: &[(u64, &str)] = &[(0, "PC0"), (1, "PC2"), (2, "PC3"), (3, "PC6")];
    const DNV: &[(u64, &str)] = &[(2, "PC2"), (3, "PC6"), (0, "unlimited")];
    const LNL: &[(u64, &str)] = &[(0, "PC0"), (1, "PC2"), (3, "PC6"), (8, "PC10")];
    const PC8: &[(u64, &str)] = &[
        (0, "PC0"),
        (1, "PC2"),
        (2, "PC3"),
        (3, "PC6"),
        (4, "PC7"),
        (5, "PC7S"),
        (6, "PC8"),
        (7, "PC9"),
        (8, "PC10"),
    ];
    Some(match model {
        0xdd | 0xaf | 0xad | 0xae | 0x6a | 0x6c => (2, ICX),
        0xcf | 0x8f | 0x55 | 0x85 | 0x57 | 0x3e => (2, SKX),
        0x4f | 0x3f => (2, HSX),
        0x56 | 0x47 => (3, BDWD),
        0x5f => (3, DNV),
        0xbd | 0xcc => (3, LNL),
        0x9a | 0x8e | 0xc5 | 0x8c | 0x9e | 0xaa | 0xba => (3, PC8),
        _ => return None,
    })
}

/// The names of MSR 0x1A4's disable bits 0.. (Intel's prefetcher
/// disclosure): the four classic ones on these Xeons, two on Xeon Phi.
fn prefetcher_names(model: u32) -> Option<&'static [&'static str]> {
    match model {
        0xad | 0xae | 0xcf | 0x8f | 0x6a | 0x6c | 0x55 | 0x4f | 0x56 | 0x47 | 0x3f | 0x3e => {
            Some(&[
                "L2 hardware (streamer)",
                "L2 adjacent cache line",
                "DCU hardware (next line)",
                "DCU IP",
            ])
        }
        0x57 | 0x85 => Some(&["DCU hardware", "L2 hardware"]),
        _ => None,
    }
}

fn bit(v: u64, b: u32) -> u64 {
    (v >> b) & 1
}

fn on_off(b: u64) -> &'static str {
    if b == 1 { "on" } else { "off" }
}

/// What the test expects of one fact on one CPU: `Ok((value, raw))`, or
/// `Err(word)`: a word the reason must contain.
type Want = Result<(String, u64), &'static str>;

fn expect(id: &str, model: u32, regs: &BTreeMap<u32, u64>) -> Want {
    let reg = |r: u32| regs.get(&r).copied().ok_or("not in the capture");
    let b = |r: u32, n: u32| -> Want {
        let v = bit(reg(r)?, n);
        Ok((on_off(v).to_string(), v))
    };
    match id {
        "c1e" => b(0x1fc, 1),
        "c1_demotion" => b(0xe2, 26),
        "c1_undemotion" => b(0xe2, 28),
        "hwp" => b(0x770, 0),
        "package_cstate_lock" => {
            let v = bit(reg(0xe2)?, 15);
            Ok((if v == 1 { "locked" } else { "unlocked" }.into(), v))
        }
        "package_cstate_limit" => {
            let (hi, names) = pkg_limits(model).unwrap();
            let code = reg(0xe2)? & ((1u64 << (hi + 1)) - 1);
            let name = names.iter().find(|(c, _)| *c == code).map(|(_, n)| *n);
            Ok((
                name.map_or(
                    format!("code {code} (not named for this model)"),
                    String::from,
                ),
                code,
            ))
        }
        "hwp_min" | "hwp_max" => {
            if bit(reg(0x770)?, 0) == 0 {
                return Err("HWP is off");
            }
            let shift = if id == "hwp_min" { 0 } else { 8 };
            let v = (reg(0x774)? >> shift) & 0xff;
            Ok((v.to_string(), v))
        }
        "epb" => {
            let v = reg(0x1b0)? & 0xf;
            Ok((v.to_string(), v))
        }
        "prefetchers" => {
            let v = reg(0x1a4)?;
            let names = prefetcher_names(model).unwrap();
            let n = names.len() as u32;
            let off: Vec<&str> = (0..n)
                .filter(|&i| bit(v, i) == 1)
                .map(|i| names[i as usize])
                .collect();
            let mut text = if off.is_empty() {
                "all on".to_string()
            } else {
                format!("off: {}", off.join(", "))
            };
            let named = (1u64 << n) - 1;
            if v & !named != 0 {
                text += &format!(" (other bits set: {:#x})", v & !named);
            }
            Ok((text, v))
        }
        other => panic!("unexpected fact {other}"),
    }
}

/// Whether the fact applies to the CPU at all (the model table, CPU flags);
/// `Some(word)` when it must be unavailable as a whole.
fn gate(id: &str, model: u32, flags: &[String]) -> Option<&'static str> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    match id {
        "package_cstate_limit" | "package_cstate_lock" | "c1_demotion" | "c1_undemotion"
            if pkg_limits(model).is_none() =>
        {
            Some("not in the model table")
        }
        "hwp" | "hwp_min" | "hwp_max" if !has("hwp") => Some("no HWP"),
        "epb" if !has("epb") => Some("no EPB"),
        "prefetchers" if pkg_limits(model).is_none() => Some("not in the model table"),
        "prefetchers" if prefetcher_names(model).is_none() => Some("names no prefetcher bits"),
        _ => None,
    }
}

fn platform(root: &Path) -> J {
    let v = json_of(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "platform",
        "--format",
        "json",
    ]));
    v["platform"].clone()
}

/// One host's inventory against the dump; returns what it saw, for the
/// coverage checks of the caller.
fn check_host(host: &str) -> BTreeMap<String, Vec<String>> {
    let tree = corpus_host(host);
    let dump = msr_dump(host).unwrap();
    let (vendor, family, model, flags) = cpu_id(&tree);
    assert_eq!((vendor.as_str(), family), ("GenuineIntel", 6), "{host}");
    let p = platform(&tree);
    assert!(p["unavailable"].is_null(), "{host}: {}", p["unavailable"]);
    let online: Vec<u32> = cpus_of(
        std::fs::read_to_string(tree.join("sys/devices/system/cpu/online"))
            .unwrap()
            .trim(),
    );
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let facts = p["facts"].as_array().unwrap();
    assert_eq!(facts.len(), 10, "{host}: {p}");
    for f in facts {
        let id = f["id"].as_str().unwrap();
        if let Some(word) = gate(id, model, &flags) {
            let why = f["unavailable"]
                .as_str()
                .unwrap_or_else(|| panic!("{host} {id}: {f}"));
            assert!(why.contains(word), "{host} {id}: {why:?} lacks {word:?}");
            assert!(f["groups"].is_null(), "{host} {id}: null, not []");
            seen.entry(id.into())
                .or_default()
                .push(format!("gated: {why}"));
            continue;
        }
        assert!(f["unavailable"].is_null(), "{host} {id}: {f}");
        let mut covered = Vec::new();
        for g in f["groups"].as_array().unwrap() {
            let cpus = cpus_of(g["cpus"].as_str().unwrap());
            let first = cpus[0];
            assert_eq!(
                g["command"].as_str().unwrap(),
                format!("rdmsr -p {first} {}", f["register"].as_str().unwrap()),
                "{host} {id}"
            );
            for cpu in &cpus {
                let regs: BTreeMap<u32, u64> = dump
                    .iter()
                    .filter_map(|(r, per)| Some((*r, *per.get(cpu)?)))
                    .collect();
                match expect(id, model, &regs) {
                    Ok((value, raw)) => {
                        assert_eq!(
                            g["value"].as_str(),
                            Some(value.as_str()),
                            "{host} {id} CPU {cpu}"
                        );
                        assert_eq!(g["raw"].as_u64(), Some(raw), "{host} {id} CPU {cpu}");
                    }
                    Err(word) => {
                        assert!(
                            g["value"].is_null() && g["raw"].is_null(),
                            "{host} {id} CPU {cpu}: {g}"
                        );
                        let why = g["unavailable"].as_str().unwrap();
                        assert!(
                            why.contains(word),
                            "{host} {id} CPU {cpu}: {why:?} lacks {word:?}"
                        );
                    }
                }
            }
            seen.entry(id.into())
                .or_default()
                .push(g["value"].as_str().unwrap_or("unavailable").to_string());
            covered.extend(cpus);
        }
        covered.sort_unstable();
        assert_eq!(
            covered, online,
            "{host} {id}: every online CPU in exactly one group"
        );
    }
    seen
}

#[test]
fn inventory_decodes_every_msr_host_as_the_dump_says() {
    let hosts = msr_hosts();
    assert_eq!(hosts.len(), 42, "pepc's 42 MSR dumps: {hosts:?}");
    let mut all = BTreeMap::new();
    for host in &hosts {
        all.insert(host.clone(), check_host(host));
    }
    let has = |host: &str, id: &str, v: &str| all[host][id].iter().any(|x| x == v);
    // The cases the issue names, so that none is passed over.
    assert!(
        has("icx2s3", "package_cstate_lock", "locked"),
        "{:?}",
        all["icx2s3"]
    );
    assert!(has("icx2s0", "package_cstate_lock", "unlocked"));
    assert!(has("adl0", "c1e", "on") && has("spr1", "c1e", "off"));
    assert!(all["bdw0"]["hwp"][0].contains("no HWP"), "no HWP on bdw0");
    // Atom (Denverton): 0 is `unlimited`, and bits 3:0.
    assert_eq!(all["dnv0"]["package_cstate_limit"].len(), 1);
    // Hybrid Alder Lake: P- and E-cores ask for different HWP ceilings.
    assert!(
        all["adl0"]["hwp_max"].len() > 1,
        "{:?}",
        all["adl0"]["hwp_max"]
    );
    // Snow Ridge is not in pepc's table: no guessed limit.
    assert!(all["snr0"]["package_cstate_limit"][0].contains("not in the model table"));
    // Prefetchers by name where the model has them.
    assert!(
        all["spr1"]["prefetchers"]
            .iter()
            .all(|v| !v.starts_with("gated"))
    );
}

#[test]
fn the_table_shows_each_fact_with_its_rdmsr_command() {
    let tree = corpus_host("icx2s3");
    let out = ok(&hostknob(&[
        "--root",
        tree.to_str().unwrap(),
        "inventory",
        "platform",
    ]));
    assert!(
        out.contains("Platform power (MSRs), model ICELAKE_X"),
        "{out}"
    );
    for needle in [
        "C1E auto-promotion",
        "rdmsr -p 0 0x1fc",
        "locked",
        "0xe2 bits 2:0",
        "HWP request max perf",
    ] {
        assert!(out.contains(needle), "{needle:?} missing:\n{out}");
    }
}

#[test]
fn a_register_not_captured_is_not_exposed_never_zero() {
    let (_tmp, tree) = copy_host("spr1");
    let index = tree.join("dev/cpu/msr-index");
    let text = std::fs::read_to_string(&index).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("0x1fc "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(kept, text, "the index lists 0x1fc");
    std::fs::write(&index, kept).unwrap();
    let p = platform(&tree);
    let c1e = p["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "c1e")
        .unwrap()
        .clone();
    let g = &c1e["groups"][0];
    assert!(g["value"].is_null() && g["raw"].is_null(), "{c1e}");
    assert!(
        g["unavailable"]
            .as_str()
            .unwrap()
            .contains("MSR 0x1fc is not in the capture"),
        "{c1e}"
    );

    // A bad index names its line; nothing is read.
    std::fs::write(&index, "0x1fc 0-3\n1fc 0\n").unwrap();
    let p = platform(&tree);
    let why = p["unavailable"].as_str().unwrap();
    assert!(
        why.contains("dev/cpu/msr-index:2:") && why.contains("hex address"),
        "{why}"
    );
    assert!(p["facts"].is_null(), "null, not []: {p}");
}

#[test]
fn hosts_without_msr_data_or_intel_msrs_say_why() {
    let genoa = platform(&corpus_host("genoa0"));
    assert!(
        genoa["unavailable"]
            .as_str()
            .unwrap()
            .contains("AuthenticAMD"),
        "{genoa}"
    );
    let vm = platform(&corpus_host("fc-haltpoll-2cpu"));
    assert!(
        vm["unavailable"].as_str().unwrap().contains("AuthenticAMD"),
        "{vm}"
    );
    // Every corpus host without a dump is AMD: an Intel one without MSRs.
    let (_tmp, tree) = copy_host("emr0");
    std::fs::remove_dir_all(tree.join("dev/cpu")).unwrap();
    let none = platform(&tree);
    assert!(
        none["unavailable"]
            .as_str()
            .unwrap()
            .contains("the capture holds no MSRs"),
        "{none}"
    );
    assert_eq!(none["model"], "EMERALDRAPIDS_X");
}

/// The live host: through /dev/cpu/N/msr only when the msr module made it;
/// on a VM it did not, and hostknob must not load it. A non-Intel host (the
/// AMD test VM) is refused by vendor before any device is looked at.
#[test]
fn live_msrs_say_why_they_are_not_exposed() {
    let before = Path::new("/sys/module/msr").exists();
    let v = json_of(&hostknob(&["inventory", "platform", "--format", "json"]));
    let p = &v["platform"];
    assert_eq!(
        Path::new("/sys/module/msr").exists(),
        before,
        "inventory loaded the msr module"
    );
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let intel = cpuinfo.contains("GenuineIntel");
    if !intel {
        // The model tables are Intel's: another vendor is said by name,
        // before (and whatever) the msr module.
        let why = p["unavailable"].as_str().unwrap();
        let vendor = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim())
            .unwrap_or("?");
        assert!(why.contains("Intel MSRs") && why.contains(vendor), "{why}");
        assert!(p["facts"].is_null(), "null, not []: {p}");
        let table = ok(&hostknob(&["inventory", "platform"]));
        assert!(table.contains(&format!("not exposed: {why}")), "{table}");
    } else if Path::new("/dev/cpu/0/msr").exists() {
        // Root on bare metal: values; otherwise each group says why.
        for f in p["facts"].as_array().unwrap() {
            for g in f["groups"].as_array().unwrap() {
                assert!(
                    g["value"].is_string() != g["unavailable"].is_string(),
                    "{g}"
                );
            }
        }
    } else {
        let why = p["unavailable"].as_str().unwrap();
        assert!(
            why.contains("msr module is not loaded") && why.contains("never loads it"),
            "{why}"
        );
        assert!(p["facts"].is_null(), "null, not []: {p}");
        let table = ok(&hostknob(&["inventory", "platform"]));
        assert!(
            table.contains("not exposed: the msr module is not loaded"),
            "{table}"
        );
    }
}

#[test]
fn capture_records_the_registers_inventory_reads() {
    let src = corpus_host("gnr0");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cap");
    ok(&hostknob(&[
        "--root",
        src.to_str().unwrap(),
        "capture",
        "--out",
        out.to_str().unwrap(),
    ]));
    let index = std::fs::read_to_string(out.join("dev/cpu/msr-index")).unwrap();
    for reg in ["0xe2 ", "0x1a4 ", "0x1b0 ", "0x1fc ", "0x770 ", "0x774 "] {
        assert!(index.contains(reg), "{reg} missing:\n{index}");
    }
    // Registers inventory does not read stay out (0x1ad is in the dump).
    assert!(!index.contains("0x1ad "), "{index}");
    let f = out.join("dev/cpu/5/msr");
    let meta = std::fs::metadata(&f).unwrap();
    assert!(meta.is_file());
    assert!(meta.len() > 0x774 * 8, "each register at 8 x its address");
    assert!(
        std::os::unix::fs::MetadataExt::blocks(&meta) * 512 < meta.len(),
        "sparse"
    );
    let dump = msr_dump("gnr0").unwrap();
    let bytes = std::fs::read(&f).unwrap();
    let at = |reg: usize| u64::from_le_bytes(bytes[reg * 8..reg * 8 + 8].try_into().unwrap());
    assert_eq!(at(0x1fc), dump[&0x1fc][&5]);
    assert_eq!(at(0x774), dump[&0x774][&5]);
    assert_eq!(
        platform(&out),
        platform(&src),
        "the capture reads back the same"
    );
}

/// A device node in a tree is never opened (it could be a live device):
/// `/dev/null`'s numbers stand in for the msr driver's.
#[test]
fn a_device_node_in_a_tree_is_refused_not_read() {
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: mknod needs root");
        return;
    }
    let (_tmp, tree) = copy_host("adl0");
    let node = tree.join("dev/cpu/3/msr");
    std::fs::remove_file(&node).unwrap();
    let st = std::process::Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(st.success());
    let p = platform(&tree);
    let c1e = p["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "c1e")
        .unwrap()
        .clone();
    let bad = c1e["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["cpus"] == "3")
        .unwrap_or_else(|| panic!("CPU 3 in a group of its own: {c1e}"))
        .clone();
    assert!(bad["value"].is_null(), "{bad}");
    assert!(
        bad["unavailable"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{bad}"
    );
}
