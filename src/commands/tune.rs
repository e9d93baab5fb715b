//! `hostknob tune`: the space and options checked before anything is
//! written, the search run on the host (or replayed from a record), the
//! advice written to `--out`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;

use super::verify::ProbeLine;
use crate::cli::TuneArgs;
use crate::render;
use crate::schema::command::{Better, CommandProbe, MetricSource};
use crate::tune::design::{self, Dim, Guard, Settings};
use crate::tune::host::{self, HostBench};
use crate::tune::output::{self, NotSearched, Record, RecordedDim, ReplayCheck, TuneReport};
use crate::tune::race::Racer;
use crate::tune::replay::Replay;
use crate::tune::{self, search, space};
use crate::verify::{self, paired::Metric};

pub fn run(args: &TuneArgs) -> Result<i32> {
    let guards = args
        .guard
        .iter()
        .map(|g| guard(g))
        .collect::<Result<Vec<_>>>()?;
    if let Some(dir) = &args.replay {
        return replay(args, dir);
    }
    let file = args.space.as_deref().expect("clap requires --space");
    if let Some(out) = &args.out {
        output::check_dir(out)?;
    }
    let g = &args.change;
    crate::probe::require_live(&crate::root::Root::open(&g.target.root.root)?, "tune")?;
    let t = super::OpenHost::open(&g.target)?;
    let manifest = t.manifest(&g.target).ok();
    let sp = space::load(file, manifest.as_ref()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = options(args)?;
    let session = t.session(&g.state);
    let searched: Vec<&space::Entry> = sp.entries.iter().collect();
    let not_searched: Vec<NotSearched> = sp
        .skipped
        .iter()
        .map(|e| NotSearched {
            knob: e.id.clone(),
            reason: e.reason.clone(),
        })
        .collect();
    let quiet = g.quiet.quiet;
    for n in &not_searched {
        eprintln!("hostknob: not searched: {}: {}", n.knob, n.reason);
    }
    if searched.is_empty() {
        bail!(
            "{}: no knob of the space takes effect at runtime: nothing to search",
            file.display()
        );
    }
    let lock = session
        .lock(args.wait)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let result = (|| -> Result<i32> {
        let dims = host::dims(&session, file, &searched)?;
        let mut bench = HostBench::new(
            &session,
            searched.clone(),
            file,
            &opts,
            args.budget.as_secs_f64(),
        )?;
        let mut s = Settings::new(usize::MAX / 4, opts.seed);
        s.min_effect = args.min_effect;
        s.guards = guards;
        let started = Instant::now();
        let budget = args.budget.as_secs_f64();
        let mut progress = |line: &str| {
            if !quiet {
                let used = started.elapsed().as_secs_f64();
                eprintln!(
                    "hostknob: {line}; {} used, {} left",
                    design::minutes(used),
                    design::minutes((budget - used).max(0.0))
                );
            }
        };
        if args.plan {
            return plan_only(&dims, &s, &mut bench, &mut progress, &searched);
        }
        let outcome = search::run(&dims, &s, &mut bench, &mut progress);
        let probe_settings = std::mem::take(&mut bench.settings);
        let warnings = std::mem::take(&mut bench.warnings);
        let command = bench.placed().cloned();
        let restored = bench.finish()?;
        let outcome = outcome?;
        let interrupted = (outcome.stopped.as_deref() == Some(tune::SIGNAL)).then(|| {
            crate::probe::interrupt::signal()
                .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
                .map_or("a signal", |s| s.as_str())
                .to_string()
        });
        let record = Record {
            host: t.host.clone(),
            space: sp.text.clone(),
            probe: opts.probe_name.clone(),
            dims: dims.iter().map(RecordedDim::of).collect(),
            alpha: s.alpha,
            min_effect: s.min_effect,
            seed: s.seed,
            budget_legs: s.budget_legs,
            budget_legs_after_pilot: outcome.plan.budget_legs,
            leg_seconds: outcome.plan.leg_seconds,
            guards: args.guard.clone(),
            rounds: outcome.records.clone(),
            stopped: outcome.stopped.clone(),
        };
        let mut report = TuneReport {
            host: t.host.clone(),
            space: file.display().to_string(),
            probe: opts.probe_name.clone(),
            settings: probe_settings,
            seed: s.seed,
            budget_s: Some(budget),
            not_searched,
            caveats: caveats(&outcome),
            outcome,
            restored: Some(restored),
            interrupted,
            replay: None,
            files: Vec::new(),
            warnings,
        };
        let probe_value = probe_in_manifest(&opts, command.as_ref());
        let out = args.out.as_deref().expect("clap requires --out");
        write(
            out,
            &report_files(&mut report, &searched, &probe_value)?,
            &mut report,
            &record,
            args.svg,
        )?;
        print(&report, g.format.format.into())?;
        Ok(code(&report))
    })();
    if matches!(session.journal().remove_if_empty(), Ok(true)) {
        let _ = lock.remove(session.root(), &session.state_dir);
    }
    result
}

/// `--plan`: the pilot only (nothing written), then the plan and the legs.
fn plan_only(
    dims: &[Dim],
    s: &Settings,
    bench: &mut HostBench,
    progress: &mut dyn FnMut(&str),
    entries: &[&space::Entry],
) -> Result<i32> {
    let mut racer = Racer::new(bench, s, Vec::new(), progress);
    let (pilot, plan) = search::pilot(dims, s, &mut racer)?;
    let stopped = racer.stopped.is_some();
    if let Some(p) = pilot {
        println!("pilot (as found twice, nothing written): {}", p.words);
    }
    for (d, e) in dims.iter().zip(entries) {
        let found = d
            .as_found
            .map(|j| format!(" (the host has {})", d.values[j]))
            .unwrap_or_default();
        println!(
            "knob {}: {} values{found}: {}; legs per round: {} (current, sham, each value)",
            d.id,
            d.values.len(),
            d.values.join(", "),
            2 + d.steps()
        );
        let _ = e;
    }
    for l in plan.words() {
        println!("{l}");
    }
    Ok(if stopped { 130 } else { 0 })
}

/// The verify options the legs run with: the built-in probe, or the command.
fn options(args: &TuneArgs) -> Result<verify::Options> {
    let command = (args.probe == "command")
        .then(|| command_probe(args))
        .transpose()?;
    let name = if command.is_some() {
        "wakeup".to_string()
    } else {
        args.probe.clone()
    };
    if !crate::schema::Probe::parse(&name).is_some_and(crate::schema::Probe::is_latency) {
        bail!(
            "--probe {name}: tune compares latency distributions or a command's metric (use {}, or command)",
            crate::schema::Probe::latency_names()
        );
    }
    let extra: Vec<String> = if command.is_some() {
        Vec::new()
    } else {
        args.probe_args.clone()
    };
    let probe = match ProbeLine::try_parse_from(std::iter::once(name.clone()).chain(extra)) {
        Ok(p) => p.probe,
        Err(e) => bail!(
            "probe options after `--`: {}",
            e.to_string().lines().next().unwrap_or("invalid")
        ),
    };
    Ok(verify::Options {
        rounds: design::FIRST_LOOK,
        max_rounds: None,
        settle: args.settle,
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        }),
        probe_name: if command.is_some() {
            "command".into()
        } else {
            name
        },
        probe: super::probe::latency_probe(&probe)?,
        wait: args.wait,
        force: false,
        command: command.map(Box::new),
    })
}

