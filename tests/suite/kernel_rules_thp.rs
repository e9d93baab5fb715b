//! Issue 20 items 8 and 9: per-size transparent huge pages
//! (`hugepages-<size>kB/enabled`, transhuge.rst) in inventory, audit and the
//! `thp` kind, and the boot value (the kernel's build configuration, the
//! command line) deciding `unpersisted`. On copies of the VM capture with
//! the files a newer kernel has added to them.

use std::path::Path;

use crate::support::*;

const THP: &str = "sys/kernel/mm/transparent_hugepage";

/// A copy of the VM whose top level is `never`, with 64 kB pages `always`,
/// the PMD size (2 MB) `inherit` and 32 kB pages `never`.
fn sized_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, root) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &root,
        &[
            (&format!("{THP}/enabled"), "always madvise [never]\n"),
            (
                &format!("{THP}/hugepages-64kB/enabled"),
                "[always] inherit madvise never\n",
            ),
            (
                &format!("{THP}/hugepages-2048kB/enabled"),
                "always [inherit] madvise never\n",
            ),
            (
                &format!("{THP}/hugepages-32kB/enabled"),
                "always inherit madvise [never]\n",
            ),
            (&format!("{THP}/hpage_pmd_size"), "2097152\n"),
        ],
    );
    (tmp, root)
}

fn thp(target: &str, set: &str, persistence: &str) -> String {
    format!("persistence: {persistence}\nkind: thp\ntarget: {target}\nset: {set}\n")
}

fn status(root: &Path, body: &str) -> (String, String, serde_json::Value) {
    let m = knobs(&[("k", body)]);
    let (report, _) = audit_json(root, m.path(), Some("h"));
    let k = knob(&report, "k").clone();
    (
        k["status"].as_str().unwrap().to_string(),
        k["detail"].as_str().unwrap().to_string(),
        k,
    )
}

#[test]
fn inventory_shows_each_thp_size_and_what_is_in_force() {
    let (_tmp, root) = sized_copy();
    let inv = json_of(&inventory_json(&root));
    let sizes = inv["memory"]["thp_sizes"].as_array().unwrap();
    let row = |kib: u64| {
        let s = sizes.iter().find(|s| s["size_kib"] == kib).unwrap();
        (
            s["enabled"].as_str().unwrap().to_string(),
            s["effective"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(sizes.len(), 3, "{sizes:#?}");
    assert_eq!(row(64), ("always".into(), "always".into()));
    assert_eq!(row(2048), ("inherit".into(), "never".into()));
    assert_eq!(row(32), ("never".into(), "never".into()));
    assert_eq!(inv["memory"]["thp_pmd_size_kib"], 2048);
    let table = ok(&hostknob(&["--root", root.to_str().unwrap(), "inventory"]));
    assert!(
        table.contains("always: 64K; never: 32K 2M (inherit)"),
        "{table}"
    );
    // A capture keeps the per-size files.
    let out = tempfile::tempdir().unwrap();
    let cap = out.path().join("cap");
    ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "capture",
        "--out",
        cap.to_str().unwrap(),
    ]));
    assert!(cap.join(THP).join("hugepages-64kB/enabled").is_file());
}

#[test]
fn a_top_level_never_with_a_size_always_is_not_in_effect() {
    let (_tmp, root) = sized_copy();
    let never = thp("{setting: enabled}", "never", "runtime");
    let (st, detail, k) = status(&root, &never);
    assert_eq!(st, "drift", "{k:#}");
    assert!(detail.contains("hugepages-64kB/enabled"), "{detail}");
    assert!(detail.contains("is always, should be never"), "{detail}");
    let notes = k["notes"].to_string();
    assert!(
        notes.contains("overrides the top-level choice for 64 kB"),
        "{notes}"
    );
    // The 32 kB `never` and the inheriting 2 MB are no targets: apply writes the 64 kB file only.
    let m = knobs(&[("k", &never)]);
    let text = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(text.contains("hugepages-64kB"), "{text}");
    let now = std::fs::read_to_string(root.join(THP).join("hugepages-64kB/enabled")).unwrap();
    assert_eq!(now.trim(), "never");
    for f in [
        "hugepages-32kB/enabled",
        "hugepages-2048kB/enabled",
        "enabled",
    ] {
        let t = std::fs::read_to_string(root.join(THP).join(f)).unwrap();
        assert!(t.contains('['), "{f} was written: {t}");
    }
    ok(&run(&root, m.path(), &["revert", "--all"]));
    let back = std::fs::read_to_string(root.join(THP).join("hugepages-64kB/enabled")).unwrap();
    // The file as it was, choices and brackets (revert restores the bytes).
    assert_eq!(back, "[always] inherit madvise never\n");
    // Without per-size files (the capture as it was), never is only the top level.
    let (_t, plain) = copy_host("fc-haltpoll-2cpu");
    write_files(
        &plain,
        &[(&format!("{THP}/enabled"), "always madvise [never]\n")],
    );
    let (st, detail, _) = status(&plain, &never);
    assert_eq!(st, "unpersisted", "{detail}");
}

