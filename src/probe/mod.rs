//! Built-in probes: each measures one thing on the live host with real
//! threads, clocks, sockets and the real allocator, and returns a serializable
//! result. Host files (`/sys`, `/proc`, `/dev/cpu_dma_latency`) are read
//! through the root seam.

mod handoff;
mod idle_counters;
pub mod interrupt;
pub mod latency;
pub mod noise_attrib;
mod noise_checks;
mod noise_pin;
pub mod noise_spin;
pub mod noise_trace;
pub mod pmqos;
pub mod residency;
mod resolve;
pub mod wake_split;

/// The probe registry. A probe is one module here plus one line below: its
/// module, its name in [`Probe`] and on the command line (`hostknob probe
/// NAME`, a manifest's `verify.probe`). The latency probes (the ones `verify`
/// compares) also become a [`latency::LatencyProbe`] variant holding the
/// module's `Options`, run through its `run` and [`latency::IntoLatencyRun`].
macro_rules! probes {
    (
        latency { $($lmodule:ident => $lvariant:ident $lname:literal,)* }
        other { $($omodule:ident => $ovariant:ident $oname:literal,)* }
    ) => {
        $(pub mod $lmodule;)*
        $(pub mod $omodule;)*

        #[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
        pub enum Probe {
            $(#[serde(rename = $lname)] $lvariant,)*
            $(#[serde(rename = $oname)] $ovariant,)*
        }

        impl Probe {
            pub const ALL: [Probe; [$($lname,)* $($oname,)*].len()] =
                [$(Probe::$lvariant,)* $(Probe::$ovariant,)*];

            /// Its name on the command line and in manifests.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Probe::$lvariant => $lname,)*
                    $(Probe::$ovariant => $oname,)*
                }
            }

            /// Whether `verify` can compare its runs (it measures latency).
            pub fn is_latency(self) -> bool {
                match self {
                    $(Probe::$lvariant => true,)*
                    $(Probe::$ovariant => false,)*
                }
            }
        }

        /// A latency probe with its options: what `verify` runs in each leg.
        #[derive(Clone, Debug)]
        pub enum LatencyProbe {
            $($lvariant($lmodule::Options),)*
        }

        impl LatencyProbe {
            pub fn probe(&self) -> Probe {
                match self {
                    $(LatencyProbe::$lvariant(_) => Probe::$lvariant,)*
                }
            }

            /// One run, as samples and the settings that shaped them.
            pub fn run(&self, root: &Root) -> Result<latency::LatencyRun> {
                use latency::IntoLatencyRun;
                match self {
                    $(LatencyProbe::$lvariant(o) => $lmodule::run(root, o)?.into_latency_run(),)*
                }
            }
        }
    };
}

probes! {
    latency {
        wakeup => Wakeup "wakeup",
        timer => Timer "timer",
        rpc => Rpc "rpc",
        noise => Noise "noise",
    }
    other {
        idle_cpu => IdleCpu "idle-cpu",
        rss => Rss "rss",
    }
}

