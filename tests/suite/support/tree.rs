//! Whole trees compared: every file, directory and link with its bytes (or
//! target) and permission bits, to prove what changed and what did not.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One entry of a tree: what it is, its bytes (or link target), its permission bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
    /// A FIFO, socket or device node: never opened (a FIFO would block).
    Special(u32),
}

pub type Tree = BTreeMap<PathBuf, Node>;

/// hostknob's own state (lock, journal) lives here under the root.
pub const STATE_DIR: &str = "var/lib/hostknob";

/// Every file, directory and link under `dir` (relative paths), leaving out
/// hostknob's state directory (and `var/lib`, `var` when they hold only it).
pub fn tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if rel == Path::new(STATE_DIR) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&p).unwrap())
            } else if meta.is_dir() {
                stack.push(p.clone());
                Node::Dir(mode)
            } else if meta.is_file() {
                Node::File(std::fs::read(&p).unwrap(), mode)
            } else {
                Node::Special(std::os::unix::fs::MetadataExt::mode(&meta))
            };
            out.insert(rel, node);
        }
    }
    // The state directory's parents exist only because of it: left out too.
    for parent in ["var/lib", "var"] {
        if !out.keys().any(|k| k.parent() == Some(Path::new(parent))) {
            out.remove(Path::new(parent));
        }
    }
    out
}

/// Asserts `dir` holds exactly `expected`, naming the first differences.
pub fn assert_tree(expected: &Tree, dir: &Path, context: &str) {
    assert_same(expected, &tree(dir), context);
}

/// Asserts two trees are equal, naming the first differences.
pub fn assert_same(expected: &Tree, now: &Tree, context: &str) {
    if now == expected {
        return;
    }
    let mut diffs = Vec::new();
    for (p, n) in expected {
        match now.get(p) {
            None => diffs.push(format!("missing: {}", p.display())),
            Some(m) if m != n => diffs.push(format!(
                "changed: {} ({} -> {})",
                p.display(),
                show(n),
                show(m)
            )),
            _ => {}
        }
    }
    for p in now.keys().filter(|p| !expected.contains_key(*p)) {
        diffs.push(format!("added: {}", p.display()));
    }
    diffs.truncate(10);
    panic!("{context}: the tree differs:\n  {}", diffs.join("\n  "));
}

fn show(n: &Node) -> String {
    match n {
        Node::File(b, m) => format!("{:?} {m:o}", String::from_utf8_lossy(b)),
        Node::Dir(m) => format!("dir {m:o}"),
        Node::Link(t) => format!("link {}", t.display()),
        Node::Special(m) => format!("special {m:o}"),
    }
}

/// Every file, symlink and directory under `dir` with its content (or link
/// target) and modification time: equal snapshots mean nothing changed.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, Option<std::time::SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mtime = meta.modified().ok();
            let content = if meta.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes()
            } else if meta.is_dir() {
                stack.push(p.clone());
                Vec::new()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(p, (content, mtime));
        }
    }
    out
}

/// Writes `files` (relative path, text) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
}

/// Debian's GRUB layout (`tests/corpus/boot/debian-grub`: `/etc/default/grub`,
/// `/boot/grub/grub.cfg`) copied into `root`, as `cp -a` keeps it.
pub fn give_debian_grub(root: &Path) {
    let src = super::repo().join("tests/corpus/boot/debian-grub");
    for part in ["etc", "boot"] {
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(src.join(part))
            .arg(root)
            .status()
            .unwrap();
        assert!(st.success());
    }
}
