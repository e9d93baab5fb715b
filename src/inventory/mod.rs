//! `hostknob inventory`: hardware and kernel facts, read through the root seam.
//!
//! Each section has its own file. What a host does not expose is `None` plus
//! an entry in `not_exposed` naming the path looked for; values that cannot be
//! parsed become a warning naming the file, never a panic or a guess.

pub(crate) mod absent;
mod arch;
mod cache;
mod collect;
mod cpu;
mod cpufreq;
mod cpuidle;
pub(crate) mod cpuinfo;
pub mod facts;
mod host;
pub(crate) mod idle_states;
pub mod irq;
mod memory;
mod network;
mod par;
mod platform;
mod pm_qos;
mod processes;
pub mod uncore;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::root::{Root, is_absent};

pub use arch::CoreType;
pub use cache::Cache;
pub use collect::{collect_only, collect_then};
pub use cpu::{Cpu, CpuTopology, Hybrid, Smt};
pub use cpufreq::{Frequency, perf_pct_ceiling_khz, show_khz};
pub use cpuidle::{Idle, IdleState};
pub use host::Host;
pub use idle_states::{
    CpuIdleDir, Listing, StateFacts, cpu_indices, cpu_listing, cpu_states, cpuidle_dir,
    state_indices, state_path,
};
pub use memory::{HugePages, Memory, Numa, NumaNode, ThpSize, thp_size_dirs};
pub use network::{Interface, Irq, NetCore, RxQueue, TxQueue};
pub use par::{Shared, affinity_words, in_order, par_map};
pub use platform::{FactGroup, Platform, PlatformFact, prefetchers};
pub use pm_qos::{
    PM_QOS_DEVICE, parse_pm_qos_request, read_cpu_dma_latency, resume_latency_path, resume_limit_us,
};
pub use processes::{Process, Processes};
pub use uncore::{Uncore, UncoreDomain};

pub const CPU_DIR: &str = "/sys/devices/system/cpu";

/// Bumped when a field changes meaning or disappears (additions keep it).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Inventory {
    pub schema: u32,
    pub host: Host,
    pub cpu: Cpu,
    pub caches: Vec<Cache>,
    pub numa: Numa,
    pub memory: Memory,
    pub idle: Idle,
    pub frequency: Option<Frequency>,
    /// `null` when the host has no `vulnerabilities` directory.
    #[serde(with = "absent", default)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub vulnerabilities: BTreeMap<String, String>,
    /// `null` when the host has no `/sys/class/net`.
    #[serde(with = "absent", default)]
    #[schemars(with = "Option<Vec<Interface>>")]
    pub network: Vec<Interface>,
    /// Busy polling and RFS (`net.core`); `null` when the network section was not asked for.
    #[serde(default)]
    pub net_core: Option<NetCore>,
    pub pm_qos: PmQos,
    /// Power facts from MSRs; `null` when the section was not asked for.
    #[serde(default)]
    pub platform: Option<Platform>,
    pub processes: Option<Processes>,
    pub not_exposed: Vec<NotExposed>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct PmQos {
    /// The global CPU latency request (`/dev/cpu_dma_latency`), µs; readable
    /// only as root. `null` when unreadable; `not_exposed` names the device
    /// when the host has none.
    pub cpu_dma_latency_us: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct NotExposed {
    pub what: String,
    pub path: String,
}

type Notes = (Vec<String>, Vec<NotExposed>);

/// Reading context: the root plus what the readers noticed on the way.
pub struct Reader<'a> {
    pub root: &'a Root,
    warnings: Mutex<Vec<String>>,
    missing: Mutex<Vec<NotExposed>>,
}

