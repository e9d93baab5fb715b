//! Command-line options, in one place. Global options may stand before or
//! after the subcommand (`hostknob --root R inventory --format json`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;

use clap::ArgGroup;
use std::net::IpAddr;
use std::time::Duration;

use crate::inventory;

#[derive(Parser, Debug)]
#[command(
    name = "hostknob",
    version,
    about = "Inventory, audit, tune and verify Linux hosts that serve latency-sensitive work",
    long_about = "hostknob reads a host's CPU, idle-state, frequency, memory and interrupt facts, \
checks them against a reviewed knob manifest, changes them safely and measures whether a change mattered.\n\n\
Every path is read under --root (default /), so a tree made by `hostknob capture` can be \
inspected offline exactly like the live host.",
    after_help = "Examples:\n  hostknob inventory\n  hostknob inventory --format json | jq .idle.states\n  \
hostknob capture /tmp/web-7 && hostknob --root /tmp/web-7 inventory\n  \
hostknob audit                                   # does the host match the manifest?\n  \
hostknob apply cpuidle-no-deep-state --dry-run   # the writes, as a diff\n  \
hostknob verify cpuidle-no-deep-state            # did it move the latency floor?\n  \
hostknob persist cpuidle-no-deep-state           # what keeps it across a reboot\n\n\
Exit codes: 0 success, 1 error (nothing changed), 2 audit drift or stale document."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone, Default)]
pub struct InventoryArgs {
    /// Only these sections, in every format (all when none is named).
    #[arg(value_enum, value_name = "SECTION")]
    pub sections: Vec<Section>,
    /// The same as naming SECTION; may be repeated.
    #[arg(long = "section", value_enum, value_name = "SECTION")]
    pub section: Vec<Section>,
}

/// An inventory section on the command line, named as its JSON key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    Host,
    Cpu,
    Caches,
    Numa,
    Memory,
    Idle,
    Frequency,
    Vulnerabilities,
    Network,
    #[value(name = "pm_qos", alias = "pm-qos")]
    PmQos,
    Processes,
}

