//! What knobs read about one host. Fixed topology (online CPUs, which CPUs
//! each cpufreq policy drives, boot time, processes) is read once and
//! shared; values (a governor, a driver) are read fresh at every survey, so
//! a survey after a write sees the write (a [`HostCtx::read_only`] context,
//! for commands that write nothing, reads each policy's values once).

use std::collections::HashMap;
use std::io;
use std::sync::{OnceLock, RwLock};

use crate::cpulist::CpuList;
use crate::inventory::{CPU_DIR, CpuIdleDir, Listing, cpu_listing, numbered, par_map};
use crate::root::{DirHandle, Root, is_absent};

pub const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

pub struct HostCtx<'r> {
    pub root: &'r Root,
    /// The name knobs target (`--host`, the hostname, or the capture's name).
    pub name: String,
    online: OnceLock<CpuList>,
    /// `None` when there is no cpufreq directory.
    policies: OnceLock<Option<Vec<(String, CpuList)>>>,
    /// Values a plan will have written before the knob being planned
    /// (path -> value in the file's words): later knobs plan against them.
    pending: RwLock<HashMap<String, String>>,
    boot_time: OnceLock<Option<u64>>,
    processes: OnceLock<Vec<Process>>,
    cmdline: OnceLock<Option<String>>,
    /// See [`HostCtx::read_only`].
    read_only: bool,
    policy_values: OnceLock<Vec<PolicyInfo>>,
}

/// One attribute of each idle state of one CPU: (state index, value).
#[derive(Clone, Debug)]
pub struct CpuIdle {
    pub cpu: u32,
    pub states: Vec<(u32, Option<String>)>,
}

pub use crate::inventory::state_path;

#[derive(Clone, Debug)]
pub struct PolicyInfo {
    pub dir: String,
    pub cpus: CpuList,
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub available_governors: Option<Vec<String>>,
}

#[derive(Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
}

/// A file's value, absent, or an error worth reporting.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadValue {
    Value(String),
    Absent,
    Unreadable(String),
}

