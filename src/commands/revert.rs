use anyhow::{Result, bail};

use crate::apply;
use crate::cli::RevertArgs;
use crate::manifest;
use crate::render;

pub fn run(args: &RevertArgs) -> Result<i32> {
    let g = &args.change;
    let c = &args.choice;
    if let Some(limit) = c.wait_limit {
        crate::journal::set_wait_limit(limit);
    }
    let profile = g.target.profile.is_some();
    if c.knobs.is_empty() && !c.all && !profile {
        bail!("name the knobs to revert, or pass --all or --profile NAME: nothing was changed");
    }
    if c.all && profile {
        bail!(
            "--all reverts everything the journal holds; --profile NAME only that profile's knobs: give one"
        );
    }
    let t = super::OpenHost::open(&g.target)?;
    // The journal, not the manifest, says what to restore: a manifest that no
    // longer loads must not keep a host from being put back (a profile's
    // knobs are known only from it, though).
    let manifest = match t.manifest(&g.target) {
        Ok(m) => Some(m),
        Err(e) if profile => return Err(e),
        Err(e) => {
            eprintln!(
                "hostknob: warning: the manifest does not load ({e}); reverting from the journal alone"
            );
            None
        }
    };
    let session = t.session(&g.state);
    let mut ids = c.knobs.clone();
    if let Some(m) = manifest.as_ref().filter(|m| m.profile.is_some()) {
        super::in_profile(m, &ids)?;
        if ids.is_empty() {
            ids = m.for_host(&t.host).map(|k| k.id.clone()).collect();
            if ids.is_empty() {
                bail!(
                    "profile {} has no knob for host {}: nothing was changed",
                    m.profile.as_deref().unwrap_or_default(),
                    t.host
                );
            }
        }
    }
    let outcome = apply::revert(&session, manifest.as_ref(), &ids, c.wait, args.force)?;
    match render::machine(g.format.format.into(), &outcome)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::apply::revert_table(
                &outcome,
                !args.change.quiet.quiet
            ))
        ),
    }
    if let Some(why) = &outcome.unrecorded {
        eprintln!(
            "hostknob: warning: restored, but not recorded in the ledger: {why}; the journal no \
             longer holds these changes"
        );
    }
    if outcome.exited > 0 {
        eprintln!(
            "hostknob: {} thread(s) moved by apply have exited since: nothing to restore for them",
            outcome.exited
        );
    }
    for line in stale_lines(&outcome)
        .into_iter()
        .chain(left_alone_lines(&outcome))
    {
        eprintln!("hostknob: {}", crate::advice::runnable(line));
    }
    if let Some(m) = &manifest {
        persisted(&session, m, &outcome, &ids, args.persisted, c.wait)?;
    }
    Ok(if outcome.left_alone.is_empty() { 0 } else { 1 })
}