impl<'a> Reader<'a> {
    pub fn new(root: &'a Root) -> Reader<'a> {
        Reader {
            root,
            warnings: Mutex::new(Vec::new()),
            missing: Mutex::new(Vec::new()),
        }
    }

    pub fn warn(&self, msg: String) {
        self.warnings.lock().unwrap().push(msg);
    }

    pub fn not_exposed(&self, what: &str, path: &str) {
        self.missing.lock().unwrap().push(NotExposed {
            what: what.into(),
            path: path.into(),
        });
    }

    /// Trimmed text of a file; `None` when absent; a warning when unreadable.
    pub fn text(&self, path: &str) -> Option<String> {
        self.text_from(|| path.to_string(), self.root.read_string(path))
    }

    /// `path` is spelled only for a warning: a format per file read is
    /// measurable on a 512-CPU host.
    fn text_from(
        &self,
        path: impl FnOnce() -> String,
        read: std::io::Result<String>,
    ) -> Option<String> {
        match read {
            Ok(s) => Some(trimmed(s)),
            Err(e) if is_absent(&e) => None,
            Err(e) => {
                if e.raw_os_error() != Some(libc::EINVAL)
                    && e.raw_os_error() != Some(libc::EOPNOTSUPP)
                {
                    self.warn(format!("{}: {}", path(), e));
                }
                None
            }
        }
    }

    /// A parsed value; garbage becomes a warning naming the file and the text.
    pub fn parse<T: FromStr>(&self, path: &str) -> Option<T> {
        self.parse_text(|| path.to_string(), self.text(path)?)
    }

    fn parse_text<T: FromStr>(&self, path: impl FnOnce() -> String, text: String) -> Option<T> {
        match text.parse::<T>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.warn(format!(
                    "{}: expected {}, found {text:?}",
                    path(),
                    type_word::<T>()
                ));
                None
            }
        }
    }

    pub fn cpulist(&self, path: &str) -> Option<CpuList> {
        self.cpulist_from(|| path.to_string(), self.root.read_string(path))
    }

    /// A CPU list from a read; garbage becomes a warning naming `path()`.
    fn cpulist_from(
        &self,
        path: impl Fn() -> String,
        read: std::io::Result<String>,
    ) -> Option<CpuList> {
        let text = self.text_from(&path, read)?;
        match CpuList::parse(&text) {
            Ok(l) => Some(l),
            Err(e) => {
                self.warn(format!("{}: {e}", path()));
                None
            }
        }
    }

    /// Whitespace-separated words (`performance powersave `).
    pub fn words(&self, path: &str) -> Option<Vec<String>> {
        self.text(path)
            .map(|t| t.split_whitespace().map(str::to_string).collect())
    }

    pub fn dir(&self, path: &str) -> Option<Vec<String>> {
        match self.root.read_dir(path) {
            Ok(v) => Some(v),
            Err(e) if is_absent(&e) => None,
            Err(e) => {
                self.warn(format!("{path}: {e}"));
                None
            }
        }
    }

    /// Many reads in one directory, each a short lookup.
    pub fn at(&'a self, dir: &str) -> Option<At<'a>> {
        match self.root.dir_handle(dir) {
            Ok(handle) => Some(At {
                ctx: self,
                handle: Held::Own(handle),
                sub: String::new(),
            }),
            Err(e) if is_absent(&e) => None,
            Err(e) => {
                self.warn(format!("{dir}: {e}"));
                None
            }
        }
    }

    /// The directory `sub` beneath `base`, opened by nothing: reads name
    /// `sub/NAME` beneath `base` (a handle shared by a pass over many such
    /// directories saves an open and a close for each).
    pub fn beneath(&'a self, base: &'a crate::root::DirHandle<'a>, sub: &str) -> At<'a> {
        At {
            ctx: self,
            handle: Held::Shared(base),
            sub: format!("{sub}/"),
        }
    }

    /// `f` over `items` on all cores, each item with a Reader of its own
    /// whose notes are then added here in the items' order: the notes of a
    /// serial pass, in its order, however the threads ran.
    pub fn par_map<I: Sync, R: Send>(
        &self,
        items: &[I],
        f: impl Fn(&Reader, &I) -> R + Sync,
    ) -> Vec<R> {
        par_map(items, |item| {
            let own = Reader::new(self.root);
            let r = f(&own, item);
            (r, own.finish())
        })
        .into_iter()
        .map(|(r, (warnings, missing))| {
            self.warnings.lock().unwrap().extend(warnings);
            self.missing.lock().unwrap().extend(missing);
            r
        })
        .collect()
    }

    /// The notes so far, taken (a part done while others still read).
    fn take_notes(&self) -> Notes {
        (
            std::mem::take(&mut *self.warnings.lock().unwrap()),
            std::mem::take(&mut *self.missing.lock().unwrap()),
        )
    }

    fn finish(self) -> Notes {
        (
            self.warnings.into_inner().unwrap(),
            self.missing.into_inner().unwrap(),
        )
    }
}

/// A directory opened once for several reads, with `Reader`'s reporting.
pub struct At<'a> {
    ctx: &'a Reader<'a>,
    handle: Held<'a>,
    /// Where the directory is beneath a shared handle (`policy3/`), or empty.
    sub: String,
}

enum Held<'a> {
    Own(crate::root::DirHandle<'a>),
    Shared(&'a crate::root::DirHandle<'a>),
}

