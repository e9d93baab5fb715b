//! `probe noise`: OS noise on a CPU, by oslat's and rtla osnoise's method.
//!
//! On each target CPU a pinned thread reads CLOCK_MONOTONIC in a tight loop
//! and never sleeps; whenever two consecutive reads are further apart than
//! the threshold, something else had the CPU (an interrupt, a softirq,
//! another thread, the hypervisor): that gap is lost time. Per CPU: the
//! lost time (µs per second, ppm), the gaps, their distribution, and who
//! took the time (`noise_attrib`: tracefs events overlapping the gaps, or
//! counts per source from procfs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::noise_attrib::{self, CpuEvidence, Evidence, Method, Source};
use super::noise_spin::{Spin, round3, share};
use super::pmqos::{self, PmQosSetting};
use super::{noise_checks, noise_pin};
use super::{Cpus, HostFacts, now_ns, pin_current_thread};
use crate::cpulist::CpuList;
use crate::root::Root;
use crate::stats::{self, Summary};

/// Set when one measuring thread could not start: the others stop.
static STOP: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Debug)]
pub struct Options {
    pub cpus: CpuList,
    pub duration: Duration,
    pub threshold: Duration,
    pub priority: Option<u32>,
    pub attribution: Method,
    pub pmqos_us: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NoiseResult {
    pub probe: String,
    pub settings: Settings,
    /// How the lost time was attributed: `tracefs` (events overlapping each
    /// gap) or `counts` (events counted per source in procfs, time estimated).
    pub attribution: String,
    /// Why tracefs was not used, when it was not.
    pub attribution_note: Option<String>,
    /// What may bend the figures: no CPU left for hostknob's own threads,
    /// RT throttling under `--priority`, a slow clocksource.
    pub warnings: Vec<String>,
    pub cpus: Vec<CpuNoise>,
    /// True when a signal stopped the run early: the figures cover `measured_ns`.
    pub partial: bool,
    /// The signal that stopped the run; null: it completed.
    pub interrupted: Option<String>,
    pub duration_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub cpus: CpuList,
    pub duration_ms: u64,
    /// A gap between two clock reads longer than this is lost time.
    pub threshold_ns: u64,
    /// SCHED_FIFO priority of the measuring threads; null: SCHED_OTHER.
    pub priority: Option<u32>,
    pub clock: String,
    /// The kernel's clocksource (`current_clocksource`); hpet and acpi_pm
    /// make every clock read a system call.
    pub clocksource: Option<String>,
    pub pm_qos: PmQosSetting,
    pub host: HostFacts,
}

/// One CPU's noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuNoise {
    pub cpu: u32,
    /// How long the thread measured (first to last clock read).
    pub measured_ns: u64,
    /// Clock reads (loop iterations).
    pub loops: u64,
    /// The sum of the gaps above the threshold.
    pub lost_ns: u64,
    pub lost_us_per_s: f64,
    /// Lost time in parts per million of the measured time.
    pub ppm: f64,
    /// Gaps above the threshold.
    pub gaps: u64,
    pub max_gap_ns: u64,
    /// The gaps' distribution (null: no gap above the threshold).
    pub gap: Option<Summary>,
    pub histogram: Vec<stats::Bucket>,
    /// Who took the time, largest first.
    pub sources: Vec<Source>,
    /// Lost time no source explains (SMIs, hypervisor exits, tracing gaps).
    pub unexplained_ns: u64,
    pub unexplained_share: f64,
    /// (start, length) of every gap, ns.
    #[serde(skip)]
    pub raw: Vec<(u64, u64)>,
}

/// Refuses CPUs that cannot run a measuring thread, saying why.
fn check_cpus(root: &Root, cpus: &CpuList) -> Result<()> {
    if cpus.is_empty() {
        bail!("--cpus: give at least one CPU");
    }
    let usable = Cpus::read(root)?;
    let own = crate::task::cpuset(root, std::process::id(), std::process::id());
    for &c in cpus.as_slice() {
        if let Some(set) = own.as_ref().filter(|s| !s.contains(c))
            && usable.online.contains(c)
        {
            bail!("--cpus {cpus}: CPU {c} is outside this process's cpuset (cpuset.cpus.effective: {set})");
        }
        usable.check("--cpus", c)?;
    }
    Ok(())
}

fn set_fifo(priority: u32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: priority as i32,
    };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!("--priority {priority}: cannot use SCHED_FIFO (it needs root or CAP_SYS_NICE)")
        });
    }
    Ok(())
}

/// Back to SCHED_OTHER (the thread's class before `set_fifo`).
fn set_other() {
    let param = libc::sched_param { sched_priority: 0 };
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
}

