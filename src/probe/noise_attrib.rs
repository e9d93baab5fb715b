//! Who took a CPU's lost time in `probe noise`.
//!
//! `tracefs` (rtla osnoise's way): irq, softirq, IRQ-vector and
//! `sched_switch` events recorded on the target CPUs during the run
//! (`noise_trace`); each gap's time goes to the intervals that overlap it,
//! hardware interrupts first, then softirqs, then other threads, so a
//! nested interrupt is not counted twice. `counts` (without tracefs): per
//! source counts from `/proc/interrupts`, `/proc/softirqs` and each thread's
//! run time and context switches on the CPU (`/proc/PID/task/TID/stat`
//! processor field, `schedstat`, `status`), read before and after; threads
//! get their run time, and the rest of the lost time is shared among the
//! interrupts and softirqs by count, each event standing for one gap of the
//! mean length (an estimate). In both, steal time (`/proc/stat`) takes what
//! the events leave unexplained, and what remains is unexplained.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::noise_spin::{Spin, share};
use super::noise_trace::{self, Interval, Level};
use crate::cpulist::CpuList;
use crate::root::Root;

/// `--attribution`: how lost time is split by source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// tracefs where it can be used, else counts.
    Auto,
    Tracefs,
    Counts,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Tracefs => "tracefs",
            Method::Counts => "counts",
        }
    }
}

/// One source of lost time on a CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    /// `irq`, `softirq`, `thread` or `steal`.
    pub kind: String,
    /// The IRQ's action (`virtio2-input.0`), the per-CPU row (`LOC`, `CAL`),
    /// the softirq (`TIMER`), or the thread's name.
    pub name: String,
    /// The thread's id (kind `thread`).
    pub pid: Option<u32>,
    /// tracefs: gaps it overlapped; counts: events (context switches for a
    /// thread); steal: clock ticks (USER_HZ) of steal in `/proc/stat`.
    pub count: u64,
    /// Lost time given to it.
    pub time_ns: u64,
    /// Its part of the CPU's lost time.
    pub share: f64,
    /// The time is an estimate (counts method, steal), not measured per gap.
    pub estimated: bool,
}

/// A CPU's sources before the lost time is known to the report.
#[derive(Default)]
pub struct Attributed(Vec<Source>);

impl Attributed {
    /// Largest first, with shares; and the unexplained remainder.
    pub fn into_sources(self, lost_ns: u64) -> (Vec<Source>, u64) {
        let mut v = self.0;
        v.retain(|s| s.time_ns > 0 || s.count > 0);
        v.sort_by(|a, b| (b.time_ns, b.count, &a.name).cmp(&(a.time_ns, a.count, &b.name)));
        let explained: u64 = v.iter().map(|s| s.time_ns).sum();
        for s in &mut v {
            s.share = share(s.time_ns, lost_ns);
        }
        (v, lost_ns.saturating_sub(explained))
    }
}