impl Probe {
    pub fn parse(name: &str) -> Option<Probe> {
        Probe::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// `wakeup, timer or rpc`: the latency probes, for messages.
    pub fn latency_names() -> String {
        let names: Vec<&str> = Probe::ALL
            .into_iter()
            .filter(|p| p.is_latency())
            .map(Probe::as_str)
            .collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use std::fmt;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::inventory::CPU_DIR;
use crate::root::Root;
use crate::stats::{self, Summary};

/// Set by a caller's signal handler (verify's Ctrl-C) to end a probe run
/// early: the sampling loops check it and stop with an error.
static CANCEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks running probes to stop (async-signal-safe: one atomic store).
pub fn cancel() {
    CANCEL.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn cancelled() -> bool {
    CANCEL.load(std::sync::atomic::Ordering::SeqCst)
}

/// The error a probe stops with when cancelled.
pub fn check_cancelled() -> Result<()> {
    if cancelled() {
        anyhow::bail!("interrupted");
    }
    Ok(())
}

/// Whether a sampling loop goes on after `step` (a sleep): `Ok(false)` when
/// the run was cancelled, so that the probe reports the samples it has,
/// marked partial, instead of dropping them.
pub fn go_on(step: Result<()>) -> Result<bool> {
    match step {
        Ok(()) => Ok(true),
        Err(_) if cancelled() => Ok(false),
        Err(e) => Err(e),
    }
}

/// The signal that cut the run short (`SIGINT`, ...), when one did.
pub fn interrupted_by() -> Option<String> {
    if !cancelled() {
        return None;
    }
    let sig = interrupt::signal().unwrap_or(libc::SIGINT);
    Some(
        nix::sys::signal::Signal::try_from(sig)
            .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string()),
    )
}

/// The error `verify` gets for a cut-short leg: it reports complete rounds only.
pub fn refuse_partial(interrupted: &Option<String>) -> Result<()> {
    match interrupted {
        Some(sig) => bail!("interrupted by {sig}"),
        None => Ok(()),
    }
}

/// CLOCK_MONOTONIC in nanoseconds (vDSO: no system call).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins the calling thread to one CPU. The mask is sized for the CPU, not
/// glibc's fixed 1,024 bits (CPU_ALLOC_SIZE), so hosts with more CPUs work.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    let words = (cpu as usize / 64) + 1;
    let mut mask = vec![0u64; words];
    mask[cpu as usize / 64] |= 1 << (cpu % 64);
    // SAFETY: the kernel reads `words * 8` bytes of `mask`.
    let rc = unsafe { libc::sched_setaffinity(0, words * 8, mask.as_ptr().cast()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot pin a thread to CPU {cpu}"));
    }
    Ok(())
}

/// The calling thread's allowed CPUs (any number of them).
pub fn allowed_cpus() -> Result<CpuList> {
    let mask = crate::inventory::affinity_words().context("sched_getaffinity")?;
    Ok(mask
        .iter()
        .enumerate()
        .flat_map(|(i, w)| {
            (0..64)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| (i * 64 + b) as u32)
        })
        .collect())
}

/// The online CPUs the running kernel isolates (`isolcpus=`), empty when
/// none are or the file is absent.
pub fn isolated_cpus(root: &Root) -> CpuList {
    let r = crate::inventory::Reader::new(root);
    let online = r.cpulist(&format!("{CPU_DIR}/online")).unwrap_or_default();
    r.cpulist(&format!("{CPU_DIR}/isolated"))
        .unwrap_or_default()
        .as_slice()
        .iter()
        .copied()
        .filter(|c| online.contains(*c))
        .collect()
}

/// The CPUs a probe may use: online on the host and allowed to this process.
#[derive(Clone, Debug)]
pub struct Cpus {
    pub online: CpuList,
    pub present: Option<CpuList>,
    pub allowed: CpuList,
    /// Online CPUs the kernel isolates: outside the default affinity, yet a
    /// thread asked to run there may be pinned there.
    pub isolated: CpuList,
}

impl Cpus {
    pub fn read(root: &Root) -> Result<Cpus> {
        let path = format!("{CPU_DIR}/online");
        let text = root
            .read_string(&path)
            .with_context(|| format!("{path}: cannot read the online CPUs"))?;
        let online = CpuList::parse(&text).with_context(|| path.clone())?;
        let present = root
            .read_string(&format!("{CPU_DIR}/present"))
            .ok()
            .and_then(|t| CpuList::parse(&t).ok());
        let allowed = allowed_cpus()?
            .as_slice()
            .iter()
            .copied()
            .filter(|&c| online.contains(c))
            .collect();
        Ok(Cpus {
            isolated: isolated_cpus(root),
            online,
            present,
            allowed,
        })
    }

    /// Checks that `cpu` (given with option `flag`) can run a probe thread.
    pub fn check(&self, flag: &str, cpu: u32) -> Result<u32> {
        if self.allowed.contains(cpu) || self.isolated.contains(cpu) {
            return Ok(cpu);
        }
        let exists = match &self.present {
            Some(p) => p.contains(cpu),
            None => self.online.contains(cpu),
        };
        if !exists {
            let all = self.present.as_ref().unwrap_or(&self.online);
            bail!("{flag} {cpu}: no such CPU (this host has CPUs {all})");
        }
        if !self.online.contains(cpu) {
            bail!(
                "{flag} {cpu}: CPU {cpu} is offline (online CPUs: {})",
                self.online
            );
        }
        bail!(
            "{flag} {cpu}: CPU {cpu} is online but outside this process's CPU affinity (allowed: {})",
            self.allowed
        )
    }

    /// Two different usable CPUs, the given ones or defaults: the last allowed
    /// CPU (usually the one with least housekeeping) and the one before it.
    pub fn pair(
        &self,
        (flag_a, a): (&str, Option<u32>),
        (flag_b, b): (&str, Option<u32>),
    ) -> Result<(u32, u32)> {
        let a = a.map(|c| self.check(flag_a, c)).transpose()?;
        let b = b.map(|c| self.check(flag_b, c)).transpose()?;
        let cpus = self.allowed.as_slice();
        let pick = |not: Option<u32>| cpus.iter().rev().copied().find(|&c| Some(c) != not);
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (Some(a), None) => (a, pick(Some(a)).unwrap_or(a)),
            (None, Some(b)) => (pick(Some(b)).unwrap_or(b), b),
            (None, None) => {
                let b = pick(None).context("no usable CPU")?;
                (pick(Some(b)).unwrap_or(b), b)
            }
        };
        if a == b {
            if self.allowed.len() < 2 {
                bail!(
                    "this probe needs two CPUs, but only CPU {} is online and allowed",
                    self.allowed
                );
            }
            bail!(
                "{flag_a} and {flag_b} are both {a}: they must differ, so that one CPU is idle while the other runs"
            );
        }
        Ok((a, b))
    }
}

/// The idle gap before each sample: a deterministic schedule over [min, max].
/// Gap i is `min + ((i*5) mod 17) * (max - min) / 16`: 17 evenly spaced values
/// visited in a fixed shuffled order, so the probe cannot phase-lock with a
/// periodic timer yet runs the same every time. 50..66 ms reproduces the
/// seed's `50 + (i*5) % 17` ms exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gaps {
    pub min_us: u64,
    pub max_us: u64,
}

