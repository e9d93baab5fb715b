//! Hardware C-state residency: what the CPU itself counts, which the OS idle
//! counters cannot show (C1E promotion, package C-states).
//!
//! Two sources, as turbostat reads them. On the live host, the `cstate_core`
//! and `cstate_pkg` perf PMUs (`/sys/bus/event_source/devices/*/events/cN-residency`),
//! one counting `perf_event_open` per CPU and event, with the `msr` PMU's
//! `tsc` event as the denominator; the raw syscall (one call, a 64-byte
//! attribute) needs no crate beyond `libc`. Otherwise the residency MSRs
//! through [`crate::msr`] (read-only: 0x3FC/0x3FD/0x3FE core C3/C6/C7,
//! 0x60D/0x3F8/0x3F9/0x3FA package C2/C3/C6/C7, on clients 0x630/0x631/0x632
//! package C8/C9/C10, TSC 0x10), which is also how a
//! captured tree holds them. Both count at the TSC's rate. Where neither is
//! readable the reason is kept: residency that is not exposed is never zero.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::Serialize;

use crate::inventory::CPU_DIR;
use crate::msr::Msrs;
use crate::root::Root;

/// Where a counter's scope lies: per core (read on each CPU) or per package.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Core,
    Package,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Core => "core",
            Scope::Package => "package",
        }
    }
}

/// The time-stamp counter, the residencies' denominator.
pub const TSC: u32 = 0x10;

/// The residency MSRs (Intel SDM vol. 4; turbostat reads the same). PC8-PC10
/// (MSR_PKG_C8/C9/C10_RESIDENCY) exist on client parts only: where they do
/// not read, they are left out as any counter is.
pub const MSR_COUNTERS: [(Scope, u32, u32); 10] = [
    (Scope::Core, 3, 0x3FC),
    (Scope::Core, 6, 0x3FD),
    (Scope::Core, 7, 0x3FE),
    (Scope::Package, 2, 0x60D),
    (Scope::Package, 3, 0x3F8),
    (Scope::Package, 6, 0x3F9),
    (Scope::Package, 7, 0x3FA),
    (Scope::Package, 8, 0x630),
    (Scope::Package, 9, 0x631),
    (Scope::Package, 10, 0x632),
];

const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// One counter on one CPU: its scope, C-state number, and how it is read.
#[derive(Debug)]
struct Slot {
    cpu: u32,
    scope: Scope,
    state: u32,
    how: How,
}

#[derive(Debug)]
enum How {
    Msr(u32),
    Perf { fd: OwnedFd, name: String },
}

/// A counter's value and the TSC read with it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Count {
    pub scope: Scope,
    /// The CPU read (for a package counter: one CPU of the package).
    pub cpu: u32,
    /// `C6` (core) or `PC6` (package).
    pub state: String,
    /// What was read: `MSR 0x3fd`, `cstate_core/c6-residency/`.
    pub counter: String,
    /// Residency in TSC ticks (over a leg: the change).
    pub ticks: u64,
    /// TSC ticks (over a leg: the change).
    pub tsc: u64,
}

impl Count {
    /// The share of the TSC's ticks spent in the state, in %.
    pub fn percent(&self) -> f64 {
        if self.tsc == 0 {
            return 0.0;
        }
        (self.ticks as f64 / self.tsc as f64 * 1e4).round() / 100.0
    }

    pub fn number(&self) -> u32 {
        self.state
            .trim_start_matches(['P', 'C'])
            .parse()
            .unwrap_or(0)
    }

    fn same(&self, o: &Count) -> bool {
        self.scope == o.scope && self.cpu == o.cpu && self.state == o.state
    }
}

/// The counters of the watched CPUs, opened once per run.
pub struct Residency<'r> {
    pub source: &'static str,
    slots: Vec<Slot>,
    msrs: Option<Msrs<'r>>,
    /// `msr/tsc/` per CPU (perf source).
    tsc_fds: Vec<(u32, OwnedFd)>,
}

