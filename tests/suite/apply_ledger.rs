//! Issue 20 item 22: ledger repair (a tear one byte into an item, first or
//! later; a tear just before `root:`) and ledger problems found before the
//! first write to the host.

use std::path::{Path, PathBuf};

use crate::support::*;

const THP: (&str, &str) = (
    "thp",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);

fn torn(root: &Path) -> String {
    let mut p = ledger_file(root).into_os_string();
    p.push(".torn");
    std::fs::read_to_string(PathBuf::from(p)).unwrap()
}

fn items(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("- ")).count()
}

/// Applies and reverts thp once: two items.
fn two_items(root: &Path, m: &Path) -> String {
    ok(&run(root, m, &["apply", "thp"]));
    ok(&run(root, m, &["revert", "--all"]));
    let text = ledger_text(root);
    assert_eq!(items(&text), 2, "{text}");
    text
}

#[test]
fn a_ledger_torn_one_byte_into_its_first_item_is_set_aside() {
    let (_t, root) = vm();
    let m = knobs(&[THP]);
    std::fs::create_dir_all(root.join(STATE_DIR)).unwrap();
    std::fs::write(ledger_file(&root), "-").unwrap();
    let o = run(&root, m.path(), &["audit"]);
    assert_ne!(o.status.code(), Some(1), "audit reads past it: {}", err(&o));
    ok(&run(&root, m.path(), &["apply", "thp"]));
    let text = ledger_text(&root);
    assert!(
        text.starts_with("- timestamp:") && items(&text) == 1,
        "{text}"
    );
    assert_eq!(torn(&root), "-");
    ok(&run(&root, m.path(), &["revert", "--all"]));
}

#[test]
fn a_ledger_torn_one_byte_into_a_later_item_keeps_the_items_before() {
    let (_t, root) = vm();
    let m = knobs(&[THP]);
    let whole = two_items(&root, m.path());
    std::fs::write(ledger_file(&root), format!("{whole}-")).unwrap();
    ok(&run(&root, m.path(), &["apply", "thp"]));
    let text = ledger_text(&root);
    assert!(text.starts_with(&whole) && items(&text) == 3, "{text}");
    assert_eq!(torn(&root), "-");
}

#[test]
fn a_tear_just_before_root_is_not_a_legacy_item() {
    let (_t, root) = vm();
    let m = knobs(&[THP]);
    let whole = two_items(&root, m.path());
    let cut = whole.rfind("  root:").unwrap();
    let second = whole[..cut].rfind("\n- ").unwrap() + 1;
    std::fs::write(ledger_file(&root), &whole[..cut]).unwrap();
    ok(&run(&root, m.path(), &["apply", "thp"]));
    let text = ledger_text(&root);
    assert!(
        text.starts_with(&whole[..second]) && items(&text) == 2,
        "{text}"
    );
    assert_eq!(torn(&root), whole[second..cut]);
    assert_eq!(
        text.matches("root: capture").count(),
        2,
        "every item kept has its identity: {text}"
    );
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A ledger that cannot take the record stops apply (and revert) before
/// the first write to the host: nothing changed, the ledger named.
#[test]
fn ledger_problems_are_found_before_the_first_write() {
    let m = knobs(&[THP]);
    type Spoil<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Spoil); 5] = [
        ("a directory", &|f| std::fs::create_dir_all(f).unwrap()),
        ("not UTF-8", &|f| {
            std::fs::write(f, b"- timestamp: \xff\xfe\n").unwrap()
        }),
        ("over the cap", &|f| {
            std::fs::File::create(f).unwrap().set_len(65 << 20).unwrap()
        }),
        ("a FIFO", &|f| mkfifo(f)),
        ("read-only", &|f| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(f, "").unwrap();
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o444)).unwrap();
        }),
    ];
    for (what, make) in cases {
        if what == "read-only" && unsafe { libc::geteuid() } == 0 {
            continue; // root writes a read-only file anyway
        }
        let (_t, root) = vm();
        let file = ledger_file(&root);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let before = tree(&root);
        make(&file);
        let o = run(&root, m.path(), &["apply", "thp"]);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", err(&o));
        assert!(
            err(&o).contains("ledger.yaml") && err(&o).contains("nothing was changed"),
            "{what}: {}",
            err(&o)
        );
        assert_tree(&before, &root, what);
        assert!(journal(&root).is_empty(), "{what}: no journal");
        assert!(
            !root.join(STATE_DIR).join("lock").exists(),
            "{what}: no lock"
        );
    }
    // Revert too: the journal keeps the host's values until the ledger is fixed.
    let (_t, root) = vm();
    let file = ledger_file(&root);
    let before = tree(&root);
    ok(&run(&root, m.path(), &["apply", "thp"]));
    let applied = tree(&root);
    std::fs::rename(&file, root.join("kept.yaml")).unwrap();
    mkfifo(&file);
    let o = run(&root, m.path(), &["revert", "--all"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("ledger.yaml") && err(&o).contains("move the file aside"),
        "{}",
        err(&o)
    );
    std::fs::remove_file(&file).unwrap();
    std::fs::rename(root.join("kept.yaml"), &file).unwrap();
    assert_tree(&applied, &root, "revert refused before writing");
    ok(&run(&root, m.path(), &["revert", "--all"]));
    assert_tree(&before, &root, "reverted once the ledger is fixed");
}
