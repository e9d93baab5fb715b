use anyhow::{Result, anyhow};

use crate::apply;
use crate::cli::PersistArgs;
use crate::persist;
use crate::render;

/// Every knob's artifact is made before anything is written, so an unknown
/// knob or one without a mechanism changes nothing; then each is printed,
/// installed or removed in the order given, one document each.
pub fn run(args: &PersistArgs) -> Result<i32> {
    let g = &args.change;
    let t = super::OpenHost::open(&g.target)?;
    let manifest = t.manifest(&g.target)?;
    super::in_profile(&manifest, &args.knobs)?;
    let session = t.session(&g.state);
    let knobs = apply::select(&manifest, &t.host, &args.knobs, false)?;
    let artifacts = knobs
        .iter()
        .map(|k| {
            persist::artifact(k, &session.ctx, &manifest)
                .map_err(|m| anyhow!("{m}: nothing was changed"))
        })
        .collect::<Result<Vec<_>>>()?;
    let format = g.format.format.into();
    for (i, (knob, artifact)) in knobs.iter().zip(&artifacts).enumerate() {
        let text = if !args.install && !args.remove {
            match render::machine(format, artifact)? {
                Some(text) => text,
                None => {
                    eprint!("{}", render::apply::persist_hints(artifact));
                    let mut text = artifact.content.clone();
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text
                }
            }
        } else {
            let outcome = apply::install::install_or_remove(
                &session,
                knob,
                artifact,
                args.install,
                args.wait,
            )
            .map_err(|e| done_before(e.into(), &knobs[..i]))?;
            match render::machine(format, &outcome)? {
                Some(text) => text,
                None => render::wrap_prose(&render::apply::persist_table(&outcome, artifact)),
            }
        };
        // Several YAML documents are one stream; JSON ones follow each other (`jq` reads them).
        if i > 0 && format == render::Format::Yaml {
            println!("---");
        }
        print!("{text}");
    }
    Ok(0)
}

/// An error after some knobs were installed or removed names them: they stay.
fn done_before(e: anyhow::Error, done: &[&crate::manifest::Knob]) -> anyhow::Error {
    if done.is_empty() {
        return e;
    }
    let ids: Vec<&str> = done.iter().map(|k| k.id.as_str()).collect();
    anyhow!("{e:#} ({} before it: done, and left so)", ids.join(", "))
}