impl<'r> Residency<'r> {
    /// The counters of `cpus` (core) and of one CPU per package among them,
    /// or why the host exposes none.
    pub fn open(root: &'r Root, cpus: &[u32]) -> Result<Residency<'r>, String> {
        let first = *cpus.first().ok_or("no CPU to watch")?;
        let perf_why = if root.is_live() {
            match open_perf(root, cpus) {
                Ok(r) => return Ok(r),
                Err(why) => why,
            }
        } else {
            "perf counters exist on the live host only".to_string()
        };
        let msrs = Msrs::open(root, first)
            .map_err(|msr_why| format!("hardware residency not exposed: {perf_why}; {msr_why}"))?;
        let mut slots = Vec::new();
        let pkgs = package_cpus(root, cpus);
        for &cpu in cpus {
            let regs: Vec<u32> = std::iter::once(TSC)
                .chain(MSR_COUNTERS.iter().map(|c| c.2))
                .collect();
            let got = msrs.read(cpu, &regs);
            if got[0].is_err() {
                continue;
            }
            for (c, v) in MSR_COUNTERS.iter().zip(&got[1..]) {
                if v.is_ok() && (c.0 == Scope::Core || pkgs.contains(&cpu)) {
                    slots.push(Slot {
                        cpu,
                        scope: c.0,
                        state: c.1,
                        how: How::Msr(c.2),
                    });
                }
            }
        }
        if slots.is_empty() {
            let why = msrs.read(first, &[TSC, 0x3FD])[1]
                .clone()
                .err()
                .unwrap_or_else(|| "the TSC (MSR 0x10) cannot be read".into());
            return Err(format!(
                "hardware residency not exposed: {perf_why}; no residency MSR reads on CPUs {} ({why})",
                crate::cpulist::CpuList::new(cpus.to_vec())
            ));
        }
        Ok(Residency {
            source: "msr",
            slots,
            msrs: Some(msrs),
            tsc_fds: Vec::new(),
        })
    }

    /// Every counter now; a counter that fails to read is left out.
    pub fn read(&self) -> Vec<Count> {
        let mut out = Vec::new();
        let mut cpus: Vec<u32> = self.slots.iter().map(|s| s.cpu).collect();
        cpus.dedup();
        for cpu in cpus {
            let slots: Vec<&Slot> = self.slots.iter().filter(|s| s.cpu == cpu).collect();
            let (tsc, values): (Option<u64>, Vec<Option<u64>>) = match &self.msrs {
                Some(m) => {
                    let regs: Vec<u32> = std::iter::once(TSC)
                        .chain(slots.iter().map(|s| match s.how {
                            How::Msr(r) => r,
                            How::Perf { .. } => TSC,
                        }))
                        .collect();
                    let v = m.read(cpu, &regs);
                    (
                        v[0].clone().ok(),
                        v[1..].iter().map(|x| x.clone().ok()).collect(),
                    )
                }
                None => {
                    let tsc = self
                        .tsc_fds
                        .iter()
                        .find(|t| t.0 == cpu)
                        .and_then(|t| read_fd(&t.1));
                    let v = slots
                        .iter()
                        .map(|s| match &s.how {
                            How::Perf { fd, .. } => read_fd(fd),
                            How::Msr(_) => None,
                        })
                        .collect();
                    (tsc, v)
                }
            };
            let Some(tsc) = tsc else { continue };
            for (s, v) in slots.iter().zip(values) {
                let Some(ticks) = v else { continue };
                out.push(Count {
                    scope: s.scope,
                    cpu,
                    state: match s.scope {
                        Scope::Core => format!("C{}", s.state),
                        Scope::Package => format!("PC{}", s.state),
                    },
                    counter: match &s.how {
                        How::Msr(r) => format!("MSR {r:#x}"),
                        How::Perf { name, .. } => name.clone(),
                    },
                    ticks,
                    tsc,
                });
            }
        }
        out
    }
}

/// `after - before` per counter; a counter that went back (reset) is left out.
pub fn delta(before: &[Count], after: &[Count]) -> Vec<Count> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.same(a))?;
            Some(Count {
                ticks: a.ticks.checked_sub(b.ticks)?,
                tsc: a.tsc.checked_sub(b.tsc)?,
                ..a.clone()
            })
        })
        .collect()
}

