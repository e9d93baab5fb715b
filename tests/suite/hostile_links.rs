//! Issue 20, what an attacker still found (items 19, 21, 23, 24, 25): hard
//! links, device nodes in a tree, unbounded report inputs, terminal escapes,
//! and the smaller ones (man pages, the textfile, capture's OUT, `--host ""`).
//! Each on a copy of a captured host, under the hang and RSS guard of `hostile`.

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::hostile::{exit1, guarded, hk, mkfifo, state};
use crate::support::*;

const THP: (&str, &str) = (
    "thp",
    "persistence: runtime\nkind: thp\ntarget: {setting: enabled}\nset: never\n",
);
const THP_FILE: &str = "sys/kernel/mm/transparent_hugepage/enabled";

/// A file outside the copy (but on its file system, so it can be linked).
fn victim(root: &Path) -> std::path::PathBuf {
    let v = root.parent().unwrap().join("victim");
    std::fs::write(&v, "precious\n").unwrap();
    v
}

fn mknod(p: &Path, major: u32, minor: u32) -> bool {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(p);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let dev = libc::makedev(major, minor);
    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, dev) == 0 }
}

// 21. A file with other hard links is never written.

#[test]
fn a_hard_link_as_lock_journal_ledger_or_knob_file_is_refused() {
    let m = knobs(&[THP]);
    // The journal's victim is empty (an empty journal reads as one), so the
    // apply reaches the append.
    for (what, path, text) in [
        ("lock", format!("{STATE_DIR}/lock"), "precious\n"),
        ("journal", format!("{STATE_DIR}/journal.jsonl"), ""),
        ("ledger", format!("{STATE_DIR}/ledger.yaml"), ""),
        (
            "knob file",
            THP_FILE.to_string(),
            "always [madvise] never\n",
        ),
    ] {
        let (_t, root) = vm();
        let v = victim(&root);
        std::fs::write(&v, text).unwrap();
        let file = root.join(&path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&file);
        std::fs::hard_link(&v, &file).unwrap();
        let before = tree(&root);
        exit1(&hk(&root, m.path(), &["apply", "thp"]), &["2 hard links"]);
        assert_eq!(std::fs::read_to_string(&v).unwrap(), text, "{what}");
        assert_tree(&before, &root, what);
    }
    // A collected ledger in the manifest linked to another file there:
    // only read, never appended to.
    let (_t, root) = vm();
    let m = knobs(&[THP]);
    let v = m.path().join("victim");
    std::fs::write(&v, "").unwrap();
    std::fs::create_dir_all(m.path().join("ledger")).unwrap();
    std::fs::hard_link(&v, collected_ledger(m.path(), "vm")).unwrap();
    ok(&hk(&root, m.path(), &["apply", "thp"]));
    assert_eq!(std::fs::read_to_string(&v).unwrap(), "");
    assert!(ledger_text(&root).contains("action: applied"));
    ok(&hk(&root, m.path(), &["revert", "--all"]));
}

#[test]
fn man_pages_and_doc_output_are_not_written_through_links() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("victim");
    std::fs::write(&v, "precious\n").unwrap();
    let out = dir.path().join("man1");
    std::fs::create_dir_all(&out).unwrap();
    let page = out.join("hostknob-apply.1");
    let man = |out: &Path| {
        guarded(&mut hostknob_command(&[
            "man",
            "--out",
            out.to_str().unwrap(),
        ]))
    };
    // A hard link, a symbolic link, a FIFO: each refused by name, nothing written through.
    std::fs::hard_link(&v, &page).unwrap();
    exit1(&man(&out), &["hostknob-apply.1", "2 hard links"]);
    std::fs::remove_file(&page).unwrap();
    symlink(&v, &page).unwrap();
    exit1(&man(&out), &["hostknob-apply.1", "symbolic link"]);
    std::fs::remove_file(&page).unwrap();
    mkfifo(&page);
    exit1(&man(&out), &["hostknob-apply.1", "FIFO"]);
    assert_eq!(std::fs::read_to_string(&v).unwrap(), "precious\n");
    std::fs::remove_file(&page).unwrap();
    ok(&man(&out));
    assert!(std::fs::read_to_string(&page).unwrap().contains(".TH"));
    // doc --out onto a hard link.
    let doc = dir.path().join("host.md");
    std::fs::hard_link(&v, &doc).unwrap();
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest");
    let o = hk(
        &corpus_host("fc-haltpoll-2cpu"),
        &catalog,
        &["doc", "--out", doc.to_str().unwrap()],
    );
    exit1(&o, &["2 hard links"]);
    assert_eq!(std::fs::read_to_string(&v).unwrap(), "precious\n");
}

