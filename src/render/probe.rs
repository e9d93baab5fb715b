//! Tables for probe results. Latencies are shown in µs with 0.1 µs precision;
//! the JSON keeps nanoseconds.

use super::{facts, grid};
use crate::probe::idle_cpu::IdleCpuResult;
use crate::probe::pmqos::PmQosSetting;
use crate::probe::rpc::RpcResult;
use crate::probe::rss::{Decay, PidResult, SelfBurstResult};
use crate::probe::timer::TimerResult;
use crate::probe::wakeup::WakeupResult;
use crate::probe::{HostFacts, Latency, Overhead};
use crate::stats::Bucket;

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn us_f(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

fn mib(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// The line that heads a result a signal cut short (`partial: interrupted
/// after 12 of 1000 samples (SIGINT)`), so it is not read as a complete run.
pub fn cut_short(interrupted: Option<&str>, taken: &str, of: &str) -> String {
    interrupted.map_or(String::new(), |sig| {
        format!("partial: interrupted after {taken} of {of} ({sig}); the numbers below are from those\n\n")
    })
}

fn distribution(title: &str, l: &Latency) -> String {
    let s = &l.summary;
    let header = [
        "n", "min", "p50", "p95", "p99", "p99.9", "max", "mean", "stdev",
    ];
    let row = vec![
        s.samples.to_string(),
        us(s.min_ns),
        us(s.p50_ns),
        us(s.p95_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.max_ns),
        us_f(s.mean_ns),
        us_f(s.stdev_ns),
    ];
    grid(title, &header, vec![row]) + &histogram(&l.histogram)
}

/// Bars scaled to the fullest bucket.
pub(super) fn histogram(buckets: &[Bucket]) -> String {
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let rows = buckets
        .iter()
        .map(|b| {
            let bar = "#".repeat(((b.count * 40).div_ceil(top)) as usize);
            vec![
                format!("{} - {}", us_f(b.lo_ns as f64), us_f(b.hi_ns as f64)),
                b.count.to_string(),
                bar,
            ]
        })
        .collect();
    grid("Histogram (µs)", &["range", "count", ""], rows)
}

fn overhead(o: &Overhead) -> Vec<(String, String)> {
    let mut v = vec![
        (
            "clock read".to_string(),
            format!("{} ns (min {} ns)", o.clock_read_ns, o.clock_read_min_ns),
        ),
        (
            "per-sample overhead".to_string(),
            format!(
                "{} ns (two timestamps and their bookkeeping)",
                o.per_sample_ns
            ),
        ),
    ];
    if let Some(w) = o.wake_call_ns {
        v.push((
            "wake call".into(),
            format!("{w} ns (with no one waiting; part of every wakeup)"),
        ));
    }
    v
}

pub(super) fn pm_qos(p: &PmQosSetting, host: &HostFacts) -> (String, String) {
    let before = host
        .cpu_dma_latency_before_us
        .map(|v| format!("; before the run {v} µs"))
        .unwrap_or_default();
    let text = match (p.held_us, p.effective_us) {
        (Some(h), Some(e)) => format!("held at {h} µs (in force: {e} µs){before}"),
        _ => format!("not held{before}"),
    };
    ("PM QoS (/dev/cpu_dma_latency)".into(), text)
}

pub(super) fn host_rows(host: &HostFacts) -> Vec<(String, String)> {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| super::NOT_EXPOSED.into());
    vec![
        ("kernel".into(), o(&host.kernel)),
        (
            "cpuidle".into(),
            format!(
                "driver {}, governor {}",
                o(&host.cpuidle_driver),
                o(&host.cpuidle_governor)
            ),
        ),
    ]
}

/// Each sample's wake and wait for the CPU, or why there is no split.
fn split(sp: &crate::probe::wake_split::Split) -> String {
    let (Some(w), Some(d)) = (&sp.wake, &sp.run_delay) else {
        return format!(
            "wake vs run delay: not split ({})\n\n",
            sp.reason.as_deref().unwrap_or("no run delay")
        );
    };
    let row = |name: &str, s: &crate::stats::Summary| {
        vec![
            name.to_string(),
            us(s.min_ns),
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns),
        ]
    };
    grid(
        "Each sample in two (µs): the wake, then the wait for the CPU (schedstat run delay)",
        &["part", "min", "p50", "p99", "max"],
        vec![row("wake", w), row("run delay", d)],
    )
}

