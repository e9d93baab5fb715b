use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::cli::DocArgs;
use crate::doc::{self, DocInput, settings};
use crate::inventory;
use crate::root::Root;

pub fn run(args: &DocArgs) -> Result<i32> {
    let g = &args.target;
    let root = Root::open(&g.root.root)?;
    let inv = inventory::collect(&root)?;
    for w in &inv.warnings {
        eprintln!("hostknob: warning: {}", crate::render::escape_controls(w));
    }
    let sysctls = settings::read_sysctls(&root);
    let host = crate::manifest::host::resolve(&root, g.host.host.as_deref());
    let manifest_dir = super::manifest_dir(g, &root);
    let path = match &args.out {
        Some(p) => p.clone(),
        // The name becomes a file name: one that is a path must not reach past `hosts/`.
        None => {
            crate::manifest::host::HostName {
                name: host.name.clone(),
                source: host.source.clone(),
            }
            .checked()?;
            PathBuf::from("hosts").join(format!("{}.md", host.name))
        }
    };

    let ctx = crate::knob::HostCtx::new(&root, host.name.clone()).read_only();
    let load: doc::knobs::Load =
        Box::new(|| super::load_manifest(g, &root, &manifest_dir, &host.name));
    let knobs = doc::knobs::sections(
        &manifest_dir,
        &doc::paths::shown(&path, &manifest_dir),
        load,
        &ctx,
        &host.source,
        &crate::journal::state_dir(&args.state.state_dir),
    )?;
    let host = host.name;
    let generated_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // Tree-derived text (a model name, a value) never carries a control
    // character into the document or onto a terminal.
    let text = crate::render::escape_controls(&doc::render(&DocInput {
        host: &host,
        inv: &inv,
        sysctls: &sysctls,
        knobs,
        generated_at: &generated_at,
    }))
    .into_owned();
    if path.as_os_str() == "-" {
        print!("{text}");
        return Ok(0);
    }
    if args.check {
        // The command that writes it: to the file --check compared with.
        let write = crate::advice::runnable(match &args.out {
            Some(p) => format!(
                "`hostknob doc --out {}`",
                crate::name::shell_word(
                    &std::path::absolute(p)
                        .unwrap_or_else(|_| p.clone())
                        .to_string_lossy()
                )
            ),
            None => "`hostknob doc`".into(),
        });
        let old = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "hostknob: {}: {e}: the document does not exist yet; run {write} to write it",
                    path.display()
                );
                return Ok(2);
            }
        };
        let (old_c, new_c) = (doc::comparable(&old), doc::comparable(&text));
        if old_c == new_c {
            println!("{} is current", path.display());
            return Ok(0);
        }
        let diff = similar::TextDiff::from_lines(&old_c, &new_c);
        print!(
            "{}",
            diff.unified_diff()
                .context_radius(2)
                .header(&path.display().to_string(), "regenerated")
        );
        eprintln!(
            "hostknob: {} is stale: regenerate it with {write}",
            path.display()
        );
        return Ok(2);
    }
    write_doc(&path, &text)?;
    println!("wrote {}", path.display());
    Ok(0)
}

/// Writes the document atomically in its directory (made when missing): a
/// temporary file created afresh, then renamed; a link in its place is
/// refused rather than followed.
fn write_doc(path: &std::path::Path, text: &str) -> Result<()> {
    // A device (`--out /dev/null`) is written as it is: it is no file to replace.
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_char_device()
    }) {
        return crate::root::write_output(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        anyhow::bail!("{}: not a file name", path.display());
    };
    let seam = Root::confined(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    seam.replace_file(&format!("/{name}"), text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
