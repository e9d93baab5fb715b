//! tracefs for `probe noise`: a private trace instance recording irq,
//! softirq, IRQ-vector, NMI, IPI and `sched_switch` events on the target CPUs with the
//! `mono` clock (CLOCK_MONOTONIC, the probe's clock), turned into intervals
//! of who ran.
//!
//! The host is left as found: tracefs is mounted at `/sys/kernel/tracing`
//! only when no tracefs is mounted, and unmounted after; everything else is
//! an instance (`instances/hostknob-noise-PID`, Documentation/trace/ftrace.rst
//! "Instances") with its own buffer, clock, CPU mask and events, removed with
//! the run, so the top-level tracing state another user set is never touched.
//! Event formats: include/trace/events/irq.h, sched.h, nmi.h, ipi.h and
//! arch/x86/include/asm/trace/irq_vectors.h.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;

use anyhow::{Context, Result, bail};

use crate::cpulist::CpuList;
use crate::root::Root;

const MOUNT_AT: &str = "/sys/kernel/tracing";
const EVENTS: [&str; 5] = [
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "sched/sched_switch",
];
/// Enabled where the kernel has them: NMIs (include/trace/events/nmi.h,
/// one event after each handler with its `delta_ns`; rtla osnoise reports
/// NMIs apart) and the IPIs of arm and arm64 (include/trace/events/ipi.h,
/// `ipi_entry`/`ipi_exit` around `do_handle_IPI`), which have no vector events.
const OPTIONAL_EVENTS: [&str; 3] = ["nmi/nmi_handler", "ipi/ipi_entry", "ipi/ipi_exit"];
/// x86's system vectors, by `/proc/interrupts`' names.
const VECTORS: [(&str, &str); 9] = [
    ("local_timer", "LOC"),
    ("reschedule", "RES"),
    ("call_function", "CAL"),
    ("call_function_single", "CAL"),
    ("irq_work", "IWI"),
    ("thermal_apic", "TRM"),
    ("x86_platform_ipi", "PLT"),
    ("spurious_apic", "SPU"),
    ("error_apic", "ERR"),
];

/// Precedence of a gap's time: NMIs (they nest in anything), interrupts,
/// softirqs, then threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Nmi,
    Irq,
    Softirq,
    Thread,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Nmi => "nmi",
            Level::Irq => "irq",
            Level::Softirq => "softirq",
            Level::Thread => "thread",
        }
    }
}

/// Something that ran on the CPU from `start` to `end` (CLOCK_MONOTONIC ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub level: Level,
    pub name: String,
    pub pid: Option<u32>,
    pub start: u64,
    pub end: u64,
}

/// One parsed trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub ts: u64,
    pub name: String,
    pub fields: String,
}

/// A running trace instance.
pub struct Session {
    base: String,
    instance: String,
    mounted: bool,
    pipes: Vec<(u32, File, String)>,
    events: HashMap<u32, Vec<Event>>,
    tids: Vec<u32>,
    done: bool,
}

/// Where tracefs is mounted (tracefs itself, or debugfs's `tracing`).
fn mounted_at(root: &Root) -> Option<String> {
    let mounts = root.read_string("/proc/mounts").ok()?;
    let mut debugfs = None;
    for l in mounts.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.get(2) {
            Some(&"tracefs") => return Some(w[1].to_string()),
            Some(&"debugfs") => debugfs = Some(format!("{}/tracing", w[1])),
            _ => {}
        }
    }
    debugfs.filter(|d| root.exists(&format!("{d}/trace")))
}

impl Session {
    pub fn start(root: &Root, cpus: &CpuList) -> Result<Session> {
        if unsafe { libc::geteuid() } != 0 {
            bail!("tracing needs root");
        }
        let (base, mounted) = match mounted_at(root) {
            Some(b) => (b, false),
            None => {
                mount(root).context("mounting tracefs")?;
                (MOUNT_AT.to_string(), true)
            }
        };
        let instance = format!("{base}/instances/hostknob-noise-{}", std::process::id());
        let mut s = Session {
            base,
            instance,
            mounted,
            pipes: Vec::new(),
            events: HashMap::new(),
            tids: Vec::new(),
            done: false,
        };
        // From here on, Drop removes what was made.
        std::fs::create_dir(root.host_path(&s.instance))
            .with_context(|| format!("creating {}", s.instance))?;
        s.setup(root, cpus)?;
        Ok(s)
    }