/// `--probe command -- CMD...` as a manifest's command probe, checked as one.
fn command_probe(args: &TuneArgs) -> Result<CommandProbe> {
    if args.probe_args.is_empty() {
        bail!("--probe command: give the command after `--` (`-- ./bench.sh --quick`)");
    }
    let metric = match args.metric.as_deref() {
        Some(m) if m.starts_with("regex:") => MetricSource {
            regex: Some(m[6..].into()),
            ..Default::default()
        },
        Some(m) if m.starts_with("json:") => MetricSource {
            json: Some(m[5..].into()),
            ..Default::default()
        },
        Some(m) => bail!("--metric {m}: give `regex:RE` (one group: the number) or `json:PATH`"),
        None => bail!(
            "--probe command needs --metric: `regex:RE` (one group: the number) or `json:PATH`"
        ),
    };
    let better = match args.better.as_str() {
        "lower" => Better::Lower,
        "higher" => Better::Higher,
        b => bail!("--better {b}: lower or higher"),
    };
    let c = CommandProbe {
        command: args.probe_args.clone(),
        metric,
        unit: args.unit.clone(),
        better,
        samples: args.samples,
        timeout: None,
        shell: false,
        cpus: None,
    };
    if let Some((field, m)) = c.check().into_iter().next() {
        bail!(
            "--probe command: {}: {m}",
            field.trim_start_matches("verify.probe.")
        );
    }
    Ok(c)
}

