//! `hostknob probe ...`: parse options, run a probe, render, write `--raw`.

use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use crate::cli::{
    CommonArgs, GapArgs, NoiseArgs, ProbeArgs, ProbeCommand, RpcArgs, TimerArgs, WakeupArgs,
};
use crate::probe::latency::LatencyProbe;
use crate::probe::{self, Gaps, idle_cpu, noise, rpc, rss, timer, wakeup};
use crate::render;
use crate::root::Root;
use crate::schema::Probe;
use crate::stats;

/// Writes `--plot`: one distribution, titled with the host and the probe.
fn plot(common: &CommonArgs, title: &str, samples_ns: &[u64]) -> Result<()> {
    if let Some(path) = &common.plot {
        let svg = render::svg::cdf(
            title,
            render::svg::LATENCY_US,
            &[render::svg::Series {
                name: "samples",
                values: &samples_ns
                    .iter()
                    .map(|&v| v as f64 / 1e3)
                    .collect::<Vec<_>>(),
            }],
        )?;
        crate::root::write_output(path, svg.as_bytes())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs the probe; Ctrl-C (SIGTERM, SIGHUP) stops it within a moment, even
/// in a long idle gap, and exits 128 + the signal's number (130 for Ctrl-C).
pub fn run(args: &ProbeArgs) -> Result<i32> {
    probe::interrupt::install()?;
    match measure(args) {
        Err(_) if probe::cancelled() => {
            let sig = probe::interrupt::signal().unwrap_or(libc::SIGINT);
            eprintln!(
                "hostknob: probe {}: interrupted by {}: nothing is reported (no sample was complete, or the run failed as it stopped); PM QoS, if it was held, is released",
                name(&args.probe),
                nix::sys::signal::Signal::try_from(sig).map_or("a signal", |s| s.as_str()),
            );
            Ok(128 + sig)
        }
        r => r,
    }
}

fn name(p: &ProbeCommand) -> &'static str {
    match p {
        ProbeCommand::Wakeup(_) => "wakeup",
        ProbeCommand::Timer(_) => "timer",
        ProbeCommand::Rpc(_) => "rpc",
        ProbeCommand::Noise(_) => "noise",
        ProbeCommand::IdleCpu(_) => "idle-cpu",
        ProbeCommand::Rss(_) => "rss",
    }
}

fn measure(args: &ProbeArgs) -> Result<i32> {
    let g = args;
    let root = Root::open(&g.root)?;
    probe::require_live(&root, "probe")?;
    let host = crate::manifest::host::resolve(&root, g.host.as_deref()).name;
    match &args.probe {
        ProbeCommand::Wakeup(a) => {
            let r = wakeup::run(&root, &wakeup_options(a)?)?;
            for w in &r.warnings {
                eprintln!("hostknob: warning: {w}");
            }
            if let Some(p) = &a.common.raw {
                let header = r.raw_header();
                let header: Vec<&str> = header.iter().map(String::as_str).collect();
                stats::write_csv(p, &header, r.raw_rows())?;
            }
            let samples: Vec<u64> = r.raw.iter().map(|s| s.latency_ns).collect();
            plot(&a.common, &format!("{host}: wakeup latency"), &samples)?;
            emit(g, &r, render::probe::wakeup)?;
            let taken = format!(
                "{} of {} samples",
                r.latency.summary.samples, r.settings.samples
            );
            finish("wakeup", r.interrupted.as_deref(), &taken)
        }
        ProbeCommand::Timer(a) => {
            let r = timer::run(&root, &timer_options(a))?;
            if let Some(p) = &a.common.raw {
                let rows = r.raw.iter().enumerate().map(|(i, &l)| vec![i as u64, l]);
                stats::write_csv(p, &["sample", "lateness_ns"], rows)?;
            }
            plot(&a.common, &format!("{host}: timer lateness"), &r.raw)?;
            emit(g, &r, render::probe::timer)?;
            let taken = format!(
                "{} of {} samples",
                r.latency.summary.samples, r.settings.loops
            );
            finish("timer", r.interrupted.as_deref(), &taken)
        }
        ProbeCommand::Rpc(a) => {
            let r = rpc::run(&root, &rpc_options(a)?)?;
            if let Some(p) = &a.common.raw {
                let rows = r
                    .raw
                    .iter()
                    .enumerate()
                    .map(|(i, &(gap, rtt))| vec![i as u64, gap, rtt]);
                stats::write_csv(p, &["sample", "gap_ns", "rtt_ns"], rows)?;
            }
            let rtts: Vec<u64> = r.raw.iter().map(|&(_, rtt)| rtt).collect();
            plot(&a.common, &format!("{host}: request round trips"), &rtts)?;
            emit(g, &r, render::probe::rpc)?;
            let taken = format!(
                "{} of {} samples",
                r.latency.summary.samples, r.settings.samples
            );
            finish("rpc", r.interrupted.as_deref(), &taken)
        }
        ProbeCommand::Noise(a) => {
            let r = noise::run(&root, &noise_options(a)?)?;
            if let Some(w) = &r.attribution_note {
                eprintln!("hostknob: note: {w}");
            }
            for w in &r.warnings {
                eprintln!("hostknob: warning: {w}");
            }
            if let Some(p) = &a.common.raw {
                let rows = r.cpus.iter().flat_map(|c| {
                    c.raw
                        .iter()
                        .map(move |&(at, len)| vec![c.cpu as u64, at, len])
                });
                stats::write_csv(p, &["cpu", "start_ns", "gap_ns"], rows)?;
            }
            let gaps: Vec<u64> = r
                .cpus
                .iter()
                .flat_map(|c| c.raw.iter().map(|g| g.1))
                .collect();
            plot(&a.common, &format!("{host}: OS noise gaps"), &gaps)?;
            emit(g, &r, render::noise::table)?;
            let measured = r.cpus.iter().map(|c| c.measured_ns).max().unwrap_or(0);
            let taken = format!(
                "{:.1} of {} s",
                measured as f64 / 1e9,
                r.settings.duration_ms as f64 / 1e3
            );
            finish("noise", r.interrupted.as_deref(), &taken)
        }
        ProbeCommand::IdleCpu(a) => {
            let target = match (&a.pid, &a.cmd) {
                (Some(p), _) => idle_cpu::Subject::Pid(*p),
                (None, Some(cmd)) => idle_cpu::Subject::Cmd(cmd.clone()),
                (None, None) => bail!("give --pid PID or --cmd COMMAND..."),
            };
            let r = idle_cpu::run(
                &root,
                &idle_cpu::Options {
                    target,
                    windows: a.windows,
                    window: a.window,
                    settle: a.settle.unwrap_or(Duration::ZERO),
                },
            )?;
            emit(g, &r, render::probe::idle_cpu)?;
            let taken = format!("{} of {} windows", r.windows.len(), r.settings.windows);
            match finish("idle-cpu", r.interrupted.as_deref(), &taken)? {
                0 => partial(r.note.as_deref()),
                code => Ok(code),
            }
        }
        ProbeCommand::Rss(a) => {
            if a.self_burst {
                let r = rss::run_self_burst_in_helper(&rss::BurstOptions {
                    mib: a.burst_mib,
                    threads: a.threads,
                    duration: a.duration,
                })?;
                if let Some(p) = &a.raw {
                    let rows = r.legs.iter().flat_map(|l| {
                        l.series
                            .iter()
                            .map(move |s| rss_row(Some(l.background_thread_set), s))
                    });
                    stats::write_csv(p, &RSS_HEADER, rows)?;
                }
                emit(g, &r, render::probe::rss_self)?;
                let taken = format!("{} of 2 legs", r.legs.len());
                finish("rss", r.interrupted.as_deref(), &taken)
            } else {
                let pid = a.pid.expect("clap requires --pid or --self-burst");
                let r = rss::run_pid(&root, pid, a.duration)?;
                if let Some(p) = &a.raw {
                    let rows = r.series.iter().map(|s| rss_row(None, s));
                    stats::write_csv(p, &RSS_HEADER, rows)?;
                }
                emit(g, &r, render::probe::rss_pid)?;
                let secs = r.series.last().map_or(0.0, |m| m.t_ms as f64 / 1000.0);
                let taken = format!("{secs:.1} of {} s", r.duration_s);
                match finish("rss", r.interrupted.as_deref(), &taken)? {
                    0 => partial(r.note.as_deref()),
                    code => Ok(code),
                }
            }
        }
    }
}

fn gaps(a: &GapArgs) -> Result<Gaps> {
    match (&a.gap_ms, &a.gap_us) {
        (_, Some(us)) => Gaps::parse(us, 1, "--gap-us"),
        (Some(ms), None) => Gaps::parse(ms, 1000, "--gap-ms"),
        (None, None) => Ok(Gaps::SEED),
    }
}

fn wakeup_options(a: &WakeupArgs) -> Result<wakeup::Options> {
    Ok(wakeup::Options {
        waker_cpu: a.waker_cpu,
        sleeper_cpu: a.sleeper_cpu,
        samples: a.samples,
        gaps: gaps(&a.gaps)?,
        mechanism: a.mechanism.into(),
        pmqos_us: a.common.pmqos_us,
    })
}

fn timer_options(a: &TimerArgs) -> timer::Options {
    timer::Options {
        interval: a.interval,
        loops: a.loops,
        cpu: a.cpu,
        priority: a.priority,
        mlock: a.mlock,
        pmqos_us: a.common.pmqos_us,
    }
}

pub fn noise_options(a: &NoiseArgs) -> Result<noise::Options> {
    use crate::cli::Attribution as A;
    use crate::probe::noise_attrib::Method;
    Ok(noise::Options {
        cpus: match &a.cpus {
            Some(t) => {
                crate::cpulist::CpuList::parse(t).map_err(|e| anyhow::anyhow!("--cpus {t}: {e}"))?
            }
            None => crate::cpulist::CpuList::default(),
        },
        duration: a.duration,
        threshold: a.threshold,
        priority: a.priority,
        attribution: match a.attribution {
            A::Auto => Method::Auto,
            A::Tracefs => Method::Tracefs,
            A::Counts => Method::Counts,
        },
        pmqos_us: a.common.pmqos_us,
    })
}

fn rpc_options(a: &RpcArgs) -> Result<rpc::Options> {
    let unescape =
        |flag: &str, t: &str| rpc::unescape(t).map_err(|e| anyhow::anyhow!("{flag} {t:?}: {e}"));
    let payload = match &a.payload {
        Some(p) => unescape("--payload", p)?,
        None => rpc::pattern(a.size),
    };
    let expect = a
        .expect
        .as_deref()
        .map(|e| unescape("--expect", e))
        .transpose()?;
    Ok(rpc::Options {
        proto: a.proto.into(),
        samples: a.samples,
        gaps: gaps(&a.gaps)?,
        client_cpu: a.client_cpu,
        server_cpu: a.server_cpu,
        bind: a.bind,
        connect: a.connect.clone(),
        payload,
        expect,
        timeout: a.timeout,
        pmqos_us: a.common.pmqos_us,
    })
}

/// The latency probe `verify` runs for a parsed `probe` command line; the
/// others measure something else than latency and are refused.
pub fn latency_probe(probe: &ProbeCommand) -> Result<LatencyProbe> {
    Ok(match probe {
        ProbeCommand::Wakeup(a) => LatencyProbe::Wakeup(wakeup_options(a)?),
        ProbeCommand::Timer(a) => LatencyProbe::Timer(timer_options(a)),
        ProbeCommand::Rpc(a) => LatencyProbe::Rpc(rpc_options(a)?),
        ProbeCommand::Noise(a) => LatencyProbe::Noise(noise_options(a)?),
        other => bail!(
            "verify compares latency distributions: use the {} probe ({} is run with `hostknob probe`)",
            Probe::latency_names(),
            other.probe()
        ),
    })
}

const RSS_HEADER: [&str; 7] = [
    "background_thread",
    "t_ms",
    "rss_kb",
    "hwm_kb",
    "pss_kb",
    "lazyfree_kb",
    "corrected_kb",
];

fn rss_row(bg: Option<bool>, s: &rss::MemSample) -> Vec<String> {
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    vec![
        bg.map(|b| b.to_string()).unwrap_or_default(),
        s.t_ms.to_string(),
        s.rss_kb.to_string(),
        s.hwm_kb.to_string(),
        opt(s.pss_kb),
        opt(s.lazyfree_kb),
        s.corrected_kb.to_string(),
    ]
}

fn emit<T: Serialize + crate::contract::Contract>(
    g: &ProbeArgs,
    value: &T,
    table: fn(&T) -> String,
) -> Result<i32> {
    match render::machine(g.format.into(), value)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::wrap_prose(&table(value))),
    }
    Ok(0)
}

