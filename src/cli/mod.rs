//! Command-line options, in one place. Each subcommand takes only the shared
//! options it uses (--root, --format, ...); they may also stand before the
//! subcommand's name (`hostknob --root R inventory --format json`): [`hoist`]
//! moves them after it before clap parses.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;

use std::time::Duration;

mod import;
mod isolate;
mod probe;
mod tune;
pub use import::{ImportArgs, ImportTool};
pub use isolate::IsolateArgs;
pub use probe::*;
pub use tune::TuneArgs;

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
Options shared by subcommands (--root, --format, --host, --manifest, --state-dir, --quiet) \
may stand before the subcommand's name for every subcommand, which ignores there those it does not use \
(as it ignores their HOSTKNOB_* variables), --format excepted; after the name, each takes those its --help lists.\n\n\
Exit codes: 0 success, 1 error or usage error (nothing changed), 2 audit drift or stale document, \
3 verify inconclusive, 130 interrupted (Ctrl-C)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct InventoryArgs {
    /// Only these sections, in every format (all when none is named).
    #[arg(value_enum, value_name = "SECTION")]
    pub sections: Vec<Section>,
    /// The same as naming SECTION; may be repeated.
    #[arg(long = "section", value_enum, value_name = "SECTION")]
    pub section: Vec<Section>,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Args, Debug)]
pub struct KnobsArgs {
    /// Only these knob ids (default: every knob for this host).
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
    /// List the manifest's profiles instead: knobs, includes, hosts, overrides, whether each applies here.
    #[arg(long, conflicts_with = "knobs")]
    pub profiles: bool,
    /// Also list the knobs for other hosts, with their `hosts:` (they are not audited here).
    #[arg(long, conflicts_with = "profiles")]
    pub all_hosts: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub state: StateArg,
    #[command(flatten)]
    pub format: FormatArg,
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
    Platform,
    Processes,
}

/// `--root`: the tree every host path is read (and written) under.
#[derive(Args, Debug, Clone)]
pub struct RootArg {
    /// Read and write every host path (/sys, /proc, /etc, /dev, /var/lib/hostknob) under DIR.
    #[arg(long, value_name = "DIR", env = "HOSTKNOB_ROOT", default_value = "/")]
    pub root: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct HostArg {
    /// Host name used for the manifest and ledger [default: the host's hostname].
    #[arg(long, value_name = "NAME", env = "HOSTKNOB_HOST", value_parser = crate::name::host_arg)]
    pub host: Option<String>,
}

/// What reads a host tree and prints a result takes.
#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    #[command(flatten)]
    pub root: RootArg,
    #[command(flatten)]
    pub host: HostArg,
    #[command(flatten)]
    pub format: FormatArg,
}

