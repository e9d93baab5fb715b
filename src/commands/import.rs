use anyhow::{Result, bail};

use crate::cli::{ImportArgs, ImportTool};
use crate::import::tuned;
use crate::render;
use crate::root::Root;

pub fn run(args: &ImportArgs) -> Result<i32> {
    let ImportTool::Tuned = args.tool;
    let root = Root::open(&args.root.root)?;
    if args.list {
        let found = crate::peers::tuned::list(&root, args.from.as_deref())?;
        if found.is_empty() {
            bail!(
                "no tuned profiles found (looked for NAME/tuned.conf in {}); give --from DIR",
                match &args.from {
                    Some(d) => d.display().to_string(),
                    None => crate::peers::tuned::load::LOAD_DIRECTORIES.join(", "),
                }
            );
        }
        let w = found.iter().map(|f| f.0.len()).max().unwrap_or(0);
        let d = found.iter().map(|f| f.1.len()).max().unwrap_or(0);
        for (name, dir, summary) in found {
            println!("{name:w$}  {dir:d$}  {}", render::escape_controls(&summary));
        }
        return Ok(0);
    }
    let (Some(profile), Some(out)) = (&args.profile, &args.out) else {
        bail!("give PROFILE and --out DIR, or --list");
    };
    let host = crate::manifest::host::resolve(&root, args.host.host.as_deref()).name;
    let imp = tuned::import(&root, args.from.as_deref(), profile, &host)?;
    for line in &imp.not_imported {
        eprintln!("hostknob: not imported: {}", render::escape_controls(line));
    }
    let stale = tuned::write_dir(out, &imp)?;
    let knobs = imp
        .outputs
        .iter()
        .filter(|(n, _)| n.ends_with(".yaml") && !n.starts_with("profiles/"))
        .count();
    println!(
        "imported tuned profile {} ({}) into {}: {knobs} knob(s) and profile {} (apply --profile {}); {} of {} option lines imported or used, {} not imported (NOT-IMPORTED.md)",
        imp.profile,
        imp.files.join(", "),
        out.display(),
        crate::name::slug(&imp.profile),
        crate::name::slug(&imp.profile),
        imp.imported,
        imp.total,
        imp.total - imp.imported
    );
    for s in stale {
        eprintln!(
            "hostknob: warning: {} is from an earlier import and was not written now: remove it if it is no longer wanted",
            out.join(s).display()
        );
    }
    Ok(0)
}