impl Gaps {
    pub const SEED: Gaps = Gaps {
        min_us: 50_000,
        max_us: 66_000,
    };

    /// The rule, as reported in each result's settings.
    pub const RULE: &str = "gap(i) = min + ((i*5) mod 17) * (max - min) / 16";

    pub fn gap_ns(&self, i: usize) -> u64 {
        let step = (i as u64 * 5) % 17;
        (self.min_us * 1000) + step * (self.max_us - self.min_us) * 1000 / 16
    }

    /// Parses `A..B` or `A` in the given unit (`us` or `ms`).
    pub fn parse(text: &str, unit_us: u64, flag: &str) -> Result<Gaps> {
        let num = |s: &str| -> Result<u64> {
            s.trim().parse::<u64>().with_context(|| {
                format!(
                    "{flag} {text}: {s:?} is not a whole number (expected A..B, e.g. 200..2000)"
                )
            })
        };
        let (a, b) = match text.split_once("..") {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let v = num(text)?;
                (v, v)
            }
        };
        if a > b {
            bail!("{flag} {text}: the range is descending");
        }
        let (min_us, max_us) = (a * unit_us, b * unit_us);
        if max_us > 3_600_000_000 {
            bail!("{flag} {text}: gaps longer than an hour are not useful");
        }
        Ok(Gaps { min_us, max_us })
    }
}

impl fmt::Display for Gaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{} µs", self.min_us, self.max_us)
    }
}

/// A duration option: a bare number is seconds; `90s`, `2m`, `500ms` also work.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    parse_with_unit(text, Duration::from_secs)
}

/// An interval option: a bare number is microseconds (cyclictest's `-i`); `2ms` also works.
pub fn parse_micros(text: &str) -> Result<Duration, String> {
    parse_with_unit(text, Duration::from_micros)
}

