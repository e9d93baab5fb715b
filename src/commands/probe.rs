//! `hostknob probe ...`: parse options, run a probe, render, write `--raw`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{ArgGroup, Args, Subcommand};
use serde::Serialize;

use crate::cli::Global;
use crate::probe::{self, Gaps, idle_cpu, rpc, rss, timer, wakeup};
use crate::render;
use crate::root::Root;
use crate::stats;

#[derive(Args, Debug)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub probe: ProbeCommand,
}

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Idle-settled wakeup latency of a thread blocked in the kernel, with the idle states its CPU entered.
    #[command(
        long_about = "Idle-settled wakeup latency. A sleeper thread pinned to --sleeper-cpu blocks in the \
kernel (a futex by default); a waker pinned to --waker-cpu leaves it idle for a gap from a deterministic \
schedule, reads CLOCK_MONOTONIC and wakes it; the sleeper reads the clock as its first act after waking. \
One sample = that difference.\n\n\
Reported: n, min, p50, p95, p99, p99.9, max, mean, stdev; a histogram; the sleeper CPU's idle-state \
entries and residency over the run (cpuidle usage/time deltas) and the samples grouped by the deepest \
state entered in their gap, so a latency floor can be tied to a state's exit latency; the clock read \
cost and the probe's own per-sample overhead, measured at start.\n\n\
PM QoS is not held unless --pmqos-us is given, so C-state exits are measured.",
        after_help = "Examples:\n  hostknob probe wakeup\n  hostknob probe wakeup --samples 500 --gap-us 200..2000 --format json\n  \
hostknob probe wakeup --pmqos-us 0          # the same with deep idle states held off\n  \
hostknob probe wakeup --raw /tmp/wakeup.csv"
    )]
    Wakeup(WakeupArgs),
    /// Timer wakeup lateness by cyclictest's method (absolute clock_nanosleep on CLOCK_MONOTONIC).
    #[command(
        long_about = "Timer wakeup lateness, cyclictest's method: a thread sleeps with absolute \
clock_nanosleep(CLOCK_MONOTONIC) until the next interval boundary and records how late it woke. \
Options mirror cyclictest: --interval (-i), --loops (-l), --cpu (-a), --priority (-p, SCHED_FIFO), \
--mlock (-m). Unlike cyclictest, PM QoS is NOT held by default, so C-state exits are part of the \
result; --pmqos-us 0 matches cyclictest's default, and no --pmqos-us matches `cyclictest --laptop`.",
        after_help = "Examples:\n  hostknob probe timer --interval 1000 --loops 10000\n  \
hostknob probe timer --interval 2ms --loops 2000 --cpu 1 --priority 80 --mlock --pmqos-us 0\n  \
  (the same as: cyclictest -i 2000 -l 2000 -a 1 -p 80 -m)"
    )]
    Timer(TimerArgs),
    /// Light request/response round trips with idle gaps: the built-in echo server or your own service.
    #[command(
        long_about = "The \"light call\" floor: small request/response round trips with idle gaps between \
them, over UDP or TCP, to a built-in echo server on a pinned thread (bound to loopback unless --bind says \
otherwise) or to your own service with --connect HOST:PORT. Each round trip after a gap pays for waking \
both ends, which is where a C-state tax shows.",
        after_help = "Examples:\n  hostknob probe rpc                       # UDP echo over loopback\n  \
hostknob probe rpc --proto tcp --gap-us 200..2000 --samples 1000\n  \
hostknob probe rpc --proto tcp --connect 10.0.0.5:8080 \\\n      --payload 'GET /health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' --expect '\\r\\n\\r\\nok'"
    )]
    Rpc(RpcArgs),
    /// CPU use of a process as % of one core, from utime + stime in /proc/PID/stat over windows.
    #[command(
        long_about = "CPU use of a process (all its threads) as a percentage of one core: the change of \
utime + stime in /proc/PID/stat over each window of wall time. Default: three consecutive 10 s windows; \
the median and range are reported. With --cmd the command is started, measured and killed at the end. \
If the process ends during the run the completed windows are printed, flagged partial, and the exit \
code is 1.",
        after_help = "Examples:\n  hostknob probe idle-cpu --pid 1234\n  \
hostknob probe idle-cpu --window 2s --windows 5 --cmd my-server --idle"
    )]
    IdleCpu(IdleCpuArgs),
    /// Memory decay after a burst: a process's RSS over time, or a jemalloc burst in hostknob itself.
    #[command(
        long_about = "Memory decay after a burst, the jemalloc PR's method: VmRSS/VmHWM from \
/proc/PID/status about twice a second and Pss/LazyFree from /proc/PID/smaps_rollup about once a second; \
corrected = rss - lazyfree. The summary gives the anchor, the peak, the values at +10 s, +30 s and the \
end, and each one's residual against the anchor (also as a % of the growth from anchor to peak).\n\n\
--self-burst reproduces the PR here: hostknob (jemalloc is its global allocator) allocates about \
--burst-mib MiB in mixed sizes from --threads threads, frees it, and samples its own memory over the \
idle window, first with jemalloc's background_thread false, then true (each written with a mallctl and \
read back; the read-back is reported). The original value is restored at the end.",
        after_help = "Examples:\n  hostknob probe rss --pid 1234 --duration 2m\n  \
hostknob probe rss --self-burst --duration 35s"
    )]
    Rss(RssArgs),
}