// 16. The man page's synopsis names each option's argument.

#[test]
fn the_man_synopsis_lists_options_with_their_arguments() {
    let dir = tempfile::tempdir().unwrap();
    ok(&hostknob(&["man", "--out", dir.path().to_str().unwrap()]));
    let page = std::fs::read_to_string(dir.path().join("hostknob-apply.1")).unwrap();
    let synopsis = page
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap();
    for needle in [
        "\\fBhostknob apply\\fR",
        "[\\-\\-root <DIR>]",
        "[\\-\\-host <NAME>]",
        "[\\-\\-format <FORMAT>]",
        "[\\-\\-dry\\-run]",
        "[<KNOB>]...",
    ] {
        assert!(synopsis.contains(needle), "{needle} not in {synopsis}");
    }
}

// 23. Device nodes in a tree are never opened; hold takes only the live root.

#[test]
fn hold_refuses_a_tree_and_device_nodes_in_a_tree_are_never_opened() {
    let (_t, root) = vm();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let device = root.join("dev/cpu_dma_latency");
    std::fs::write(&device, 2_000_000_000i32.to_ne_bytes()).unwrap();
    let m = knobs(&[("qos", "persistence: hold\nkind: pm-qos\nset: 20\n")]);
    // Without the suite's probe hook: refused before anything is read.
    let mut c = hostknob_command(&["--root", root.to_str().unwrap(), "hold", "qos"]);
    c.env("HOSTKNOB_MANIFEST", m.path());
    exit1(&guarded(&mut c), &["hold", "without --root"]);
    assert_eq!(
        std::fs::read(&device).unwrap(),
        2_000_000_000i32.to_ne_bytes()
    );
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the device-node half: mknod needs root");
        return;
    }
    // A node as the PM QoS device (here the harmless null device, 1:3): even
    // with the hook, hold refuses to open it.
    assert!(mknod(&device, 1, 3));
    let o = hk(&root, m.path(), &["hold", "qos"]);
    exit1(&o, &["/dev/cpu_dma_latency", "device node (1:3)"]);
    // As a host file: inventory names it and reads on.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    assert!(mknod(&root.join("proc/meminfo"), 1, 3));
    let empty = tempfile::tempdir().unwrap();
    let o = hk(&root, empty.path(), &["inventory"]);
    assert!(
        err(&o).contains("/proc/meminfo") && err(&o).contains("device node (1:3)"),
        "{}",
        err(&o)
    );
    // As a knob's file: apply refuses before its first write.
    let (_t, root) = vm();
    assert!(mknod(&root.join(THP_FILE), 1, 3));
    let before = tree(&root);
    let m = knobs(&[THP]);
    exit1(
        &hk(&root, m.path(), &["apply", "thp"]),
        &["device node (1:3)"],
    );
    assert_tree(&before, &root, "a device node as the knob's file");
    assert!(!state(&root).exists());
}

// 19. report reads its inputs as host files are read.