fn parse_with_unit(text: &str, bare: fn(u64) -> Duration) -> Result<Duration, String> {
    let d = match text.trim().parse::<u64>() {
        Ok(n) => bare(n),
        Err(_) => humantime::parse_duration(text.trim())
            .map_err(|e| format!("{text:?}: {e} (examples: 1000, 2ms, 90s, 2m)"))?,
    };
    if d.is_zero() {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(d)
}

/// What a clock read and the probe's own bookkeeping cost, measured at start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Overhead {
    /// Median cost of one CLOCK_MONOTONIC read, from 10,000 back-to-back reads.
    pub clock_read_ns: u64,
    /// The fastest of those reads (the clock's resolution shows here).
    pub clock_read_min_ns: u64,
    /// Median of what a sample reads when nothing happens between its two
    /// timestamps: every sample includes this much of the probe itself.
    pub per_sample_ns: u64,
    /// Median cost of the wake call (or send) itself with no one waiting;
    /// it is part of every sample, as it is of a real wakeup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_call_ns: Option<u64>,
}

/// Measures the clock read cost (median and minimum over back-to-back reads).
pub fn clock_cost() -> (u64, u64) {
    const N: usize = 10_000;
    let mut t = vec![0u64; N + 1];
    for slot in t.iter_mut() {
        *slot = now_ns();
    }
    let mut d: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    d.sort_unstable();
    (stats::percentile_sorted(&d, stats::P50), d[0])
}

/// Median of `f()`'s result over `n` runs.
pub fn median_of(n: usize, mut f: impl FnMut() -> u64) -> u64 {
    let mut v: Vec<u64> = (0..n).map(|_| f()).collect();
    v.sort_unstable();
    stats::percentile_sorted(&v, stats::P50)
}

/// Facts about the host that shape every latency result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    pub kernel: Option<String>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    /// The system-wide PM QoS CPU latency limit before the run (µs; 2000000000 = none),
    /// read from `/dev/cpu_dma_latency` (root only). Another process holding it
    /// low makes wakeups look fast.
    pub cpu_dma_latency_before_us: Option<i64>,
}

impl HostFacts {
    pub fn read(root: &Root) -> HostFacts {
        let text = |p: &str| root.read_trimmed(p).ok().flatten();
        HostFacts {
            kernel: text("/proc/sys/kernel/osrelease"),
            cpuidle_driver: text(&format!("{CPU_DIR}/cpuidle/current_driver")),
            cpuidle_governor: text(&format!("{CPU_DIR}/cpuidle/current_governor"))
                .or_else(|| text(&format!("{CPU_DIR}/cpuidle/current_governor_ro"))),
            cpu_dma_latency_before_us: pmqos::read_aggregate(root),
        }
    }
}

/// The fields every latency probe's JSON has: the distribution, its histogram
/// and the run's overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    #[serde(flatten)]
    pub summary: Summary,
    pub histogram: Vec<stats::Bucket>,
}

impl Latency {
    pub fn from_ns(samples: &[u64]) -> Result<Latency> {
        Ok(Latency {
            summary: Summary::from_ns(samples).context("the run produced no samples")?,
            histogram: stats::histogram(samples),
        })
    }
}

/// The test suite's seam (only in its binary: [`crate::test_hooks`]): with
/// `HOSTKNOB_TEST_PROBE_ON_ROOT=1`, probes and verify run under a `--root`
/// tree, so that verify's orchestration is tested on copies of captures.
/// The measurement is still of this machine; never set it outside the suite.
pub const PROBE_ON_ROOT_VAR: &str = "HOSTKNOB_TEST_PROBE_ON_ROOT";

