//! `hostknob import tuned PROFILE`: a tuned profile as `peers::tuned` reads
//! and translates it, written as a manifest directory (`write`): a knob file
//! per setting, a profile, and the accounting of every line. Nothing is
//! run, and the host is only read.

mod write;

use std::path::Path;

use anyhow::{Context as _, Result, bail};

use crate::peers::tuned::out::Fate;
use crate::peers::tuned::{facts, load, source, translate};
use crate::root::Root;

/// What an import produced, before anything is written.
pub struct Import {
    pub profile: String,
    pub files: Vec<String>,
    /// (file name in the output directory, contents), sorted by name.
    pub outputs: Vec<(String, String)>,
    /// `file:line: key: reason` for each line not imported.
    pub not_imported: Vec<String>,
    pub imported: usize,
    pub total: usize,
}

/// The profile file's modification date, for the note (not the history's date).
fn mtime_date(root: &Root, shown: &str, from: Option<&Path>) -> String {
    let path = match from {
        Some(_) => std::path::PathBuf::from(shown),
        None => root.host_path(shown),
    };
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string()[..10].to_string())
        .unwrap_or_else(|_| "1970-01-01".into())
}

pub fn import(root: &Root, from: Option<&Path>, name: &str, host: &str) -> Result<Import> {
    let src = source(root, from)?;
    let p = load::load(&src, name)?;
    let facts = facts::read(root);
    let mut out = translate::translate(root, &p, &facts)?;
    let summary = p
        .main
        .iter()
        .find(|o| o.key == "summary")
        .map(|o| o.value.clone())
        .unwrap_or_else(|| "no summary".into());
    let top = p.files.last().cloned().unwrap_or_default();
    let date = crate::manifest::ledger::today();
    let profile_date = mtime_date(root, &top, from);
    let cx = write::Context {
        host,
        date: &date,
        profile_file: &top,
        profile_date: &profile_date,
        summary: &summary,
        tuned: crate::peers::tuned::presence(root),
    };
    let mut outputs: Vec<(String, String)> = Vec::new();
    // Only what the manifest loader accepts is written: a setting whose knob
    // it would refuse (a quote in a kernel parameter, a sysfs path leaving
    // /sys) is listed as not imported, with the loader's reason.
    for k in std::mem::take(&mut out.knobs) {
        let name = format!("{}.yaml", k.id);
        let text = write::knob_file(&k, &p, &cx);
        match crate::manifest::check_knob_file(Path::new(&name), &text) {
            Ok(()) => {
                outputs.push((name, text));
                out.knobs.push(k);
            }
            Err(errors) => {
                let why: Vec<String> = errors
                    .iter()
                    .map(|e| match &e.field {
                        Some(f) => format!("{f}: {}", e.message),
                        None => e.message.clone(),
                    })
                    .collect();
                for o in &k.lines {
                    out.fate(
                        o,
                        Fate::Not(format!(
                            "the manifest loader refuses it ({})",
                            why.join("; ")
                        )),
                    );
                }
            }
        }
    }
    outputs.push((
        format!("profiles/{}.yaml", crate::name::slug(&p.name)),
        write::profile_file(&out.knobs, &p, &cx),
    ));
    let (imp, not, stderr, imported, total) = write::accounting(&p, &out);
    outputs.push(("IMPORTED.md".into(), imp));
    outputs.push(("NOT-IMPORTED.md".into(), not));
    outputs.sort();
    // Never a knob or profile file the manifest loader would refuse.
    if let Some((name, text)) = outputs
        .iter()
        .find(|(n, t)| n.ends_with(".yaml") && t.len() > crate::manifest::FILE_CAP)
    {
        bail!(
            "{name} would be {} bytes, over the manifest's {} MiB cap for one file: nothing was written",
            text.len(),
            crate::manifest::FILE_CAP >> 20
        );
    }
    Ok(Import {
        profile: p.name.clone(),
        files: p.files.clone(),
        outputs,
        not_imported: stderr,
        imported,
        total,
    })
}

/// Writes the outputs into `dir` (made when missing), each file replaced
/// whole; an earlier import's knob files there that this one does not write
/// are named, never removed.
pub fn write_dir(dir: &Path, imp: &Import) -> Result<Vec<String>> {
    // As `capture OUT`: a link as the directory would put the files wherever
    // it points; refused, not followed.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        bail!(
            "--out {}: is a symbolic link; import writes into a directory, never through a link: name the directory itself; nothing was written",
            dir.display()
        );
    }
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--out {}: not a directory; nothing was written",
            dir.display()
        );
    }
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles)
        .with_context(|| format!("creating {}", profiles.display()))?;
    let seam = Root::confined(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    for (name, text) in &imp.outputs {
        seam.replace_file(&format!("/{name}"), text.as_bytes())
            .with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    let prefix = format!("tuned-{}-", crate::name::slug(&imp.profile));
    let mut stale: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&prefix) && !imp.outputs.iter().any(|(o, _)| o == n))
        .collect();
    stale.sort();
    Ok(stale)
}
