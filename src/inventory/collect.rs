//! Reading every section on two threads: the jobs, the process table they
//! share, and the inventory put together from what each job found.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::par::{self, Shared, in_order};
use super::{
    Cache, Cpu, Frequency, Host, Idle, Interface, Inventory, Memory, NetCore, Notes, Numa,
    Platform, PmQos, Process, Reader, SCHEMA_VERSION, Section, cache, cpu, cpufreq, cpuidle, host,
    memory, network, platform, pm_qos_request, processes,
};
use crate::cpulist::CpuList;
use crate::root::Root;

/// Reads the sections asked for (all when `only` is empty). Host, CPU and
/// memory are always read (the others need the online CPUs); the rest, idle
/// states included, are left empty when not asked for.
pub fn collect_only(root: &Root, only: &[Section]) -> anyhow::Result<Inventory> {
    collect_then(root, only, &|_| ()).map(|(inv, ())| inv)
}

/// [`collect_only`], calling `early` with the inventory as soon as every part
/// but the process table is read: the thread that finishes the last job
/// calls it (a command renders there) while the other one goes on reading
/// the table, which is then added, and its notes after the others.
///
/// The parts are jobs that two threads take in turn: listing /proc, the CPU
/// chain (topology, then caches, idle states, cpufreq and NUMA, which need
/// the online CPUs), then the others; then both share the process table, a
/// few PIDs at a time. Each part has its own Reader, and their notes are
/// joined in a fixed order, so the output does not depend on which thread
/// read what.
pub fn collect_then<R: Send>(
    root: &Root,
    only: &[Section],
    early: &(dyn Fn(&mut Inventory) -> R + Sync),
) -> anyhow::Result<(Inventory, R)> {
    let want = |s: Section| s.wanted(only);
    // The idle states (7,680 files on a 512-CPU host) only for `idle`; the
    // PM QoS files (the request and one per CPU) for `idle` or `pm_qos`.
    let shows_idle = want(Section::Idle) || want(Section::PmQos);
    let shows_states = want(Section::Idle);
    let ctx: [Reader; 11] = std::array::from_fn(|_| Reader::new(root));
    let [
        host_ctx,
        cpu_ctx,
        idle_ctx,
        freq_ctx,
        numa_ctx,
        memory_ctx,
        vulns_ctx,
        net_ctx,
        qos_ctx,
        platform_ctx,
        procs_ctx,
    ] = &ctx;
    let p = Parts::default();
    let table = OnceLock::new();
    let pids = OnceLock::new();
    // The online CPUs as `cpu::read` finds them, read ahead so that the idle
    // states and cpufreq need not wait for the rest of the CPU section; where
    // only `/proc/cpuinfo` lists them, they wait for it.
    let online = || match p.online.wait() {
        Some(l) => Some(l.clone()),
        None => p.cpu_online.wait().clone(),
    };
    let jobs: [&(dyn Fn() + Sync); 12] = [
        // Listing /proc first: once it is done, both threads can share the table.
        &|| {
            if want(Section::Processes)
                && let Some(t) = table.get_or_init(|| processes::Table::list(procs_ctx))
            {
                let _ = pids.set(Shared::new(t.pids()));
            }
        },
        &|| {
            let _unwinding = NoneOnPanic(&p.online);
            let _ = p.online.set(cpu::online_ahead(&Reader::new(root)));
        },
        &|| {
            let _unwinding = NoneOnPanic(&p.cpu_online);
            let cpu = cpu::read(cpu_ctx);
            let _ = p
                .cpu_online
                .set(cpu.as_ref().ok().map(|c| c.online.clone()));
            p.cpu.put(cpu.map(|cpu| {
                let caches = if want(Section::Caches) {
                    cache::read(cpu_ctx, &cpu.online, &cpu.smt.sibling_lists)
                } else {
                    Vec::new()
                };
                (cpu, caches)
            }));
        },
        &|| {
            if shows_idle && let Some(online) = online() {
                p.idle.put(cpuidle::read(idle_ctx, &online, shows_states));
            }
        },
        &|| {
            if want(Section::Frequency)
                && let Some(online) = online()
            {
                p.frequency.put(cpufreq::read(freq_ctx, &online));
            }
        },
        &|| {
            if want(Section::Numa) {
                p.numa.put(memory::read_numa(numa_ctx));
            }
        },
        &|| p.host.put(host::read(host_ctx)),
        &|| p.memory.put(memory::read(memory_ctx)),
        &|| {
            if want(Section::Vulnerabilities) {
                p.vulnerabilities.put(host::vulnerabilities(vulns_ctx));
            }
        },
        &|| {
            if want(Section::Network) {
                p.network.put(network::read(net_ctx));
                p.net_core.put(network::read_core(net_ctx));
            }
        },
        &|| {
            if shows_idle {
                p.pm_qos.put(pm_qos_request(qos_ctx));
            }
        },
        &|| {
            if want(Section::Platform)
                && let Some(online) = online()
            {
                p.platform.put(platform::read(platform_ctx, &online));
            }
        },
    ];
    // Jobs are taken in order, and a job waits only on earlier ones.
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let assembled = Mutex::new(None);
    let work = || {
        while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
            job();
            if finished.fetch_add(1, Ordering::AcqRel) + 1 == jobs.len() {
                let inv = p.assemble(&ctx[..10]).map(|mut inv| {
                    let r = early(&mut inv);
                    (inv, r)
                });
                *assembled.lock().unwrap() = Some(inv);
            }
        }
        // A thread done before the table was listed leaves it to the lister.
        match (table.get(), pids.get()) {
            (Some(Some(t)), Some(pids)) => pids.drain(&|pid: &String| t.read(pid)),
            _ => Vec::new(),
        }
    };
    let found = par::run_with_helpers(par::allowed_cpu_count().min(2) - 1, &work);
    drop(pids);
    let (mut inv, r) = assembled
        .into_inner()
        .unwrap()
        .expect("the last job put the parts together")?;
    inv.processes = table.into_inner().flatten().and_then(|t| {
        let all: Vec<Option<Process>> = in_order(t.pids().len(), found);
        processes::summarize(&ctx[10], all.into_iter().flatten().collect())
    });
    let [.., procs_ctx] = ctx;
    add_notes(&mut inv, procs_ctx.finish());
    Ok((inv, r))
}

