//! How a document names the paths it was made from: the same directory is
//! written the same way however it was spelled on the command line, so
//! `doc --check` never calls a document stale for a path's spelling.

use std::path::{Component, Path, PathBuf};

/// `p` absolute, with every link of its longest existing ancestor resolved
/// and the rest (not there yet) appended as written.
fn canonical(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut tail = Vec::new();
    let mut head = abs.as_path();
    loop {
        if let Ok(c) = head.canonicalize() {
            return tail.iter().rev().fold(c, |acc: PathBuf, t| acc.join(t));
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                head = parent;
            }
            _ => return abs,
        }
    }
}

/// `target` relative to the directory `base` (both resolved first): `../manifest`.
fn relative(base: &Path, target: &Path) -> PathBuf {
    let (b, t) = (canonical(base), canonical(target));
    let bc: Vec<Component> = b.components().collect();
    let tc: Vec<Component> = t.components().collect();
    let common = bc.iter().zip(&tc).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..bc.len() {
        out.push("..");
    }
    for c in &tc[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// How a document written to `out` (`-`: standard output) names `path`:
/// relative to the document's directory, or for standard output relative to
/// the working directory when inside it and absolute otherwise.
pub fn shown(out: &Path, path: &Path) -> PathBuf {
    if out.as_os_str() == "-" {
        let cwd = canonical(Path::new("."));
        let p = canonical(path);
        return match p.strip_prefix(&cwd) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
            _ => p,
        };
    }
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    relative(dir, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_directory_is_named_alike_however_it_is_spelled() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(repo.join("manifest")).unwrap();
        std::fs::create_dir_all(repo.join("hosts")).unwrap();
        std::os::unix::fs::symlink(repo.join("manifest"), t.path().join("link")).unwrap();
        let out = repo.join("hosts/x.md");
        for spelled in [
            repo.join("manifest"),
            repo.join("hosts/../manifest"),
            repo.join("./manifest/"),
            t.path().join("link"),
        ] {
            assert_eq!(
                shown(&out, &spelled),
                Path::new("../manifest"),
                "{spelled:?}"
            );
        }
        // A document not written yet, in a directory not made yet.
        assert_eq!(
            shown(&repo.join("new/deeper/x.md"), &repo.join("manifest")),
            Path::new("../../manifest")
        );
    }
}