/// `METRIC:no-higher:PCT` or `METRIC:no-lower:PCT`.
fn guard(text: &str) -> Result<Guard> {
    let bad = || {
        anyhow::anyhow!(
            "--guard {text}: give METRIC:no-higher:PCT or METRIC:no-lower:PCT (`p99:no-higher:5%`)"
        )
    };
    let mut parts = text.splitn(3, ':');
    let (Some(m), Some(way), Some(pct)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let metric: Metric = serde_yaml::from_str(m).map_err(|_| bad())?;
    let pct = crate::cli::parse_percent(pct).map_err(|_| bad())?;
    let upper = match way {
        "no-higher" => true,
        "no-lower" => false,
        _ => return Err(bad()),
    };
    Ok(Guard {
        metric,
        upper,
        limit: if upper { 1.0 + pct } else { 1.0 - pct },
        text: text.to_string(),
    })
}

fn caveats(o: &search::Outcome) -> Vec<String> {
    let mut out = vec![
        "a one-knob-at-a-time search: knobs that help only together are not looked for".to_string(),
    ];
    if o.partial {
        out.push(format!(
            "PARTIAL: {} stopped the search before its end: nothing is advised; the report lists what was decided",
            o.stopped.as_deref().unwrap_or(tune::SIGNAL)
        ));
    }
    if !o.shams.claimed.is_empty() {
        out.push(o.shams.words.clone());
    }
    out
}

/// The knob files of the shipped knobs, by file name.
fn report_files(
    r: &mut TuneReport,
    entries: &[&space::Entry],
    probe: &serde_yaml::Value,
) -> Result<Vec<(String, String)>> {
    let date = crate::manifest::ledger::today();
    let mut files = Vec::new();
    for a in &r.outcome.shipped {
        let e = entries
            .iter()
            .find(|e| e.id == a.knob)
            .context("a shipped knob of the space")?;
        let name = format!("{}.yaml", crate::name::slug(&e.id));
        files.push((
            name.clone(),
            output::knob_file(e, a, &r.outcome, &r.host, &date, probe)?,
        ));
        r.files.push(name);
    }
    Ok(files)
}

/// The probe as a knob file's `verify.probe`: its name, or the command.
fn probe_in_manifest(
    opts: &verify::Options,
    placed: Option<&verify::command::Placed>,
) -> serde_yaml::Value {
    match (&opts.command, placed) {
        (Some(c), _) => serde_yaml::to_value(c.as_ref()).unwrap_or(serde_yaml::Value::Null),
        _ => serde_yaml::Value::String(opts.probe_name.clone()),
    }
}

fn write(
    dir: &Path,
    knobs: &[(String, String)],
    r: &mut TuneReport,
    record: &Record,
    svg: bool,
) -> Result<()> {
    let mut files = knobs.to_vec();
    let json = serde_json::to_string_pretty(&crate::contract::Versioned::new(&*r))? + "\n";
    files.push((output::REPORT_JSON.into(), json));
    files.push((output::REPORT_TEXT.into(), render::tune::table(r)));
    files.push((
        output::SAMPLES.into(),
        serde_json::to_string(record)? + "\n",
    ));
    if svg {
        files.push((output::SVG.into(), render::tune::path(r)));
    }
    output::write_dir(dir, &files)
}

fn print(r: &TuneReport, format: render::Format) -> Result<()> {
    match render::machine(format, r)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::wrap_prose(&render::tune::table(r))),
    }
    Ok(())
}

/// 1 when the host is not as found or a replay differs, 128 + signal when stopped, else 0.
fn code(r: &TuneReport) -> i32 {
    if r.restored == Some(false) || r.replay.as_ref().is_some_and(|p| !p.same) {
        1
    } else if r.interrupted.is_some() {
        128 + crate::probe::interrupt::signal().unwrap_or(libc::SIGINT)
    } else {
        0
    }
}

/// `--replay DIR`: the search again on the recorded rounds; the host untouched.
fn replay(args: &TuneArgs, dir: &Path) -> Result<i32> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .with_context(|| format!("--replay {}: reading {name}", dir.display()))
    };
    let record: Record = serde_json::from_str(&read(output::SAMPLES)?).with_context(|| {
        format!(
            "--replay {}: {} is not a tune record",
            dir.display(),
            output::SAMPLES
        )
    })?;
    let recorded: serde_json::Value = serde_json::from_str(&read(output::REPORT_JSON)?)?;
    let dims: Vec<Dim> = record.dims.iter().map(RecordedDim::dim).collect();
    let mut s = Settings::new(record.budget_legs, record.seed);
    s.alpha = record.alpha;
    s.min_effect = record.min_effect;
    s.guards = record
        .guards
        .iter()
        .map(|g| guard(g))
        .collect::<Result<Vec<_>>>()?;
    let mut bench = Replay::new(record.rounds);
    bench.budget_legs = Some(record.budget_legs_after_pilot);
    bench.leg_seconds = record.leg_seconds;
    bench.stopped = record.stopped.clone();
    let outcome = search::run(&dims, &s, &mut bench, &mut |_| {})?;
    bench.finish()?;
    let replayed = serde_json::to_value(&outcome)?;
    let differences = output::differences(&recorded["outcome"], &replayed);
    let report = TuneReport {
        host: record.host,
        space: recorded["space"].as_str().unwrap_or_default().to_string(),
        probe: record.probe,
        settings: recorded["settings"].clone(),
        seed: record.seed,
        budget_s: recorded["budget_s"].as_f64(),
        not_searched: serde_json::from_value(recorded["not_searched"].clone()).unwrap_or_default(),
        caveats: caveats(&outcome),
        outcome,
        restored: None,
        interrupted: None,
        replay: Some(ReplayCheck {
            same: differences.is_empty(),
            differences,
        }),
        files: serde_json::from_value(recorded["files"].clone()).unwrap_or_default(),
        warnings: Vec::new(),
    };
    print(&report, args.change.format.format.into())?;
    Ok(code(&report))
}
