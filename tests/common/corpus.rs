//! The real host captures in `../shared/corpus`, unpacked once per machine
//! into `target/corpus/<host>-<hash>/<host>/` and reused by every test crate.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn corpus_dir() -> PathBuf {
    if let Ok(d) = std::env::var("HOSTKNOB_CORPUS") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/hosts")
}

/// Every captured host's name, sorted.
pub fn corpus_hosts() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory ../shared/corpus/hosts")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".tar.gz")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// FNV-1a: enough to notice a changed tarball, no dependency needed.
fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The unpacked, read-only-by-convention tree of one captured host.
pub fn corpus_host(name: &str) -> PathBuf {
    // One unpack at a time in this process: tests run on parallel threads.
    static UNPACK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = UNPACK.lock().unwrap_or_else(|e| e.into_inner());
    let tarball = corpus_dir().join(format!("{name}.tar.gz"));
    let bytes = std::fs::read(&tarball).unwrap_or_else(|e| panic!("{}: {e}", tarball.display()));
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/corpus");
    let dest = cache.join(format!("{name}-{:016x}", fnv64(&bytes)));
    // The tree sits in a directory named after the host, so `--root` alone
    // names it (hostknob falls back to the root directory's name).
    let tree = dest.join(name);
    if tree.is_dir() {
        return tree;
    }
    if dest.is_dir() && !dest.join(name).exists() && dest.join("sys").exists() {
        // An unpack in the older layout (the tree directly in `dest`).
        let _ = std::fs::remove_dir_all(&dest);
    }
    std::fs::create_dir_all(&cache).unwrap();
    // Unpack beside, then rename: concurrent test processes never see half a tree.
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(&cache)
        .unwrap();
    std::fs::create_dir(tmp.path().join(name)).unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(tmp.path().join(name))
        .status()
        .unwrap();
    assert!(st.success(), "tar failed on {}", tarball.display());
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &dest).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(tree.is_dir(), "could not place {}", dest.display());
    }
    tree
}

/// A private, writable copy of a captured host (for tests that change files).
pub fn corpus_copy(name: &str) -> tempfile::TempDir {
    let src = corpus_host(name);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir()
        .unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    dir
}

pub fn expected(name: &str) -> serde_yaml::Value {
    let p = corpus_dir().join(format!("{name}.expected.yaml"));
    serde_yaml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}
