//! `probe rss`: memory decay after a burst, by the jemalloc PR's method:
//! VmRSS/VmHWM from `/proc/PID/status` at about 2 Hz, Pss/LazyFree from
//! `/proc/PID/smaps_rollup` at about 1 Hz; `corrected = rss - lazyfree`
//! (MADV_FREE'd pages stay in VmRSS until reclaimed; the corrected figure is
//! what a memory limit enforces).
//!
//! `--self-burst` reproduces the PR in a process of its own,
//! `hostknob-jemalloc` (installed beside hostknob), whose global allocator is
//! jemalloc: a burst of mixed-size allocations from a few threads, freed,
//! then the idle window sampled, once with `background_thread` false and once
//! true (each set by a mallctl write and read back). hostknob itself uses the
//! system allocator: linking jemalloc runs its start-up in every command, a
//! tenth of a live `inventory`.

use std::sync::Barrier;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::idle_cpu::{first_stat, same_process};
use super::now_ns;
use crate::root::Root;

/// Status is read every tick, smaps_rollup every other tick.
const TICK: Duration = Duration::from_millis(500);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemSample {
    /// Milliseconds since the start of the idle window (negative: before it).
    pub t_ms: i64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
    /// From the latest smaps_rollup read (at most a second old).
    pub pss_kb: Option<u64>,
    pub lazyfree_kb: Option<u64>,
    /// rss - lazyfree.
    pub corrected_kb: u64,
}

/// One moment of the decay curve, against the anchor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Point {
    pub t_s: f64,
    pub rss_kb: u64,
    pub corrected_kb: u64,
    /// corrected - the anchor's corrected.
    pub residual_kb: i64,
    /// residual as a share of the growth from the anchor to the peak.
    pub residual_pct_of_growth: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decay {
    pub anchor: Point,
    pub peak: Point,
    pub at_10s: Option<Point>,
    pub at_30s: Option<Point>,
    pub end: Point,
    /// peak corrected - anchor corrected.
    pub growth_kb: i64,
    /// VmHWM at the end (the kernel's own high-water mark).
    pub hwm_kb: u64,
}

impl Decay {
    /// `anchor` and `peak` may lie before the series (self-burst) or be
    /// found in it (`None`: its first sample and its highest corrected one).
    fn of(series: &[MemSample], anchor: Option<&MemSample>, peak: Option<&MemSample>) -> Decay {
        let anchor = anchor.unwrap_or(&series[0]);
        let peak = peak.unwrap_or_else(|| {
            series
                .iter()
                .max_by_key(|s| (s.corrected_kb, std::cmp::Reverse(s.t_ms)))
                .unwrap()
        });
        let growth = peak.corrected_kb as i64 - anchor.corrected_kb as i64;
        let point = |s: &MemSample| {
            let residual = s.corrected_kb as i64 - anchor.corrected_kb as i64;
            Point {
                t_s: s.t_ms as f64 / 1000.0,
                rss_kb: s.rss_kb,
                corrected_kb: s.corrected_kb,
                residual_kb: residual,
                residual_pct_of_growth: (growth > 0)
                    .then(|| (residual as f64 / growth as f64 * 1000.0).round() / 10.0),
            }
        };
        let at = |ms: i64| series.iter().find(|s| s.t_ms >= ms).map(point);
        let last = series.last().unwrap();
        Decay {
            anchor: point(anchor),
            peak: point(peak),
            at_10s: at(10_000),
            at_30s: at(30_000),
            end: point(last),
            growth_kb: growth,
            hwm_kb: last.hwm_kb,
        }
    }
}

fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Reads memory counters of one process through the root.
struct Reader<'r> {
    root: &'r Root,
    pid: i32,
    start_ticks: u64,
    rollup: Option<(u64, u64)>,
}