#[test]
fn report_refuses_a_fifo_at_once_and_caps_a_huge_input() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("a.json");
    mkfifo(&fifo);
    let o = guarded(&mut hostknob_command(&["report", fifo.to_str().unwrap()]));
    exit1(&o, &["a.json", "FIFO", "regular files only"]);
    let big = dir.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((64 << 20) + 1).unwrap();
    drop(f);
    let o = guarded(&mut hostknob_command(&["report", big.to_str().unwrap()]));
    exit1(&o, &["big.json", "larger than 64 MiB"]);
    // In a directory, the same.
    std::fs::remove_file(&fifo).unwrap();
    let o = guarded(&mut hostknob_command(&[
        "report",
        dir.path().to_str().unwrap(),
    ]));
    exit1(&o, &["big.json", "larger than 64 MiB"]);
}

// 24. Control characters from a tree or an audit JSON never reach the terminal raw.

fn no_escape(what: &str, text: &str) {
    assert!(
        !text.contains('\x1b') && !text.contains('\u{9b}'),
        "{what}: a raw control character in {text:?}"
    );
}

#[test]
fn control_characters_are_escaped_in_every_human_output() {
    let (_t, root) = vm();
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap();
    let evil = cpuinfo.replacen("model name\t: ", "model name\t: \x1b[31mRED\u{9b}2J ", 1);
    assert_ne!(evil, cpuinfo);
    std::fs::write(root.join("proc/cpuinfo"), evil).unwrap();
    std::fs::write(root.join("proc/sys/vm/swappiness"), "6\x1b[31m0\n").unwrap();
    let m = knobs(&VM_KNOBS);
    let o = hk(&root, m.path(), &["inventory"]);
    let text = ok(&o);
    no_escape("inventory", &text);
    assert!(text.contains("\\x1b[31mRED\\u{9b}2J"), "{text}");
    // JSON stays exact.
    let json = ok(&hk(&root, m.path(), &["inventory", "--format", "json"]));
    assert!(json.contains("\\u001b[31mRED"), "{json}");
    let o = hk(&root, m.path(), &["audit", "swappiness"]);
    no_escape("audit", &out(&o));
    assert!(out(&o).contains("6\\x1b[31m0"), "{}", out(&o));
    let o = hk(&root, m.path(), &["apply", "--dry-run", "swappiness"]);
    no_escape("apply --dry-run", &out(&o));
    no_escape("apply --dry-run (stderr)", &err(&o));
    let o = hk(&root, m.path(), &["doc", "--out", "-"]);
    no_escape("doc", &out(&o));
    assert!(out(&o).contains("\\x1b[31mRED"), "{}", out(&o));
    // report: an audit JSON whose host, id and value carry ESC.
    let audit = out(&hk(
        &root,
        m.path(),
        &["--host", "vm", "audit", "--format", "json", "thp"],
    ));
    let mut v: serde_json::Value = serde_json::from_str(&audit).unwrap();
    v["host"] = "v\x1b]0;pwned\x07m".into();
    let k = &mut v["knobs"][0];
    k["id"] = "t\x1b[2Jhp".into();
    k["desired"] = "ne\x1b[31mver".into();
    if let Some(c) = k["current"].get_mut(0) {
        c["value"] = "al\x1b[31mways".into();
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("vm.json"), v.to_string()).unwrap();
    for format in ["table", "markdown"] {
        let o = guarded(&mut hostknob_command(&[
            "report",
            "--format",
            format,
            dir.path().to_str().unwrap(),
        ]));
        no_escape(format, &out(&o));
        assert!(out(&o).contains("t\\x1b[2Jhp"), "{format}: {}", out(&o));
    }
    let o = guarded(&mut hostknob_command(&[
        "report",
        "--format",
        "json",
        dir.path().to_str().unwrap(),
    ]));
    assert!(out(&o).contains("t\\u001b[2Jhp"), "{}", out(&o));
}

// 25. The smaller ones.

