//! The idle states of one CPU under a root: the one place their layout
//! (`cpuN/cpuidle/stateI/ATTR`), their index rule and their attributes are
//! spelled. Inventory, the `cpuidle-state` knob, the wakeup probe and verify's
//! not-honoured check all read idle states through it.

use std::io;

use anyhow::{Context, Result};

use super::{CPU_DIR, numbered};
use crate::root::{DirHandle, Root, is_absent};

/// One CPU's idle-state directory.
pub fn cpuidle_dir(cpu: u32) -> String {
    format!("{CPU_DIR}/cpu{cpu}/cpuidle")
}

/// One file of one idle state: `.../cpuN/cpuidle/stateI/attr`.
pub fn state_path(cpu: u32, index: u32, attr: &str) -> String {
    format!("{}/state{index}/{attr}", cpuidle_dir(cpu))
}

/// The index rule: the `stateN` entries of a cpuidle directory, by N. The same
/// index can be a different state on another CPU of a hybrid part, so states
/// are listed per CPU.
pub fn state_indices(names: &[String]) -> Vec<u32> {
    numbered(names, "state")
}

/// What one idle state says about itself, read at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct StateFacts {
    pub index: u32,
    /// `name`, or `stateI` when it has none.
    pub name: String,
    /// Exit latency (`latency`), µs.
    pub latency_us: Option<u64>,
    /// Target residency (`residency`), µs.
    pub residency_us: Option<u64>,
    /// `disable` is not 0.
    pub disabled: Option<bool>,
    /// Entries (`usage`), a live counter.
    pub usage: Option<u64>,
    /// Time spent (`time`), µs, a live counter.
    pub time_us: Option<u64>,
}

/// What a CPU's cpuidle directory lists.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Its states, by index.
    pub indices: Vec<u32>,
    /// It has a `driver` directory: the kernel makes one only where each CPU
    /// may have an idle driver of its own (CONFIG_CPU_IDLE_MULTIPLE_DRIVERS,
    /// cpuidle/sysfs.c `cpuidle_add_driver_sysfs`). Without it one driver
    /// serves every CPU, and each CPU gets that driver's `state_count` states
    /// (`cpuidle_add_state_sysfs`): no CPU has a state the first one lacks.
    pub own_driver: bool,
}

impl Listing {
    fn of(root: &Root, cpu: u32, names: &[String]) -> Listing {
        let own_driver = names.iter().any(|n| n == "driver");
        if own_driver && root.is_recording() {
            // So that a capture keeps the sign that CPUs' tables may differ.
            let _ = root.read(&format!("{}/driver/name", cpuidle_dir(cpu)));
        }
        Listing {
            indices: state_indices(names),
            own_driver,
        }
    }

    /// Whether another CPU may have states beyond these: only with drivers
    /// per CPU, or when this CPU lists none.
    pub fn others_may_have_more(&self) -> bool {
        self.own_driver || self.indices.is_empty()
    }
}

/// One CPU's idle states: beneath its own open cpuidle directory (each
/// attribute read after that is one short lookup; the wakeup probe samples
/// `usage` between wakeups), or beneath the CPU directory shared by a pass
/// over every CPU, which saves an open and a close per CPU.
pub struct CpuIdleDir<'r> {
    root: &'r Root,
    cpu: u32,
    handle: Handle<'r>,
}

enum Handle<'r> {
    Own(DirHandle<'r>),
    /// `/sys/devices/system/cpu`: names are `cpuN/cpuidle/...` beneath it.
    Shared(&'r DirHandle<'r>),
}