pub fn wakeup(r: &WakeupResult) -> String {
    let s = &r.settings;
    let mut rows = vec![
        (
            "threads".to_string(),
            format!(
                "waker on CPU {}, sleeper on CPU {} (blocks on {})",
                s.waker_cpu, s.sleeper_cpu, s.mechanism
            ),
        ),
        ("gaps".into(), format!("{} ({})", s.gap_us, s.gap_rule)),
        pm_qos(&s.pm_qos, &s.host),
        (
            "run time".into(),
            format!("{:.3} s", r.duration_ms as f64 / 1000.0),
        ),
    ];
    rows.extend(host_rows(&s.host));
    rows.extend(overhead(&r.overhead));
    for w in &r.warnings {
        rows.push(("WARNING".into(), w.clone()));
    }
    let mut out = cut_short(
        r.interrupted.as_deref(),
        &r.latency.summary.samples.to_string(),
        &format!("{} samples", s.samples),
    );
    out += &facts("Wakeup probe", &rows);
    out += &distribution("Wakeup latency (µs)", &r.latency);
    out += &split(&r.split);
    let states = r
        .idle_states
        .iter()
        .map(|st| {
            vec![
                format!("state{} {}", st.index, st.name),
                super::opt(&st.latency_us),
                match st.disabled {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "?".into(),
                },
                st.entries.to_string(),
                format!("{:.2}", st.entries_per_sample),
                st.time_us.to_string(),
            ]
        })
        .collect();
    out += &grid(
        &format!("Idle states of CPU {} over the run", s.sleeper_cpu),
        &[
            "state",
            "exit latency µs",
            "disabled",
            "entries",
            "per sample",
            "time µs",
        ],
        states,
    );
    let by = r
        .by_deepest_state
        .iter()
        .map(|b| {
            vec![
                b.state.clone(),
                b.samples.to_string(),
                us(b.min_ns),
                us(b.p50_ns),
                us(b.p99_ns),
                us(b.max_ns),
            ]
        })
        .collect();
    out += &grid(
        "Latency by the deepest state entered in the gap (µs)",
        &["state", "n", "min", "p50", "p99", "max"],
        by,
    );
    out
}

pub fn timer(r: &TimerResult) -> String {
    let s = &r.settings;
    let mut rows = vec![
        (
            "interval / loops".to_string(),
            format!("{} µs x {}", s.interval_us, s.loops),
        ),
        (
            "thread".into(),
            format!(
                "{}, {}{}",
                s.cpu.map_or("not pinned".into(), |c| format!("CPU {c}")),
                s.priority
                    .map_or("SCHED_OTHER".into(), |p| format!("SCHED_FIFO {p}")),
                if s.mlock { ", memory locked" } else { "" }
            ),
        ),
        ("clock".into(), s.clock.clone()),
        pm_qos(&s.pm_qos, &s.host),
        ("overruns".into(), r.overruns.to_string()),
        (
            "run time".into(),
            format!("{:.3} s", r.duration_ms as f64 / 1000.0),
        ),
    ];
    rows.extend(host_rows(&s.host));
    rows.extend(overhead(&r.overhead));
    let head = cut_short(
        r.interrupted.as_deref(),
        &r.latency.summary.samples.to_string(),
        &format!("{} samples", s.loops),
    );
    head + &facts("Timer probe", &rows) + &distribution("Timer lateness (µs)", &r.latency)
}

pub fn rpc(r: &RpcResult) -> String {
    let s = &r.settings;
    let cpu = |c: Option<u32>| c.map_or("not pinned".into(), |c| format!("CPU {c}"));
    let mut rows = vec![
        (
            "target".to_string(),
            format!("{} {} ({})", s.proto, s.target, s.server),
        ),
        (
            "request".into(),
            format!(
                "{} bytes{}",
                s.payload_bytes,
                s.expect
                    .as_ref()
                    .map(|e| format!(", reply complete at {e:?}"))
                    .unwrap_or_default()
            ),
        ),
        (
            "threads".into(),
            format!("client {}, server {}", cpu(s.client_cpu), cpu(s.server_cpu)),
        ),
        ("gaps".into(), format!("{} ({})", s.gap_us, s.gap_rule)),
        pm_qos(&s.pm_qos, &s.host),
        (
            "lost / reconnects / stray bytes".into(),
            format!("{} / {} / {}", r.lost, r.reconnects, r.stray_bytes),
        ),
        (
            "run time".into(),
            format!("{:.3} s", r.duration_ms as f64 / 1000.0),
        ),
    ];
    rows.extend(host_rows(&s.host));
    rows.extend(overhead(&r.overhead));
    let head = cut_short(
        r.interrupted.as_deref(),
        &r.latency.summary.samples.to_string(),
        &format!("{} samples", s.samples),
    );
    head + &facts("RPC probe", &rows) + &distribution("Round trip (µs)", &r.latency)
}

