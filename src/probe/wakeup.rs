//! `probe wakeup`: idle-settled wakeup latency.
//!
//! A sleeper thread blocks in the kernel on one CPU; a waker thread on another
//! CPU leaves it idle for a gap from a deterministic schedule, takes
//! CLOCK_MONOTONIC, and wakes it. The sleeper takes the clock as soon as its
//! blocking call returns; the difference is one sample. After every sample the
//! waker reads the sleeper CPU's `cpuidle/stateN/usage`, so each sample knows
//! which idle states the CPU entered while it waited (including the one its
//! wake ended).
//!
//! Each sample is split in two from the sleeper's own
//! `/proc/thread-self/schedstat` (its run delay, read before it blocks and
//! as soon as it runs): the time it waited on its CPU's run queue after the
//! wake queued it, and the rest, from the wake request until it was queued
//! (the IPI, the idle exit, the enqueue). A knob can help the one and hurt
//! the other.
//!
//! The sleeper blocks on a futex by default: it is the kernel's shortest
//! block/wake path (what mutexes, condition variables and thread parking use),
//! so the least of each sample is the probe and the most is the wakeup itself.
//! `eventfd` (what epoll-driven servers are woken through) and `pipe` are there
//! to compare.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub use super::handoff::Mechanism;
use super::handoff::{Channel, futex_wake, wait_for};
use super::idle_counters::IdleCounters;
use super::pmqos::{self, PmQosSetting};
use super::{Cpus, Gaps, HostFacts, Latency, Overhead, now_ns, pin_current_thread};
use crate::inventory::StateFacts;
use crate::root::Root;
use crate::stats::Summary;