/// Key of a counted source: kind, name, thread id.
type Key = (&'static str, String, Option<u32>);

/// A thread as `/proc/PID/task/TID` shows it at one instant.
#[derive(Clone, Debug, Default)]
struct Thread {
    comm: String,
    /// The CPU it last ran on (`stat` field 39).
    cpu: u32,
    switches: u64,
    /// Run time on any CPU (`schedstat`), ns.
    run_ns: u64,
    /// `Cpus_allowed_list` (`status`); empty when unreadable.
    allowed: CpuList,
}

/// Counters read once: per CPU and source.
#[derive(Default)]
struct Snapshot {
    events: HashMap<(u32, Key), u64>,
    /// Per thread id, wherever it ran: its CPU, switches, run time and allowed
    /// CPUs. By id alone: a kworker's name changes with its work item.
    threads: HashMap<u32, Thread>,
    steal_ticks: HashMap<u32, u64>,
}

fn columns(header: &str) -> Vec<u32> {
    header
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
        .collect()
}

/// `/proc/interrupts` rows counted for the whole system.
const GLOBAL_ROWS: [&str; 3] = ["ERR", "MIS", "Err"];

/// `/proc/interrupts` and `/proc/softirqs`: counts per CPU column and row.
fn table(text: &str, kind: &'static str, out: &mut HashMap<(u32, Key), u64>) {
    let mut lines = text.lines();
    let cpus = lines.next().map(columns).unwrap_or_default();
    let numbered = crate::inventory::irq::parse(text);
    for line in lines {
        let Some((head, rest)) = line.split_once(':') else {
            continue;
        };
        let head = head.trim();
        // A count for the whole system, not per CPU (ERR, MIS; arm64's Err):
        // arch/x86/kernel/irq.c and arch/arm64/kernel/irq.c
        // `arch_show_interrupts` print one column. It is no CPU's noise.
        let counts = rest
            .split_whitespace()
            .map_while(|w| w.parse::<u64>().ok())
            .count();
        if GLOBAL_ROWS.contains(&head) || (counts == 1 && cpus.len() > 1) {
            continue;
        }
        let name = match head.parse::<u32>() {
            Ok(n) => numbered
                .rows
                .iter()
                .find(|r| r.irq == n)
                .filter(|r| !r.actions.is_empty())
                .map_or(format!("irq {n}"), |r| r.actions.join(", ")),
            Err(_) => head.to_string(),
        };
        for (cpu, n) in cpus
            .iter()
            .zip(rest.split_whitespace().map_while(|w| w.parse::<u64>().ok()))
        {
            out.insert((*cpu, (kind, name.clone(), None)), n);
        }
    }
}

impl Snapshot {
    fn read(root: &Root) -> Snapshot {
        let mut s = Snapshot::default();
        let text = |p: &str| root.read_string(p).unwrap_or_default();
        table(&text("/proc/interrupts"), "irq", &mut s.events);
        table(&text("/proc/softirqs"), "softirq", &mut s.events);
        for line in text("/proc/stat").lines() {
            let mut w = line.split_whitespace();
            if let Some(cpu) = w
                .next()
                .and_then(|h| h.strip_prefix("cpu")?.parse::<u32>().ok())
                && let Some(steal) = w.nth(7).and_then(|v| v.parse().ok())
            {
                s.steal_ticks.insert(cpu, steal);
            }
        }
        // Every thread, not only those on the target now: one that moves
        // onto it during the run is charged its run since the start, not
        // its whole life.
        for (pid, tid) in crate::task::threads(root) {
            if let Some(t) = thread(root, pid, tid) {
                s.threads.insert(tid, t);
            }
        }
        s
    }
}

/// A thread's name, CPU (field 39 of `stat`), context switches, run time
/// and allowed CPUs.
fn thread(root: &Root, pid: u32, tid: u32) -> Option<Thread> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = String::from_utf8_lossy(&root.read(&format!("{dir}/stat")).ok()?).into_owned();
    let comm = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_string();
    let rest: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let cpu = rest.get(36)?.parse().ok()?;
    let run_ns = root
        .read_string(&format!("{dir}/schedstat"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let status = root
        .read_string(&format!("{dir}/status"))
        .unwrap_or_default();
    let switches = status
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        .sum();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|v| CpuList::parse(v.trim()).ok())
        .unwrap_or_default();
    Some(Thread {
        comm,
        cpu,
        switches,
        run_ns,
        allowed,
    })
}

/// The part of a thread's run time charged to `cpu`. /proc keeps a thread's
/// run time over all CPUs and only the CPU it last ran on, so: all of it when
/// the thread may run on `cpu` alone (a per-CPU kworker, a pinned
/// neighbour); else an even share over the CPUs it may run on, counted once
/// per snapshot (start, end) that saw it on `cpu`. An estimate: schedstat
/// cannot say where the time was spent.
fn charged(cpu: u32, before: Option<&Thread>, after: &Thread) -> u64 {
    let run = after.run_ns.saturating_sub(before.map_or(0, |b| b.run_ns));
    let seen = [before.map(|b| b.cpu), Some(after.cpu)]
        .iter()
        .filter(|c| **c == Some(cpu))
        .count() as u64;
    let allowed = after.allowed.as_slice();
    match allowed {
        [only] if *only == cpu => run,
        [] => run * seen / 2,
        _ => run * seen / (2 * allowed.len() as u64),
    }
}

/// The attribution of one run: started before the threads, finished after.
pub struct Attribution {
    before: Snapshot,
    trace: Option<noise_trace::Session>,
    note: Option<String>,
    /// tracefs was asked for and could not be used: the run fails.
    refused: Option<String>,
}

impl Attribution {
    pub fn start(root: &Root, method: Method, cpus: &CpuList) -> Attribution {
        let (trace, note) = match method {
            Method::Counts => (None, None),
            _ => match noise_trace::Session::start(root, cpus) {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(format!("tracefs not used: {e:#}"))),
            },
        };
        let refused = (method == Method::Tracefs && trace.is_none())
            .then(|| note.clone().unwrap_or_default());
        Attribution {
            before: Snapshot::read(root),
            trace,
            note,
            refused,
        }
    }

    /// Refuses a run that asked for tracefs and cannot have it.
    pub fn check(&self) -> anyhow::Result<()> {
        match &self.refused {
            Some(why) => anyhow::bail!("--attribution tracefs: {why}"),
            None => Ok(()),
        }
    }

    /// During the run: reads the trace as it fills (from CPUs outside the target).
    pub fn watch(&mut self, tids: &[u32], until_ns: u64) {
        if let Some(t) = &mut self.trace {
            t.follow(tids, until_ns);
        }
    }

    /// Sources per CPU, the method used and why tracefs was not.
    pub fn finish(
        self,
        root: &Root,
        spins: &[Spin],
    ) -> (Method, Option<String>, HashMap<u32, Attributed>) {
        let after = Snapshot::read(root);
        let ticks = super::idle_cpu::clock_ticks_per_s().max(1);
        // (clock ticks of steal, their time): /proc/stat counts in USER_HZ ticks.
        let steal = |cpu: u32| -> (u64, u64) {
            let d = after
                .steal_ticks
                .get(&cpu)
                .unwrap_or(&0)
                .saturating_sub(*self.before.steal_ticks.get(&cpu).unwrap_or(&0));
            (d, d * 1_000_000_000 / ticks)
        };
        let (method, mut per_cpu): (Method, HashMap<u32, Attributed>) = match self.trace {
            Some(t) => {
                let intervals = t.finish(root);
                let per = spins
                    .iter()
                    .map(|s| {
                        (
                            s.cpu,
                            by_overlap(
                                &s.gaps,
                                intervals.get(&s.cpu).map_or(&[][..], Vec::as_slice),
                            ),
                        )
                    })
                    .collect();
                (Method::Tracefs, per)
            }
            // Counts: steal first. The hypervisor's time is measured by the
            // host (/proc/stat), while events only stand for mean gaps: left
            // to share what the events leave, it would go to LOC and RES.
            None => {
                let per = spins
                    .iter()
                    .map(|s| {
                        let (ticks, st) = steal(s.cpu);
                        let st = st.min(s.lost_ns());
                        let mut a = by_counts(&self.before, &after, s, st);
                        if ticks > 0 {
                            a.0.push(steal_source(ticks, st));
                        }
                        (s.cpu, a)
                    })
                    .collect();
                return (Method::Counts, self.note, per);
            }
        };
        // tracefs: each gap's events are measured; steal takes what they leave.
        for s in spins {
            let a: &mut Attributed = per_cpu.entry(s.cpu).or_default();
            let left = s
                .lost_ns()
                .saturating_sub(a.0.iter().map(|x| x.time_ns).sum());
            let (ticks, st) = steal(s.cpu);
            if ticks > 0 {
                a.0.push(steal_source(ticks, st.min(left)));
            }
        }
        (method, self.note, per_cpu)
    }
}

