use anyhow::Result;

use crate::apply::{self, ApplyOptions};
use crate::cli::ApplyArgs;
use crate::manifest;
use crate::render;

pub fn run(args: &ApplyArgs) -> Result<i32> {
    let g = &args.change;
    let t = super::OpenHost::open(&g.target)?;
    let manifest = manifest::load(&t.manifest_dir)?;
    let session = t.session(&g.state);
    let knobs = apply::select(&manifest, &t.host, &args.choice.knobs, args.choice.all)?;
    let opts = ApplyOptions {
        dry_run: args.dry_run,
        wait: args.choice.wait,
        ..ApplyOptions::default()
    };
    let outcome = apply::apply(&session, &knobs, &opts)?;
    match render::machine(g.format.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::apply_table(&outcome))
        ),
    }
    Ok(0)
}