/// The host tree, its name and its manifest: what reads the manifest needs.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    #[command(flatten)]
    pub root: RootArg,
    #[command(flatten)]
    pub host: HostArg,
    /// The knob manifest directory [default: /etc/hostknob/manifest under --root].
    #[arg(long, value_name = "DIR", env = "HOSTKNOB_MANIFEST")]
    pub manifest: Option<PathBuf>,
    /// Local overrides of knobs' set/target, *.yaml files [default: /etc/hostknob/overrides under --root].
    #[arg(long, value_name = "DIR", env = "HOSTKNOB_OVERRIDES")]
    pub overrides: Option<PathBuf>,
    /// Only the knobs of this profile (profiles/NAME.yaml in the manifest, with its includes), its overrides applied.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct StateArg {
    /// Where hostknob keeps its journal, lock and this host's ledger (ledger.yaml), resolved under --root.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/hostknob")]
    pub state_dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct FormatArg {
    /// Output format: table for people; yaml and json are stable for machines.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct QuietArg {
    /// No progress on stderr (shown only when stderr is a terminal); apply and
    /// revert print what happened without the plan of every file.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Hardware and kernel facts: CPUs, caches, frequency, idle states, memory, NUMA, NICs, processes.
    #[command(
        long_about = include_str!("../help/inventory.txt"),
        after_help = "Examples:\n  hostknob inventory\n  hostknob inventory network          # NICs: queues, coalescing, rings, offloads, RPS/XPS, IRQs\n  \
hostknob inventory network --format json\n  hostknob --root /tmp/web-7 inventory network"
    )]
    Inventory(InventoryArgs),
    /// Copy every file inventory reads into --out DIR, a tree to use later with --root DIR.
    #[command(
        long_about = include_str!("../help/capture.txt"),
        after_help = "Examples:\n  hostknob capture --out /tmp/web-7\n  hostknob --root /tmp/web-7 inventory"
    )]
    Capture(CaptureArgs),
    /// Write the host document (Markdown) to hosts/<host>.md, or check that it is current.
    #[command(
        long_about = include_str!("../help/doc.txt"),
        after_help = "Examples:\n  hostknob doc                       # writes hosts/$(hostname).md\n  \
hostknob --root /tmp/web-7 --host web-7 doc --check\n  hostknob doc --out -             # to stdout"
    )]
    Doc(DocArgs),
    /// The manifest's knobs for this host: desired value, current value (grouped) and status.
    #[command(
        long_about = include_str!("../help/knobs.txt")
    )]
    Knobs(KnobsArgs),
    /// Check every knob for this host: ok, drift, lost-on-reboot, unsupported, not-applicable, unpersisted.
    #[command(
        long_about = include_str!("../help/audit.txt"),
        after_help = "Examples:\n  hostknob audit\n  hostknob --root /tmp/rpc-ap-1 --manifest manifest audit --format json\n  \
hostknob audit cpuidle-no-deep-state"
    )]
    Audit(AuditArgs),
    /// Measure the host: wakeup and timer latency, RPC round trips, a process's idle CPU and memory decay.
    #[command(
        long_about = include_str!("../help/probe.txt"),
        after_help = "Examples:\n  hostknob probe wakeup --format json\n  \
hostknob probe timer --interval 1000 --loops 10000 --pmqos-us 0\n  \
hostknob probe rss --self-burst --duration 35s"
    )]
    Probe(ProbeArgs),
    /// Change knobs safely: plan (as a diff), check, journal, write, read back, record.
    #[command(
        long_about = include_str!("../help/apply.txt"),
        after_help = "Examples:\n  hostknob apply cpuidle-no-deep-state --dry-run\n  \
sudo hostknob apply cpuidle-no-deep-state\n  sudo hostknob apply --all --wait"
    )]
    Apply(ApplyArgs),
    /// Restore the values recorded before the first apply, read them back, record it.
    #[command(
        long_about = include_str!("../help/revert.txt")
    )]
    Revert(RevertArgs),
    /// Print (or install) what makes knobs survive a reboot: tmpfiles.d, sysctl.d, drop-in, cmdline, .link file, udev rule.
    #[command(
        long_about = include_str!("../help/persist.txt"),
        after_help = "Examples:\n  hostknob persist thp-madvise                # print the artifact\n  \
sudo hostknob persist thp-madvise --install\n  \
sudo hostknob persist ens1f0-queues --install  # a NIC knob: /etc/systemd/network/50-hostknob-ens1f0.link\n  \
sudo hostknob persist ens1f0-rps --remove"
    )]
    Persist(PersistArgs),
    /// Hold a pm-qos knob's PM QoS request in the foreground until SIGTERM or Ctrl-C.
    #[command(
        long_about = include_str!("../help/hold.txt")
    )]
    Hold(HoldArgs),
    /// A/B one knob with its probe in shuffled rounds; a verdict you can defend, recorded as evidence.
    #[command(
        long_about = include_str!("../help/verify.txt"),
        after_help = "Examples:\n  hostknob verify cpuidle-no-deep-state\n  \
hostknob verify haltpoll-idle-off --rounds 6 --max-rounds 12 --settle 1s --plot /tmp/v.svg -- --samples 100 --gap-us 500..5000\n  \
hostknob verify KNOB --seed 1796035200 --format json     # repeat a run's leg order\n  \
hostknob verify resume-latency-cpu1 --sweep 0,5,20,100,n/a --plot /tmp/knee.svg\n  \
hostknob verify cpuidle-no-deep-state thp-madvise       # a bundle: each knob's share"
    )]
    Verify(VerifyArgs),
    /// Search a space of knob values for the ones that help this host, each step a verify verdict, with a stated false-step rate; advice as a manifest directory.
    #[command(
        long_about = include_str!("../help/tune.txt"),
        after_help = "Examples:\n  hostknob tune --space space.yaml --plan --budget 20m\n  \
hostknob tune --space space.yaml --out /tmp/tuned --budget 30m --svg\n  \
hostknob tune --space ipc.yaml --out /tmp/ipc --probe command --metric 'regex:took ([0-9.]+) ms' -- ./bench.sh\n  \
hostknob tune --replay /tmp/tuned            # every decision again from the recorded samples"
    )]
    Tune(TuneArgs),
    /// Plan which CPUs to isolate from this host's topology, as manifest knobs to review and apply.
    #[command(
        long_about = include_str!("../help/isolate.txt"),
        after_help = "Examples:\n  hostknob isolate --count 8                 # the fragment on stdout, the reasons on stderr\n  \
hostknob isolate --count 8 --out manifest/isolation/\n  hostknob isolate --cpus 4-11 --format json | jq .housekeeping\n  \
hostknob isolate --cpus 1-1                # CPU 1 alone (a bare `--cpus 1` is the old spelling of --count 1)\n  \
hostknob --root /tmp/web-7 --host web-7 isolate --count 16 --out /tmp/web-7-isolation"
    )]
    Isolate(IsolateArgs),
    /// Translate another tool's tuning (a tuned profile) into manifest knobs to review, with what could not be imported and why.
    #[command(
        long_about = include_str!("../help/import.txt"),
        after_help = "Examples:\n  hostknob import tuned --list\n  \
hostknob import tuned latency-performance --out manifest/tuned/\n  \
hostknob --root /tmp/spr1 import tuned network-latency --out /tmp/nl\n  \
hostknob import tuned my-profile --from ./tuned-profiles --out /tmp/mine"
    )]
    Import(ImportArgs),
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
    /// With --wait: give up (changing nothing) when the lock is still held
    /// after DURATION (`90s`, `2min`), as a unit at boot must.
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = humantime::parse_duration)]
    pub wait_limit: Option<std::time::Duration>,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub choice: KnobChoice,
    /// Show the plan and check it; write nothing, take no lock.
    #[arg(long)]
    pub dry_run: bool,
    /// What the boot unit runs: every knob for this host that persists
    /// (not `persistence: runtime`), each applied on its own, so one that
    /// fails (named, exit 1) leaves the others applied. Knobs persisted by
    /// the command line, a drop-in or `hold` are left to their own mechanism.
    #[arg(long, conflicts_with_all = ["knobs", "all"])]
    pub boot: bool,
    /// What the chart's apply DaemonSet runs (with --profile NAME): each
    /// runtime knob of the profile applied on its own; a knob that needs a
    /// reboot or a service restart (kernel-cmdline, systemd-cpu-affinity,
    /// allocator, hold) reported pending and never written; a knob the
    /// journal holds that left the profile reverted.
    #[arg(long, requires = "profile", conflicts_with_all = ["knobs", "all", "boot"])]
    pub pod: bool,
    /// Apply a knob that tuned's active profile sets differently (without it
    /// such a knob is refused: tuned would undo it on its next reapply):
    /// `--force=KNOB` for that knob only (repeatable); plain `--force`
    /// overrides every one.
    #[arg(long, value_name = "KNOB", num_args = 0..=1, require_equals = true, default_missing_value = "", action = clap::ArgAction::Append)]
    pub force: Vec<String>,
    #[command(flatten)]
    pub change: ChangeArgs,
}