/// The exit status once a result is printed: 128 + the signal (130 for
/// Ctrl-C) when one cut the run short, which stderr says too.
fn finish(probe: &str, interrupted: Option<&str>, taken: &str) -> Result<i32> {
    let Some(sig) = interrupted else {
        return Ok(0);
    };
    let pmqos = match Probe::parse(probe).is_some_and(Probe::is_latency) {
        true => "; PM QoS, if it was held, is released",
        false => "",
    };
    eprintln!(
        "hostknob: probe {probe}: interrupted by {sig} after {taken}: the result printed is PARTIAL{pmqos}"
    );
    Ok(128 + probe::interrupt::signal().unwrap_or(libc::SIGINT))
}

/// A partial result has been printed; the run still failed.
fn partial(note: Option<&str>) -> Result<i32> {
    match note {
        Some(n) => bail!("{n}"),
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    //! The probe registry (`probe::Probe`, from `probes!` in `probe/mod.rs`)
    //! against everything else that must name each probe.
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn every_probe_has_a_subcommand_a_json_schema_and_documentation() {
        let cli = crate::cli::Cli::command();
        let probe = cli.find_subcommand("probe").unwrap();
        let subcommands: Vec<&str> = probe.get_subcommands().map(|c| c.get_name()).collect();
        let probes: Vec<&str> = Probe::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            subcommands, probes,
            "`probe_commands!` in cli.rs against `probes!`"
        );
        let docs = include_str!("../../docs/probes.md");
        let json = include_str!("../../docs/json.md");
        for p in Probe::ALL {
            let name = format!("probe-{p}");
            assert!(
                crate::commands::schema::schema(&name).is_some(),
                "no JSON schema `{name}` in commands/schema.rs"
            );
            assert!(
                docs.contains(&format!("## `probe {p}`")),
                "docs/probes.md has no section for {p}"
            );
            assert!(
                json.contains(&format!("`{p}")),
                "docs/json.md does not describe {p}"
            );
        }
    }

    #[test]
    fn a_command_line_runs_the_probe_it_names_and_verify_takes_the_latency_ones() {
        for p in Probe::ALL {
            // The least each probe needs on its command line.
            let line: &[&str] = match p {
                Probe::IdleCpu | Probe::Rss => &["--pid", "1"],
                _ => &[],
            };
            let head = ["hostknob", "probe", p.as_str()];
            let cli = crate::cli::Cli::try_parse_from(head.iter().chain(line)).unwrap();
            let crate::cli::Command::Probe(a) = cli.command else {
                panic!("not a probe command");
            };
            assert_eq!(a.probe.probe(), p);
            let latency = latency_probe(&a.probe);
            assert_eq!(latency.is_ok(), p.is_latency(), "{p}");
            if let Ok(l) = latency {
                assert_eq!(l.probe(), p);
            } else {
                let e = latency.err().unwrap().to_string();
                assert!(
                    e.contains("use the wakeup, timer, rpc or noise probe"),
                    "{e}"
                );
            }
        }
    }

    /// `hostknob probe NAME --help` (issue 14 item 8): the probe's own
    /// options under its own heading, the shared ones after them.
    #[test]
    fn probes_list_their_own_options_before_the_shared_ones() {
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let probe = cli.find_subcommand_mut("probe").unwrap();
        for p in Probe::ALL {
            let name = p.as_str();
            let own = format!("{}{} options", name[..1].to_uppercase(), &name[1..]);
            let sub = probe.find_subcommand_mut(name).unwrap();
            let help = sub.render_long_help().to_string();
            let at = |heading: &str| help.find(&format!("\n{heading}:\n"));
            let own_at = at(&own).unwrap_or_else(|| panic!("{name}: no {own:?}:\n{help}"));
            if let Some(shared) = at("Shared probe options") {
                assert!(own_at < shared, "{name}: shared options first:\n{help}");
            }
            for arg in sub.get_arguments().filter(|a| !a.is_global_set()) {
                let id = arg.get_id().as_str();
                let heading = arg.get_help_heading();
                assert!(
                    heading == Some(own.as_str())
                        || heading == Some("Shared probe options")
                        || id == "help",
                    "{name}: --{id} is under {heading:?}"
                );
            }
        }
    }
}
