//! Command-line options, in one place. Global options may stand before or
//! after the subcommand (`hostknob --root R inventory --format json`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::render::Format;

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
hostknob capture /tmp/web-7 && hostknob --root /tmp/web-7 inventory\n\n\
Exit codes: 0 success, 1 error (nothing changed), 2 audit drift or stale document."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
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
    Inventory,
    /// Copy every file inventory reads into OUT, a tree to use later with --root OUT.
    #[command(
        long_about = "Copy every file that inventory reads into OUT as a mirror tree (symlinks kept as \
symlinks), plus hostknob-capture.yaml (host, time, version, command line, skipped files). \
Then `hostknob --root OUT inventory` prints what this host printed, apart from live counters. \
Files this user may not read are skipped and listed. OUT must be new or empty."
    )]
    Capture(CaptureArgs),
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
    Probe(crate::commands::probe::ProbeArgs),
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory to create (or an empty one).
    pub out: PathBuf,
}
