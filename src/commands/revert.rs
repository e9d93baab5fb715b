use anyhow::{Result, bail};

use crate::apply;
use crate::cli::{Global, RevertArgs};
use crate::manifest;
use crate::render;

pub fn run(g: &Global, args: &RevertArgs) -> Result<i32> {
    let c = &args.choice;
    if c.knobs.is_empty() && !c.all {
        bail!("name the knobs to revert, or pass --all: nothing was changed");
    }
    let t = super::OpenHost::open(g)?;
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
    let session = t.session(g);
    let outcome = apply::revert(&session, manifest.as_ref(), &c.knobs, c.wait)?;
    match render::machine(g.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::revert_table(&outcome))
        ),
    }
    Ok(0)
}