#[test]
fn a_thp_knob_targets_one_size() {
    let (_tmp, root) = sized_copy();
    let (st, detail, _) = status(
        &root,
        &thp("{setting: enabled, size: 64kB}", "never", "runtime"),
    );
    assert_eq!(st, "drift", "{detail}");
    assert!(detail.contains("is always, should be never"), "{detail}");
    let (st, _, k) = status(
        &root,
        &thp("{setting: enabled, size: 2M}", "inherit", "runtime"),
    );
    assert_eq!(st, "ok", "the PMD size inherits by default: {k:#}");
    let (st, detail, _) = status(
        &root,
        &thp("{setting: enabled, size: 128kB}", "always", "runtime"),
    );
    assert_eq!(st, "not-applicable", "{detail}");
    assert!(
        detail.contains("sizes here: hugepages-32kB hugepages-64kB hugepages-2048kB"),
        "{detail}"
    );
    // apply writes the size's file and nothing else.
    let m = knobs(&[(
        "k",
        &thp("{setting: enabled, size: 32kB}", "madvise", "runtime"),
    )]);
    ok(&run(&root, m.path(), &["apply", "--all"]));
    let now = std::fs::read_to_string(root.join(THP).join("hugepages-32kB/enabled")).unwrap();
    assert_eq!(now.trim(), "madvise");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    // Persisted on the command line by thp_anon=.
    let m = knobs(&[(
        "k",
        &thp("{setting: enabled, size: 32kB}", "madvise", "cmdline"),
    )]);
    let text = ok(&run(&root, m.path(), &["persist", "k"]));
    assert!(text.contains("thp_anon=32K:madvise"), "{text}");
}

#[test]
fn bad_thp_sizes_name_the_field_and_change_nothing() {
    let (_tmp, root) = sized_copy();
    let before = tree(&root);
    for (target, set, needle) in [
        (
            "{setting: defrag, size: 64kB}",
            "never",
            "defrag has no per-size file",
        ),
        (
            "{setting: enabled, size: 65kB}",
            "never",
            "not a huge page size",
        ),
        ("{setting: enabled, size: lots}", "never", "not a page size"),
        ("{setting: enabled}", "inherit", "give target.size too"),
    ] {
        let m = knobs(&[("k", &thp(target, set, "runtime"))]);
        let o = run(&root, m.path(), &["apply", "--all"]);
        assert_eq!(o.status.code(), Some(1), "{target}: {}", out(&o));
        let e = err(&o);
        assert!(e.contains("knobs.yaml:"), "{e}");
        assert!(e.contains(needle), "{target}: {e}");
        assert!(
            e.contains("target.size") || e.contains("set"),
            "{target}: {e}"
        );
    }
    assert_tree(&before, &root, "after refused THP knobs");
}

/// `CONFIG_...=y` as /proc/config.gz, gzip-compressed like the kernel's.
fn config_gz(root: &Path, line: &str) {
    let f = root.join("proc/config");
    std::fs::write(&f, format!("CONFIG_TRANSPARENT_HUGEPAGE=y\n{line}\n")).unwrap();
    let st = std::process::Command::new("gzip")
        .arg("-f")
        .arg(&f)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(root.join("proc/config.gz").is_file());
}

#[test]
fn the_kernels_boot_default_is_not_unpersisted() {
    // The VM reads madvise and its command line has no transparent_hugepage=.
    let (_tmp, root) = copy_host("fc-haltpoll-2cpu");
    let shipped = std::fs::read_to_string(repo().join("manifest/thp-madvise.yaml")).unwrap();
    let m = manifest(&[("thp.yaml", &shipped)]);
    let judge = |root: &Path| {
        let (report, _) = audit_json(root, m.path(), Some("h"));
        let k = knob(&report, "thp-madvise").clone();
        (k["status"].as_str().unwrap().to_string(), k)
    };
    // No configuration to read: the command line decides, and lacks it.
    let (st, k) = judge(&root);
    assert_eq!(st, "unpersisted", "{k:#}");
    // A MADVISE kernel boots with madvise: nothing needs to persist it.
    config_gz(&root, "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y");
    let (st, k) = judge(&root);
    assert_eq!(st, "ok", "{k:#}");
    assert!(
        k["persisted_by"]
            .as_str()
            .unwrap()
            .contains("CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y in /proc/config.gz"),
        "{k:#}"
    );
    // An ALWAYS kernel boots with always: unpersisted, saying so.
    config_gz(&root, "CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS=y");
    let (st, k) = judge(&root);
    assert_eq!(st, "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("the kernel boots with always"),
        "{k:#}"
    );
    // /boot/config-$(uname -r) when there is no /proc/config.gz.
    std::fs::remove_file(root.join("proc/config.gz")).unwrap();
    let release = std::fs::read_to_string(root.join("proc/sys/kernel/osrelease")).unwrap();
    write_files(
        &root,
        &[(
            &format!("boot/config-{}", release.trim()),
            "CONFIG_TRANSPARENT_HUGEPAGE=y\nCONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y\n",
        )],
    );
    let (st, k) = judge(&root);
    assert_eq!(st, "ok", "{k:#}");
    // A command-line parameter beats the configuration.
    let cmdline = std::fs::read_to_string(root.join("proc/cmdline")).unwrap();
    std::fs::write(
        root.join("proc/cmdline"),
        format!("transparent_hugepage=always {cmdline}"),
    )
    .unwrap();
    let (st, k) = judge(&root);
    assert_eq!(st, "unpersisted", "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("transparent_hugepage=always"),
        "{k:#}"
    );
}

#[test]
fn defrag_madvise_is_the_kernels_default() {
    // The VM's defrag reads madvise, which every kernel boots with.
    let root = corpus_host("fc-haltpoll-2cpu");
    let (st, _, k) = status(&root, &thp("{setting: defrag}", "madvise", "runtime"));
    assert_eq!(st, "ok", "{k:#}");
    let (st, _, k) = status(&root, &thp("{setting: defrag}", "defer", "runtime"));
    assert_eq!(st, "drift", "{k:#}");
}
