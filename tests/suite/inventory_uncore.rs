//! Issue 22 item 4, uncore: the floor and ceiling per die in the inventory
//! (JSON and table) and the host document, each with the `cat` that reads it.
//! Every corpus host with `intel_uncore_frequency` is checked against values
//! read here, independently, from its files: the MSR layout
//! (`package_XX_die_YY/`, spr1 and most) and TPMI (`uncoreNN/` with
//! `package_id` and `domain_id`: gnr0, gnr3, srf2, srf8, cwf0, real captures,
//! so no TPMI tree is made up). A host without it says why, never 0.

use std::path::Path;

use serde_json::Value as J;

use crate::support::*;

const UNC: &str = "sys/devices/system/cpu/intel_uncore_frequency";

/// One domain as the files say: (package, die or domain, dir, min, max,
/// initial min, initial max), kHz.
type Want = (u64, u64, String, u64, u64, u64, u64);

fn num(path: &Path) -> u64 {
    let t = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}: {t:?}", path.display()))
}

/// The domains of a tree, decoded from the directory names and files: the
/// TPMI directories when there are any (the package ones are then root
/// domains), else `package_XX_die_YY`. `None` without the directory.
fn decode(tree: &Path) -> Option<(&'static str, Vec<Want>)> {
    let base = tree.join(UNC);
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .ok()?
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let row = |name: &str, package: u64, die: u64| {
        let d = base.join(name);
        (
            package,
            die,
            format!("/{UNC}/{name}"),
            num(&d.join("min_freq_khz")),
            num(&d.join("max_freq_khz")),
            num(&d.join("initial_min_freq_khz")),
            num(&d.join("initial_max_freq_khz")),
        )
    };
    let tpmi: Vec<Want> = names
        .iter()
        .filter(|n| n.starts_with("uncore"))
        .map(|n| {
            let d = base.join(n);
            row(n, num(&d.join("package_id")), num(&d.join("domain_id")))
        })
        .collect();
    if !tpmi.is_empty() {
        return Some(("tpmi", tpmi));
    }
    let msr = names
        .iter()
        .map(|n| {
            // package_01_die_00
            let p = n[8..10].parse().unwrap();
            let d = n[15..17].parse().unwrap();
            assert_eq!(format!("package_{p:02}_die_{d:02}"), *n);
            row(n, p, d)
        })
        .collect();
    Some(("msr", msr))
}

fn uncore(root: &Path) -> J {
    let v = json_of(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "platform",
        "--format",
        "json",
    ]));
    v["platform"]["uncore"].clone()
}

fn table(root: &Path) -> String {
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "platform",
    ]))
}

fn document(root: &Path, host: &str) -> String {
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "--host",
        host,
        "doc",
        "--out",
        "-",
    ]))
}

#[test]
fn inventory_reads_every_uncore_host_as_its_files_say() {
    let mut layouts = std::collections::BTreeMap::<&str, Vec<String>>::new();
    for host in corpus_hosts() {
        let tree = corpus_host(&host);
        let Some((layout, want)) = decode(&tree) else {
            continue;
        };
        let u = uncore(&tree);
        assert!(u["unavailable"].is_null(), "{host}: {u}");
        assert_eq!(u["layout"], layout, "{host}");
        let got: Vec<Want> = u["domains"]
            .as_array()
            .unwrap_or_else(|| panic!("{host}: {u}"))
            .iter()
            .map(|d| {
                let n = |k: &str| d[k].as_u64().unwrap_or_else(|| panic!("{host} {k}: {d}"));
                let dir = d["dir"].as_str().unwrap().to_string();
                let command = format!("cat {dir}/{{min,max}}_freq_khz");
                assert_eq!(d["command"], command.as_str(), "{host}");
                (
                    n("package"),
                    n("die"),
                    dir,
                    n("min_khz"),
                    n("max_khz"),
                    n("initial_min_khz"),
                    n("initial_max_khz"),
                )
            })
            .collect();
        assert_eq!(got, want, "{host}");
        layouts.entry(layout).or_default().push(host);
    }
    // The corpus has both layouts; a lost capture must not shrink this test.
    assert!(layouts["tpmi"].len() >= 5, "{layouts:?}");
    assert!(layouts["msr"].len() >= 25, "{layouts:?}");
    assert!(layouts["tpmi"].contains(&"gnr0".to_string()), "{layouts:?}");
}

/// Every domain's row: package, die, floor and ceiling in MHz, the command.
fn rows_in(text: &str, want: &[Want], host: &str) {
    for (package, die, dir, min, max, imin, imax) in want {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("{dir}/{{min,max}}_freq_khz")))
            .unwrap_or_else(|| panic!("{host}: no row for {dir}:\n{text}"));
        let cells: Vec<&str> = line
            .split(['│', '|'])
            .map(|c| c.trim().trim_matches('`'))
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells[..5],
            [
                package.to_string(),
                die.to_string(),
                format!("{} MHz", min / 1000),
                format!("{} MHz", max / 1000),
                format!("{} MHz..{} MHz", imin / 1000, imax / 1000),
            ],
            "{host}: {line}"
        );
    }
}