fn add_notes(inv: &mut Inventory, (warnings, missing): Notes) {
    inv.warnings.extend(warnings);
    inv.not_exposed.extend(missing);
}

/// Sets what other jobs wait for to `None` if its job panics, so that they
/// go on and the panic reaches the caller instead of a hang.
struct NoneOnPanic<'a, T>(&'a OnceLock<Option<T>>);

impl<T> Drop for NoneOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.set(None);
        }
    }
}

/// A part's result, put by its job and taken once when all are done.
struct Slot<T>(Mutex<Option<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Mutex::new(None))
    }
}

impl<T> Slot<T> {
    fn put(&self, v: T) {
        *self.0.lock().unwrap() = Some(v);
    }

    fn take(&self) -> Option<T> {
        self.0.lock().unwrap().take()
    }
}

/// What the jobs of [`collect_then`] found.
#[derive(Default)]
struct Parts {
    online: OnceLock<Option<CpuList>>,
    cpu_online: OnceLock<Option<CpuList>>,
    cpu: Slot<anyhow::Result<(Cpu, Vec<Cache>)>>,
    idle: Slot<Idle>,
    frequency: Slot<Option<Frequency>>,
    numa: Slot<Numa>,
    host: Slot<Host>,
    memory: Slot<Memory>,
    vulnerabilities: Slot<BTreeMap<String, String>>,
    network: Slot<Vec<Interface>>,
    net_core: Slot<NetCore>,
    pm_qos: Slot<Option<i64>>,
    platform: Slot<Platform>,
}

impl Parts {
    /// The inventory without its process table, the readers' notes joined
    /// in their order (the sections' order), whichever thread read what.
    fn assemble(&self, ctx: &[Reader]) -> anyhow::Result<Inventory> {
        let (cpu, caches) = self.cpu.take().expect("the CPU job ran")?;
        let mut inv = Inventory {
            schema: SCHEMA_VERSION,
            host: self.host.take().expect("the host job ran"),
            cpu,
            caches,
            numa: self.numa.take().unwrap_or(Numa { nodes: Vec::new() }),
            memory: self.memory.take().expect("the memory job ran"),
            idle: self.idle.take().unwrap_or_else(|| Idle {
                driver: None,
                governor: None,
                available_governors: None,
                states: Vec::new(),
                cpus_with_states: CpuList::default(),
                state_tables: None,
                pm_qos_resume_latency_us: Vec::new(),
            }),
            frequency: self.frequency.take().flatten(),
            vulnerabilities: self.vulnerabilities.take().unwrap_or_default(),
            network: self.network.take().unwrap_or_default(),
            net_core: self.net_core.take(),
            pm_qos: PmQos {
                cpu_dma_latency_us: self.pm_qos.take().flatten(),
            },
            platform: self.platform.take(),
            processes: None,
            not_exposed: Vec::new(),
            warnings: Vec::new(),
        };
        for c in ctx {
            add_notes(&mut inv, c.take_notes());
        }
        Ok(inv)
    }
}
