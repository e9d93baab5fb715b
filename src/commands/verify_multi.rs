//! `verify KNOB --sweep ...` and `verify K1 K2 ...`: the arguments checked
//! before anything is written, the plan said, the report printed.

use std::io::IsTerminal;

use anyhow::{Result, bail};

use crate::apply::Session;
use crate::cli::VerifyArgs;
use crate::manifest::{Knob, Manifest};
use crate::render;
use crate::verify::{self, bundle, sweep};

pub fn run(
    args: &VerifyArgs,
    manifest: &Manifest,
    host: &str,
    session: &Session,
    knob: &Knob,
    opts: &verify::Options,
) -> Result<i32> {
    let quiet = args.change.quiet.quiet;
    if args.plot.is_some() && args.sweep.is_empty() {
        bail!(
            "--plot draws one knob's legs, or with --sweep its curve: a bundle has no plot; leave --plot out"
        );
    }
    let show = !quiet && std::io::stderr().is_terminal();
    let mut first = true;
    // The plan (legs, estimated time) is said whatever the terminal; the
    // per-leg progress only to a person watching.
    let mut progress = |line: &str| {
        if std::mem::take(&mut first) {
            if !quiet {
                eprintln!("hostknob: {line}");
            }
        } else if show {
            eprintln!("hostknob: {line}");
        }
    };
    let format = args.change.format.format.into();
    if !args.sweep.is_empty() {
        if !args.more.is_empty() {
            bail!(
                "--sweep takes one knob (got {}): a bundle's knobs keep their manifest values",
                1 + args.more.len()
            );
        }
        let so = sweep::SweepOptions {
            values: args.sweep.clone(),
            tolerance: args.knee_tolerance,
        };
        let mut r = sweep::run(session, knob, opts, &so, &mut progress)?;
        interrupted(&r.interrupted, r.rounds, r.restored, &knob.id);
        if r.interrupted.is_none() {
            verify::record_sweep(session, knob, &mut r)?;
        }
        if let Some(path) = &args.svg {
            super::deprecated("--svg", &format!("--plot {}", path.display()));
        }
        if let Some(path) = args.plot.as_ref().or(args.svg.as_ref()) {
            let svg = render::sweep::curve(&r)?;
            crate::root::write_output(path, svg.as_bytes())
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        match render::machine(format, &r)? {
            Some(text) => print!("{text}"),
            None => print!("{}", render::wrap_prose(&render::sweep::sweep_table(&r))),
        }
        let any = r.points.iter().map(|p| p.verdict);
        return Ok(code(r.restored, r.interrupted.is_some(), any));
    }
    let mut ids = vec![args.knob.clone()];
    ids.extend(args.more.iter().cloned());
    if let Some(i) = (1..ids.len()).find(|&i| ids[..i].contains(&ids[i])) {
        bail!("{} is given twice: a bundle's knobs are distinct", ids[i]);
    }
    let knobs = crate::apply::select(manifest, host, &ids, false)?;
    let mut r = bundle::run(session, &knobs, opts, &mut progress)?;
    interrupted(&r.interrupted, r.rounds, r.restored, &ids.join(" "));
    if r.interrupted.is_none() {
        verify::record_bundle(session, &knobs, &mut r)?;
    }
    match render::machine(format, &r)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::wrap_prose(&render::sweep::bundle_table(&r))),
    }
    let all = std::iter::once(r.together.verdict).chain(r.shares.iter().map(|s| s.verdict));
    Ok(code(r.restored, r.interrupted.is_some(), all))
}

/// `ids`: the knobs to revert if the run could not, as revert takes them.
fn interrupted(sig: &Option<String>, rounds: usize, restored: bool, ids: &str) {
    if let Some(sig) = sig {
        eprintln!(
            "{}",
            crate::advice::runnable(format!(
                "hostknob: verify: interrupted by {sig} after {rounds} complete rounds; {}; the report is PARTIAL and nothing is recorded",
                if restored {
                    "the knobs were reverted and read back".to_string()
                } else {
                    format!(
                        "the host was NOT restored (see above): run `hostknob revert {ids}` for it"
                    )
                }
            ))
        );
    }
}

/// As `verify`'s: 1 not restored, 128 + signal, 3 when any comparison is inconclusive, else 0.
fn code(
    restored: bool,
    interrupted: bool,
    mut verdicts: impl Iterator<Item = verify::paired::Verdict>,
) -> i32 {
    if !restored {
        1
    } else if interrupted {
        128 + crate::probe::interrupt::signal().unwrap_or(libc::SIGINT)
    } else if verdicts.any(|v| v == verify::paired::Verdict::Inconclusive) {
        3
    } else {
        0
    }
}
