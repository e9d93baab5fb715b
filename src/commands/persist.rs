use anyhow::{Result, anyhow};

use crate::apply;
use crate::cli::PersistArgs;
use crate::persist;
use crate::render;

pub fn run(args: &PersistArgs) -> Result<i32> {
    let g = &args.change;
    let t = super::OpenHost::open(&g.target)?;
    let manifest = t.manifest(&g.target)?;
    super::in_profile(&manifest, std::slice::from_ref(&args.knob))?;
    let session = t.session(&g.state);
    let knob = apply::select(&manifest, &t.host, std::slice::from_ref(&args.knob), false)?[0];
    let artifact = persist::artifact(knob, &session.ctx, &manifest)
        .map_err(|m| anyhow!("{m}: nothing was changed"))?;
    if !args.install && !args.remove {
        match render::machine(g.format.format.into(), &artifact)? {
            Some(text) => print!("{text}"),
            None => {
                print!("{}", artifact.content);
                if !artifact.content.ends_with('\n') {
                    println!();
                }
                eprint!("{}", render::apply::persist_hints(&artifact));
            }
        }
        return Ok(0);
    }
    let outcome = crate::apply::install::install_or_remove(
        &session,
        knob,
        &artifact,
        args.install,
        args.wait,
    )?;
    match render::machine(g.format.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::persist_table(&outcome, &artifact))
        ),
    }
    Ok(0)
}