/// The loop: pinned, reading the clock until `duration` has passed.
fn spin(
    cpu: u32,
    duration_ns: u64,
    threshold_ns: u64,
    priority: Option<u32>,
    go: &AtomicBool,
    tid: &std::sync::mpsc::Sender<Option<u32>>,
) -> Result<Spin> {
    let ready = pin_current_thread(cpu).and_then(|()| priority.map_or(Ok(()), set_fifo));
    // Every thread says whether it is ready, so the caller never waits on one that failed.
    let _ = tid.send(ready.is_ok().then(|| unsafe { libc::gettid() } as u32));
    ready?;
    // Room for 20,000 gaps a second, touched before the loop.
    let mut gaps: Vec<(u64, u64)> = Vec::with_capacity((duration_ns / 50_000) as usize + 1024);
    gaps.resize(gaps.capacity(), (1, 1));
    gaps.clear();
    while !go.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let start = now_ns();
    let end = start + duration_ns;
    let mut prev = start;
    let mut loops = 0u64;
    loop {
        let t = now_ns();
        let d = t - prev;
        if d > threshold_ns {
            gaps.push((prev, d));
        }
        prev = t;
        loops += 1;
        if t >= end || (loops & 0x3ff == 0 && (super::cancelled() || STOP.load(Ordering::Relaxed))) {
            break;
        }
    }
    if priority.is_some() {
        set_other();
    }
    Ok(Spin {
        cpu,
        tid: 0,
        start_ns: start,
        end_ns: prev,
        loops,
        gaps,
    })
}

/// Starts one measuring thread per CPU, releases them together, joins them;
/// `during` runs on the calling thread meanwhile (tracefs reading), given
/// the threads' ids and when the run ends.
fn measure(opts: &Options, during: impl FnOnce(&[u32], u64)) -> Result<Vec<Spin>> {
    let duration_ns = opts.duration.as_nanos() as u64;
    let threshold_ns = opts.threshold.as_nanos() as u64;
    let go = AtomicBool::new(false);
    std::thread::scope(|s| -> Result<Vec<Spin>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let handles: Vec<_> = opts
            .cpus
            .as_slice()
            .iter()
            .map(|&cpu| {
                let (go, tx) = (&go, tx.clone());
                std::thread::Builder::new()
                    .name(format!("noise/{cpu}"))
                    .spawn_scoped(s, move || spin(cpu, duration_ns, threshold_ns, opts.priority, go, &tx))
                    .context("cannot start a measuring thread")
            })
            .collect::<Result<_>>()?;
        drop(tx);
        let tids: Vec<u32> = rx.iter().take(handles.len()).flatten().collect();
        let all = tids.len() == handles.len();
        if !all {
            // A thread failed before its loop: the others stop at once.
            STOP.store(true, Ordering::Release);
        }
        go.store(true, Ordering::Release);
        if all {
            during(&tids, now_ns() + duration_ns);
        }
        let mut spins = Vec::new();
        for h in handles {
            spins.push(h.join().expect("noise thread panicked"));
        }
        STOP.store(false, Ordering::Release);
        let mut spins = spins.into_iter().collect::<Result<Vec<Spin>>>()?;
        for (s, t) in spins.iter_mut().zip(tids) {
            s.tid = t;
        }
        Ok(spins)
    })
}

pub fn run(root: &Root, opts: &Options) -> Result<NoiseResult> {
    super::require_live(root, "probe noise")?;
    check_cpus(root, &opts.cpus)?;
    if opts.threshold.is_zero() {
        bail!("--threshold: must be longer than zero");
    }
    let threshold_ns = opts.threshold.as_nanos() as u64;
    let (clocksource, slow_clock) = noise_checks::clocksource(root, threshold_ns)?;
    let mut warnings: Vec<String> = slow_clock.into_iter().collect();
    warnings.extend(noise_checks::rt_throttling(root, opts.priority));
    let host = HostFacts::read(root);
    let hold = opts.pmqos_us.map(|us| pmqos::hold(root, us)).transpose()?;
    let start = now_ns();
    // Before any thread of the run starts: they inherit the main thread's CPUs.
    let allowed = Cpus::read(root)?.allowed;
    let (pinned, no_room) = noise_pin::others_off(&opts.cpus, &allowed);
    warnings.extend(no_room);
    let mut attrib = noise_attrib::Attribution::start(root, opts.attribution, &opts.cpus);
    attrib.check()?;
    let spins = measure(opts, |tids, until| attrib.watch(tids, until))?;
    drop(pinned);
    let pm_qos = PmQosSetting::of(&hold);
    drop(hold);
    let interrupted = spins
        .iter()
        .any(|s| s.end_ns.saturating_sub(s.start_ns) + 1_000_000 < opts.duration.as_nanos() as u64)
        .then(super::interrupted_by)
        .flatten();
    let (method, note, mut per_cpu) = attrib.finish(root, &spins);
    let cpus = spins
        .into_iter()
        .map(|s| {
            let sources = per_cpu.remove(&s.cpu).unwrap_or_default();
            cpu_noise(s, sources)
        })
        .collect();
    Ok(NoiseResult {
        probe: super::Probe::Noise.as_str().into(),
        settings: Settings {
            cpus: opts.cpus.clone(),
            duration_ms: opts.duration.as_millis() as u64,
            threshold_ns: opts.threshold.as_nanos() as u64,
            priority: opts.priority,
            clock: "CLOCK_MONOTONIC (vDSO), read back to back".into(),
            clocksource,
            pm_qos,
            host,
        },
        attribution: method.as_str().into(),
        attribution_note: note,
        warnings,
        cpus,
        partial: interrupted.is_some(),
        interrupted,
        duration_ms: (now_ns() - start) / 1_000_000,
    })
}