#[derive(Args, Debug)]
pub struct WakeupArgs {
    /// CPU of the waker thread [default: an allowed online CPU other than the sleeper's].
    #[arg(long, value_name = "CPU")]
    pub waker_cpu: Option<u32>,
    /// CPU of the sleeper thread, the one left idle [default: the last allowed online CPU].
    #[arg(long, value_name = "CPU")]
    pub sleeper_cpu: Option<u32>,
    /// Number of wakeups measured.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub samples: usize,
    #[command(flatten)]
    pub gaps: GapArgs,
    /// What the sleeper blocks on: futex (the shortest kernel path), eventfd (what epoll servers wake through), pipe.
    #[arg(long, value_enum, default_value = "futex")]
    pub mechanism: wakeup::Mechanism,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct GapArgs {
    /// Idle gap before each sample, in ms: A..B (or one value). Gap i is
    /// A + ((i*5) mod 17) * (B-A)/16, the seed's schedule [default: 50..66].
    #[arg(long, value_name = "A..B", conflicts_with = "gap_us")]
    pub gap_ms: Option<String>,
    /// The same in µs, for short gaps (e.g. 200..2000).
    #[arg(long, value_name = "A..B")]
    pub gap_us: Option<String>,
}

impl GapArgs {
    fn gaps(&self) -> Result<Gaps> {
        match (&self.gap_ms, &self.gap_us) {
            (_, Some(us)) => Gaps::parse(us, 1, "--gap-us"),
            (Some(ms), None) => Gaps::parse(ms, 1000, "--gap-ms"),
            (None, None) => Ok(Gaps::SEED),
        }
    }
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Hold /dev/cpu_dma_latency at N µs for the run (0 keeps CPUs out of every
    /// idle state with an exit latency). Released when the run ends [default: not held].
    #[arg(long, value_name = "N")]
    pub pmqos_us: Option<u32>,
    /// Also write every sample to FILE as CSV.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
    /// Also draw the distribution (a CDF on a log time axis) to FILE.svg.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Writes `--plot`: one distribution, titled with the host and the probe.
fn plot(common: &CommonArgs, title: &str, samples_ns: &[u64]) -> Result<()> {
    if let Some(path) = &common.plot {
        let svg = render::svg::cdf(
            title,
            &[render::svg::Series {
                name: "samples",
                samples_ns,
            }],
        )?;
        std::fs::write(path, svg).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct TimerArgs {
    /// Interval between wakeups: µs when a bare number (cyclictest's -i), or e.g. 2ms.
    #[arg(long, default_value = "1000", value_parser = probe::parse_micros, value_name = "US")]
    pub interval: Duration,
    /// Number of wakeups measured.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub loops: usize,
    /// Pin the timer thread to this CPU [default: not pinned].
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<u32>,
    /// Run the timer thread as SCHED_FIFO at this priority, 1-99 (needs root) [default: SCHED_OTHER].
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u32).range(1..=99))]
    pub priority: Option<u32>,
    /// Lock all memory (mlockall) for the run.
    #[arg(long)]
    pub mlock: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct RpcArgs {
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub proto: rpc::Proto,
    /// Number of round trips measured.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub samples: usize,
    #[command(flatten)]
    pub gaps: GapArgs,
    /// Request size in bytes (a repeating a-z pattern) when no --payload is given.
    #[arg(long, default_value_t = 64, value_name = "BYTES")]
    pub size: usize,
    /// CPU of the client thread [default: with the built-in server, an allowed CPU other than the server's; else not pinned].
    #[arg(long, value_name = "CPU")]
    pub client_cpu: Option<u32>,
    /// CPU of the built-in echo server thread [default: the last allowed online CPU].
    #[arg(long, value_name = "CPU", conflicts_with = "connect")]
    pub server_cpu: Option<u32>,
    /// Address the built-in echo server binds; the port is chosen by the kernel.
    #[arg(
        long,
        default_value = "127.0.0.1",
        value_name = "IP",
        conflicts_with = "connect"
    )]
    pub bind: IpAddr,
    /// Measure your own service at HOST:PORT instead of the built-in echo server.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// Request bytes to send (escapes: \r \n \t \0 \\ \xHH) [default: --size bytes of a-z].
    #[arg(long, value_name = "TEXT", requires = "connect")]
    pub payload: Option<String>,
    /// The reply is complete once this text has arrived (same escapes); pick text at its end
    /// [default: the first bytes of the reply end it].
    #[arg(long, value_name = "TEXT", requires = "connect")]
    pub expect: Option<String>,
    /// How long to wait for a reply: seconds, or e.g. 500ms.
    #[arg(long, default_value = "1", value_parser = probe::parse_seconds, value_name = "TIME")]
    pub timeout: Duration,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["pid", "cmd"])))]