impl Reader<'_> {
    /// `Ok(None)` once the process has gone (or its pid was reused).
    fn sample(&mut self, t_ms: i64, with_rollup: bool) -> Result<Option<MemSample>> {
        if same_process(self.root, self.pid, self.start_ticks)?.is_none() {
            return Ok(None);
        }
        let status_path = format!("/proc/{}/status", self.pid);
        let status = match self.root.read_string(&status_path) {
            Ok(s) => s,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) || crate::root::is_absent(&e) => {
                return Ok(None);
            }
            Err(e) => return Err(e).context(status_path),
        };
        let (Some(rss_kb), Some(hwm_kb)) = (kb_field(&status, "VmRSS"), kb_field(&status, "VmHWM"))
        else {
            // Kernel threads and zombies have no memory lines.
            return Ok(None);
        };
        if with_rollup || self.rollup.is_none() {
            let path = format!("/proc/{}/smaps_rollup", self.pid);
            match self.root.read_string(&path) {
                Ok(text) => {
                    if let (Some(p), Some(l)) =
                        (kb_field(&text, "Pss"), kb_field(&text, "LazyFree"))
                    {
                        self.rollup = Some((p, l));
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) || crate::root::is_absent(&e) => {
                    return Ok(None);
                }
                Err(e) => return Err(e).with_context(|| format!("{path} (Pss, LazyFree)")),
            }
        }
        let lazy = self.rollup.map(|r| r.1);
        Ok(Some(MemSample {
            t_ms,
            rss_kb,
            hwm_kb,
            pss_kb: self.rollup.map(|r| r.0),
            lazyfree_kb: lazy,
            corrected_kb: rss_kb.saturating_sub(lazy.unwrap_or(0)),
        }))
    }

    /// Samples from now for `duration`; stops early (`false`) if the process
    /// ends or the run is cancelled (Ctrl-C).
    fn window(&mut self, duration: Duration) -> Result<(Vec<MemSample>, bool)> {
        let start = now_ns();
        let ticks = (duration.as_nanos() / TICK.as_nanos()) as u64;
        let mut out = Vec::new();
        let _sleeper = super::interrupt::register();
        let ticker = crate::progress::Ticker::start("rss samples", Some(ticks + 1), || {});
        for k in 0..=ticks {
            let due = start + k * TICK.as_nanos() as u64;
            let now = now_ns();
            if due > now && !super::go_on(super::interrupt::sleep(Duration::from_nanos(due - now)))?
            {
                return Ok((out, false));
            }
            ticker.tick();
            let t_ms = ((now_ns() - start) / 1_000_000) as i64;
            match self.sample(t_ms, k % 2 == 0)? {
                Some(s) => out.push(s),
                None => return Ok((out, false)),
            }
        }
        Ok((out, true))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PidResult {
    pub probe: String,
    pub mode: String,
    pub pid: i32,
    pub duration_s: f64,
    pub decay: Option<Decay>,
    pub series: Vec<MemSample>,
    /// True when the process ended, or a signal (Ctrl-C) stopped the run,
    /// before `duration_s`.
    pub partial: bool,
    pub note: Option<String>,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: none did.
    pub interrupted: Option<String>,
}

/// Samples process `pid` for `duration`.
pub fn run_pid(root: &Root, pid: i32, duration: Duration) -> Result<PidResult> {
    let flag = format!("--pid {pid}");
    let stat = first_stat(root, pid, &flag)?;
    let mut reader = Reader {
        root,
        pid,
        start_ticks: stat.start_ticks,
        rollup: None,
    };
    let (series, complete) = reader.window(duration)?;
    if series.is_empty() {
        bail!("{flag}: the process has no memory to sample (a kernel thread, or it exited)");
    }
    let interrupted = if complete {
        None
    } else {
        super::interrupted_by()
    };
    let note = (!complete && interrupted.is_none()).then(|| {
        format!(
            "{flag}: process {pid} exited after {:.1} s of {} s; the result is partial",
            series.last().unwrap().t_ms as f64 / 1000.0,
            duration.as_secs_f64()
        )
    });
    Ok(PidResult {
        probe: super::Probe::Rss.as_str().into(),
        mode: "pid".into(),
        pid,
        duration_s: duration.as_secs_f64(),
        decay: Some(Decay::of(&series, None, None)),
        series,
        partial: !complete,
        note,
        interrupted,
    })
}

#[derive(Clone, Debug)]
pub struct BurstOptions {
    pub mib: u64,
    pub threads: usize,
    pub duration: Duration,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SelfBurstResult {
    pub probe: String,
    pub mode: String,
    pub pid: i32,
    pub settings: BurstSettings,
    /// background_thread false, then true.
    pub legs: Vec<BurstLeg>,
    /// The value found at start, written back at the end (and read back).
    pub background_thread_restored: bool,
    /// True when a signal (Ctrl-C) stopped the run before both legs' idle
    /// windows ended: the last leg's series (and decay) stops where it was cut.
    pub partial: bool,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: it completed.
    pub interrupted: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BurstSettings {
    pub burst_mib: u64,
    pub threads: usize,
    pub sizes_bytes: Vec<usize>,
    pub duration_s: f64,
    pub allocator: String,
    pub dirty_decay_ms: Option<isize>,
    pub muzzy_decay_ms: Option<isize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BurstLeg {
    /// The value written to `background_thread`.
    pub background_thread_set: bool,
    /// The value read back after the write: the fact.
    pub background_thread_read_back: bool,
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// jemalloc's `stats.allocated` growth over the burst: proof it went through jemalloc.
    pub jemalloc_allocated_growth_kb: u64,
    pub decay: Decay,
    pub series: Vec<MemSample>,
}

/// Sizes a burst cycles through: small request objects up to the ~120 KiB
/// bodies of the PR and a few large buffers.
pub const SIZES: [usize; 10] = [
    64, 200, 512, 1500, 4096, 16_384, 50_000, 122_880, 262_144, 1_048_576,
];

/// What the burst needs of jemalloc, the global allocator of the process
/// that runs it (`hostknob-jemalloc`, the only program that links it).
pub trait Jemalloc {
    fn background_thread(&self) -> Result<bool>;
    /// Writes `background_thread` and returns what it reads back.
    fn set_background_thread(&self, on: bool) -> Result<bool>;
    /// Returns every arena's unused dirty pages to the OS, so each leg
    /// starts from the same state.
    fn purge_all_arenas(&self) -> Result<()>;
    /// `stats.allocated`, after an epoch advance.
    fn allocated(&self) -> Result<u64>;
    /// An `opt.*` value such as `opt.dirty_decay_ms`.
    fn opt_isize(&self, name: &[u8]) -> Option<isize>;
}

/// The executable that runs `--self-burst`: beside this one.
pub const HELPER: &str = "hostknob-jemalloc";

/// `--self-burst` run by [`HELPER`], which prints its result as JSON; its
/// stderr (progress, errors) is this one's, and a signal that stops this
/// probe is passed on to it.
pub fn run_self_burst_in_helper(opts: &BurstOptions) -> Result<SelfBurstResult> {
    let exe = std::env::current_exe().context("cannot find hostknob's own path")?;
    let helper = exe.with_file_name(HELPER);
    let mut child = std::process::Command::new(&helper)
        .args(["--burst-mib", &opts.mib.to_string()])
        .args(["--threads", &opts.threads.to_string()])
        .args(["--duration-ms", &opts.duration.as_millis().to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "--self-burst runs {} (installed beside hostknob; jemalloc is its allocator,                  not hostknob's): build it with `cargo build --release --locked` (every binary),                  or install both with `cargo install --locked --path .` or the package",
                helper.display()
            )
        })?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).map(|_| out)
    });
    let mut passed_on = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if super::cancelled() && !passed_on {
            let sig = super::interrupt::signal().unwrap_or(libc::SIGINT);
            unsafe { libc::kill(child.id() as i32, sig) };
            passed_on = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = reader.join().expect("reader thread")?;
    // Cut short, the helper prints the legs it has (marked) and exits 0.
    if super::cancelled() && !status.success() {
        bail!("interrupted");
    }
    if !status.success() {
        bail!("--self-burst: {HELPER} failed ({status})");
    }
    serde_json::from_slice(&out)
        .with_context(|| format!("--self-burst: {HELPER} printed no result"))
}

/// Runs both legs in this process, whose global allocator must be jemalloc
/// (`je`): the burst is plain heap allocations.
pub fn run_self_burst(
    root: &Root,
    opts: &BurstOptions,
    je: &dyn Jemalloc,
) -> Result<SelfBurstResult> {
    if opts.threads == 0 || opts.mib == 0 {
        bail!("--burst-mib and --threads must be at least 1");
    }
    let pid = std::process::id() as i32;
    let original = je.background_thread()?;
    let mut legs = Vec::new();
    let outcome = (|| -> Result<()> {
        for on in [false, true] {
            legs.push(leg(root, pid, on, opts, je)?);
            if super::cancelled() {
                break;
            }
        }
        Ok(())
    })();
    let restored = je.set_background_thread(original);
    outcome?;
    let restored = restored?;
    let interrupted = super::interrupted_by();
    Ok(SelfBurstResult {
        probe: super::Probe::Rss.as_str().into(),
        mode: "self-burst".into(),
        pid,
        settings: BurstSettings {
            burst_mib: opts.mib,
            threads: opts.threads,
            sizes_bytes: SIZES.to_vec(),
            duration_s: opts.duration.as_secs_f64(),
            allocator: "jemalloc (tikv-jemallocator)".into(),
            dirty_decay_ms: je.opt_isize(b"opt.dirty_decay_ms\0"),
            muzzy_decay_ms: je.opt_isize(b"opt.muzzy_decay_ms\0"),
        },
        legs,
        background_thread_restored: restored,
        partial: interrupted.is_some(),
        interrupted,
    })
}

fn leg(
    root: &Root,
    pid: i32,
    on: bool,
    opts: &BurstOptions,
    je: &dyn Jemalloc,
) -> Result<BurstLeg> {
    let read_back = je.set_background_thread(on)?;
    je.purge_all_arenas()?;
    let stat = first_stat(root, pid, "--self-burst")?;
    let mut reader = Reader {
        root,
        pid,
        start_ticks: stat.start_ticks,
        rollup: None,
    };
    let gone = || anyhow::anyhow!("--self-burst: cannot read this process's memory counters");
    let t_anchor = now_ns();
    let mut anchor = reader.sample(0, true)?.ok_or_else(gone)?;
    let allocated_before = je.allocated()?;

    let per_thread = opts.mib * (1 << 20) / opts.threads as u64;
    let barrier = Barrier::new(opts.threads + 1);
    let (mut peak, t_peak, t_window, allocated_peak, series, counts) =
        std::thread::scope(|s| -> Result<_> {
            let workers: Vec<_> = (0..opts.threads)
                .map(|w| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        let mut held: Vec<Box<[u8]>> = Vec::new();
                        let (mut bytes, mut k) = (0u64, w);
                        while bytes < per_thread {
                            let size = SIZES[k % SIZES.len()];
                            // A non-zero fill writes every page, as a request body would.
                            held.push(vec![(k as u8) | 1; size].into_boxed_slice());
                            bytes += size as u64;
                            k += 1;
                        }
                        let count = held.len() as u64;
                        barrier.wait(); // all allocated: the peak is measured
                        barrier.wait();
                        drop(held);
                        barrier.wait(); // all freed: the idle window starts
                        barrier.wait(); // the window is over
                        (count, bytes)
                    })
                })
                .collect();
            barrier.wait();
            let allocated_peak = je.allocated();
            let t_peak = now_ns();
            let peak = reader.sample(0, true);
            barrier.wait();
            barrier.wait();
            let t_window = now_ns();
            let window = reader.window(opts.duration);
            barrier.wait();
            let counts: Vec<(u64, u64)> = workers.into_iter().map(|h| h.join().unwrap()).collect();
            let peak = peak?.ok_or_else(gone)?;
            // Cut short (Ctrl-C), the series stops where it was.
            let (series, _) = window?;
            Ok((peak, t_peak, t_window, allocated_peak?, series, counts))
        })?;
    if series.is_empty() {
        return Err(gone());
    }
    let growth = allocated_peak.saturating_sub(allocated_before);
    let allocated_bytes: u64 = counts.iter().map(|c| c.1).sum();
    if growth < allocated_bytes / 2 {
        bail!(
            "--self-burst: jemalloc saw {} KiB of a {} KiB burst; it is not the global allocator of this program",
            growth / 1024,
            allocated_bytes / 1024
        );
    }
    anchor.t_ms = -(((t_window - t_anchor) / 1_000_000) as i64);
    peak.t_ms = -(((t_window - t_peak) / 1_000_000) as i64);
    Ok(BurstLeg {
        background_thread_set: on,
        background_thread_read_back: read_back,
        allocations: counts.iter().map(|c| c.0).sum(),
        allocated_bytes,
        jemalloc_allocated_growth_kb: growth / 1024,
        decay: Decay::of(&series, Some(&anchor), Some(&peak)),
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_ms: i64, rss: u64, lazy: u64) -> MemSample {
        MemSample {
            t_ms,
            rss_kb: rss,
            hwm_kb: 500,
            pss_kb: Some(rss),
            lazyfree_kb: Some(lazy),
            corrected_kb: rss - lazy,
        }
    }

    #[test]
    fn decay_points_by_hand() {
        // anchor 100, peak 300 (growth 200), 150 at +10 s, 120 at +30 s, 110 at the end.
        let series = [
            s(0, 100, 0),
            s(500, 320, 20),
            s(9_000, 200, 0),
            s(10_000, 150, 0),
            s(30_500, 130, 10),
            s(40_000, 110, 0),
        ];
        let d = Decay::of(&series, None, None);
        assert_eq!(
            (d.anchor.corrected_kb, d.peak.corrected_kb, d.growth_kb),
            (100, 300, 200)
        );
        assert_eq!(d.peak.rss_kb, 320);
        let at10 = d.at_10s.unwrap();
        assert_eq!(
            (at10.t_s, at10.residual_kb, at10.residual_pct_of_growth),
            (10.0, 50, Some(25.0))
        );
        let at30 = d.at_30s.unwrap();
        assert_eq!(
            (at30.t_s, at30.corrected_kb, at30.residual_pct_of_growth),
            (30.5, 120, Some(10.0))
        );
        assert_eq!(
            (d.end.residual_kb, d.end.residual_pct_of_growth),
            (10, Some(5.0))
        );
        // A window shorter than 30 s has no +30 s point.
        assert!(Decay::of(&series[..4], None, None).at_30s.is_none());
    }

    #[test]
    fn kb_fields_are_read_by_exact_key() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 1000 kB\n";
        assert_eq!(kb_field(status, "VmRSS"), Some(1024));
        assert_eq!(kb_field(status, "VmHWM"), Some(2048));
        assert_eq!(kb_field(status, "Rss"), None);
        let rollup = "Rss:  10 kB\nPss:   8 kB\nPss_Anon:  6 kB\nLazyFree:  0 kB\n";
        assert_eq!(
            (kb_field(rollup, "Pss"), kb_field(rollup, "LazyFree")),
            (Some(8), Some(0))
        );
    }

    #[test]
    fn this_process_can_be_sampled() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let r = run_pid(&root, std::process::id() as i32, Duration::from_millis(600)).unwrap();
        assert!(!r.partial);
        assert_eq!(r.series.len(), 2);
        assert!(
            r.series
                .iter()
                .all(|s| s.rss_kb > 0 && s.hwm_kb >= s.rss_kb && s.lazyfree_kb.is_some())
        );
        assert!(r.series[1].t_ms >= 500);
    }
}