#[derive(Clone, Debug)]
pub struct Options {
    pub waker_cpu: Option<u32>,
    pub sleeper_cpu: Option<u32>,
    pub samples: usize,
    pub gaps: Gaps,
    pub mechanism: Mechanism,
    pub pmqos_us: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WakeupResult {
    pub probe: String,
    #[serde(flatten)]
    pub latency: Latency,
    pub settings: Settings,
    pub overhead: Overhead,
    /// Per idle state of the sleeper's CPU: counter deltas over the whole run.
    pub idle_states: Vec<IdleStateDelta>,
    /// Samples grouped by the deepest idle state the sleeper's CPU entered
    /// during that sample's gap (`none`: its cpuidle counters recorded no entry).
    pub by_deepest_state: Vec<StateLatency>,
    /// Each sample split into the wake (request to queued on the CPU) and
    /// the wait for the CPU (queued to running).
    pub split: super::wake_split::Split,
    /// Wall time of the run, ms.
    pub duration_ms: u64,
    /// What makes the result less than it seems (e.g. a sleeper CPU that was busy).
    pub warnings: Vec<String>,
    /// True when a signal (Ctrl-C) stopped the run before its last sample:
    /// the numbers are from the `samples` taken, of `settings.samples`.
    pub partial: bool,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: it completed.
    pub interrupted: Option<String>,
    #[serde(skip)]
    pub raw: Vec<Sample>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub waker_cpu: u32,
    pub sleeper_cpu: u32,
    pub samples: usize,
    pub gap_us: Gaps,
    pub gap_rule: String,
    pub mechanism: Mechanism,
    pub pm_qos: PmQosSetting,
    pub host: HostFacts,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleStateDelta {
    pub index: u32,
    pub name: String,
    /// Exit latency the kernel advertises, µs.
    pub latency_us: Option<u64>,
    pub residency_us: Option<u64>,
    pub disabled: Option<bool>,
    /// Entries into the state over the run (`usage` delta).
    pub entries: u64,
    /// Time spent in the state over the run (`time` delta), µs.
    pub time_us: u64,
    pub entries_per_sample: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateLatency {
    pub state: String,
    pub samples: usize,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub gap_ns: u64,
    pub latency_ns: u64,
    /// The sleeper's run delay over this sample (schedstat), when readable.
    pub run_delay_ns: Option<u64>,
    /// Entries per idle state (in `idle_states` order) during this sample's gap.
    pub entries: Vec<u64>,
}

impl WakeupResult {
    pub fn raw_header(&self) -> Vec<String> {
        let mut h = vec!["sample".into(), "gap_ns".into(), "latency_ns".into()];
        h.extend(
            self.idle_states
                .iter()
                .map(|s| format!("entries_{}", s.name.replace([' ', ','], "_"))),
        );
        h.push("run_delay_ns".into());
        h
    }

    pub fn raw_rows(&self) -> impl Iterator<Item = Vec<String>> + '_ {
        self.raw.iter().enumerate().map(|(i, s)| {
            let mut r = vec![i.to_string(), s.gap_ns.to_string(), s.latency_ns.to_string()];
            r.extend(s.entries.iter().map(u64::to_string));
            // An unreadable run delay is an empty field, never a 0.
            r.push(s.run_delay_ns.map(|d| d.to_string()).unwrap_or_default());
            r
        })
    }
}

/// Each sample's run delay, or why none could be read.
type RunDelays = (Vec<Option<u64>>, Option<String>);

/// A sample's gap (ns) and the idle-state entries counted over it.
type GapEntries = (u64, Vec<u64>);

/// Measures the clock, the per-sample bookkeeping and the wake call, on the
/// calling (waker) thread.
fn overhead(mechanism: Mechanism) -> Result<Overhead> {
    let (clock_read_ns, clock_read_min_ns) = super::clock_cost();
    let t0 = AtomicU64::new(0);
    let per_sample_ns = super::median_of(10_000, || {
        let a = now_ns();
        t0.store(a, Ordering::Release);
        let seen = t0.load(Ordering::Acquire);
        now_ns() - seen
    });
    let ch = Channel::new(mechanism, true).context("cannot create the wake channel")?;
    let mut err = None;
    let wake_call_ns = super::median_of(1000, || {
        let a = now_ns();
        if let Err(e) = ch.wake() {
            err = Some(e);
        }
        let d = now_ns() - a;
        ch.drain();
        d
    });
    if let Some(e) = err {
        return Err(e).context("wake call failed");
    }
    Ok(Overhead {
        clock_read_ns,
        clock_read_min_ns,
        per_sample_ns,
        wake_call_ns: Some(wake_call_ns),
    })
}

pub fn run(root: &Root, opts: &Options) -> Result<WakeupResult> {
    if opts.samples == 0 {
        bail!("--samples 0: at least one sample is needed");
    }
    let cpus = Cpus::read(root)?;
    let (waker_cpu, sleeper_cpu) = cpus.pair(
        ("--waker-cpu", opts.waker_cpu),
        ("--sleeper-cpu", opts.sleeper_cpu),
    )?;
    let host = HostFacts::read(root);
    let counters = IdleCounters::open(root, sleeper_cpu)?;
    let states = &counters.states;
    let hold = opts.pmqos_us.map(|us| pmqos::hold(root, us)).transpose()?;
    let channel = Channel::new(opts.mechanism, false).context("cannot create the wake channel")?;

    let n = opts.samples;
    let t0 = AtomicU64::new(0);
    let ready = AtomicU32::new(0);
    let done = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let usage_before = counters.read("usage")?;
    let time_before = counters.read("time")?;
    let start = now_ns();

    let ticker = crate::progress::Ticker::start("wakeup", Some(n as u64), move || {
        let _ = pin_current_thread(waker_cpu);
    });
    let ((latencies, (delays, delay_why)), waker) = std::thread::scope(|s| {
        let sleeper = s.spawn(|| -> Result<(Vec<u64>, RunDelays)> {
            let r = (|| {
                pin_current_thread(sleeper_cpu)?;
                let mut lat = Vec::with_capacity(n);
                let (sched, mut delays) = (super::wake_split::RunDelay::open(), Vec::new());
                ready.store(1, Ordering::Release);
                futex_wake(&ready);
                for i in 0..n {
                    let d0 = sched.as_ref().ok().and_then(|s| s.read());
                    channel
                        .wait()
                        .context("the sleeper's blocking call failed")?;
                    let t1 = now_ns();
                    let d1 = sched.as_ref().ok().and_then(|s| s.read());
                    if failed.load(Ordering::Acquire) {
                        if super::cancelled() {
                            // Ctrl-C: the waker stopped between samples.
                            break;
                        }
                        bail!("stopped");
                    }
                    lat.push(t1.saturating_sub(t0.load(Ordering::Acquire)));
                    delays.push(d0.zip(d1).map(|(a, b)| b.saturating_sub(a)));
                    done.store(i as u32 + 1, Ordering::Release);
                    futex_wake(&done);
                }
                Ok((lat, (delays, sched.err())))
            })();
            if r.is_err() {
                failed.store(true, Ordering::Release);
                futex_wake(&ready);
                futex_wake(&done);
            }
            r
        });
        let waker = s.spawn(|| -> Result<(Overhead, Vec<GapEntries>)> {
            let r = (|| {
                pin_current_thread(waker_cpu)?;
                let _sleeper = super::interrupt::register();
                let overhead = overhead(opts.mechanism)?;
                wait_for(&ready, 1, Duration::from_secs(5), &failed)?;
                let mut per_gap = Vec::with_capacity(n);
                // The kernel counts an idle period when it ends, so the one
                // this sample's wake ends is counted after the sleeper answers.
                let mut before = counters.read("usage")?;
                for i in 0..n {
                    let gap = opts.gaps.gap_ns(i);
                    if !super::go_on(super::interrupt::sleep(Duration::from_nanos(gap)))? {
                        // Ctrl-C: release the sleeper, keep the samples taken.
                        failed.store(true, Ordering::Release);
                        let _ = channel.wake();
                        break;
                    }
                    t0.store(now_ns(), Ordering::Release);
                    channel.wake().context("the wake call failed")?;
                    wait_for(&done, i as u32 + 1, Duration::from_secs(5), &failed)?;
                    let after = counters.read("usage")?;
                    let entries = after
                        .iter()
                        .zip(&before)
                        .map(|(a, b)| a.saturating_sub(*b))
                        .collect();
                    per_gap.push((gap, entries));
                    before = after;
                    ticker.tick();
                }
                Ok((overhead, per_gap))
            })();
            if r.is_err() {
                // Release a sleeper blocked for a wake that will not come.
                failed.store(true, Ordering::Release);
                let _ = channel.wake();
            }
            r
        });
        let w = waker.join().expect("waker thread panicked");
        let l = sleeper.join().expect("sleeper thread panicked");
        both(l, w)
    })?;
    let duration_ms = (now_ns() - start) / 1_000_000;
    let usage_after = counters.read("usage")?;
    let time_after = counters.read("time")?;
    let pm_qos = PmQosSetting::of(&hold);
    drop(hold);

    let (overhead, per_gap) = waker;
    let raw = zip_samples(&latencies, &delays, per_gap);
    let split = super::wake_split::Split::of(&latencies, &delays, delay_why);
    let idle_states = state_deltas(
        states,
        (&usage_before, &usage_after),
        (&time_before, &time_after),
        raw.len().max(1),
    );
    let by_deepest_state = by_deepest_state(&raw, &idle_states);
    let warnings = busy_warning(&raw, sleeper_cpu, states.is_empty()).into_iter().collect();
    let interrupted = (raw.len() < n).then(super::interrupted_by).flatten();
    Ok(WakeupResult {
        probe: super::Probe::Wakeup.as_str().into(),
        latency: Latency::from_ns(&latencies)?,
        settings: Settings {
            waker_cpu,
            sleeper_cpu,
            samples: n,
            gap_us: opts.gaps,
            gap_rule: Gaps::RULE.into(),
            mechanism: opts.mechanism,
            pm_qos,
            host,
        },
        overhead,
        idle_states,
        by_deepest_state,
        split,
        duration_ms,
        warnings,
        partial: interrupted.is_some(),
        interrupted,
        raw,
    })
}

/// Both threads' results; the first real failure explains the other
/// thread's "stopped".
fn both<L, W>(l: Result<L>, w: Result<W>) -> Result<(L, W)> {
    match (l, w) {
        (Ok(l), Ok(w)) => Ok((l, w)),
        (Err(e), Ok(_)) => Err(e),
        (Ok(_), Err(e)) => Err(e),
        (Err(le), Err(we)) => Err(if le.to_string() == "stopped" { we } else { le }),
    }
}

/// Each sample with its gap and the idle-state entries counted over it.
fn zip_samples(latencies: &[u64], delays: &[Option<u64>], per_gap: Vec<GapEntries>) -> Vec<Sample> {
    latencies
        .iter()
        .zip(delays)
        .zip(per_gap)
        .map(|((&latency_ns, &run_delay_ns), (gap_ns, entries))| Sample {
            gap_ns,
            latency_ns,
            run_delay_ns,
            entries,
        })
        .collect()
}

/// Each idle state's entries and residency over the run.
fn state_deltas(
    states: &[StateFacts],
    (usage_before, usage_after): (&[u64], &[u64]),
    (time_before, time_after): (&[u64], &[u64]),
    n: usize,
) -> Vec<IdleStateDelta> {
    states
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let entries = usage_after[k].saturating_sub(usage_before[k]);
            IdleStateDelta {
                index: s.index,
                name: s.name.clone(),
                latency_us: s.latency_us,
                residency_us: s.residency_us,
                disabled: s.disabled,
                entries,
                time_us: time_after[k].saturating_sub(time_before[k]),
                entries_per_sample: (entries as f64 / n as f64 * 100.0).round() / 100.0,
            }
        })
        .collect()
}

