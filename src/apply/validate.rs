//! Every check apply makes before its first write. None of them changes
//! anything: a refusal leaves the host exactly as it was.

use std::path::Path;

use super::plan::Planned;
use super::write::describe_write_error;
use crate::knob::WriteMode;
use crate::root::Root;

/// The values: every target the host can take, the value accepted, the
/// value before known (so it can be restored), and a mode apply can write.
pub fn values(planned: &Planned) -> Result<(), String> {
    for p in &planned.knobs {
        crate::knob::refusal(&p.knob.id, &p.refused)?;
    }
    for s in &planned.steps {
        let id = &planned.knobs[s.knob].knob.id;
        match s.write.mode {
            WriteMode::Attribute | WriteMode::Msr | WriteMode::Affinity | WriteMode::Sched
                if s.write.before.is_none() =>
            {
                return Err(format!(
                    "{id}: {}: its current value cannot be read, so it could not be restored",
                    s.write.path
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Permission, asked of the kernel without writing: each existing target is
/// opened for writing and closed; for a file to be created, its nearest
/// existing directory must be writable. With `access_only`, only a refusal
/// of access (no permission, a read-only file system) fails the check;
/// other errors (a file that is gone) are left to each write to report.
pub fn permissions<'p>(
    root: &Root,
    paths: impl IntoIterator<Item = (&'p str, bool)>,
    access_only: bool,
) -> Result<(), String> {
    for (path, whole_file) in paths {
        // A whole file is replaced by rename: a link in its place is refused, never replaced.
        if whole_file && let Ok(Some(to)) = root.link_target(path) {
            return Err(crate::root::symlink_refused(path, Some(&to)).to_string());
        }
        // An MSR field is written through its CPU's device (or captured file).
        let r = if let Some((cpu, _)) = crate::msr::write::parse_path(path) {
            root.probe_write(&crate::msr::device(cpu))
        } else if crate::ethtool::Field::parse(path).is_some() {
            crate::ethtool::probe_write(root, path)
        } else if crate::task::parse_path(path).is_some() {
            crate::task::probe(root, path)
        } else if whole_file && !root.exists(path) {
            root.probe_create(path)
        } else {
            root.probe_write(path)
        };
        match r {
            Err(e)
                if !access_only
                    || matches!(
                        e.raw_os_error(),
                        Some(libc::EACCES | libc::EPERM | libc::EROFS)
                    ) =>
            {
                return Err(describe_write_error(path, &e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The ledger can be appended to (or created), checked without creating it.
pub fn ledger_writable(path: &Path) -> Result<(), String> {
    let mut p = path;
    while !p.exists() {
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => {
                p = Path::new(".");
                break;
            }
        }
    }
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).map_err(|e| {
        format!(
            "cannot write the ledger {}: {} is not writable ({e})",
            path.display(),
            p.display()
        )
    })
}
