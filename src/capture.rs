//! `hostknob capture OUT`: mirror every file the read commands use into a tree
//! that any command can later read with `--root OUT`.
//!
//! Paths are walked one component at a time so that each symlink on the way
//! (`/sys/class/net/eth0`, `cpu0/cpufreq`) is recreated as a symlink with the
//! same target, and the files behind it are copied where the target points.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::root::{Access, Root};

pub const METADATA_FILE: &str = "hostknob-capture.yaml";

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CaptureReport {
    pub out: PathBuf,
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    /// Paths that exist but could not be read (e.g. root-only files as non-root).
    pub skipped: Vec<String>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Metadata<'a> {
    host: Option<&'a str>,
    captured_at: String,
    hostknob_version: &'a str,
    command_line: Vec<String>,
    source_root: String,
    files: usize,
    skipped: &'a [String],
}

/// Copies the recorded paths of `root` (a recording root that has been read) into `out`.
pub fn mirror_recorded(root: &Root, out: &Path, host: Option<&str>) -> Result<CaptureReport> {
    prepare_out(out)?;
    let mut report = CaptureReport {
        out: out.to_path_buf(),
        files: 0,
        dirs: 0,
        links: 0,
        skipped: Vec::new(),
    };
    let recorded = root.recorded();
    let mut msr_cpus = Vec::new();
    let ticker = crate::progress::Ticker::start("capture", Some(recorded.len() as u64), || {});
    for (path, access) in recorded {
        ticker.tick();
        if access == Access::Denied {
            report.skipped.push(path);
            continue;
        }
        // MSR devices become sparse files of the registers read (crate::msr).
        if let Some(cpu) = msr_cpu(&path) {
            msr_cpus.push(cpu);
            continue;
        }
        let follow_last = access != Access::Link;
        match mirror_path(root, out, &path, follow_last, &mut report, 0) {
            Ok(_) => {}
            // Live files can vanish between reading and copying (a process
            // exits), and some sysfs files open but have no value (`speed` of
            // a virtual NIC: EINVAL): leaving them out reads back the same.
            Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(no_value) => {}
            Err(e) => return Err(e.context(format!("capturing {path}"))),
        }
    }
    report.files += crate::msr::capture::mirror(root, out, &msr_cpus)?;
    report.files += mirror_ethtool(root, out, &mut report.skipped)?;
    let meta = Metadata {
        host,
        captured_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        hostknob_version: env!("CARGO_PKG_VERSION"),
        command_line: std::env::args().collect(),
        source_root: root.base().display().to_string(),
        files: report.files,
        skipped: &report.skipped,
    };
    fs::write(out.join(METADATA_FILE), serde_yaml::to_string(&meta)?)
        .with_context(|| format!("writing {}", out.join(METADATA_FILE).display()))?;
    Ok(report)
}

/// Each interface's ethtool state (read live through the ioctl, which
/// leaves no file to copy) as its state file, `crate::ethtool::state_path`.
fn mirror_ethtool(root: &Root, out: &Path, skipped: &mut Vec<String>) -> Result<usize> {
    let names = root.read_dir("/sys/class/net").unwrap_or_default();
    let mut written = 0;
    for name in names {
        let state = match crate::ethtool::read(root, &name) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                skipped.push(e);
                continue;
            }
        };
        let file = out.join(crate::ethtool::state_path(&name).trim_start_matches('/'));
        let dir = file.parent().expect("a state file has a directory");
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        fs::write(&file, crate::ethtool::to_text(&state))
            .with_context(|| format!("writing {}", file.display()))?;
        written += 1;
    }
    Ok(written)
}

/// N of `/dev/cpu/N/msr`.
fn msr_cpu(path: &str) -> Option<u32> {
    path.strip_prefix("/dev/cpu/")?
        .strip_suffix("/msr")?
        .parse()
        .ok()
}

fn no_value(e: &std::io::Error) -> bool {
    crate::root::is_absent(e)
        || matches!(
            e.raw_os_error(),
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(libc::EIO) | Some(libc::ENODATA)
        )
}

fn prepare_out(out: &Path) -> Result<()> {
    // A link as OUT (planted, or left over) would put the capture wherever it
    // points: refused, not followed.
    if let Ok(meta) = fs::symlink_metadata(out)
        && meta.file_type().is_symlink()
    {
        bail!(
            "{}: is a symbolic link (to {}); capture writes into a new or empty directory, never \
             through a link: name the directory itself",
            out.display(),
            fs::read_link(out)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into())
        );
    }
    if out.exists() {
        let mut entries =
            fs::read_dir(out).with_context(|| format!("{}: cannot read", out.display()))?;
        if entries.next().is_some() {
            bail!(
                "{}: exists and is not empty; capture writes into a new or empty directory",
                out.display()
            );
        }
    } else {
        fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    }
    Ok(())
}

/// Walks `logical` component by component, recreating directories and
/// symlinks under `out`; returns the resolved logical path.
fn mirror_path(
    root: &Root,
    out: &Path,
    logical: &str,
    follow_last: bool,
    report: &mut CaptureReport,
    depth: u32,
) -> Result<String> {
    if depth > 40 {
        bail!("too many levels of symbolic links");
    }
    let comps: Vec<&str> = logical
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut cur = String::new();
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        if *comp == ".." {
            if let Some(p) = cur.rfind('/') {
                cur.truncate(p);
            }
            continue;
        }
        let next = format!("{cur}/{comp}");
        let src = root.host_path(&next);
        let meta = fs::symlink_metadata(&src)?;
        let dst = out.join(next.trim_start_matches('/'));
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&src)?;
            if fs::symlink_metadata(&dst).is_err() {
                fs::create_dir_all(dst.parent().unwrap())?;
                symlink(&target, &dst)
                    .with_context(|| format!("creating link {}", dst.display()))?;
                report.links += 1;
            }
            if last && !follow_last {
                return Ok(next);
            }
            let target = target.to_string_lossy();
            let joined = if target.starts_with('/') {
                target.to_string()
            } else {
                format!("{cur}/{target}")
            };
            let rest: String = comps[i + 1..].iter().map(|c| format!("/{c}")).collect();
            return mirror_path(
                root,
                out,
                &format!("{joined}{rest}"),
                follow_last,
                report,
                depth + 1,
            );
        }
        if meta.is_dir() {
            if !dst.is_dir() {
                fs::create_dir_all(&dst).with_context(|| format!("creating {}", dst.display()))?;
                report.dirs += 1;
            }
        } else if last {
            if fs::symlink_metadata(&dst).is_err() {
                let bytes = root.read(&next)?;
                fs::create_dir_all(dst.parent().unwrap())?;
                fs::write(&dst, bytes).with_context(|| format!("writing {}", dst.display()))?;
                report.files += 1;
            }
        } else {
            bail!("{next} is not a directory");
        }
        cur = next;
    }
    Ok(if cur.is_empty() { "/".into() } else { cur })
}
