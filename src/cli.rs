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
    /// The knob manifest directory [default: ./manifest if it exists, else /etc/hostknob/manifest under --root].
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
    Inventory,
    /// Copy every file inventory reads into OUT, a tree to use later with --root OUT.
    #[command(
        long_about = "Copy every file that inventory reads into OUT as a mirror tree (symlinks kept as \
symlinks), plus hostknob-capture.yaml (host, time, version, command line, skipped files). \
Then `hostknob --root OUT inventory` prints what this host printed, apart from live counters. \
Files this user may not read are skipped and listed. OUT must be new or empty."
    )]
    Capture(CaptureArgs),
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
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only these knob ids (default: every knob for this host).
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory to create (or an empty one).
    pub out: PathBuf,
}
