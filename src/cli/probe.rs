//! `probe`'s options: one `*Args` struct per probe, and the subcommands
//! generated from the probe registry.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};

use std::net::IpAddr;
use std::time::Duration;

use super::{Format, Mechanism};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    Udp,
    Tcp,
}

#[derive(Args, Debug)]
// Options `probe` itself takes (and its subcommands inherit) come after the probe's own.
#[command(next_help_heading = "Global options")]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub probe: ProbeCommand,
    /// Only / (the default): a probe measures this machine, so another root is refused.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "HOSTKNOB_ROOT",
        default_value = "/"
    )]
    pub root: PathBuf,
    /// Host name for the plot's title [default: the host's hostname].
    #[arg(long, global = true, value_name = "NAME", env = "HOSTKNOB_HOST")]
    pub host: Option<String>,
    /// Output format: table for people; yaml and json are stable for machines.
    #[arg(long, global = true, value_enum, default_value = "table")]
    pub format: Format,
    /// No progress on stderr (shown only when stderr is a terminal).
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

/// The probes' subcommands, one per `probe::Probe` (the registry in
/// `probe/mod.rs`): a variant here is named as the probe's there, so a
/// subcommand without a probe does not compile, and `commands::probe`'s
/// tests check that every probe has a subcommand. Each `*Args` struct lists
/// the probe's own options under its own heading, before the shared ones.
macro_rules! probe_commands {
    ($($(#[$attr:meta])* $variant:ident($args:ident),)*) => {
        #[derive(Subcommand, Debug)]
        pub enum ProbeCommand {
            $($(#[$attr])* $variant($args),)*
        }

        impl ProbeCommand {
            /// The probe this command line runs.
            pub fn probe(&self) -> crate::schema::Probe {
                match self {
                    $(ProbeCommand::$variant(_) => crate::schema::Probe::$variant,)*
                }
            }
        }
    };
}

probe_commands! {
    /// Idle-settled wakeup latency of a thread blocked in the kernel, with the idle states its CPU entered.
    #[command(
        long_about = include_str!("../help/probe-wakeup.txt"),
        after_help = include_str!("../help/probe-wakeup-examples.txt")
    )]
    Wakeup(WakeupArgs),
    /// Timer wakeup lateness by cyclictest's method (absolute clock_nanosleep on CLOCK_MONOTONIC).
    #[command(
        long_about = include_str!("../help/probe-timer.txt"),
        after_help = include_str!("../help/probe-timer-examples.txt")
    )]
    Timer(TimerArgs),
    /// Light request/response round trips with idle gaps: the built-in echo server or your own service.
    #[command(
        long_about = include_str!("../help/probe-rpc.txt"),
        after_help = include_str!("../help/probe-rpc-examples.txt")
    )]
    Rpc(RpcArgs),
    /// OS noise: the time a spinning thread on each CPU loses, and to whom (interrupts, softirqs, threads, steal).
    #[command(
        long_about = include_str!("../help/probe-noise.txt"),
        after_help = include_str!("../help/probe-noise-examples.txt")
    )]
    Noise(NoiseArgs),
    /// CPU use of a process as % of one core, from utime + stime in /proc/PID/stat over windows.
    #[command(
        long_about = include_str!("../help/probe-idle-cpu.txt"),
        after_help = include_str!("../help/probe-idle-cpu-examples.txt")
    )]
    IdleCpu(IdleCpuArgs),
    /// Memory decay after a burst: a process's RSS over time, or a jemalloc burst in hostknob itself.
    #[command(
        long_about = include_str!("../help/probe-rss.txt"),
        after_help = include_str!("../help/probe-rss-examples.txt")
    )]
    Rss(RssArgs),
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Wakeup options")]
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
    pub mechanism: Mechanism,
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

#[derive(Args, Debug)]
#[command(next_help_heading = "Shared probe options")]
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

#[derive(Args, Debug)]
#[command(next_help_heading = "Timer options")]
pub struct TimerArgs {
    /// Interval between wakeups: µs when a bare number (cyclictest's -i), or e.g. 2ms.
    #[arg(long, default_value = "1000", value_parser = crate::probe::parse_micros, value_name = "US")]
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

/// How `probe noise` splits lost time by source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Attribution {
    /// tracefs events where tracing can be used (root), else counts.
    Auto,
    /// irq, softirq and sched_switch events overlapping each gap (needs root).
    Tracefs,
    /// Counts per source from /proc (interrupts, softirqs, threads' switches); time estimated.
    Counts,
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Noise options")]
pub struct NoiseArgs {
    /// CPUs to measure, in the kernel's list form (1, 2-5,8); required, except under verify (which picks the CPUs the knob isolates).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// How long each CPU is measured: seconds when a bare number, or e.g. 500ms.
    #[arg(long, default_value = "10s", value_parser = crate::probe::parse_seconds, value_name = "TIME")]
    pub duration: Duration,
    /// A gap between two clock reads longer than this is lost time: ns when a bare number, or e.g. 1us.
    #[arg(long, default_value = "1us", value_parser = parse_nanos, value_name = "TIME")]
    pub threshold: Duration,
    /// Run the measuring threads as SCHED_FIFO at this priority, 1-99 (needs root) [default: SCHED_OTHER].
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u32).range(1..=99))]
    pub priority: Option<u32>,
    /// How lost time is split by source.
    #[arg(long, value_enum, default_value = "auto")]
    pub attribution: Attribution,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_nanos(text: &str) -> Result<Duration, String> {
    let d = match text.trim().parse::<u64>() {
        Ok(n) => Duration::from_nanos(n),
        Err(_) => humantime::parse_duration(text.trim())
            .map_err(|e| format!("{text:?}: {e} (examples: 500, 1us, 20us)"))?,
    };
    if d.is_zero() {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(d)
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Rpc options")]
pub struct RpcArgs {
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub proto: Proto,
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
    /// Measure your own service at HOST:PORT instead of the built-in echo server
    /// (HOST: an address, or a name from /etc/hosts; no DNS).
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
    #[arg(long, default_value = "1", value_parser = crate::probe::parse_seconds, value_name = "TIME")]
    pub timeout: Duration,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["pid", "cmd"])))]
#[command(next_help_heading = "Idle-cpu options")]
pub struct IdleCpuArgs {
    /// The process to measure.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Start this command (everything after --cmd), measure it, then kill it. Must come last.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_name = "CMD")]
    pub cmd: Option<Vec<String>>,
    /// Length of each window: seconds, or e.g. 500ms, 1m.
    #[arg(long, default_value = "10", value_parser = crate::probe::parse_seconds, value_name = "TIME")]
    pub window: Duration,
    /// Number of consecutive windows.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub windows: usize,
    /// Wait this long before the first window (e.g. 4s, as the seed did) [default: 0].
    #[arg(long, value_parser = crate::probe::parse_seconds, value_name = "TIME")]
    pub settle: Option<Duration>,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["pid", "self_burst"])))]
#[command(next_help_heading = "Rss options")]
pub struct RssArgs {
    /// The process to sample.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Burst, free and sample hostknob itself, with jemalloc's background_thread off then on.
    #[arg(long)]
    pub self_burst: bool,
    /// Length of the sampling window (per leg with --self-burst): seconds, or e.g. 90s, 2m.
    #[arg(long, default_value = "90", value_parser = crate::probe::parse_seconds, value_name = "TIME")]
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
