//! Helpers for manifest and audit tests: corpus hosts unpacked once per run
//! (cached under target/ by the tarball's hash), copies for tests that change
//! a host, the binary, and snapshots to prove nothing changed.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project's shared folder: `$HOSTKNOB_SHARED`, `../shared` beside the
/// checkout (as CI lays it out), or `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Ok(p) = std::env::var("HOSTKNOB_SHARED") {
        return PathBuf::from(p);
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.join("corpus").is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

#[path = "../common/corpus.rs"]
mod corpus;

/// A corpus host unpacked read-only-by-convention into a directory named
/// after the host (so the host name resolves to it). Do not modify it: use
/// `copy_host` for that.
pub fn corpus_host(name: &str) -> PathBuf {
    corpus::corpus_host(name)
}

/// A private copy of a corpus host, at `<tempdir>/<name>`, for tests that change it.
pub fn copy_host(name: &str) -> (tempfile::TempDir, PathBuf) {
    let src = corpus_host(name);
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .expect("cp runs");
    assert!(status.success());
    (tmp, dst)
}

/// Writes `files` (relative path, text) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
}

/// A manifest directory holding `files`.
pub fn manifest(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    dir
}

/// Runs the binary; the environment cannot pick a manifest, root or host for it.
pub fn hostknob(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hostknob"))
        .args(args)
        .env_remove("HOSTKNOB_MANIFEST")
        .env_remove("HOSTKNOB_ROOT")
        .env_remove("HOSTKNOB_HOST")
        .output()
        .expect("hostknob runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `hostknob --root ROOT --manifest DIR [--host H] audit --format json`, parsed, and the exit code.
pub fn audit_json(root: &Path, manifest: &Path, host: Option<&str>) -> (serde_json::Value, i32) {
    let mut args = vec![
        "--root".to_string(),
        root.display().to_string(),
        "--manifest".to_string(),
        manifest.display().to_string(),
    ];
    if let Some(h) = host {
        args.push("--host".into());
        args.push(h.into());
    }
    args.extend(["audit".into(), "--format".into(), "json".into()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = hostknob(&refs);
    let code = out.status.code().unwrap_or(-1);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit output is not JSON ({e}); exit {code}\nstdout:\n{}\nstderr:\n{}",
            stdout(&out),
            stderr(&out)
        )
    });
    (json, code)
}

/// The knob with `id` in an audit report.
pub fn knob<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["knobs"]
        .as_array()
        .expect("knobs is a list")
        .iter()
        .find(|k| k["id"] == id)
        .unwrap_or_else(|| panic!("no knob {id} in {report:#}"))
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