fn steal_source(ticks: u64, time_ns: u64) -> Source {
    source(
        "steal",
        "steal (hypervisor)".into(),
        None,
        ticks,
        time_ns,
        true,
    )
}

fn source(
    kind: &str,
    name: String,
    pid: Option<u32>,
    count: u64,
    time_ns: u64,
    estimated: bool,
) -> Source {
    Source {
        kind: kind.into(),
        name,
        pid,
        count,
        time_ns,
        share: 0.0,
        estimated,
    }
}

/// tracefs: each gap's time to the intervals overlapping it, interrupts
/// first. Timestamps in the trace have µs resolution: intervals are
/// widened by 1 µs each side.
pub fn by_overlap(gaps: &[(u64, u64)], intervals: &[Interval]) -> Attributed {
    const SLACK: u64 = 1_000;
    let longest = intervals.iter().map(|i| i.end - i.start).max().unwrap_or(0);
    let mut acc: BTreeMap<(Level, String, Option<u32>), (u64, u64)> = BTreeMap::new();
    for &(at, len) in gaps {
        let (s, e) = (at, at + len);
        let from = intervals.partition_point(|i| i.start + longest + 2 * SLACK < s);
        let mut hit: Vec<(&Interval, u64)> = intervals[from..]
            .iter()
            .take_while(|i| i.start <= e + SLACK)
            .filter_map(|i| {
                let lo = i.start.saturating_sub(SLACK).max(s);
                let hi = (i.end + SLACK).min(e);
                (hi > lo).then_some((i, hi - lo))
            })
            .collect();
        hit.sort_by_key(|(i, _)| i.level);
        let mut left = len;
        let mut seen: Vec<(Level, &str, Option<u32>)> = Vec::new();
        for (i, overlap) in hit {
            let t = overlap.min(left);
            left -= t;
            let e = acc.entry((i.level, i.name.clone(), i.pid)).or_default();
            e.1 += t;
            if !seen.contains(&(i.level, &i.name, i.pid)) {
                seen.push((i.level, &i.name, i.pid));
                e.0 += 1;
            }
        }
    }
    Attributed(
        acc.into_iter()
            .map(|((level, name, pid), (count, t))| {
                source(level.as_str(), name, pid, count, t, false)
            })
            .collect(),
    )
}