/// A warning when over a tenth of the gaps counted no cpuidle entry (none
/// when the CPU has no idle states to count).
fn busy_warning(raw: &[Sample], sleeper_cpu: u32, no_states: bool) -> Option<String> {
    if no_states {
        return None;
    }
    let n = raw.len();
    let busy = raw
        .iter()
        .filter(|s| s.entries.iter().all(|&e| e == 0))
        .count();
    (busy * 10 > n).then(|| {
        format!(
            "in {busy} of {n} gaps CPU {sleeper_cpu} counted no cpuidle entry: something else ran \
             there, or it idled outside cpuidle; those samples are not tied to an idle state \
             (see by_deepest_state)"
        )
    })
}

/// Groups samples by the deepest (highest-index) state entered in their gap.
fn by_deepest_state(raw: &[Sample], states: &[IdleStateDelta]) -> Vec<StateLatency> {
    let mut groups: Vec<(String, Vec<u64>)> = Vec::new();
    for s in raw {
        let deepest = s
            .entries
            .iter()
            .rposition(|&e| e > 0)
            .map_or("none".to_string(), |k| states[k].name.clone());
        match groups.iter_mut().find(|(n, _)| *n == deepest) {
            Some((_, v)) => v.push(s.latency_ns),
            None => groups.push((deepest, vec![s.latency_ns])),
        }
    }
    let order = |name: &str| states.iter().position(|s| s.name == name);
    groups.sort_by_key(|(name, _)| order(name).map_or(-1, |p| p as i64));
    groups
        .into_iter()
        .filter_map(|(state, v)| {
            let s = Summary::from_ns(&v)?;
            Some(StateLatency {
                state,
                samples: s.samples,
                min_ns: s.min_ns,
                p50_ns: s.p50_ns,
                p99_ns: s.p99_ns,
                max_ns: s.max_ns,
            })
        })
        .collect()
}