impl From<Section> for inventory::Section {
    fn from(s: Section) -> Self {
        match s {
            Section::Host => inventory::Section::Host,
            Section::Cpu => inventory::Section::Cpu,
            Section::Caches => inventory::Section::Caches,
            Section::Numa => inventory::Section::Numa,
            Section::Memory => inventory::Section::Memory,
            Section::Idle => inventory::Section::Idle,
            Section::Frequency => inventory::Section::Frequency,
            Section::Vulnerabilities => inventory::Section::Vulnerabilities,
            Section::Network => inventory::Section::Network,
            Section::PmQos => inventory::Section::PmQos,
            Section::Processes => inventory::Section::Processes,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Read and write every host path (/sys, /proc, /etc, /dev, /var/lib/hostknob) under DIR.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "HOSTKNOB_ROOT",
        default_value = "/"
    )]
    pub root: PathBuf,
    /// Output format: table for people; yaml and json are stable for machines.
    #[arg(long, global = true, value_enum, default_value = "table")]
    pub format: Format,
    /// Host name used for the manifest and ledger [default: the host's hostname].
    #[arg(long, global = true, value_name = "NAME", env = "HOSTKNOB_HOST")]
    pub host: Option<String>,
    /// The knob manifest directory [default: /etc/hostknob/manifest under --root].
    #[arg(long, global = true, value_name = "DIR", env = "HOSTKNOB_MANIFEST")]
    pub manifest: Option<PathBuf>,
    /// Where apply keeps its journal and state, resolved under --root.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        default_value = "/var/lib/hostknob"
    )]
    pub state_dir: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Hardware and kernel facts: CPUs, caches, frequency, idle states, memory, NUMA, NICs, processes.
    #[command(
        long_about = "Hardware and kernel facts, read-only and without root: CPU identity and topology \
(packages, cores, SMT siblings, hybrid types, online/isolated/nohz_full CPUs), caches, cpufreq driver, \
governor, EPP and limits, cpuidle driver, governor and every idle state, per-CPU PM QoS, memory, NUMA, \
huge pages, THP, kernel, boot time, mitigations, NIC IRQs and their affinity, and the busiest processes.\n\n\
Values that differ between CPUs are grouped (`0-15: performance; 16-31: powersave`). What the host does \
not expose is reported as \"not exposed\" with the path looked for."
    )]
    Inventory(InventoryArgs),
    /// Copy every file inventory reads into OUT, a tree to use later with --root OUT.
    #[command(
        long_about = "Copy every file that inventory reads into OUT as a mirror tree (symlinks kept as \
symlinks), plus hostknob-capture.yaml (host, time, version, command line, skipped files). \
Then `hostknob --root OUT inventory` prints what this host printed, apart from live counters. \
Files this user may not read are skipped and listed. OUT must be new or empty."
    )]
    Capture(CaptureArgs),
    /// Write the host document (Markdown) to hosts/<host>.md, or check that it is current.
    #[command(
        long_about = "Write the host document: CPU and SMT layout, caches, frequencies, governor and \
energy preference, idle states and PM QoS, memory and NUMA, kernel and mitigations, CPU partitioning, NIC \
interrupt placement and loopback settings, the services sharing the host, the knobs in effect and the \
latest evidence, and for every fact the read-only command that shows it without hostknob.\n\n\
The output is stable: an unchanged host gives an identical file apart from the one `_Generated by` line. \
--check regenerates, prints a unified diff against the file and exits 2 when it is stale.",
        after_help = "Examples:\n  hostknob doc                       # writes hosts/$(hostname).md\n  \
hostknob --root /tmp/web-7 --host web-7 doc --check\n  hostknob doc --out -             # to stdout"
    )]
    Doc(DocArgs),
    /// The manifest's knobs for this host: desired value, current value (grouped) and status.
    #[command(
        long_about = "List the knobs of the manifest that target this host (by `hosts:`, matched against \
--host, the hostname, or the capture's name), with the desired value, the current value grouped over CPUs or \
files that agree, and the audit status. Read-only; exit 0 unless the manifest or the root cannot be read."
    )]
    Knobs,
    /// Check every knob for this host: ok, drift, lost-on-reboot, unsupported, not-applicable, unpersisted.
    #[command(
        long_about = "For each knob that targets this host, compare the desired value with what the host \
holds, per CPU group or file, and give one status: ok; drift (differs); lost-on-reboot (the ledger or the \
knob's history says it was applied here runtime-only, the host booted since, and the value is back); \
unsupported (the host does not accept the value, e.g. a governor it lacks); not-applicable (with the reason, \
e.g. no such idle state, no cpufreq in a VM); unpersisted (in effect, but nothing makes it survive a reboot). \
Also names other managers that may override a knob: tuned, power-profiles-daemon, TLP, cpupower, and \
sysctl.d, tmpfiles.d or udev entries touching the same files.\n\n\
Exit codes: 0 when every knob is ok, unpersisted or not-applicable; 2 when any is drift, unsupported or \
lost-on-reboot; 1 when the manifest does not load or the root cannot be read.",
        after_help = "Examples:\n  hostknob audit\n  hostknob --root /tmp/rpc-ap-1 --manifest manifest audit --format json\n  \
hostknob audit cpuidle-no-deep-state"
    )]
    Audit(AuditArgs),
    /// Measure the host: wakeup and timer latency, RPC round trips, a process's idle CPU and memory decay.
    #[command(
        long_about = "Built-in probes that measure what a knob is meant to change, with real threads, \
clocks, sockets and the real allocator. Latency probes report n, min, p50, p95, p99, p99.9, max, mean \
and stdev (nearest-rank percentiles of the exact samples) and a histogram; --raw FILE writes every \
sample as CSV.\n\n\
  wakeup    idle-settled wakeup of a thread blocked in the kernel, with its CPU's idle-state entries\n\
  timer     timer lateness by cyclictest's method\n\
  rpc       light request/response round trips with idle gaps\n\
  idle-cpu  a process's CPU use in % of one core\n\
  rss       memory decay after a burst (a process, or a jemalloc burst in hostknob itself)\n\n\
No probe leaves anything changed: PM QoS (--pmqos-us) is held only while the probe runs.",
        after_help = "Examples:\n  hostknob probe wakeup --format json\n  \
hostknob probe timer --interval 1000 --loops 10000 --pmqos-us 0\n  \
hostknob probe rss --self-burst --duration 35s"
    )]
    Probe(ProbeArgs),
    /// Change knobs safely: plan (as a diff), check, journal, write, read back, record.
    #[command(
        long_about = "Plan every write of the chosen knobs that target this host and show it as a unified \
diff per file (files that change alike over many CPUs as one: cpu0-319/cpuidle/state3/disable). \
Then check every write before making the first (values the host accepts, values before that can be \
read, permission asked without writing), take the lock in the state directory, journal the values \
before (fsynced), write in an order that respects kernel dependencies (governor before EPP, a global \
boost before per-policy ones) and read every file back. If any write or read-back fails, everything \
already written is restored (in the order the kernel's dependencies require) and read back, and the failing file is named. On \
success the change is appended to the ledger (<manifest>/ledger/<host>.yaml) and the knobs' caveats \
are printed.\n\nExit codes: 0 applied (or nothing to do, or a dry run); 1 refused or failed, with \
what happened to the host said on stderr.",
        after_help = "Examples:\n  hostknob apply cpuidle-no-deep-state --dry-run\n  \
sudo hostknob apply cpuidle-no-deep-state\n  sudo hostknob apply --all --wait"
    )]
    Apply(ApplyArgs),
    /// Restore the values recorded before the first apply, read them back, record it.
    #[command(
        long_about = "Restore what the journal in the state directory recorded before the first apply \
since the journal began (also after a crash in the middle of an apply), in the order the kernel's dependencies require (EPP before the governor that pins it), read every \
file back, append to the ledger and drop the restored entries from the journal. Files that cannot \
be restored stay in the journal, and revert exits 1 naming them."
    )]
    Revert(RevertArgs),
    /// Print (or install) what makes a knob survive a reboot: tmpfiles.d, sysctl.d, drop-in, cmdline.
    #[command(
        long_about = "Produce what makes the knob survive a reboot, by the mechanism its manifest entry \
names: systemd-tmpfiles.d `w` lines for sysfs knobs, a sysctl.d file for sysctl knobs, a systemd \
drop-in with Environment= for allocator knobs, kernel command-line arguments for boot-time knobs. \
Without --install the artifact goes to stdout (the file's content, or the arguments) and where it \
would go to stderr. --install writes the file under --root (audit then reports the knob persisted); \
--remove deletes it. Kernel command-line arguments are printed with the commands that add them; \
hostknob never writes a boot loader's configuration."
    )]
    Persist(PersistArgs),
    /// Hold a pm-qos knob's PM QoS request in the foreground until SIGTERM or Ctrl-C.
    #[command(
        long_about = "Opens /dev/cpu_dma_latency, writes the pm-qos knob's value and keeps the file open: \
the kernel keeps a PM QoS request only while its file is open. Prints the aggregate the kernel reads \
back, then waits; SIGTERM, SIGINT or SIGHUP close the file (the kernel drops the request) and it \
exits 0. Runs in the foreground, for a systemd unit: `persistence: hold` with `hostknob persist KNOB \
--install` writes hostknob-hold@.service, whose instance hostknob-hold@KNOB.service runs this."
    )]
    Hold(HoldArgs),
    /// A/B one knob with its probe in shuffled rounds; a verdict you can defend, recorded as evidence.
    #[command(
        long_about = "Runs the knob's declared probe (`verify.probe` in the manifest, or --probe) in rounds. \
Each round runs two legs, the knob as found and the knob applied, in an order drawn per round from the seed \
(ChaCha8; the seed is printed so a run can be repeated). Each leg sets the state with apply's journal and lock, \
waits --settle, then probes. The sleeper (rpc server, timer CPU) runs on a CPU inside the knob's target \
CPUs, the waker (rpc client) outside them where possible and never on a CPU sharing a core, module or L2 \
with the sleeper; a --sleeper-cpu outside the target is refused unless --force.\n\n\
The round is the unit of evidence: its two legs are a pair, and the verdict tests the per-round log ratios \
applied / as found (a Student t interval at 99.5%). After the first --rounds and after each further batch, \
it stops when the interval clears 1 and the ratio is at least 5% from 1 (improved or regressed), or when the \
interval lies within 5% of 1 (no detectable effect), else runs more rounds up to --max-rounds (then: no \
detectable effect at this noise after N rounds). At least 5 rounds: with fewer, the interval is so wide \
that no effect worth having could clear it, and a verdict from 2 or 3 rounds is chance.\n\n\
Reported: each leg's median across rounds of p50, p95, p99 and max, the per-round ratios, the ratio and its \
interval, the decision and rounds run, and each `verify.expect` of the manifest, met or not. The evidence is \
appended to the ledger. Exit 0 when every expectation is met (or none is declared), 2 when the run \
contradicts one, 1 on error.\n\n\
The host is left as found on every path: success, a probe error, a panic, Ctrl-C/SIGTERM (the run stops \
and reverts); after a SIGKILL, `hostknob revert KNOB` restores from the journal.",
        after_help = "Examples:\n  hostknob verify cpuidle-no-deep-state\n  \
hostknob verify haltpoll-idle-off --rounds 6 --max-rounds 12 --settle 1s --plot /tmp/v.svg -- --samples 100 --gap-us 500..5000\n  \
hostknob verify KNOB --seed 1796035200 --format json     # repeat a run's leg order"
    )]
    Verify(VerifyArgs),
    /// Many hosts' audit JSON outputs as one fleet view: drift per knob, hosts grouped where they agree.
    Report(ReportArgs),
    /// Print the JSON Schema of a machine-readable output (list them without NAME).
    Schema(SchemaArgs),
    /// Print a shell completion script: bash, zsh or fish.
    Completions(CompletionsArgs),
    /// Write man pages for hostknob and every subcommand into a directory (packaging, or ~/.local/share/man/man1).
    Man(ManArgs),
}

