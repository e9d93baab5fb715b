use anyhow::Result;

use crate::apply::{self, ApplyOptions};
use crate::cli::ApplyArgs;
use crate::render;

pub fn run(args: &ApplyArgs) -> Result<i32> {
    let g = &args.change;
    let t = super::OpenHost::open(&g.target)?;
    let manifest = t.manifest(&g.target)?;
    let session = t.session(&g.state);
    let ids = &args.choice.knobs;
    super::in_profile(&manifest, ids)?;
    if let Some(limit) = args.choice.wait_limit {
        crate::journal::set_wait_limit(limit);
    }
    // `--profile NAME` alone: every knob of the profile for this host.
    let all = args.boot || args.choice.all || (manifest.profile.is_some() && ids.is_empty());
    let knobs = apply::select(&manifest, &t.host, ids, all)?;
    let opts = ApplyOptions {
        dry_run: args.dry_run,
        wait: args.choice.wait,
        force: args.force.iter().any(String::is_empty),
        force_knobs: args
            .force
            .iter()
            .filter(|f| !f.is_empty())
            .cloned()
            .collect(),
        ..ApplyOptions::default()
    };
    let outcome = if args.pod {
        let profile = manifest.for_host(&t.host).map(|k| k.id.clone()).collect();
        apply::apply_pod(&session, &manifest, &knobs, &profile, &opts)
    } else if args.boot {
        apply::apply_each(&session, &knobs, &opts)
    } else {
        apply::apply(&session, &knobs, &opts).map_err(|e| name_override(e, &knobs))?
    };
    match render::machine(g.format.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        // --quiet: what happened, not the plan (`--format json` has it).
        None if g.quiet.quiet => print!(
            "{}",
            render::wrap_prose(render::apply::apply_summary(&outcome).trim_start())
        ),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::apply_table(&outcome))
        ),
    }
    // Each failure is said on stderr too: the journal of a boot unit shows it.
    for f in &outcome.failed {
        eprintln!(
            "hostknob: {}: {} (the other knobs were applied)",
            f.id, f.why
        );
    }
    Ok(if outcome.failed.is_empty() { 0 } else { 1 })
}

/// A refusal about an overridden knob says where its value came from.
fn name_override(e: apply::ApplyError, knobs: &[&crate::manifest::Knob]) -> anyhow::Error {
    let text = e.to_string();
    let Some(k) = knobs
        .iter()
        .find(|k| !k.overrides.is_empty() && text.starts_with(&format!("{}: ", k.id)))
    else {
        return e.into();
    };
    let from: Vec<String> = k.overrides.iter().map(|o| o.describe()).collect();
    let tail = ": nothing was changed";
    let head = text.strip_suffix(tail).unwrap_or(&text);
    let tail = if head.len() < text.len() { tail } else { "" };
    anyhow::anyhow!("{head} ({} overridden: {}){tail}", k.id, from.join("; "))
}
