//! What knobs read about one host. Fixed topology (online CPUs, which CPUs
//! each cpufreq policy drives, boot time, processes) is read once and
//! shared; values (a governor, a driver) are read fresh at every survey, so
//! a survey after a write sees the write.

use std::collections::HashMap;
use std::io;
use std::sync::{OnceLock, RwLock};

use crate::cpulist::CpuList;
use crate::inventory::{CPU_DIR, cpu_indices, numbered, par_map};
use crate::root::{Root, is_absent};

pub const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

pub struct HostCtx<'r> {
    pub root: &'r Root,
    /// The name knobs target (`--host`, the hostname, or the capture's name).
    pub name: String,
    online: OnceLock<CpuList>,
    policies: OnceLock<Vec<(String, CpuList)>>,
    /// Values a plan will have written before the knob being planned
    /// (path -> value in the file's words): later knobs plan against them.
    pending: RwLock<HashMap<String, String>>,
    boot_time: OnceLock<Option<u64>>,
    processes: OnceLock<Vec<Process>>,
    cmdline: OnceLock<Option<String>>,
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
        }
    }

    /// A file's text, trimmed (as an earlier write of the plan being made
    /// will have left it, see [`HostCtx::assume_written`]).
    pub fn value(&self, path: &str) -> ReadValue {
        if let Some(v) = self.pending.read().ok().and_then(|p| p.get(path).cloned()) {
            return ReadValue::Value(v);
        }
        match self.root.read_string(path) {
            Ok(s) => ReadValue::Value(s.trim().to_string()),
            Err(e) if is_absent(&e) => ReadValue::Absent,
            Err(e) => ReadValue::Unreadable(describe_io(&e)),
        }
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
    /// index rule (`inventory::cpu_indices`); values are read as a plan would
    /// leave them. A state without the attribute is left out.
    pub fn idle_attr(&self, attr: &str) -> Vec<CpuIdle> {
        par_map(self.online().as_slice(), |&cpu| {
            let states = cpu_indices(self.root, cpu)
                .into_iter()
                .filter_map(|index| match self.value(&state_path(cpu, index, attr)) {
                    ReadValue::Value(v) => Some((index, Some(v))),
                    ReadValue::Unreadable(_) => Some((index, None)),
                    ReadValue::Absent => None,
                })
                .collect();
            CpuIdle { cpu, states }
        })
    }

    /// Plans what follows as if `path` already held `value`.
    pub fn assume_written(&self, path: &str, value: &str) {
        if let Ok(mut p) = self.pending.write() {
            p.insert(path.to_string(), value.to_string());
        }
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

    /// cpufreq policies with the CPUs they drive (online ones only): which
    /// CPUs a policy drives is read once, its driver and governor every time.
    pub fn policies(&self) -> Vec<PolicyInfo> {
        let topology = self.policies.get_or_init(|| {
            let names = self.root.read_dir(CPUFREQ_DIR).unwrap_or_default();
            let ids = numbered(&names, "policy");
            let online = self.online();
            par_map(&ids, |id| {
                let dir = format!("{CPUFREQ_DIR}/policy{id}");
                let h = self.root.dir_handle(&dir).ok()?;
                let text = |name: &str| {
                    h.read_string(name)
                        .ok()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                };
                let cpus = text("related_cpus")
                    .or_else(|| text("affected_cpus"))
                    .and_then(|t| CpuList::parse(&t).ok())
                    .unwrap_or_else(|| CpuList::new(vec![*id]));
                let cpus: CpuList = cpus
                    .as_slice()
                    .iter()
                    .copied()
                    .filter(|c| online.contains(*c))
                    .collect();
                Some((dir, cpus))
            })
            .into_iter()
            .flatten()
            .filter(|(_, cpus)| !cpus.is_empty())
            .collect()
        });
        par_map(topology, |(dir, cpus)| {
            let text = |name: &str| {
                self.text(&format!("{dir}/{name}"))
                    .filter(|s| !s.is_empty())
            };
            PolicyInfo {
                cpus: cpus.clone(),
                driver: text("scaling_driver"),
                governor: text("scaling_governor"),
                available_governors: text("scaling_available_governors")
                    .map(|t| t.split_whitespace().map(str::to_string).collect()),
                dir: dir.clone(),
            }
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