/// counts: threads by their run time on the CPU, interrupts and softirqs
/// by count (each event one gap of the mean length), scaled to what is left
/// after `steal_ns` (charged first by the caller).
fn by_counts(before: &Snapshot, after: &Snapshot, s: &Spin, steal_ns: u64) -> Attributed {
    let lost: u64 = s.lost_ns().saturating_sub(steal_ns);
    let mut out = Vec::new();
    for (tid, t) in &after.threads {
        let b = before.threads.get(tid);
        if *tid == s.tid || (t.cpu != s.cpu && b.is_none_or(|b| b.cpu != s.cpu)) {
            continue;
        }
        let dsw = t.switches.saturating_sub(b.map_or(0, |b| b.switches));
        let drun = charged(s.cpu, b, t);
        if drun > 0 {
            out.push(source(
                "thread",
                t.comm.clone(),
                Some(*tid),
                dsw,
                drun,
                true,
            ));
        }
    }
    scale(&mut out, lost);
    let left = lost.saturating_sub(out.iter().map(|x| x.time_ns).sum());
    let mean_gap = s.lost_ns().checked_div(s.gaps.len() as u64).unwrap_or(0);
    let mut events: Vec<Source> = after
        .events
        .iter()
        .filter(|((cpu, _), _)| *cpu == s.cpu)
        .filter_map(|((_, (kind, name, _)), &n)| {
            let d = n.saturating_sub(
                *before
                    .events
                    .get(&(s.cpu, (*kind, name.clone(), None)))
                    .unwrap_or(&0),
            );
            (d > 0).then(|| source(kind, name.clone(), None, d, d * mean_gap, true))
        })
        .collect();
    scale(&mut events, left);
    out.extend(events);
    Attributed(out)
}

/// Scales the sources' times down to at most `budget` in all.
fn scale(v: &mut [Source], budget: u64) {
    let sum: u64 = v.iter().map(|s| s.time_ns).sum();
    if sum > budget {
        for s in v.iter_mut() {
            s.time_ns = (s.time_ns as u128 * budget as u128 / sum as u128) as u64;
        }
    }
}