pub struct IdleCpuArgs {
    /// The process to measure.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Start this command (everything after --cmd), measure it, then kill it. Must come last.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_name = "CMD")]
    pub cmd: Option<Vec<String>>,
    /// Length of each window: seconds, or e.g. 500ms, 1m.
    #[arg(long, default_value = "10", value_parser = probe::parse_seconds, value_name = "TIME")]
    pub window: Duration,
    /// Number of consecutive windows.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub windows: usize,
    /// Wait this long before the first window (e.g. 4s, as the seed did) [default: 0].
    #[arg(long, value_parser = probe::parse_seconds, value_name = "TIME")]
    pub settle: Option<Duration>,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["pid", "self_burst"])))]
pub struct RssArgs {
    /// The process to sample.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Burst, free and sample hostknob itself, with jemalloc's background_thread off then on.
    #[arg(long)]
    pub self_burst: bool,
    /// Length of the sampling window (per leg with --self-burst): seconds, or e.g. 90s, 2m.
    #[arg(long, default_value = "90", value_parser = probe::parse_seconds, value_name = "TIME")]
    pub duration: Duration,
    /// Size of the self burst, MiB.
    #[arg(
        long,
        default_value_t = 128,
        value_name = "MIB",
        requires = "self_burst"
    )]
    pub burst_mib: u64,
    /// Threads that allocate the self burst.
    #[arg(long, default_value_t = 4, value_name = "N", requires = "self_burst")]
    pub threads: usize,
    /// Also write every sample to FILE as CSV.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
}