/// What every command that changes the host takes.
#[derive(Args, Debug)]
pub struct ChangeArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub state: StateArg,
    #[command(flatten)]
    pub format: FormatArg,
    #[command(flatten)]
    pub quiet: QuietArg,
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
    /// Restore files that no longer hold what hostknob wrote (someone else
    /// changed them since) and entries from another boot; without it they
    /// are left alone and named.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub change: ChangeArgs,
}

#[derive(Args, Debug)]
pub struct PersistArgs {
    /// Knob ids, each handled in turn (see `hostknob knobs`).
    #[arg(value_name = "KNOB", required = true)]
    pub knobs: Vec<String>,
    /// Write the artifact under --root.
    #[arg(long, conflicts_with = "remove")]
    pub install: bool,
    /// Delete the artifact hostknob installed.
    #[arg(long)]
    pub remove: bool,
    /// Wait for another hostknob holding the lock instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub change: ChangeArgs,
}

#[derive(Args, Debug)]
pub struct HoldArgs {
    /// The pm-qos knob's id.
    #[arg(value_name = "KNOB")]
    pub knob: String,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Args, Debug)]
pub struct DocArgs {
    /// Where to write (`-` for stdout) [default: hosts/<host>.md].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Compare with the file instead of writing it: exit 0 if current, 2 (with a diff) if stale.
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub state: StateArg,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only these knob ids (default: every knob for this host).
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
    /// Also write the audit as Prometheus metrics to DIR/hostknob.prom (atomically, for node_exporter's textfile collector).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
    /// Audit as the DaemonSet's pod (its chart sets HOSTKNOB_POD=1): the paths the chart does not mount (docs/fleet.md) are not read, and what depends on them is `unknown`, not absent.
    #[arg(long, env = "HOSTKNOB_POD", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub pod: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub state: StateArg,
    /// Output format: table for people; yaml and json are stable for machines;
    /// prometheus is the text exposition format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: AuditFormat,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory to create (or an empty one).
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "out_positional",
        conflicts_with = "out_positional"
    )]
    pub out: Option<PathBuf>,
    /// The old spelling `capture DIR`, still taken (with a note).
    #[arg(value_name = "DIR", hide = true)]
    pub out_positional: Option<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub quiet: QuietArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Yaml,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditFormat {
    Table,
    Yaml,
    Json,
    /// Prometheus text exposition.
    Prometheus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Table,
    /// Markdown tables.
    Markdown,
    Yaml,
    Json,
    /// A row per host and knob.
    Csv,
    /// JUnit XML: a test suite per host, a test case per knob.
    Junit,
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

/// `5%` or `5` as 0.05.
pub(crate) fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "{text:?}: give a percentage from 0 to 100, e.g. 5%"
        )),
    }
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The knob id (see `hostknob knobs`).
    #[arg(value_name = "KNOB")]
    pub knob: String,
    /// More knobs: verify them as a bundle (legs as found, all together, and
    /// all but each one), each knob's share of the effect with its interval.
    #[arg(value_name = "KNOB")]
    pub more: Vec<String>,
    /// Rounds before the first look (at least 5); each runs both legs, in a seeded order.
    #[arg(long, default_value_t = 6, value_name = "R")]
    pub rounds: usize,
    /// The most rounds before giving up on deciding, at most 60 [default: 4 × --rounds, at most 60].
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
    /// Draw the run to FILE.svg: both legs' distributions (CDFs, log time
    /// axis), or with --sweep each value's ratio with its interval.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Wait for another hostknob holding the lock instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    /// Measure on a --sleeper-cpu (--server-cpu, --cpu) outside the knob's target CPUs.
    #[arg(long)]
    pub force: bool,
    /// Sweep the knob over these values (each a leg in every round, with as
    /// found): each value's ratio to as found and the knee. Ordered kinds only:
    /// pm-qos-resume-latency (`0,5,20,100,n/a`), pm-qos, cpufreq-min, cpufreq-epp, numeric sysctl.
    #[arg(long, value_delimiter = ',', value_name = "V1,V2,...")]
    pub sweep: Vec<String>,
    /// The knee is the least aggressive improved value whose ratio is within this of the best's.
    #[arg(long, default_value = "5%", value_parser = parse_percent, value_name = "PCT")]
    pub knee_tolerance: f64,
    /// The old spelling of --plot for a sweep, still taken (with a note).
    #[arg(
        long,
        value_name = "FILE.svg",
        requires = "sweep",
        conflicts_with = "plot",
        hide = true
    )]
    pub svg: Option<PathBuf>,
    /// Options for the probe, after `--` (as `hostknob probe NAME --help` lists them).
    #[arg(last = true, value_name = "PROBE OPTIONS")]
    pub probe_args: Vec<String>,
    #[command(flatten)]
    pub change: ChangeArgs,
}