/// What verify keeps of a leg: per CPU the lost time and its top sources.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    pub attribution: String,
    pub cpus: Vec<CpuEvidence>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuEvidence {
    pub cpu: u32,
    pub lost_us_per_s: f64,
    pub gaps: u64,
    pub max_gap_ns: u64,
    /// Up to 8 sources, largest first.
    pub top: Vec<Source>,
    pub unexplained_share: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(level: Level, name: &str, start: u64, end: u64) -> Interval {
        Interval {
            level,
            name: name.into(),
            pid: None,
            start,
            end,
        }
    }

    #[test]
    fn overlapping_intervals_share_a_gap_interrupts_first() {
        // One 20 µs gap: a thread ran 10..40 µs, an IRQ inside it 12..17 µs.
        let ivs = vec![
            iv(Level::Thread, "neigh", 10_000, 40_000),
            iv(Level::Irq, "virtio", 12_000, 17_000),
        ];
        let mut ivs = ivs;
        ivs.sort_by_key(|i| i.start);
        let a = by_overlap(&[(10_000, 20_000), (100_000, 5_000)], &ivs);
        let (s, unexplained) = a.into_sources(25_000);
        assert_eq!(s[0].name, "neigh");
        assert_eq!(s[0].time_ns, 13_000, "{s:?}");
        assert_eq!(s[1].name, "virtio");
        assert_eq!(s[1].time_ns, 7_000, "widened by 1 µs each side: {s:?}");
        assert_eq!(unexplained, 5_000, "the second gap has no event");
        assert_eq!(s[0].share, 0.52);
    }

    fn th(comm: &str, cpu: u32, switches: u64, run_ns: u64, allowed: &str) -> Thread {
        Thread {
            comm: comm.into(),
            cpu,
            switches,
            run_ns,
            allowed: CpuList::parse(allowed).unwrap_or_default(),
        }
    }

    #[test]
    fn a_thread_free_to_run_elsewhere_is_charged_its_share_not_its_whole_run_time() {
        // Under load: an unbound kworker (renamed by its work item) ran 300 ms on CPUs 0-1 and was last
        // seen on CPU 1; a neighbour pinned to CPU 1 ran 100 ms; a thread on
        // CPU 0 at the start moved onto CPU 1 (its life's 5 s ran before).
        let mut before = Snapshot::default();
        let mut after = Snapshot::default();
        before
            .threads
            .insert(10, th("kworker/u4:1-events", 0, 0, 1_000_000, "0-1"));
        after.threads.insert(
            10,
            th("kworker/u4:1-events_unbound", 1, 90, 301_000_000, "0-1"),
        );
        before.threads.insert(20, th("hk-noisy", 1, 0, 0, "1"));
        after
            .threads
            .insert(20, th("hk-noisy", 1, 500, 100_000_000, "1"));
        before
            .threads
            .insert(30, th("rustc", 0, 0, 5_000_000_000, "0-1"));
        after
            .threads
            .insert(30, th("rustc", 1, 3, 5_020_000_000, "0-1"));
        let spin = Spin {
            cpu: 1,
            tid: 5,
            start_ns: 0,
            end_ns: 1_000_000_000,
            loops: 1,
            gaps: vec![(0, 200_000_000), (1, 200_000_000)],
        };
        let (s, _) = by_counts(&before, &after, &spin, 0).into_sources(400_000_000);
        // The pinned neighbour, all of its time; the kworker, seen on CPU 1
        // once of two looks and free on 2 CPUs, a quarter; rustc its run
        // during the probe (20 ms), a quarter of that.
        assert_eq!(
            (s[0].name.as_str(), s[0].time_ns),
            ("hk-noisy", 100_000_000)
        );
        assert_eq!(
            (s[1].name.as_str(), s[1].time_ns),
            ("kworker/u4:1-events_unbound", 75_000_000)
        );
        assert_eq!((s[2].name.as_str(), s[2].time_ns), ("rustc", 5_000_000));
        assert!(s.iter().all(|x| x.estimated), "{s:?}");
    }

    #[test]
    fn counted_events_share_what_threads_leave() {
        let mut before = Snapshot::default();
        let mut after = Snapshot::default();
        let key = |n: &str| (1u32, ("irq", n.to_string(), None));
        before.events.insert(key("LOC"), 100);
        after.events.insert(key("LOC"), 130);
        after.events.insert(key("CAL"), 10);
        before.threads.insert(77, th("noisy", 1, 5, 1_000, ""));
        after.threads.insert(77, th("noisy", 1, 9, 41_000, ""));
        after.threads.insert(78, th("elsewhere", 0, 9, 41_000, ""));
        let spin = Spin {
            cpu: 1,
            tid: 5,
            start_ns: 0,
            end_ns: 1_000_000,
            loops: 1,
            gaps: vec![(0, 50_000), (100, 50_000)],
        };
        let (s, unexplained) = by_counts(&before, &after, &spin, 0).into_sources(100_000);
        // Largest first: 60 µs left for 40 events of 50 µs, scaled, LOC 3/4 of it.
        assert_eq!((s[0].name.as_str(), s[0].time_ns), ("LOC", 45_000));
        assert_eq!(s[1].name, "noisy");
        assert_eq!((s[1].time_ns, s[1].count, s[1].pid), (40_000, 4, Some(77)));
        assert_eq!((s[2].name.as_str(), s[2].time_ns), ("CAL", 15_000));
        assert_eq!(unexplained, 0);
        assert!(s.iter().all(|x| x.name != "elsewhere"));
    }

    #[test]
    fn proc_tables_are_read_per_cpu_column() {
        let mut m = HashMap::new();
        let text = "           CPU0       CPU1\n 38:          0       1572 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nLOC:     102941     107813   Local timer interrupts\nERR:          0\n";
        table(text, "irq", &mut m);
        assert_eq!(m[&(1, ("irq", "virtio2-input.0".to_string(), None))], 1572);
        assert_eq!(m[&(0, ("irq", "LOC".to_string(), None))], 102941);
        assert!(
            m.keys().all(|k| k.1.1 != "ERR"),
            "ERR counts for the system, not CPU 0: {m:?}"
        );
        let mut m = HashMap::new();
        table(
            "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      14516      11868\n",
            "softirq",
            &mut m,
        );
        assert_eq!(m[&(1, ("softirq", "TIMER".to_string(), None))], 11868);
    }
}