/// The knobs (every one for this host with `--all`) whose persistence file
/// hostknob installed is still there: a reverted change comes back at the
/// next boot. Removed with `--persisted`, else named with the way to remove it.
/// The file is found even when the knob no longer plans here (its target is
/// gone, its value refused now, its persistence changed to runtime).
fn persisted(
    s: &apply::Session,
    m: &manifest::Manifest,
    outcome: &apply::RevertOutcome,
    ids: &[String],
    remove: bool,
    wait: bool,
) -> Result<()> {
    for knob in m.for_host(&s.ctx.name) {
        if !ids.is_empty() && !ids.contains(&knob.id) {
            continue;
        }
        if knob.kind == crate::knob::KindName::KernelCmdline {
            // Its own files were restored; what still boots with the change is named.
            if let Some(k) = outcome.knobs.iter().find(|k| k.id == knob.id) {
                let restored: Vec<&str> = k.changes.iter().map(|g| g.path.as_str()).collect();
                for w in crate::persist::cmdline::after_revert(knob, &s.ctx, &restored) {
                    eprintln!("hostknob: warning: {}: {w}", knob.id);
                }
            }
            continue;
        }
        let exists = |p: &str| matches!(apply::write::content(s.root(), p), Ok(Some(_)));
        // Found by name only: its header must be this knob's (`hostknob-10-gov.conf`
        // is knob `gov`'s phase file and knob `10-gov`'s old name).
        let own = |p: &String| matches!(apply::write::content(s.root(), p), Ok(Some(t)) if crate::persist::is_own(&t, &knob.id));
        let artifact = match crate::persist::artifact(knob, &s.ctx, m) {
            Ok(a) if a.path.as_deref().is_some_and(exists) => a,
            Ok(a) if a.path.is_none() => continue,
            // Installed under an older name (`replaces`), or the knob no longer
            // plans here: its own files by name.
            other => {
                let older = other.map(|a| a.replaces).unwrap_or_default();
                match older
                    .into_iter()
                    .chain(crate::persist::own_files(&knob.id))
                    .find(own)
                {
                    Some(p) => crate::persist::Artifact {
                        knob: knob.id.clone(),
                        mechanism: knob.persistence,
                        path: Some(p),
                        content: String::new(),
                        commands: Vec::new(),
                        notes: Vec::new(),
                        replaces: Vec::new(),
                    },
                    None => continue,
                }
            }
        };
        let path = artifact.path.as_deref().unwrap_or_default();
        if remove {
            apply::install::install_or_remove(s, knob, &artifact, false, wait)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let journaled = outcome.knobs.iter().any(|k| k.id == knob.id);
            eprintln!(
                "hostknob: {}: {}removed its persistence file {path}",
                knob.id,
                if journaled {
                    ""
                } else {
                    "nothing in the journal to restore; "
                }
            );
        } else {
            eprintln!(
                "{}",
                crate::advice::runnable(format!(
                    "hostknob: warning: {} is persisted by {path}, which brings it back at the next boot: run `hostknob persist {} --remove` (or `hostknob revert {} --persisted`)",
                    knob.id, knob.id, knob.id
                ))
            );
        }
    }
    Ok(())
}

/// Per knob, the files a list names: the first few, then how many more.
fn some(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut out = paths[..paths.len().min(SHOWN)].join(", ");
    if paths.len() > SHOWN {
        out += &format!(" and {} more", paths.len() - SHOWN);
    }
    out
}

fn stale_lines(o: &apply::RevertOutcome) -> Vec<String> {
    let mut knobs: Vec<&str> = o.stale.iter().map(|s| s.knob.as_str()).collect();
    knobs.dedup();
    knobs
        .into_iter()
        .map(|k| {
            let mine: Vec<&apply::Stale> = o.stale.iter().filter(|s| s.knob == k).collect();
            let paths: Vec<String> = mine.iter().map(|s| s.path.clone()).collect();
            format!(
                "{k}: stale: {} written in another boot ({}); the reboot reset those kernel values, \
                 so they were dropped from the journal and not written (`--force` writes the values \
                 recorded before anyway)",
                some(&paths),
                mine[0].boot
            )
        })
        .collect()
}

fn left_alone_lines(o: &apply::RevertOutcome) -> Vec<String> {
    o.left_alone
        .iter()
        .map(|l| {
            let show = |v: &Option<String>| match v {
                Some(v) => format!("{v:?}"),
                None => "no file".into(),
            };
            format!(
                "error: {}: {} no longer holds what hostknob wrote (it reads {}, hostknob left {}){}: \
                 left alone and kept in the journal; `hostknob revert {} --force` restores the \
                 value before anyway",
                l.knob,
                l.path,
                show(&l.now),
                show(&l.wrote),
                l.by.as_deref()
                    .map(|b| format!("; changed by {b}"))
                    .unwrap_or_else(|| "; someone else changed it since".into()),
                l.knob
            )
        })
        .collect()
}