    fn setup(&mut self, root: &Root, cpus: &CpuList) -> Result<()> {
        let write = |f: &str, v: &str| {
            let p = format!("{}/{f}", self.instance);
            root.write_existing(&p, v.as_bytes())
                .with_context(|| format!("writing {v} to {p}"))
        };
        write("tracing_on", "0")?;
        write("trace_clock", "mono")?;
        write("buffer_size_kb", "8192")?;
        write("tracing_cpumask", &mask(cpus))?;
        for e in EVENTS {
            write(&format!("events/{e}/enable"), "1")?;
        }
        let optional = VECTORS
            .iter()
            .flat_map(|(v, _)| ["entry", "exit"].map(|end| format!("irq_vectors/{v}_{end}")))
            .chain(OPTIONAL_EVENTS.map(String::from));
        for e in optional {
            let f = format!("events/{e}/enable");
            if root.exists(&format!("{}/{f}", self.instance)) {
                write(&f, "1")?;
            }
        }
        for &c in cpus.as_slice() {
            let p = format!("{}/per_cpu/cpu{c}/trace_pipe", self.instance);
            let f = root.open_read(&p).with_context(|| format!("opening {p}"))?;
            self.pipes.push((c, f, String::new()));
        }
        write("tracing_on", "1")
    }