/// What `verify` compares of a run.
impl super::latency::IntoLatencyRun for WakeupResult {
    fn into_latency_run(self) -> Result<super::latency::LatencyRun> {
        super::refuse_partial(&self.interrupted)?;
        Ok(super::latency::LatencyRun {
            samples: self.raw.iter().map(|s| s.latency_ns as f64).collect(),
            settings: serde_json::to_value(&self.settings)?,
            split: super::wake_split::parts(self.raw.iter().map(|s| (s.latency_ns, s.run_delay_ns))),
            warnings: self.warnings,
            lost: None,
            evidence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_channel_wakes_a_blocked_thread() {
        for m in [Mechanism::Futex, Mechanism::Eventfd, Mechanism::Pipe] {
            let ch = Channel::new(m, false).unwrap();
            let woke = AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    ch.wait().unwrap();
                    woke.store(true, Ordering::Release);
                });
                std::thread::sleep(Duration::from_millis(20));
                assert!(
                    !woke.load(Ordering::Acquire),
                    "{m:?} returned before the wake"
                );
                ch.wake().unwrap();
            });
            assert!(woke.load(Ordering::Acquire), "{m:?}");
        }
    }

    #[test]
    fn samples_group_by_the_deepest_state_entered() {
        let st = |name: &str| IdleStateDelta {
            index: 0,
            name: name.into(),
            latency_us: None,
            residency_us: None,
            disabled: None,
            entries: 0,
            time_us: 0,
            entries_per_sample: 0.0,
        };
        let states = [st("POLL"), st("C1")];
        let s = |lat, e: [u64; 2]| Sample {
            gap_ns: 0,
            latency_ns: lat,
            run_delay_ns: None,
            entries: e.to_vec(),
        };
        let raw = [s(50, [1, 1]), s(5, [3, 0]), s(60, [0, 2]), s(1, [0, 0])];
        let g = by_deepest_state(&raw, &states);
        let names: Vec<_> = g
            .iter()
            .map(|g| (g.state.as_str(), g.samples, g.p50_ns))
            .collect();
        assert_eq!(names, [("none", 1, 1), ("POLL", 1, 5), ("C1", 2, 50)]);
    }
}