pub fn run(g: &Global, args: &ProbeArgs) -> Result<i32> {
    let root = Root::open(&g.root)?;
    let host = crate::manifest::host::resolve(&root, g.host.as_deref()).name;
    match &args.probe {
        ProbeCommand::Wakeup(a) => {
            let r = wakeup::run(&root, &wakeup_options(a)?)?;
            probe::warn_if_not_live(&root);
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
            emit(g, &r, render::probe::wakeup)
        }
        ProbeCommand::Timer(a) => {
            let r = timer::run(&root, &timer_options(a))?;
            if let Some(p) = &a.common.raw {
                let rows = r.raw.iter().enumerate().map(|(i, &l)| vec![i as u64, l]);
                stats::write_csv(p, &["sample", "lateness_ns"], rows)?;
            }
            plot(&a.common, &format!("{host}: timer lateness"), &r.raw)?;
            emit(g, &r, render::probe::timer)
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
            emit(g, &r, render::probe::rpc)
        }
        ProbeCommand::IdleCpu(a) => {
            let target = match (&a.pid, &a.cmd) {
                (Some(p), _) => idle_cpu::Target::Pid(*p),
                (None, Some(cmd)) => idle_cpu::Target::Cmd(cmd.clone()),
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
            partial(r.note.as_deref())
        }
        ProbeCommand::Rss(a) => {
            if a.self_burst {
                let r = rss::run_self_burst(
                    &root,
                    &rss::BurstOptions {
                        mib: a.burst_mib,
                        threads: a.threads,
                        duration: a.duration,
                    },
                )?;
                if let Some(p) = &a.raw {
                    let rows = r.legs.iter().flat_map(|l| {
                        l.series
                            .iter()
                            .map(move |s| rss_row(Some(l.background_thread_set), s))
                    });
                    stats::write_csv(p, &RSS_HEADER, rows)?;
                }
                emit(g, &r, render::probe::rss_self)
            } else {
                let pid = a.pid.expect("clap requires --pid or --self-burst");
                let r = rss::run_pid(&root, pid, a.duration)?;
                if let Some(p) = &a.raw {
                    let rows = r.series.iter().map(|s| rss_row(None, s));
                    stats::write_csv(p, &RSS_HEADER, rows)?;
                }
                emit(g, &r, render::probe::rss_pid)?;
                partial(r.note.as_deref())
            }
        }
    }
}

fn wakeup_options(a: &WakeupArgs) -> Result<wakeup::Options> {
    Ok(wakeup::Options {
        waker_cpu: a.waker_cpu,
        sleeper_cpu: a.sleeper_cpu,
        samples: a.samples,
        gaps: a.gaps.gaps()?,
        mechanism: a.mechanism,
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
        proto: a.proto,
        samples: a.samples,
        gaps: a.gaps.gaps()?,
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

/// One run of a latency probe, as `verify` uses it: every sample and the
/// settings that shaped the run.
pub struct LatencyRun {
    pub samples_ns: Vec<u64>,
    pub settings: serde_json::Value,
    pub warnings: Vec<String>,
}

/// Runs a latency probe (wakeup, timer or rpc); the others measure something
/// else than latency and are refused.
pub fn run_latency(root: &Root, probe: &ProbeCommand) -> Result<LatencyRun> {
    Ok(match probe {
        ProbeCommand::Wakeup(a) => {
            let r = wakeup::run(root, &wakeup_options(a)?)?;
            LatencyRun {
                samples_ns: r.raw.iter().map(|s| s.latency_ns).collect(),
                settings: serde_json::to_value(&r.settings)?,
                warnings: r.warnings,
            }
        }
        ProbeCommand::Timer(a) => {
            let r = timer::run(root, &timer_options(a))?;
            LatencyRun {
                samples_ns: r.raw,
                settings: serde_json::to_value(&r.settings)?,
                warnings: Vec::new(),
            }
        }
        ProbeCommand::Rpc(a) => {
            let r = rpc::run(root, &rpc_options(a)?)?;
            LatencyRun {
                samples_ns: r.raw.iter().map(|&(_, rtt)| rtt).collect(),
                settings: serde_json::to_value(&r.settings)?,
                warnings: Vec::new(),
            }
        }
        ProbeCommand::IdleCpu(_) | ProbeCommand::Rss(_) => {
            bail!(
                "verify compares latency distributions: use the wakeup, timer or rpc probe (idle-cpu and rss are run with `hostknob probe`)"
            )
        }
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

fn emit<T: Serialize>(g: &Global, value: &T, table: fn(&T) -> String) -> Result<i32> {
    match render::machine(g.format, value)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::wrap_prose(&table(value))),
    }
    Ok(0)
}

/// A partial result has been printed; the run still failed.
fn partial(note: Option<&str>) -> Result<i32> {
    match note {
        Some(n) => bail!("{n}"),
        None => Ok(0),
    }
}