    /// Reads what the pipes hold until the run ends (`until_ns`), on the
    /// calling thread, which `noise_pin` has moved off the target CPUs.
    pub fn follow(&mut self, tids: &[u32], until_ns: u64) {
        self.tids = tids.to_vec();
        while super::now_ns() < until_ns && !super::cancelled() {
            if self.drain() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    /// Reads every complete line the pipes hold now; bytes read.
    fn drain(&mut self) -> usize {
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        for (cpu, f, partial) in &mut self.pipes {
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                total += n;
                partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                let complete = partial.rfind('\n').map_or(0, |i| i + 1);
                let list = self.events.entry(*cpu).or_default();
                list.extend(partial[..complete].lines().filter_map(parse_line));
                partial.drain(..complete);
            }
        }
        total
    }

    /// Stops tracing, removes the instance (and the mount) and returns the
    /// intervals per CPU.
    pub fn finish(mut self, root: &Root) -> HashMap<u32, Vec<Interval>> {
        let _ = root.write_existing(&format!("{}/tracing_on", self.instance), b"0");
        self.drain();
        let tids = std::mem::take(&mut self.tids);
        let events = std::mem::take(&mut self.events);
        self.teardown(root);
        events
            .into_iter()
            .map(|(cpu, ev)| (cpu, intervals(&ev, &tids)))
            .collect()
    }

    fn teardown(&mut self, root: &Root) {
        if self.done {
            return;
        }
        self.done = true;
        self.pipes.clear();
        let _ = root.write_existing(&format!("{}/tracing_on", self.instance), b"0");
        let dir = root.host_path(&self.instance);
        if let Err(e) = std::fs::remove_dir(&dir) {
            eprintln!(
                "hostknob: warning: cannot remove the trace instance {}: {e}",
                dir.display()
            );
        }
        if self.mounted {
            let path = std::ffi::CString::new(
                root.host_path(&self.base)
                    .into_os_string()
                    .into_encoded_bytes(),
            )
            .expect("no NUL in a path");
            if unsafe { libc::umount2(path.as_ptr(), 0) } != 0 {
                eprintln!(
                    "hostknob: warning: cannot unmount the tracefs mounted at {}: {}",
                    self.base,
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.done
            && let Ok(root) = Root::open(std::path::Path::new("/"))
        {
            self.teardown(&root);
        }
    }
}

fn mount(root: &Root) -> Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let at = c(&root.host_path(MOUNT_AT).to_string_lossy());
    let (src, fs) = (c("tracefs"), c("tracefs"));
    if unsafe { libc::mount(src.as_ptr(), at.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// `tracing_cpumask`'s hex form: 32-bit words, most significant first, commas between.
pub fn mask(cpus: &CpuList) -> String {
    cpus.to_mask()
}

/// `TASK-PID [CPU] FLAGS SECS.USECS: EVENT: FIELDS`; the timestamp is the
/// first `N.N:` followed by an event name (a task name may hold anything).
pub fn parse_line(line: &str) -> Option<Event> {
    // `TASK-PID [CPU] FLAGS SECS.FRAC: EVENT: FIELDS`; TASK may hold any
    // character, so the first `-PID [CPU]` after it anchors the rest.
    static LINE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = LINE.get_or_init(|| {
        regex::Regex::new(r"^.*?-\d+\s+\[\d+\]\s+(?:\S+\s+)?(\d+)\.(\d+): ([^:\s]+):? ?(.*)$")
            .expect("a valid pattern")
    });
    let c = re.captures(line)?;
    let (secs, frac) = (c[1].parse::<u64>().ok()?, &c[2]);
    let scale = 10u64.pow(9u32.saturating_sub(frac.len() as u32));
    Some(Event {
        ts: secs * 1_000_000_000 + frac.parse::<u64>().ok()? * scale,
        name: c[3].to_string(),
        fields: c[4].to_string(),
    })
}

fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let at = fields.find(&format!("{key}="))? + key.len() + 1;
    let v = &fields[at..];
    Some(v.split([' ', ']']).next().unwrap_or(v))
}

/// Who ran when, from one CPU's events in time order. `ours`: the measuring
/// threads, whose own running is not noise.
pub fn intervals(events: &[Event], ours: &[u32]) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut open: HashMap<String, (Level, String, u64)> = HashMap::new();
    let mut running: Option<(String, u32, u64)> = None;
    let mut last = 0;
    for e in events {
        last = e.ts;
        let close = |key: String, open: &mut HashMap<String, (Level, String, u64)>| {
            open.remove(&key).map(|(level, name, start)| Interval {
                level,
                name,
                pid: None,
                start,
                end: e.ts,
            })
        };
        match e.name.as_str() {
            "irq_handler_entry" => {
                let irq = field(&e.fields, "irq").unwrap_or("?");
                let name = field(&e.fields, "name").map_or(format!("irq {irq}"), str::to_string);
                open.insert(format!("irq{irq}"), (Level::Irq, name, e.ts));
            }
            "irq_handler_exit" => out.extend(close(
                format!("irq{}", field(&e.fields, "irq").unwrap_or("?")),
                &mut open,
            )),
            "softirq_entry" => {
                let vec = field(&e.fields, "vec").unwrap_or("?");
                let name =
                    field(&e.fields, "action").map_or(format!("softirq {vec}"), str::to_string);
                open.insert(format!("soft{vec}"), (Level::Softirq, name, e.ts));
            }
            "softirq_exit" => out.extend(close(
                format!("soft{}", field(&e.fields, "vec").unwrap_or("?")),
                &mut open,
            )),
            "sched_switch" => {
                if let Some((comm, pid, start)) = running.take() {
                    out.push(Interval {
                        level: Level::Thread,
                        name: comm,
                        pid: Some(pid),
                        start,
                        end: e.ts,
                    });
                }
                let next: u32 = field(&e.fields, "next_pid")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(0);
                if next != 0 && !ours.contains(&next) {
                    let comm = e
                        .fields
                        .split_once("next_comm=")
                        .and_then(|(_, r)| r.split(" next_pid=").next())
                        .unwrap_or("?")
                        .to_string();
                    running = Some((comm, next, e.ts));
                }
            }
            // `HANDLER() delta_ns: N handled: H`, at the handler's end.
            "nmi_handler" => {
                let f = &e.fields;
                let delta: u64 = f
                    .split_once("delta_ns: ")
                    .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
                    .unwrap_or(0);
                let handler = f.split_once("()").map_or("NMI", |(h, _)| h.trim());
                out.push(Interval {
                    level: Level::Nmi,
                    name: format!("NMI {handler}"),
                    pid: None,
                    start: e.ts.saturating_sub(delta),
                    end: e.ts,
                });
            }
            // `(REASON)`: arm64's `ipi_types`, e.g. `Rescheduling interrupts`.
            "ipi_entry" => {
                let reason = e
                    .fields
                    .trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')');
                open.insert("ipi".into(), (Level::Irq, format!("IPI {reason}"), e.ts));
            }
            "ipi_exit" => out.extend(close("ipi".into(), &mut open)),
            other => {
                if let Some(stem) = other.strip_suffix("_entry")
                    && let Some((_, row)) = VECTORS.iter().find(|(v, _)| *v == stem)
                {
                    open.insert(format!("vec{stem}"), (Level::Irq, row.to_string(), e.ts));
                } else if let Some(stem) = other.strip_suffix("_exit") {
                    out.extend(close(format!("vec{stem}"), &mut open));
                }
            }
        }
    }
    if let Some((comm, pid, start)) = running {
        out.push(Interval {
            level: Level::Thread,
            name: comm,
            pid: Some(pid),
            start,
            end: last,
        });
    }
    out.sort_by_key(|i| i.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_parse_whatever_the_task_name() {
        let e = parse_line("          <idle>-0       [001] d.h2.   123.456789: irq_handler_entry: irq=38 name=virtio2-input.0").unwrap();
        assert_eq!(
            (e.ts, e.name.as_str()),
            (123_456_789_000, "irq_handler_entry")
        );
        assert_eq!(field(&e.fields, "name"), Some("virtio2-input.0"));
        let e = parse_line(" a: b] 1.5: x-77 [001] ..... 9.000001: sched_switch: prev_comm=noise/1 prev_pid=5 prev_prio=120 prev_state=R ==> next_comm=my neighbour next_pid=77 next_prio=120").unwrap();
        assert_eq!((e.ts, e.name.as_str()), (9_000_001_000, "sched_switch"));
        assert!(parse_line("# tracer: nop").is_none());
    }

    #[test]
    fn events_become_intervals_of_who_ran() {
        let ev = |ts: u64, name: &str, fields: &str| Event {
            ts,
            name: name.into(),
            fields: fields.into(),
        };
        let events = [
            ev(
                10,
                "sched_switch",
                "prev_comm=noise/1 prev_pid=5 prev_prio=120 prev_state=R ==> next_comm=my neighbour next_pid=77 next_prio=120",
            ),
            ev(12, "local_timer_entry", "vector=236"),
            ev(14, "local_timer_exit", "vector=236"),
            ev(15, "softirq_entry", "vec=1 [action=TIMER]"),
            ev(16, "softirq_exit", "vec=1 [action=TIMER]"),
            ev(
                20,
                "sched_switch",
                "prev_comm=my neighbour prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=noise/1 next_pid=5 next_prio=120",
            ),
            ev(30, "irq_handler_entry", "irq=38 name=virtio2-input.0"),
            ev(33, "irq_handler_exit", "irq=38 ret=handled"),
            ev(40, "ipi_entry", "(Rescheduling interrupts)"),
            ev(42, "ipi_exit", "(Rescheduling interrupts)"),
            ev(
                50,
                "nmi_handler",
                "perf_event_nmi_handler() delta_ns: 6 handled: 1",
            ),
        ];
        let iv = intervals(&events, &[5]);
        let got: Vec<(&str, Option<u32>, u64, u64)> = iv
            .iter()
            .map(|i| (i.name.as_str(), i.pid, i.start, i.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("my neighbour", Some(77), 10, 20),
                ("LOC", None, 12, 14),
                ("TIMER", None, 15, 16),
                ("virtio2-input.0", None, 30, 33),
                ("IPI Rescheduling interrupts", None, 40, 42),
                ("NMI perf_event_nmi_handler", None, 44, 50),
            ]
        );
    }

    #[test]
    fn cpumasks_are_hex_words() {
        assert_eq!(mask(&CpuList::parse("1").unwrap()), "00000002");
        assert_eq!(mask(&CpuList::parse("0,33").unwrap()), "00000002,00000001");
    }
}