/// Which knobs an apply or a revert is about.
#[derive(Args, Debug)]
pub struct KnobChoice {
    /// Knob ids (see `hostknob knobs`).
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
    /// apply: every knob that targets this host; revert: everything the journal holds.
    #[arg(long, conflicts_with = "knobs")]
    pub all: bool,
    /// Wait for another apply or revert to finish instead of failing at once.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub choice: KnobChoice,
    /// Show the plan and check it; write nothing, take no lock.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug)]
pub struct RevertArgs {
    #[command(flatten)]
    pub choice: KnobChoice,
    /// Also remove the persistence file hostknob installed for these knobs
    /// (as `persist KNOB --remove`); without it, revert names the file that
    /// would bring the change back at the next boot.
    #[arg(long)]
    pub persisted: bool,
}

#[derive(Args, Debug)]
pub struct PersistArgs {
    /// The knob id.
    #[arg(value_name = "KNOB")]
    pub knob: String,
    /// Write the artifact under --root.
    #[arg(long, conflicts_with = "remove")]
    pub install: bool,
    /// Delete the artifact hostknob installed.
    #[arg(long)]
    pub remove: bool,
    /// Wait for another hostknob holding the lock instead of failing at once.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Args, Debug)]
pub struct HoldArgs {
    /// The pm-qos knob's id.
    #[arg(value_name = "KNOB")]
    pub knob: String,
}

#[derive(Args, Debug)]
pub struct DocArgs {
    /// Where to write (`-` for stdout) [default: hosts/<host>.md].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Compare with the file instead of writing it: exit 0 if current, 2 (with a diff) if stale.
    #[arg(long)]
    pub check: bool,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only these knob ids (default: every knob for this host).
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
    /// Also write the audit as Prometheus metrics to DIR/hostknob.prom (atomically, for node_exporter's textfile collector).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory to create (or an empty one).
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Yaml,
    Json,
    /// Markdown tables (`report`).
    Markdown,
    /// Prometheus text exposition (`audit`).
    Prometheus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    /// FUTEX_WAIT / FUTEX_WAKE on a private futex word.
    Futex,
    /// A blocking read(2) of an eventfd; the waker writes 1.
    Eventfd,
    /// A blocking read(2) of one byte from a pipe.
    Pipe,
}

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
        long_about = include_str!("help/probe-wakeup.txt"),
        after_help = include_str!("help/probe-wakeup-examples.txt")
    )]
    Wakeup(WakeupArgs),
    /// Timer wakeup lateness by cyclictest's method (absolute clock_nanosleep on CLOCK_MONOTONIC).
    #[command(
        long_about = include_str!("help/probe-timer.txt"),
        after_help = include_str!("help/probe-timer-examples.txt")
    )]
    Timer(TimerArgs),
    /// Light request/response round trips with idle gaps: the built-in echo server or your own service.
    #[command(
        long_about = include_str!("help/probe-rpc.txt"),
        after_help = include_str!("help/probe-rpc-examples.txt")
    )]
    Rpc(RpcArgs),
    /// CPU use of a process as % of one core, from utime + stime in /proc/PID/stat over windows.
    #[command(
        long_about = include_str!("help/probe-idle-cpu.txt"),
        after_help = include_str!("help/probe-idle-cpu-examples.txt")
    )]
    IdleCpu(IdleCpuArgs),
    /// Memory decay after a burst: a process's RSS over time, or a jemalloc burst in hostknob itself.
    #[command(
        long_about = include_str!("help/probe-rss.txt"),
        after_help = include_str!("help/probe-rss-examples.txt")
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

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The knob id (see `hostknob knobs`).
    #[arg(value_name = "KNOB")]
    pub knob: String,
    /// Rounds before the first look (at least 5); each runs both legs, in a seeded order.
    #[arg(long, default_value_t = 6, value_name = "R")]
    pub rounds: usize,
    /// The most rounds before giving up on deciding [default: 4 × --rounds].
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<usize>,
    /// Wait after setting a leg's state before probing (e.g. 2s, 500ms).
    #[arg(long, default_value = "2s", value_parser = crate::probe::parse_seconds, value_name = "DURATION")]
    pub settle: Duration,
    /// Seed of the leg order [default: from the clock; printed, so a run can be repeated].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Use this probe instead of the manifest's `verify.probe` (wakeup, timer or rpc).
    #[arg(long, value_name = "PROBE")]
    pub probe: Option<String>,
    /// Draw both legs' latency distributions (CDFs, log time axis) to FILE.svg.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Wait for another hostknob holding the lock instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    /// Measure on a --sleeper-cpu (--server-cpu, --cpu) outside the knob's target CPUs.
    #[arg(long)]
    pub force: bool,
    /// Options for the probe, after `--` (as `hostknob probe NAME --help` lists them).
    #[arg(last = true, value_name = "PROBE OPTIONS")]
    pub probe_args: Vec<String>,
}