/// Refuses a probe (or verify) under a root other than `/`: the probe would
/// measure this machine and report the tree's idle states and CPUs as if
/// they were the ones measured.
pub fn require_live(root: &Root, what: &str) -> Result<()> {
    if root.is_live() || crate::test_hooks::var_os(PROBE_ON_ROOT_VAR).is_some_and(|v| v == "1") {
        return Ok(());
    }
    anyhow::bail!(
        "{what} measures this machine, not the tree at --root {}: run it on the host itself (without --root)",
        root.base().display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_masks_round_trip_beyond_one_word() {
        let before = allowed_cpus().unwrap();
        assert!(!before.is_empty());
        let cpu = before.as_slice().last().copied().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), CpuList::new(vec![cpu]));
            // A CPU far beyond 1,024 is refused by the kernel, not by the mask size.
            let err = pin_current_thread(5000).unwrap_err();
            assert!(format!("{err:#}").contains("CPU 5000"), "{err:#}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn seed_schedule_is_reproduced() {
        // The seed: 50 + (i*5) % 17 ms.
        for i in 0..200 {
            assert_eq!(
                Gaps::SEED.gap_ns(i),
                (50 + (i as u64 * 5) % 17) * 1_000_000,
                "i = {i}"
            );
        }
        let g = Gaps::parse("200..2000", 1, "--gap-us").unwrap();
        assert_eq!(g.gap_ns(0), 200_000);
        // i = 10: step (50 mod 17) = 16: the top of the range.
        assert_eq!(g.gap_ns(10), 2_000_000);
        assert!((0..100).all(|i| (200_000..=2_000_000).contains(&g.gap_ns(i))));
        assert_eq!(Gaps::parse("50..66", 1000, "--gap-ms").unwrap(), Gaps::SEED);
        assert_eq!(
            Gaps::parse("7", 1000, "--gap-ms").unwrap().gap_ns(3),
            7_000_000
        );
    }

    #[test]
    fn bad_gaps_are_refused_with_the_flag() {
        for bad in ["9..1", "a..2", "1..", ""] {
            let e = Gaps::parse(bad, 1, "--gap-us").unwrap_err().to_string();
            assert!(e.starts_with("--gap-us"), "{e}");
        }
    }

    #[test]
    fn durations_take_bare_numbers_in_their_unit() {
        assert_eq!(parse_seconds("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_seconds("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_micros("1000").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_micros("2ms").unwrap(), Duration::from_millis(2));
        assert!(parse_seconds("0").is_err());
        assert!(parse_micros("fast").is_err());
    }

    fn cpus(online: &str, present: &str, allowed: &str) -> Cpus {
        Cpus {
            online: CpuList::parse(online).unwrap(),
            present: Some(CpuList::parse(present).unwrap()),
            allowed: CpuList::parse(allowed).unwrap(),
            isolated: CpuList::default(),
        }
    }

    #[test]
    fn cpu_checks_name_the_problem() {
        let c = cpus("0-1,3", "0-3", "0-1");
        assert_eq!(c.check("--cpu", 1).unwrap(), 1);
        let e = c.check("--cpu", 9).unwrap_err().to_string();
        assert_eq!(e, "--cpu 9: no such CPU (this host has CPUs 0-3)");
        let e = c.check("--cpu", 2).unwrap_err().to_string();
        assert_eq!(e, "--cpu 2: CPU 2 is offline (online CPUs: 0-1,3)");
        let e = c.check("--cpu", 3).unwrap_err().to_string();
        assert!(
            e.contains("outside this process's CPU affinity (allowed: 0-1)"),
            "{e}"
        );
        // An isolated CPU is outside the default affinity, but may be asked for.
        let iso = Cpus {
            isolated: CpuList::parse("3").unwrap(),
            ..c
        };
        assert_eq!(iso.check("--cpu", 3).unwrap(), 3);
    }

    #[test]
    fn pairs_default_to_two_different_cpus() {
        let c = cpus("0-3", "0-3", "0-3");
        assert_eq!(c.pair(("--a", None), ("--b", None)).unwrap(), (2, 3));
        assert_eq!(c.pair(("--a", None), ("--b", Some(1))).unwrap(), (3, 1));
        assert_eq!(c.pair(("--a", Some(3)), ("--b", None)).unwrap(), (3, 2));
        let e = c.pair(("--a", Some(1)), ("--b", Some(1))).unwrap_err();
        assert!(e.to_string().contains("must differ"), "{e}");
        let one = cpus("0", "0", "0");
        let e = one.pair(("--a", None), ("--b", None)).unwrap_err();
        assert!(e.to_string().contains("needs two CPUs"), "{e}");
    }

    #[test]
    fn clock_is_cheap_and_monotonic() {
        let (median, min) = clock_cost();
        assert!(min <= median);
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
    }
}