#[derive(Args, Debug)]
#[command(
    long_about = include_str!("../help/report.txt"),
    after_help = "Examples:\n  hostknob report /srv/hostknob-audits/\n  \
hostknob report --format markdown audits/*.json > fleet.md\n  \
hostknob report --format junit audits/ > hostknob-junit.xml\n  \
hostknob report --compare audits-monday/ audits-tuesday/"
)]
pub struct ReportArgs {
    /// Audit JSON files, or directories holding them.
    #[arg(value_name = "FILE|DIR", required_unless_present = "compare")]
    pub inputs: Vec<PathBuf>,
    /// What changed between two rounds of audits: hosts added or gone, knobs
    /// that started or stopped drifting where (exit 2 when any started).
    #[arg(long, num_args = 2, value_names = ["OLD_DIR", "NEW_DIR"], conflicts_with = "inputs")]
    pub compare: Option<Vec<PathBuf>>,
    /// Output format: table or markdown for people; yaml and json for
    /// machines; csv (a row per host and knob) and junit (XML, a test suite
    /// per host) for CI gates.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Exit 1 when an input cannot be read (empty, truncated, another
    /// schema). Without it such files are listed in a section of their own
    /// and every readable host is reported.
    #[arg(long)]
    pub strict: bool,
    /// Hosts audited longer ago than this are listed as stale (30m, 2h, 1d).
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = humantime::parse_duration)]
    pub max_age: std::time::Duration,
}

#[derive(Args, Debug)]
#[command(
    long_about = include_str!("../help/schema.txt")
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