#[derive(Args, Debug)]
#[command(
    long_about = "Read many hosts' `hostknob audit --format json` outputs (files, or directories of \
*.json files, e.g. what ansible/playbooks/audit.yml fetched) and show one fleet view: per knob, the hosts \
grouped where they agree on status and current value; hosts that agree on every knob; what is lost on \
reboot or unpersisted where; the latest verify evidence per knob.\n\n\
--format table (default), markdown, json or yaml. Exit codes: 0 when no host fails its audit; 2 when any \
host drifts (drift, unsupported, lost-on-reboot); 1 when an input cannot be read.",
    after_help = "Examples:\n  hostknob report /srv/hostknob-audits/\n  \
hostknob report --format markdown audits/*.json > fleet.md"
)]
pub struct ReportArgs {
    /// Audit JSON files, or directories holding them.
    #[arg(value_name = "FILE|DIR", required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args, Debug)]
#[command(
    long_about = "Print the JSON Schema (draft 2020-12) of one machine-readable output, generated from \
the Rust type that writes it. Every JSON and YAML output carries `schema: N`, its version; N changes \
only when a field changes meaning or goes away (new fields do not change it). Without NAME, list the names."
)]
pub struct SchemaArgs {
    /// The output, e.g. audit, inventory, probe-wakeup.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  hostknob completions bash > /etc/bash_completion.d/hostknob\n  \
hostknob completions zsh > \"${fpath[1]}/_hostknob\"\n  hostknob completions fish > ~/.config/fish/completions/hostknob.fish"
)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory for hostknob.1 and hostknob-SUBCOMMAND.1 (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}
