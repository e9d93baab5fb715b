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

use super::noise_attrib::{self, Method, Source};
use super::pmqos::{self, PmQosSetting};
use super::{Cpus, HostFacts, now_ns, pin_current_thread};
use crate::cpulist::CpuList;
use crate::root::Root;
use crate::stats::{self, Summary};

/// Set when one measuring thread could not start: the others stop.
static STOP: AtomicBool = AtomicBool::new(false);

/// Windows verify compares (lost time per window, in ns per second).
pub const WINDOW_NS: u64 = 100_000_000;

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
    /// Lost ns per second in each 100 ms window (what verify compares).
    #[serde(skip)]
    pub windows: Vec<u64>,
    /// (start, length) of every gap, ns.
    #[serde(skip)]
    pub raw: Vec<(u64, u64)>,
}

/// What one measuring thread saw.
pub struct Spin {
    pub cpu: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub loops: u64,
    pub gaps: Vec<(u64, u64)>,
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
    let host = HostFacts::read(root);
    let hold = opts.pmqos_us.map(|us| pmqos::hold(root, us)).transpose()?;
    let start = now_ns();
    let mut attrib = noise_attrib::Attribution::start(root, opts.attribution, &opts.cpus);
    attrib.check()?;
    let spins = measure(opts, |tids, until| attrib.watch(tids, until))?;
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
            pm_qos,
            host,
        },
        attribution: method.as_str().into(),
        attribution_note: note,
        cpus,
        partial: interrupted.is_some(),
        interrupted,
        duration_ms: (now_ns() - start) / 1_000_000,
    })
}

/// One CPU's figures from its gaps and its attributed sources.
fn cpu_noise(s: Spin, attributed: noise_attrib::Attributed) -> CpuNoise {
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
        windows: windows(s.start_ns, s.end_ns, &s.gaps),
        raw: s.gaps,
    }
}

/// Lost ns per second in each whole 100 ms window (the last, partial one
/// dropped; a run shorter than one window is one window).
pub fn windows(start: u64, end: u64, gaps: &[(u64, u64)]) -> Vec<u64> {
    let n = ((end.saturating_sub(start)) / WINDOW_NS).max(1) as usize;
    let mut lost = vec![0u64; n];
    for &(at, len) in gaps {
        let i = ((at.saturating_sub(start)) / WINDOW_NS) as usize;
        if let Some(w) = lost.get_mut(i) {
            *w += len;
        }
    }
    let window = WINDOW_NS.min(end.saturating_sub(start).max(1));
    lost.into_iter().map(|l| l * 1_000_000_000 / window).collect()
}

/// The CPUs verify measures: those asked for (`-- --cpus`), else the
/// isolated CPUs, else the allowed CPUs outside the knob's target (what an
/// isolation knob moves work away from), else the placed sleeper's CPU.
pub fn verify_cpus(
    root: &Root,
    given: &CpuList,
    sleeper: u32,
    target_cpus: Option<&CpuList>,
) -> CpuList {
    if !given.is_empty() {
        return given.clone();
    }
    let isolated = super::isolated_cpus(root);
    if !isolated.is_empty() {
        return isolated;
    }
    let outside: CpuList = Cpus::read(root)
        .map(|c| c.allowed)
        .unwrap_or_default()
        .as_slice()
        .iter()
        .copied()
        .filter(|&c| target_cpus.is_some_and(|t| !t.contains(c)))
        .collect();
    if outside.is_empty() {
        std::iter::once(sleeper).collect()
    } else {
        outside
    }
}

pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        round3(part as f64 / whole as f64)
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// What `verify` compares: lost ns per second in each 100 ms window of
/// every CPU, floored at 1 (a window with no gap) so each round has a ratio;
/// the attribution goes with it as the leg's evidence.
impl super::latency::IntoLatencyRun for NoiseResult {
    fn into_latency_run(self) -> Result<super::latency::LatencyRun> {
        super::refuse_partial(&self.interrupted)?;
        let samples = self
            .cpus
            .iter()
            .flat_map(|c| c.windows.iter().map(|&w| w.max(1) as f64))
            .collect();
        let evidence = serde_json::to_value(noise_attrib::Evidence::of(&self))?;
        Ok(super::latency::LatencyRun {
            split: None,
            samples,
            settings: serde_json::to_value(&self.settings)?,
            warnings: self.attribution_note.iter().cloned().collect(),
            lost: None,
            evidence: Some(evidence),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_lost_time_per_second_of_their_gaps() {
        let s = 1_000;
        // 3 windows; 20 µs lost in the first, 5 µs in the third, one gap past the end.
        let gaps = [(s + 10, 15_000), (s + 50_000_000, 5_000), (s + 250_000_000, 5_000), (s + 400_000_000, 1)];
        let w = windows(s, s + 300_000_000, &gaps);
        assert_eq!(w, vec![200_000, 0, 50_000]);
        // Shorter than a window: one window, scaled by its real length.
        assert_eq!(windows(0, 50_000_000, &[(0, 1_000)]), vec![20_000]);
    }
}