/// One CPU's figures from its gaps and its attributed sources.
pub fn cpu_noise(s: Spin, attributed: noise_attrib::Attributed) -> CpuNoise {
    let measured_ns = s.end_ns.saturating_sub(s.start_ns).max(1);
    let lengths: Vec<u64> = s.gaps.iter().map(|g| g.1).collect();
    let lost_ns: u64 = lengths.iter().sum();
    let per_s = lost_ns as f64 * 1e9 / measured_ns as f64;
    let (sources, unexplained_ns) = attributed.into_sources(lost_ns);
    CpuNoise {
        cpu: s.cpu,
        measured_ns,
        loops: s.loops,
        lost_ns,
        lost_us_per_s: round3(per_s / 1e3),
        ppm: round3(lost_ns as f64 * 1e6 / measured_ns as f64),
        gaps: lengths.len() as u64,
        max_gap_ns: lengths.iter().copied().max().unwrap_or(0),
        gap: Summary::from_ns(&lengths),
        histogram: stats::histogram(&lengths),
        sources,
        unexplained_ns,
        unexplained_share: share(unexplained_ns, lost_ns),
        raw: s.gaps,
    }
}

impl NoiseResult {
    /// What verify keeps of a leg: per CPU the lost time and its top sources.
    pub fn evidence(&self) -> Evidence {
        Evidence {
            attribution: self.attribution.clone(),
            cpus: self
                .cpus
                .iter()
                .map(|c| CpuEvidence {
                    cpu: c.cpu,
                    lost_us_per_s: c.lost_us_per_s,
                    gaps: c.gaps,
                    max_gap_ns: c.max_gap_ns,
                    top: c.sources.iter().take(8).cloned().collect(),
                    unexplained_share: c.unexplained_share,
                })
                .collect(),
        }
    }
}

/// What `verify` compares in a round: the lost time of every measured CPU
/// together, per CPU-second (ns/s). On an isolated CPU noise is sparse: most
/// short windows hold no gap, so a median of windows sees none in either
/// leg, while the round's total still counts every event. A round with no
/// gap counts as one gap of the threshold (the least the probe can see), so
/// that every round has a ratio and a silent leg is not a thousandfold change.
pub fn round_lost_per_s(cpus: &[CpuNoise], threshold_ns: u64) -> f64 {
    let measured: u64 = cpus.iter().map(|c| c.measured_ns).sum::<u64>().max(1);
    let lost: u64 = cpus.iter().map(|c| c.lost_ns).sum();
    lost.max(threshold_ns.max(1)) as f64 * 1e9 / measured as f64
}

/// One sample per round (`round_lost_per_s`), so every metric (`p50`,
/// `mean`, `max`) is that figure; the longest gap goes with the attribution
/// as the leg's evidence (its second figure).
impl super::latency::IntoLatencyRun for NoiseResult {
    fn into_latency_run(self) -> Result<super::latency::LatencyRun> {
        super::refuse_partial(&self.interrupted)?;
        let samples = vec![round_lost_per_s(&self.cpus, self.settings.threshold_ns)];
        let evidence = serde_json::to_value(self.evidence())?;
        Ok(super::latency::LatencyRun {
            split: None,
            samples,
            settings: serde_json::to_value(&self.settings)?,
            warnings: self
                .attribution_note
                .iter()
                .chain(&self.warnings)
                .cloned()
                .collect(),
            lost: None,
            evidence: Some(evidence),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(lost_ns: u64, measured_ns: u64) -> CpuNoise {
        let gaps = if lost_ns > 0 { vec![(10, lost_ns)] } else { vec![] };
        let spin = Spin {
            cpu: 1,
            tid: 0,
            start_ns: 0,
            end_ns: measured_ns,
            loops: 1,
            gaps,
        };
        cpu_noise(spin, noise_attrib::Attributed::default())
    }

    #[test]
    fn a_round_is_its_total_lost_time_per_cpu_second() {
        // 30 µs in 2 s on one CPU, 10 µs in 1 s on another: 40 µs in 3 CPU-seconds.
        let v = round_lost_per_s(&[cpu(30_000, 2_000_000_000), cpu(10_000, 1_000_000_000)], 1_000);
        assert!((v - 40_000.0 / 3.0).abs() < 1e-6, "{v}");
        // No gap: one threshold-long gap over the round, not 1 ns/s.
        assert_eq!(round_lost_per_s(&[cpu(0, 10_000_000_000)], 1_000), 100.0);
    }
}