impl At<'_> {
    fn handle(&self) -> &crate::root::DirHandle<'_> {
        match &self.handle {
            Held::Own(h) => h,
            Held::Shared(h) => h,
        }
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{}{}", self.handle().logical(), self.sub, name)
    }

    fn read(&self, name: &str) -> std::io::Result<String> {
        match self.sub.is_empty() {
            true => self.handle().read_string(name),
            false => self.handle().read_string(&format!("{}{name}", self.sub)),
        }
    }

    pub fn text(&self, name: &str) -> Option<String> {
        self.ctx.text_from(|| self.path(name), self.read(name))
    }

    pub fn parse<T: FromStr>(&self, name: &str) -> Option<T> {
        self.ctx.parse_text(|| self.path(name), self.text(name)?)
    }

    pub fn cpulist(&self, name: &str) -> Option<CpuList> {
        self.ctx.cpulist_from(|| self.path(name), self.read(name))
    }

    /// Whether `name` exists; `.` is the directory itself.
    pub fn exists(&self, name: &str) -> bool {
        match (self.sub.is_empty(), name) {
            (true, _) => self.handle().exists(name),
            (false, ".") => self.handle().exists(self.sub.trim_end_matches('/')),
            (false, _) => self.handle().exists(&format!("{}{name}", self.sub)),
        }
    }

    pub fn words(&self, name: &str) -> Option<Vec<String>> {
        self.text(name)
            .map(|t| t.split_whitespace().map(str::to_string).collect())
    }
}

/// A file's text without surrounding white space or NULs (some captures end
/// files with a NUL after the newline); no copy when only the end is trimmed.
fn trimmed(mut s: String) -> String {
    let end = s.trim_end_matches(is_pad).len();
    s.truncate(end);
    match s.find(|c: char| !is_pad(c)) {
        Some(0) => s,
        Some(start) => s[start..].to_string(),
        None => String::new(),
    }
}

/// [`trimmed`] of borrowed text.
pub(crate) fn trim_text(s: &str) -> &str {
    s.trim_matches(is_pad)
}

fn is_pad(c: char) -> bool {
    c == '\0' || c.is_whitespace()
}

fn type_word<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    if name.starts_with('u') || name.starts_with('i') {
        "a whole number"
    } else {
        "a value"
    }
}

/// Numbered entries in a listing (`cpu12`, `rx-3`): the rule lives with
/// the root seam, so that `ethtool` (which inventory reads) shares it too.
pub use crate::root::numbered;

/// The bracketed choice in files such as `always [madvise] never`.
pub fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// A top-level section of the inventory, named as its JSON key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    Host,
    Cpu,
    Caches,
    Numa,
    Memory,
    Idle,
    Frequency,
    Vulnerabilities,
    Network,
    PmQos,
    Platform,
    Processes,
}

impl Section {
    /// Whether this section is among `only` (every section when it is empty).
    pub fn wanted(self, only: &[Section]) -> bool {
        only.is_empty() || only.contains(&self)
    }

    pub fn key(self) -> &'static str {
        match self {
            Section::Host => "host",
            Section::Cpu => "cpu",
            Section::Caches => "caches",
            Section::Numa => "numa",
            Section::Memory => "memory",
            Section::Idle => "idle",
            Section::Frequency => "frequency",
            Section::Vulnerabilities => "vulnerabilities",
            Section::Network => "network",
            Section::PmQos => "pm_qos",
            Section::Platform => "platform",
            Section::Processes => "processes",
        }
    }
}

/// Reads every section. Never fails on what a host lacks; fails only on a root
/// that has no CPUs to describe at all.
pub fn collect(root: &Root) -> anyhow::Result<Inventory> {
    collect_only(root, &[])
}

/// What `not_exposed` calls the PM QoS device when a host has none.
pub const PM_QOS_WHAT: &str = "PM QoS request";

/// The request in force; a host without the device (a capture) says so in
/// `not_exposed`, while an unreadable one (not root) is only `None`.
fn pm_qos_request(ctx: &Reader) -> Option<i64> {
    match ctx.root.read_device(PM_QOS_DEVICE, 64) {
        Ok(bytes) => parse_pm_qos_request(&bytes),
        Err(e) if is_absent(&e) => {
            ctx.not_exposed(PM_QOS_WHAT, PM_QOS_DEVICE);
            None
        }
        Err(_) => None,
    }
}

impl Inventory {
    /// A copy without the values that change while a host runs (counters,
    /// current frequencies, processes), for comparing a host with its capture.
    pub fn without_counters(&self) -> Inventory {
        let mut inv = self.clone();
        for s in &mut inv.idle.states {
            s.usage = None;
            s.time_us = None;
        }
        for i in &mut inv.network {
            for irq in &mut i.irqs {
                irq.count = None;
                irq.fired_on = None;
            }
        }
        inv.processes = None;
        inv.host.uptime_s = None;
        inv.pm_qos.cpu_dma_latency_us = None;
        inv.memory.mem_available_kib = None;
        inv.memory.mem_free_kib = None;
        if let Some(h) = &mut inv.memory.hugepages {
            for p in h {
                p.free = None;
            }
        }
        inv.not_exposed
            .retain(|n| n.what != "processes" && n.what != PM_QOS_WHAT);
        inv.warnings.clear();
        inv
    }
}
