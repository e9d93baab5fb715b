use anyhow::{Result, bail};
use clap::Parser;

use crate::cli::{ProbeCommand, VerifyArgs};
use crate::render;
use crate::schema::Probe;
use crate::verify;

/// Parses the probe's own options as `hostknob probe NAME ...` would.
#[derive(Parser, Debug)]
#[command(name = "hostknob probe", no_binary_name = true)]
pub(super) struct ProbeLine {
    #[command(subcommand)]
    pub(super) probe: ProbeCommand,
}

pub fn run(args: &VerifyArgs) -> Result<i32> {
    let g = &args.change;
    crate::probe::require_live(&crate::root::Root::open(&g.target.root.root)?, "verify")?;
    let t = crate::commands::OpenHost::open(&g.target)?;
    let manifest = t.manifest(&g.target)?;
    super::in_profile(&manifest, std::slice::from_ref(&args.knob))?;
    let knob =
        crate::apply::select(&manifest, &t.host, std::slice::from_ref(&args.knob), false)?[0];
    let command = match (&args.probe, &knob.verify) {
        (None, Some(v)) => match &v.probe {
            crate::schema::command::ProbeSpec::Command(c) => Some(c.clone()),
            _ => None,
        },
        _ => None,
    };
    if command.is_some() && !args.probe_args.is_empty() {
        bail!(
            "{}: verify.probe is a command: options after `--` are for a built-in probe (give the command's own in the manifest, or pass --probe NAME)",
            knob.id
        );
    }
    let name = match (&args.probe, &knob.verify) {
        (Some(p), _) => p.clone(),
        // The command runs instead; the wakeup probe's placement only picks
        // the CPU whose idle counters are watched.
        (None, Some(_)) if command.is_some() => "wakeup".to_string(),
        (None, Some(v)) => v.probe.name().to_string(),
        (None, None) if verify::noise::default_probe(knob).is_some() => "noise".to_string(),
        (None, None) => bail!(
            "{}:{}: verify: knob {} declares no probe; add `verify: {{probe: wakeup, expect: ...}}` or pass --probe",
            knob.source.file.display(),
            knob.source.first_line,
            knob.id
        ),
    };
    if !Probe::parse(&name).is_some_and(Probe::is_latency) {
        bail!(
            "verify compares latency distributions: probe {name:?} is not one (use {}; run `hostknob probe {name}` for the other)",
            Probe::latency_names()
        );
    }
    let line = std::iter::once(name.clone()).chain(args.probe_args.iter().cloned());
    let probe = match ProbeLine::try_parse_from(line) {
        Ok(p) => p.probe,
        Err(e) => bail!(
            "probe options after `--`: {}",
            e.to_string().lines().next().unwrap_or("invalid")
        ),
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    });
    let session = t.session(&g.state);
    let opts = verify::Options {
        rounds: args.rounds,
        max_rounds: args.max_rounds,
        settle: args.settle,
        seed,
        probe_name: match command {
            Some(_) => "command".to_string(),
            None => name,
        },
        probe: crate::commands::probe::latency_probe(&probe)?,
        wait: args.wait,
        force: args.force,
        command,
    };
    if !args.sweep.is_empty() || !args.more.is_empty() {
        return super::verify_multi::run(args, &manifest, &t.host, &session, knob, &opts);
    }
    // A line per round, with the time left, wherever stderr goes: a run
    // redirected to a file still says how far it is.
    let quiet = g.quiet.quiet;
    let mut report = verify::run(&session, knob, &opts, &mut |line| {
        if !quiet {
            eprintln!("hostknob: {line}")
        }
    })?;
    match &report.interrupted {
        Some(sig) => eprintln!(
            "{}",
            crate::advice::runnable(format!(
                "hostknob: verify {}: interrupted by {sig} {}; {}; the report is PARTIAL and nothing is recorded",
                knob.id,
                match report.rounds {
                    0 => "before the first complete round (no complete round)".to_string(),
                    n => format!("after {n} complete rounds"),
                },
                if report.restored {
                    "the knob was reverted and read back".to_string()
                } else {
                    format!(
                        "the host was NOT restored (see above): run `hostknob revert {}` for it",
                        knob.id
                    )
                }
            ))
        ),
        None => verify::record(&session, knob, &mut report)?,
    }
    if let Some(path) = &args.plot {
        let svg = render::verify::plot(&report)?;
        crate::root::write_output(path, svg.as_bytes())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    match render::machine(g.format.format.into(), &report)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::wrap_prose(&render::verify::table(&report))),
    }
    Ok(verify::exit_code(&report))
}