impl<'r> CpuIdleDir<'r> {
    /// `None` when the CPU has no cpuidle directory.
    pub fn open(root: &'r Root, cpu: u32) -> io::Result<Option<CpuIdleDir<'r>>> {
        match root.dir_handle(&cpuidle_dir(cpu)) {
            Ok(handle) => Ok(Some(CpuIdleDir {
                root,
                cpu,
                handle: Handle::Own(handle),
            })),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `cpu`'s states read beneath `cpus`, an open [`CPU_DIR`]: nothing is
    /// opened here, and a CPU without a cpuidle directory reads as absent.
    pub fn beneath(cpus: &'r DirHandle<'r>, cpu: u32) -> CpuIdleDir<'r> {
        CpuIdleDir {
            root: cpus.root(),
            cpu,
            handle: Handle::Shared(cpus),
        }
    }

    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    pub fn logical(&self) -> String {
        cpuidle_dir(self.cpu)
    }

    /// The CPU's states by index (one directory read).
    pub fn indices(&self) -> io::Result<Vec<u32>> {
        Ok(self.listing()?.indices)
    }

    /// The CPU's states by index and whether it has an idle driver of its
    /// own (one directory read).
    pub fn listing(&self) -> io::Result<Listing> {
        let names = self.root.read_dir(&self.logical())?;
        Ok(Listing::of(self.root, self.cpu, &names))
    }

    /// `rel` (beneath the cpuidle directory) opened through the handle.
    fn beneath_handle(&self, rel: std::fmt::Arguments) -> (&DirHandle<'r>, String) {
        match &self.handle {
            Handle::Own(h) => (h, rel.to_string()),
            Handle::Shared(h) => (h, format!("cpu{}/cpuidle/{rel}", self.cpu)),
        }
    }

    /// `read` of each of `first`'s states (the first CPU's table), where this
    /// CPU has exactly that table. The kernel numbers states from 0 without
    /// gaps (cpuidle/sysfs.c `cpuidle_add_state_sysfs`), so a CPU that has
    /// them all and none after the last has just those, and with one idle
    /// driver for all CPUs none has more ([`Listing::others_may_have_more`]).
    /// `None` (a state `read` finds missing, one past the table, an empty
    /// table): list this CPU's directory instead.
    pub fn read_as<T>(
        &self,
        first: &Listing,
        read: impl FnMut(u32) -> Option<T>,
    ) -> Option<Vec<T>> {
        let last = *first.indices.last()?;
        let values = first
            .indices
            .iter()
            .copied()
            .map(read)
            .collect::<Option<Vec<T>>>()?;
        let more = first.others_may_have_more() && self.has(last + 1);
        (!more).then_some(values)
    }

    /// Whether state `index` exists.
    pub fn has(&self, index: u32) -> bool {
        let (h, rel) = self.beneath_handle(format_args!("state{index}"));
        h.exists(&rel)
    }

    pub fn path(&self, index: u32, attr: &str) -> String {
        state_path(self.cpu, index, attr)
    }

    /// One attribute as the kernel wrote it.
    pub fn read(&self, index: u32, attr: &str) -> io::Result<String> {
        let (h, rel) = self.beneath_handle(format_args!("state{index}/{attr}"));
        h.read_string(&rel)
    }

    /// One attribute, trimmed (some captures end files with a NUL); `None`
    /// when absent or unreadable.
    pub fn text(&self, index: u32, attr: &str) -> Option<String> {
        let t = self.read(index, attr).ok()?;
        Some(super::trim_text(&t).to_string())
    }

    pub fn number(&self, index: u32, attr: &str) -> Option<u64> {
        self.text(index, attr)?.parse().ok()
    }

    /// A counter (`usage`, `time`) that must be there: an error names the file.
    pub fn counter(&self, index: u32, attr: &str) -> Result<u64> {
        let path = self.path(index, attr);
        let text = self.read(index, attr).with_context(|| path.clone())?;
        text.trim()
            .parse()
            .with_context(|| format!("{path}: not a number: {text:?}"))
    }

    /// Every attribute of state `index`.
    pub fn facts(&self, index: u32) -> StateFacts {
        StateFacts {
            index,
            name: self
                .text(index, "name")
                .unwrap_or_else(|| format!("state{index}")),
            latency_us: self.number(index, "latency"),
            residency_us: self.number(index, "residency"),
            disabled: self.number(index, "disable").map(|v| v != 0),
            usage: self.number(index, "usage"),
            time_us: self.number(index, "time"),
        }
    }

    /// Every state's attributes, by index.
    pub fn states(&self) -> io::Result<Vec<StateFacts>> {
        Ok(self.indices()?.into_iter().map(|i| self.facts(i)).collect())
    }
}

/// The idle states of `cpu` with their attributes; none when it has no
/// cpuidle directory.
pub fn cpu_states(root: &Root, cpu: u32) -> io::Result<Vec<StateFacts>> {
    match CpuIdleDir::open(root, cpu)? {
        Some(d) => d.states(),
        None => Ok(Vec::new()),
    }
}

/// The indices of `cpu`'s idle states; none when it has no cpuidle directory
/// or it cannot be read.
pub fn cpu_indices(root: &Root, cpu: u32) -> Vec<u32> {
    cpu_listing(root, cpu).indices
}

/// [`CpuIdleDir::listing`] of `cpu`; empty when it has no cpuidle directory
/// or it cannot be read.
pub fn cpu_listing(root: &Root, cpu: u32) -> Listing {
    root.read_dir(&cpuidle_dir(cpu))
        .map(|names| Listing::of(root, cpu, &names))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU's states as files under a test root: `name`, `latency`, `disable`, `usage`, `time`.
    fn tree(states: &[(u32, &str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        for (i, name, disable) in states {
            let d = dir
                .path()
                .join(format!("sys/devices/system/cpu/cpu1/cpuidle/state{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in [("name", *name), ("latency", "2\n"), ("disable", *disable)] {
                std::fs::write(d.join(f), v).unwrap();
            }
            std::fs::write(d.join("usage"), format!("{}\n", 100 + i)).unwrap();
            std::fs::write(d.join("time"), "7\n").unwrap();
        }
        dir
    }

    #[test]
    fn states_are_listed_by_number_and_read_with_their_attributes() {
        let t = tree(&[(10, "C10\n", "1\n"), (0, "POLL\0\n", "0\n"), (2, "C2", "0")]);
        let root = Root::open(t.path()).unwrap();
        let dir = CpuIdleDir::open(&root, 1).unwrap().unwrap();
        assert_eq!(dir.indices().unwrap(), vec![0, 2, 10]);
        assert!(dir.has(2) && !dir.has(1));
        let states = cpu_states(&root, 1).unwrap();
        assert_eq!(states[0].name, "POLL");
        assert_eq!(
            states[2],
            StateFacts {
                index: 10,
                name: "C10".into(),
                latency_us: Some(2),
                residency_us: None,
                disabled: Some(true),
                usage: Some(110),
                time_us: Some(7),
            }
        );
        assert_eq!(dir.counter(2, "usage").unwrap(), 102);
        let e = format!("{:#}", dir.counter(2, "residency").unwrap_err());
        assert!(
            e.starts_with("/sys/devices/system/cpu/cpu1/cpuidle/state2/residency"),
            "{e}"
        );
        assert_eq!(cpu_indices(&root, 1), vec![0, 2, 10]);
        // A CPU without cpuidle has no states, which is not an error.
        assert!(CpuIdleDir::open(&root, 0).unwrap().is_none());
        assert!(cpu_states(&root, 0).unwrap().is_empty());
        assert!(cpu_indices(&root, 0).is_empty());
    }
}