pub fn idle_cpu(r: &IdleCpuResult) -> String {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}%"));
    let mut rows = vec![
        (
            "process".to_string(),
            match &r.command {
                Some(c) => format!("{} (started: {})", r.pid, c.join(" ")),
                None => r.pid.to_string(),
            },
        ),
        (
            "windows".into(),
            format!(
                "{} x {} s after {} s settle ({})",
                r.settings.windows, r.settings.window_s, r.settings.settle_s, r.settings.source
            ),
        ),
        ("median".into(), pct(r.median_pct)),
        (
            "range".into(),
            format!("{} - {}", pct(r.min_pct), pct(r.max_pct)),
        ),
    ];
    if let Some(n) = &r.note {
        rows.push(("PARTIAL".into(), n.clone()));
    }
    let w = r
        .windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            vec![
                (i + 1).to_string(),
                format!("{:.3}", w.seconds),
                w.cpu_ticks.to_string(),
                format!("{:.2}", w.cpu_pct),
            ]
        })
        .collect();
    let head = cut_short(
        r.interrupted.as_deref(),
        &r.windows.len().to_string(),
        &format!("{} windows", r.settings.windows),
    );
    head + &facts("CPU use, % of one core", &rows)
        + &grid(
            "Windows",
            &["window", "seconds", "ticks", "% of one core"],
            w,
        )
}

fn decay(title: &str, d: &Decay) -> String {
    let row = |name: &str, p: &crate::probe::rss::Point| {
        vec![
            name.to_string(),
            format!("{:+.1}", p.t_s),
            mib(p.rss_kb),
            mib(p.corrected_kb),
            format!("{:+.1}", p.residual_kb as f64 / 1024.0),
            p.residual_pct_of_growth
                .map_or("-".into(), |v| format!("{v:.1}%")),
        ]
    };
    let mut rows = vec![row("anchor", &d.anchor), row("peak", &d.peak)];
    if let Some(p) = &d.at_10s {
        rows.push(row("+10 s", p));
    }
    if let Some(p) = &d.at_30s {
        rows.push(row("+30 s", p));
    }
    rows.push(row("end", &d.end));
    grid(
        title,
        &[
            "point",
            "t s",
            "RSS MiB",
            "corrected MiB",
            "residual MiB",
            "of growth",
        ],
        rows,
    )
}

pub fn rss_pid(r: &PidResult) -> String {
    let mut rows = vec![
        ("process".to_string(), r.pid.to_string()),
        (
            "window".into(),
            format!("{} s, {} samples", r.duration_s, r.series.len()),
        ),
    ];
    if let Some(d) = &r.decay {
        rows.push(("VmHWM at end".into(), format!("{} MiB", mib(d.hwm_kb))));
    }
    if let Some(n) = &r.note {
        rows.push(("PARTIAL".into(), n.clone()));
    }
    let taken = r.series.last().map_or(0.0, |m| m.t_ms as f64 / 1000.0);
    let mut out = cut_short(
        r.interrupted.as_deref(),
        &format!("{taken:.1}"),
        &format!("{} s ({} samples)", r.duration_s, r.series.len()),
    );
    out += &facts("RSS probe (corrected = rss - lazyfree)", &rows);
    if let Some(d) = &r.decay {
        out += &decay("Memory (anchor = first sample)", d);
    }
    out
}

pub fn rss_self(r: &SelfBurstResult) -> String {
    let s = &r.settings;
    let rows = vec![
        (
            "burst".to_string(),
            format!(
                "{} MiB from {} threads, sizes {:?} bytes",
                s.burst_mib, s.threads, s.sizes_bytes
            ),
        ),
        ("allocator".into(), s.allocator.clone()),
        (
            "decay".into(),
            format!(
                "dirty_decay_ms {}, muzzy_decay_ms {}",
                super::opt(&s.dirty_decay_ms),
                super::opt(&s.muzzy_decay_ms)
            ),
        ),
        ("idle window".into(), format!("{} s per leg", s.duration_s)),
        (
            "background_thread restored to".into(),
            r.background_thread_restored.to_string(),
        ),
    ];
    let last = r.legs.last().and_then(|l| l.series.last());
    let mut out = cut_short(
        r.interrupted.as_deref(),
        &format!(
            "{} of 2 legs, the last at {:.1}",
            r.legs.len(),
            last.map_or(0.0, |m| m.t_ms as f64 / 1000.0)
        ),
        &format!("{} s", s.duration_s),
    );
    out += &facts("RSS self-burst (corrected = rss - lazyfree)", &rows);
    for l in &r.legs {
        out += &decay(
            &format!(
                "background_thread set {}, read back {}: {} allocations, {} MiB (jemalloc saw +{} MiB)",
                l.background_thread_set,
                l.background_thread_read_back,
                l.allocations,
                mib(l.allocated_bytes / 1024),
                mib(l.jemalloc_allocated_growth_kb)
            ),
            &l.decay,
        );
    }
    out
}