#[test]
fn the_table_and_the_document_show_each_die_in_mhz_with_its_command() {
    for (host, tpmi) in [("spr1", false), ("gnr0", true)] {
        let tree = corpus_host(host);
        let (_, want) = decode(&tree).unwrap();
        let t = table(&tree);
        assert!(
            t.contains("Uncore frequency per die (intel_uncore_frequency)"),
            "{t}"
        );
        assert_eq!(t.contains("TPMI: per power domain"), tpmi, "{host}:\n{t}");
        rows_in(&t, &want, host);
        let doc = document(&tree, host);
        let section = doc
            .split("## Uncore frequency per die\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{host}: no uncore section:\n{doc}"))
            .split("\n## ")
            .next()
            .unwrap();
        assert_eq!(section.contains("per power domain (`uncoreNN/`)"), tpmi);
        rows_in(section, &want, host);
        assert_eq!(
            section.matches("_freq_khz`").count(),
            want.len(),
            "one row per domain, the root package domains left out:\n{section}"
        );
    }
}

#[test]
fn hosts_without_uncore_control_say_why_never_zero() {
    // AMD (a bare-metal Genoa and a Firecracker VM): an Intel driver.
    for host in ["genoa0", "fc-haltpoll-2cpu"] {
        let tree = corpus_host(host);
        assert!(!tree.join(UNC).exists(), "{host}");
        let u = uncore(&tree);
        let why = u["unavailable"].as_str().unwrap_or_else(|| panic!("{u}"));
        assert!(why.contains("this CPU is AuthenticAMD"), "{why}");
        assert!(u["domains"].is_null() && u["layout"].is_null(), "{u}");
        let t = table(&tree);
        assert!(
            t.contains("floor and ceiling")
                && t.contains("not exposed: no /sys/devices/system/cpu/intel_uncore_frequency"),
            "{t}"
        );
        assert!(!t.contains("0 MHz"), "{t}");
        let doc = document(&tree, host);
        assert!(
            doc.contains("The uncore frequency limits are not exposed: no /sys/"),
            "{doc}"
        );
    }
    // Intel without the driver loaded, then with an empty directory.
    let (_tmp, tree) = copy_host("emr0");
    let dir = tree.join(UNC);
    std::fs::remove_dir_all(&dir).unwrap();
    let u = uncore(&tree);
    let why = u["unavailable"].as_str().unwrap();
    assert!(why.contains("driver is not loaded"), "{why}");
    assert!(u["domains"].is_null(), "{u}");
    std::fs::create_dir(&dir).unwrap();
    let why = uncore(&tree)["unavailable"].as_str().unwrap().to_string();
    assert!(
        why.contains("has no package_XX_die_YY or uncoreNN directory"),
        "{why}"
    );
}

#[test]
fn a_missing_or_garbled_uncore_file_is_not_exposed_and_named() {
    let (_tmp, tree) = copy_host("spr1");
    let die = tree.join(UNC).join("package_01_die_01");
    std::fs::remove_file(die.join("max_freq_khz")).unwrap();
    std::fs::write(die.join("min_freq_khz"), "fast\n").unwrap();
    let o = hostknob(&[
        "--root",
        tree.to_str().unwrap(),
        "inventory",
        "platform",
        "--format",
        "json",
    ]);
    let u = json_of(&o)["platform"]["uncore"].clone();
    let d = &u["domains"][1];
    assert_eq!(d["die"], 1, "{u}");
    assert!(d["min_khz"].is_null() && d["max_khz"].is_null(), "{d}");
    assert_eq!(d["initial_max_khz"], 2_500_000, "{d}");
    assert_eq!(u["domains"][0]["max_khz"], 2_500_000, "{u}");
    let warn = stderr(&o);
    assert!(
        warn.contains("package_01_die_01/min_freq_khz: expected") && warn.contains("\"fast\""),
        "{warn}"
    );
    let t = table(&tree);
    let row = t
        .lines()
        .find(|l| l.contains("package_01_die_01/"))
        .unwrap();
    assert!(row.matches("not exposed").count() == 2, "{row}");

    // A TPMI domain whose ids do not parse is left out, by name.
    let (_tmp, tree) = copy_host("gnr0");
    std::fs::write(tree.join(UNC).join("uncore03/package_id"), "zero\n").unwrap();
    let o = hostknob(&[
        "--root",
        tree.to_str().unwrap(),
        "inventory",
        "platform",
        "--format",
        "json",
    ]);
    let u = json_of(&o)["platform"]["uncore"].clone();
    assert_eq!(u["layout"], "tpmi");
    let dirs: Vec<&str> = u["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs.len(), 9, "{dirs:?}");
    assert!(!dirs.iter().any(|d| d.ends_with("uncore03")), "{dirs:?}");
    let warn = stderr(&o);
    assert!(
        warn.contains("intel_uncore_frequency/uncore03: left out, its package_id or domain_id"),
        "{warn}"
    );
}

/// The live host (read only): per die where the driver is, else why not.
#[test]
fn the_live_host_shows_its_uncore_or_says_why() {
    let u = uncore(Path::new("/"));
    match decode(Path::new("/")) {
        Some((layout, want)) => {
            assert_eq!(u["layout"], layout, "{u}");
            assert_eq!(u["domains"].as_array().unwrap().len(), want.len(), "{u}");
        }
        None => {
            let why = u["unavailable"].as_str().unwrap_or_else(|| panic!("{u}"));
            assert!(
                why.contains("no /sys/devices/system/cpu/intel_uncore_frequency"),
                "{why}"
            );
            assert!(u["domains"].is_null(), "{u}");
        }
    }
}