/// Adds `d` into the running totals `sum`.
pub fn accumulate(sum: &mut Vec<Count>, d: &[Count]) {
    for c in d {
        match sum.iter_mut().find(|s| s.same(c)) {
            Some(s) => {
                s.ticks += c.ticks;
                s.tsc += c.tsc;
            }
            None => sum.push(c.clone()),
        }
    }
}

/// The first of `cpus` in each package (`topology/physical_package_id`,
/// else `/proc/cpuinfo`'s `physical id`; neither: the CPU stands for its own
/// package).
fn package_cpus(root: &Root, cpus: &[u32]) -> BTreeSet<u32> {
    // processor -> physical id, from /proc/cpuinfo.
    let mut info = std::collections::BTreeMap::new();
    let mut processor = None;
    for line in root
        .read_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
    {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => processor = v.trim().parse::<u32>().ok(),
            "physical id" => {
                if let (Some(p), Ok(id)) = (processor, v.trim().parse::<i64>()) {
                    info.insert(p, id);
                }
            }
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    for &cpu in cpus {
        let pkg = root
            .read_string(&format!("{CPU_DIR}/cpu{cpu}/topology/physical_package_id"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .or_else(|| info.get(&cpu).copied())
            .unwrap_or(-1 - cpu as i64);
        if seen.insert(pkg) {
            out.insert(cpu);
        }
    }
    out
}

/// The `cstate_core`/`cstate_pkg` events of the live host, opened per CPU.
fn open_perf<'r>(root: &'r Root, cpus: &[u32]) -> Result<Residency<'r>, String> {
    let mut events = Vec::new();
    for (pmu, scope) in [("cstate_core", Scope::Core), ("cstate_pkg", Scope::Package)] {
        let Ok(ty) = pmu_type(root, pmu) else {
            continue;
        };
        let dir = format!("{PMU_DIR}/{pmu}/events");
        let Ok(names) = root.read_dir(&dir) else {
            continue;
        };
        for name in names {
            let Some(n) = name
                .strip_prefix('c')
                .and_then(|r| r.strip_suffix("-residency"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(config) = event_config(root, &format!("{dir}/{name}")) {
                events.push((scope, n, ty, config, format!("{pmu}/{name}/")));
            }
        }
    }
    if events.is_empty() {
        return Err(format!("no cstate_core or cstate_pkg perf PMU ({PMU_DIR})"));
    }
    let tsc_ty = pmu_type(root, "msr")
        .map_err(|_| format!("no msr perf PMU for the TSC ({PMU_DIR}/msr)"))?;
    let tsc_cfg = event_config(root, &format!("{PMU_DIR}/msr/events/tsc"))
        .ok_or_else(|| format!("no tsc event in {PMU_DIR}/msr/events"))?;
    let pkgs = package_cpus(root, cpus);
    let mut slots = Vec::new();
    let mut tsc_fds = Vec::new();
    let mut last_err = String::new();
    for &cpu in cpus {
        let tsc = match perf_open(tsc_ty, tsc_cfg, cpu) {
            Ok(fd) => fd,
            Err(e) => {
                last_err = format!("perf_event_open of msr/tsc/ on CPU {cpu}: {e}");
                continue;
            }
        };
        tsc_fds.push((cpu, tsc));
        for (scope, n, ty, config, name) in &events {
            if *scope == Scope::Package && !pkgs.contains(&cpu) {
                continue;
            }
            match perf_open(*ty, *config, cpu) {
                Ok(fd) => slots.push(Slot {
                    cpu,
                    scope: *scope,
                    state: *n,
                    how: How::Perf {
                        fd,
                        name: name.clone(),
                    },
                }),
                Err(e) => last_err = format!("perf_event_open of {name} on CPU {cpu}: {e}"),
            }
        }
    }
    if slots.is_empty() {
        return Err(last_err);
    }
    Ok(Residency {
        source: "perf",
        slots,
        msrs: None,
        tsc_fds,
    })
}

fn pmu_type(root: &Root, pmu: &str) -> Result<u32, ()> {
    root.read_string(&format!("{PMU_DIR}/{pmu}/type"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or(())
}

/// `event=0x03` (the only term the cstate and msr PMUs use) as a config.
pub fn event_config(root: &Root, path: &str) -> Option<u64> {
    let text = root.read_string(path).ok()?;
    let v = text.trim().strip_prefix("event=")?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER0, 64 bytes):
/// a counting event, enabled at open, every field past `config` zero.
#[repr(C)]
#[derive(Default)]
struct PerfAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// `PERF_FLAG_FD_CLOEXEC` (include/uapi/linux/perf_event.h; not in `libc`).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// A CPU-wide counting event (pid -1, `cpu`): needs CAP_PERFMON (or root), or
/// `perf_event_paranoid` at most 0.
pub fn perf_open(ty: u32, config: u64, cpu: u32) -> std::io::Result<OwnedFd> {
    let attr = PerfAttr {
        type_: ty,
        size: std::mem::size_of::<PerfAttr>() as u32,
        config,
        ..Default::default()
    };
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A counting event's value (8 bytes, no read_format).
pub fn read_fd(fd: &OwnedFd) -> Option<u64> {
    let mut b = [0u8; 8];
    let n = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    (n == 8).then(|| u64::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_perf_attribute_is_the_kernels_first_layout() {
        assert_eq!(std::mem::size_of::<PerfAttr>(), 64);
    }

    /// The syscall path, on the `msr` PMU's TSC where this host has it (the
    /// VM does; the cstate PMUs it lacks use the same call).
    #[test]
    fn a_perf_counter_of_the_tsc_counts_on_this_host() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let (Ok(ty), Some(cfg)) = (
            pmu_type(&root, "msr"),
            event_config(&root, &format!("{PMU_DIR}/msr/events/tsc")),
        ) else {
            eprintln!("no msr/tsc perf event here: skipped");
            return;
        };
        let fd = match perf_open(ty, cfg, 0) {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!("perf_event_open refused ({e}): skipped");
                return;
            }
        };
        let a = read_fd(&fd).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = read_fd(&fd).unwrap();
        assert!(b > a, "the TSC counted {a} then {b}");
    }

    /// This VM: no cstate PMU and no msr driver; a host with either skips.
    #[test]
    fn a_host_without_counters_gives_the_reason_not_a_zero() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        if root.exists(&format!("{PMU_DIR}/cstate_core")) || root.exists("/dev/cpu/0/msr") {
            eprintln!("this host exposes residency counters: skipped");
            return;
        }
        let why = Residency::open(&root, &[0]).err().unwrap();
        assert!(
            why.starts_with(
                "hardware residency not exposed: no cstate_core or cstate_pkg perf PMU"
            ) && why.contains("/dev/cpu/0/msr"),
            "{why}"
        );
    }

    #[test]
    fn deltas_leave_out_a_counter_that_went_back() {
        let c = |state: &str, ticks, tsc| Count {
            scope: Scope::Core,
            cpu: 1,
            state: state.into(),
            counter: String::new(),
            ticks,
            tsc,
        };
        let d = delta(
            &[c("C6", 10, 100), c("C3", 50, 100)],
            &[c("C6", 30, 300), c("C3", 5, 300)],
        );
        assert_eq!(d, [c("C6", 20, 200)]);
        assert_eq!(d[0].percent(), 10.0);
        assert_eq!(d[0].number(), 6);
        let mut sum = d.clone();
        accumulate(&mut sum, &d);
        assert_eq!(sum, [c("C6", 40, 400)]);
    }
}
