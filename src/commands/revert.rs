use anyhow::{Result, bail};

use crate::apply;
use crate::cli::RevertArgs;
use crate::manifest;
use crate::render;

pub fn run(args: &RevertArgs) -> Result<i32> {
    let g = &args.change;
    let c = &args.choice;
    if c.knobs.is_empty() && !c.all {
        bail!("name the knobs to revert, or pass --all: nothing was changed");
    }
    let t = super::OpenHost::open(&g.target)?;
    // The journal, not the manifest, says what to restore: a manifest that no
    // longer loads must not keep a host from being put back.
    let manifest = match manifest::load(&t.manifest_dir) {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!(
                "hostknob: warning: the manifest does not load ({e}); reverting from the journal alone"
            );
            None
        }
    };
    let session = t.session(&g.state);
    let outcome = apply::revert(&session, manifest.as_ref(), &c.knobs, c.wait)?;
    match render::machine(g.format.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::revert_table(&outcome))
        ),
    }
    if let Some(m) = &manifest {
        persisted(&session, m, &c.knobs, args.persisted, c.wait)?;
    }
    Ok(0)
}

/// The knobs (every one for this host with `--all`) whose persistence file
/// hostknob installed is still there: a reverted change comes back at the
/// next boot. Removed with `--persisted`, else named with the way to remove it.
fn persisted(
    s: &apply::Session,
    m: &manifest::Manifest,
    ids: &[String],
    remove: bool,
    wait: bool,
) -> Result<()> {
    for knob in m.for_host(&s.ctx.name) {
        if !ids.is_empty() && !ids.contains(&knob.id) {
            continue;
        }
        let Ok(artifact) = crate::persist::artifact(knob, &s.ctx, m) else {
            continue;
        };
        let Some(path) = artifact.path.as_deref() else {
            continue;
        };
        // A file installed under an older name counts too (`replaces`).
        let path = match apply::write::content(s.root(), path) {
            Ok(Some(_)) => path,
            _ => match artifact.replaces.first() {
                Some(old) => old.as_str(),
                None => continue,
            },
        };
        if remove {
            apply::install::install_or_remove(s, knob, &artifact, false, wait)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            eprintln!("hostknob: {}: removed its persistence file {path}", knob.id);
        } else {
            eprintln!(
                "hostknob: warning: {} is persisted by {path}, which brings it back at the next boot: run `hostknob persist {} --remove` (or `hostknob revert {} --persisted`)",
                knob.id, knob.id, knob.id
            );
        }
    }
    Ok(())
}