impl<'r> HostCtx<'r> {
    pub fn new(root: &'r Root, name: String) -> HostCtx<'r> {
        HostCtx {
            root,
            name,
            online: OnceLock::new(),
            policies: OnceLock::new(),
            pending: RwLock::new(HashMap::new()),
            boot_time: OnceLock::new(),
            processes: OnceLock::new(),
            cmdline: OnceLock::new(),
            read_only: false,
            policy_values: OnceLock::new(),
        }
    }

    /// A file's text, trimmed (as an earlier write of the plan being made
    /// will have left it, see [`HostCtx::assume_written`]).
    pub fn value(&self, path: &str) -> ReadValue {
        if let Some(v) = self.pending_value(path) {
            return ReadValue::Value(v);
        }
        match self.root.read_string(path) {
            Ok(s) => ReadValue::Value(s.trim().to_string()),
            Err(e) if is_absent(&e) => ReadValue::Absent,
            Err(e) => ReadValue::Unreadable(describe_io(&e)),
        }
    }

    /// The running kernel's release as numbers (`6.18.8` -> [6, 18, 8]) from
    /// `osrelease`, else `/proc/version`; empty when neither says.
    pub fn kernel_release(&self) -> Vec<u64> {
        let release = self.text("/proc/sys/kernel/osrelease").or_else(|| {
            let v = self.text("/proc/version")?;
            v.strip_prefix("Linux version ")?
                .split_whitespace()
                .next()
                .map(str::to_string)
        });
        release
            .map(|r| crate::inventory::facts::release_numbers(&r))
            .unwrap_or_default()
    }

    pub fn text(&self, path: &str) -> Option<String> {
        match self.value(path) {
            ReadValue::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn online(&self) -> &CpuList {
        self.online.get_or_init(|| {
            if let Some(l) = self
                .text(&format!("{CPU_DIR}/online"))
                .and_then(|t| CpuList::parse(&t).ok())
            {
                return l;
            }
            let names = self.root.read_dir(CPU_DIR).unwrap_or_default();
            numbered(&names, "cpu")
                .into_iter()
                .filter(|c| {
                    self.text(&format!("{CPU_DIR}/cpu{c}/online"))
                        .is_none_or(|v| v == "1")
                })
                .collect()
        })
    }

    /// One attribute (`name`, `latency`) of every idle state of every online
    /// CPU, in CPU and state order. States are listed per CPU by the one
    /// index rule (`inventory::cpu_listing`); values are read as a plan would
    /// leave them. A state without the attribute is left out.
    pub fn idle_attr(&self, attr: &str) -> Vec<CpuIdle> {
        let online = self.online().as_slice();
        let first = online
            .first()
            .map(|&cpu| cpu_listing(self.root, cpu))
            .unwrap_or_default();
        // One handle on the CPU directory for all CPUs, not one per CPU.
        let cpus = self.root.dir_handle(CPU_DIR).ok();
        if let Some(shared) = self.driver_attr(cpus.as_ref(), attr, &first) {
            return shared;
        }
        par_map(online, |&cpu| CpuIdle {
            cpu,
            states: self.cpu_idle_attr(cpus.as_ref(), cpu, attr, &first),
        })
    }

    /// An attribute of the driver's state table (`name`, `desc`, `latency`,
    /// `residency`: cpuidle/sysfs.c shows them from `drv->states[i]`), where
    /// one driver serves every CPU: read on the first CPU only. Another CPU
    /// that has the last state has all of them (numbered without gaps) with
    /// the same values, so one read each tells; one without it is read whole.
    fn driver_attr(
        &self,
        cpus: Option<&DirHandle>,
        attr: &str,
        first: &Listing,
    ) -> Option<Vec<CpuIdle>> {
        const DRIVER_LEVEL: &[&str] = &["name", "desc", "latency", "residency"];
        if !DRIVER_LEVEL.contains(&attr) || first.others_may_have_more() || self.planning() {
            return None;
        }
        let (cpus, &last) = (cpus?, first.indices.last()?);
        let online = self.online().as_slice();
        let cpu0 = *online.first()?;
        let table = self.cpu_idle_attr(Some(cpus), cpu0, attr, first);
        let whole = table.len() == first.indices.len() && table.iter().all(|(_, v)| v.is_some());
        if !whole {
            return None;
        }
        Some(par_map(online, |&cpu| {
            let same = cpu == cpu0 || CpuIdleDir::beneath(cpus, cpu).read(last, attr).is_ok();
            CpuIdle {
                cpu,
                states: if same {
                    table.clone()
                } else {
                    self.cpu_idle_attr(Some(cpus), cpu, attr, first)
                },
            }
        }))
    }

    /// [`HostCtx::idle_attr`] of one CPU, read beneath the CPU directory: as
    /// the first CPU's table where it has it ([`CpuIdleDir::read_as`]; a
    /// state without the attribute ends that), else by its own listing.
    fn cpu_idle_attr(
        &self,
        cpus: Option<&DirHandle>,
        cpu: u32,
        attr: &str,
        first: &Listing,
    ) -> Vec<(u32, Option<String>)> {
        let dir = match cpus {
            Some(cpus) => CpuIdleDir::beneath(cpus, cpu),
            None => match CpuIdleDir::open(self.root, cpu) {
                Ok(Some(dir)) => dir,
                _ => return Vec::new(),
            },
        };
        let read = |index: u32| {
            // The path is spelled only when a plan has assumed writes.
            if self.planning()
                && let Some(v) = self.pending_value(&dir.path(index, attr))
            {
                return ReadValue::Value(v);
            }
            match dir.read(index, attr) {
                Ok(s) => ReadValue::Value(s.trim().to_string()),
                Err(e) if is_absent(&e) => ReadValue::Absent,
                Err(e) => ReadValue::Unreadable(describe_io(&e)),
            }
        };
        let entry = |(index, value): (u32, ReadValue)| match value {
            ReadValue::Value(v) => Some((index, Some(v))),
            ReadValue::Unreadable(_) => Some((index, None)),
            ReadValue::Absent => None,
        };
        let as_first = dir.read_as(first, |i| match read(i) {
            ReadValue::Absent => None,
            v => Some((i, v)),
        });
        let values = match as_first {
            Some(values) => values,
            None => {
                let indices = dir.indices().unwrap_or_default();
                indices.into_iter().map(|i| (i, read(i))).collect()
            }
        };
        values.into_iter().filter_map(entry).collect()
    }

    /// Whether this plan has assumed writes ([`HostCtx::assume_written`]).
    fn planning(&self) -> bool {
        self.pending.read().is_ok_and(|p| !p.is_empty())
    }

    fn pending_value(&self, path: &str) -> Option<String> {
        self.pending.read().ok()?.get(path).cloned()
    }

    /// Plans what follows as if `path` already held `value`.
    pub fn assume_written(&self, path: &str, value: &str) {
        if let Ok(mut p) = self.pending.write() {
            p.insert(path.to_string(), value.to_string());
        }
    }

    /// The paths under `prefix` an earlier write of this plan will have
    /// written, with their values, in path order.
    pub fn assumed_under(&self, prefix: &str) -> Vec<(String, String)> {
        let Ok(p) = self.pending.read() else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = p
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.sort();
        out
    }

    /// Whether `path` holds a value an earlier write of this plan will have written.
    pub fn is_assumed(&self, path: &str) -> bool {
        self.pending.read().is_ok_and(|p| p.contains_key(path))
    }

    /// Back to the host as it is.
    pub fn forget_assumed(&self) {
        if let Ok(mut p) = self.pending.write() {
            p.clear();
        }
    }

    /// For a command that writes nothing (`audit`, `knobs`, `doc`): what one
    /// survey reads holds for the next, so values several knobs survey (each
    /// policy's governor, for the governor and the EPP knob) are read once.
    pub fn read_only(mut self) -> HostCtx<'r> {
        self.read_only = true;
        self
    }

    /// cpufreq policies with the CPUs they drive (online ones only): which
    /// CPUs a policy drives is read once, its driver and governor every time
    /// (the driver and the governor list once for all policies), or once in
    /// all for a [`HostCtx::read_only`] context.
    pub fn policies(&self) -> Vec<PolicyInfo> {
        if self.read_only && !self.planning() {
            return self
                .policy_values
                .get_or_init(|| self.read_policies())
                .clone();
        }
        self.read_policies()
    }

    fn read_policies(&self) -> Vec<PolicyInfo> {
        let topology = self.policies.get_or_init(|| {
            let names = self.root.read_dir(CPUFREQ_DIR).unwrap_or_default();
            let ids = numbered(&names, "policy");
            let online = self.online();
            // Beneath one handle on the cpufreq directory: a handle per
            // policy cost an open and a close for one or two reads.
            let base = self.root.dir_handle(CPUFREQ_DIR).ok()?;
            let topology = par_map(&ids, |id| {
                let text = |name: &str| {
                    base.read_string(&format!("policy{id}/{name}"))
                        .ok()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                };
                let listed = text("related_cpus").or_else(|| text("affected_cpus"));
                if listed.is_none() && !base.exists(&format!("policy{id}")) {
                    return None;
                }
                let cpus = listed
                    .and_then(|t| CpuList::parse(&t).ok())
                    .unwrap_or_else(|| CpuList::new(vec![*id]));
                let cpus: CpuList = cpus
                    .as_slice()
                    .iter()
                    .copied()
                    .filter(|c| online.contains(*c))
                    .collect();
                Some((format!("{CPUFREQ_DIR}/policy{id}"), cpus))
            });
            Some(
                topology
                    .into_iter()
                    .flatten()
                    .filter(|(_, cpus)| !cpus.is_empty())
                    .collect(),
            )
        });
        let Some(topology) = topology else {
            return Vec::new();
        };
        let text = |dir: &str, name: &str| {
            self.text(&format!("{dir}/{name}"))
                .filter(|s| !s.is_empty())
        };
        // Read from the first policy for all: the driver is one for the
        // system (cpufreq.c: one `cpufreq_driver`, whose name
        // `show_scaling_driver` prints) and so is the governor list
        // (`show_scaling_available_governors` prints "performance powersave"
        // or the global `cpufreq_governor_list`, by the driver's `has_target()`).
        let first = topology.first().map(|(dir, _)| dir.as_str());
        let driver = first.and_then(|d| text(d, "scaling_driver"));
        let available_governors: Option<Vec<String>> = first
            .and_then(|d| text(d, "scaling_available_governors"))
            .map(|t| t.split_whitespace().map(str::to_string).collect());
        par_map(topology, |(dir, cpus)| PolicyInfo {
            cpus: cpus.clone(),
            driver: driver.clone(),
            governor: text(dir, "scaling_governor"),
            available_governors: available_governors.clone(),
            dir: dir.clone(),
        })
    }

    /// `btime` from `/proc/stat`, Unix seconds.
    pub fn boot_time(&self) -> Option<u64> {
        *self.boot_time.get_or_init(|| {
            self.text("/proc/stat")?
                .lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
        })
    }

    pub fn cmdline(&self) -> Option<&str> {
        self.cmdline
            .get_or_init(|| self.text("/proc/cmdline"))
            .as_deref()
    }

    /// Running processes (PID and name); empty in a capture.
    pub fn processes(&self) -> &[Process] {
        self.processes.get_or_init(|| {
            // The pod does not see the host's processes: not "none running".
            if self.root.unseen("/proc/1") {
                return Vec::new();
            }
            let names = self.root.read_dir("/proc").unwrap_or_default();
            names
                .iter()
                .filter_map(|n| n.parse::<u32>().ok())
                .filter_map(|pid| {
                    let comm = self.text(&format!("/proc/{pid}/comm"))?;
                    Some(Process { pid, comm })
                })
                .collect()
        })
    }

    /// Entries of a directory under the root; empty when it is absent.
    pub fn list(&self, dir: &str) -> Vec<String> {
        self.root.read_dir(dir).unwrap_or_default()
    }
}

pub fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => "permission denied (run as root to read it)".into(),
        _ => e.to_string(),
    }
}