#[test]
fn a_planted_textfile_temporary_neither_fails_the_audit_nor_stays() {
    let m = knobs(&[THP]);
    let (_t, root) = vm();
    let dir = tempfile::tempdir().unwrap();
    let v = victim(&root);
    // The temporary's name carries the pid: plant it for the next pids.
    for _ in 0..20 {
        let next = std::process::Command::new("true")
            .spawn()
            .map(|mut c| {
                let id = c.id();
                let _ = c.wait();
                id
            })
            .unwrap();
        let planted: Vec<_> = (next + 1..next + 400)
            .map(|p| dir.path().join(format!(".hostknob.prom.{p}.tmp")))
            .collect();
        for p in &planted {
            symlink(&v, p).unwrap();
        }
        let mut c = command(
            &root,
            m.path(),
            &["audit", "--textfile", dir.path().to_str().unwrap()],
        );
        let child = c
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let o = child.wait_with_output().unwrap();
        let mine = dir.path().join(format!(".hostknob.prom.{pid}.tmp"));
        let hit = planted.contains(&mine);
        for p in &planted {
            let _ = std::fs::remove_file(p);
        }
        if !hit {
            continue; // another process took those pids: try again
        }
        assert!(o.status.code().is_some_and(|c| c != 1), "{}", err(&o));
        let prom = std::fs::read_to_string(dir.path().join("hostknob.prom")).unwrap();
        assert!(prom.contains("hostknob_"), "{prom}");
        assert_eq!(std::fs::read_to_string(&v).unwrap(), "precious\n");
        assert!(!mine.exists() && std::fs::symlink_metadata(&mine).is_err());
        return;
    }
    panic!("no run took a planted pid in 20 tries");
}

#[test]
fn capture_refuses_a_link_as_out_and_host_must_not_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let link = dir.path().join("out");
    symlink(&empty, &link).unwrap();
    let host = corpus_host("fc-haltpoll-2cpu");
    let o = guarded(&mut hostknob_command(&[
        "--root",
        host.to_str().unwrap(),
        "capture",
        "--out",
        link.to_str().unwrap(),
    ]));
    exit1(&o, &["is a symbolic link"]);
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    for args in [
        &["--host", "", "audit"][..],
        &["audit", "--host", ""],
        &["--host", "  ", "inventory"],
    ] {
        let mut all = vec!["--root", host.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = guarded(&mut hostknob_command(&all));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", err(&o));
        assert!(err(&o).contains("is empty"), "{args:?}: {}", err(&o));
    }
}

/// Issue 50 item 9: `--raw` (and every output path a user names) is opened
/// as the state files are: a FIFO is refused at once instead of blocking
/// forever, a symbolic link or a second hard link is refused before the
/// file it leads to is truncated.
#[test]
fn probe_raw_output_refuses_fifos_links_and_hard_links() {
    let dir = tempfile::tempdir().unwrap();
    let probe = |raw: &Path| {
        let raw = raw.to_str().unwrap().to_string();
        guarded(&mut hostknob_command(&[
            "probe",
            "wakeup",
            "--samples",
            "20",
            "--gap-us",
            "200..400",
            "--raw",
            &raw,
        ]))
    };
    let fifo = dir.path().join("raw.csv");
    mkfifo(&fifo);
    exit1(&probe(&fifo), &["--raw", "FIFO"]);
    let kept = dir.path().join("kept");
    std::fs::write(&kept, "keep").unwrap();
    let link = dir.path().join("link.csv");
    symlink(&kept, &link).unwrap();
    exit1(&probe(&link), &["--raw", "symbolic link"]);
    let hard = dir.path().join("hard.csv");
    std::fs::hard_link(&kept, &hard).unwrap();
    exit1(&probe(&hard), &["--raw", "hard links"]);
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "keep");
    let plain = dir.path().join("plain.csv");
    let o = probe(&plain);
    assert!(o.status.success(), "{}", err(&o));
    assert!(std::fs::read_to_string(&plain).unwrap().lines().count() > 20);
}
