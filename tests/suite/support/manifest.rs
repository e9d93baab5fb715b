//! Manifest and audit helpers: a temporary manifest directory, audit's JSON
//! report, one knob of it.

use std::path::Path;

use super::run::{hostknob, stderr, stdout};
use super::tree::write_files;

/// A manifest directory holding `files`.
pub fn manifest(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    dir
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
