//! The manifest fragment for a split: one knob file per mechanism, in the
//! shapes the isolation kinds take (docs/knob-kinds.md).

use serde::Serialize;
use serde_yaml::Value;

use super::choose::Choice;
use super::nic::Nics;
use super::spec::{Spec, list, map};
use super::topology::Topology;
use crate::cpulist::CpuList;

/// The flags of `isolcpus=` (kernel-parameters.txt): `domain` takes the
/// CPUs out of scheduler load balancing, which the kernel documents as
/// deprecated in favour of cpusets and NTO adds only for static isolation;
/// `managed_irq` keeps managed interrupts off them where it can.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Isolcpus {
    /// No `isolcpus=`: nohz_full, rcu_nocbs and irqaffinity only.
    None,
    /// `isolcpus=managed_irq,LIST`.
    #[default]
    ManagedIrq,
    /// `isolcpus=managed_irq,domain,LIST`.
    Domain,
}

impl Isolcpus {
    pub fn parse(text: &str) -> Option<Isolcpus> {
        match text {
            "none" => Some(Isolcpus::None),
            "managed_irq" => Some(Isolcpus::ManagedIrq),
            "domain" => Some(Isolcpus::Domain),
            _ => None,
        }
    }
}

/// One knob file of the fragment.
#[derive(Clone, Debug)]
pub struct KnobFile {
    pub id: String,
    pub kind: &'static str,
    /// The YAML document, with a comment saying where it came from.
    pub text: String,
}

#[derive(Serialize)]
struct Doc<'a> {
    id: &'a str,
    title: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<Value>,
    set: Value,
    hosts: Vec<&'a str>,
    persistence: &'static str,
    caveats: Vec<String>,
    why: String,
    history: Vec<History<'a>>,
}

#[derive(Serialize)]
struct History<'a> {
    date: &'a str,
    action: &'static str,
    hosts: Vec<&'a str>,
    note: String,
}

/// What the fragment is about, for its comments and history notes.
pub struct Context<'a> {
    pub host: &'a str,
    /// `YYYY-MM-DD`, UTC.
    pub date: &'a str,
    /// The command line that planned it (`hostknob isolate --count 8`).
    pub command: &'a str,
}

/// The isolation command line's words and their caveats.
fn cmdline(
    topo: &Topology,
    iso: &CpuList,
    hk: &CpuList,
    isolcpus: Isolcpus,
) -> (Vec<String>, Vec<String>) {
    let mut add = match isolcpus {
        Isolcpus::None => vec![],
        Isolcpus::ManagedIrq => vec![format!("isolcpus=managed_irq,{iso}")],
        Isolcpus::Domain => vec![format!("isolcpus=managed_irq,domain,{iso}")],
    };
    // Under nohz=off no CPU enters NOHZ mode (tick-sched.c
    // tick_nohz_activate), so nohz_full= cannot stop the tick: tuned's
    // cpu-partitioning and NTO write nohz=on beside it, as here.
    add.extend([
        "nohz=on".to_string(),
        format!("nohz_full={iso}"),
        format!("rcu_nocbs={iso}"),
        format!("irqaffinity={hk}"),
        "skew_tick=1".to_string(),
    ]);
    let mut cmdline_caveats =
        vec!["takes effect at the next boot: audit says pending-reboot until then".to_string()];
    match isolcpus {
        Isolcpus::Domain => cmdline_caveats.push(format!(
            "isolcpus=domain (--isolcpus domain) takes CPUs {iso} out of scheduler load balancing: only work pinned there (taskset, a unit's CPUAffinity=) runs there, so pin every thread of the workload, and not more threads than CPUs; kernel-parameters.txt calls it deprecated in favour of cpusets"
        )),
        _ => cmdline_caveats.push(format!(
            "CPUs {iso} stay in scheduler load balancing (no isolcpus=domain; --isolcpus domain adds it): keep other work off them with the services' and threads' affinity (the knobs below) or a cpuset"
        )),
    }
    cmdline_caveats.extend([
        match isolcpus {
            Isolcpus::None => "no isolcpus=managed_irq (--isolcpus none): managed interrupts (nvme queues, many multi-queue NICs) may stay on the isolated CPUs, and an irq-affinity write cannot move those".to_string(),
            _ => "managed_irq keeps managed interrupts (nvme queues, many multi-queue NICs) off the isolated CPUs where the kernel can; an irq-affinity write cannot move those".to_string(),
        },
        "skew_tick=1 staggers the CPUs' ticks so they do not contend for the same timekeeping locks at once (the RHEL for Real Time tuning guide, tuned's realtime profile); it costs some power on idle hosts, since ticks no longer coincide: drop it from `add` where power matters more".to_string(),
    ]);
    if !topo.nohz_full_exposed {
        cmdline_caveats.push(
            "this kernel exposes no /sys/devices/system/cpu/nohz_full: it may be built without CONFIG_NO_HZ_FULL, and then ignores nohz_full= (rcu_nocbs= needs CONFIG_RCU_NOCB_CPU likewise)".into(),
        );
    }
    (add, cmdline_caveats)
}

/// The knobs, in the order to review them: the boot-time partition first,
/// then what moves running work off the isolated CPUs.
pub fn fragment(
    topo: &Topology,
    choice: &Choice,
    isolcpus: Isolcpus,
    nics: &Nics,
    cx: &Context,
) -> Vec<KnobFile> {
    let (iso, hk) = (&choice.isolated, &choice.housekeeping);
    let (add, cmdline_caveats) = cmdline(topo, iso, hk, isolcpus);
    let nic_globs = nics.irq_globs();
    let mut irq_target = vec![("all", Value::Bool(true)), ("default", Value::Bool(true))];
    let mut irq_title = format!("Move every movable interrupt to housekeeping CPUs {hk}");
    if !nic_globs.is_empty() {
        let globs = nic_globs.iter().cloned().map(Value::String).collect();
        irq_target.insert(1, ("exclude", Value::Sequence(globs)));
        irq_title = format!(
            "Move every other movable interrupt to housekeeping CPUs {hk} (the NIC queues': isolate-nic-irq-affinity)"
        );
    }
    let mut specs: Vec<Spec> = vec![
        Spec::of(
            "isolate-kernel-cmdline",
            "kernel-cmdline",
            format!("Isolate CPUs {iso} at boot (isolcpus, nohz_full, rcu_nocbs), interrupts on {hk}"),
            None,
            map(&[(
                "add",
                Value::Sequence(add.into_iter().map(Value::String).collect()),
            )]),
            "cmdline",
            cmdline_caveats,
            format!(
                "Only the kernel command line can keep the scheduler tick (nohz_full), RCU callbacks (rcu_nocbs), load balancing and managed interrupts (isolcpus) off CPUs {iso}; irqaffinity= puts every interrupt that appears at boot on the housekeeping CPUs {hk} before anything else runs."
            ),
        ),
        Spec::of(
            "isolate-irq-affinity",
            "irq-affinity",
            irq_title,
            Some(map(&irq_target)),
            list(hk),
            "boot",
            vec![
                "managed interrupts refuse the write (EIO) and are left to isolcpus=managed_irq; per-CPU interrupts (timers, IPIs) cannot move and are not targeted".into(),
                "irqbalance rewrites affinity every 10 s unless its banned list covers the isolated CPUs (the isolate-irqbalance knob)".into(),
            ],
            format!(
                "An interrupt served on an isolated CPU preempts the workload there; `default` also places interrupts registered later (a NIC reset, a hot-plugged device) on {hk}."
            ),
        ),
        Spec::of(
            "isolate-irqbalance",
            "irqbalance",
            format!("Keep irqbalance off isolated CPUs {iso}"),
            None,
            list(iso),
            "runtime",
            vec!["irqbalance reads its banned list when it starts: restart it after apply".into()],
            format!(
                "irqbalance places interrupts on every CPU it is not told to avoid, undoing the irq-affinity knob within seconds; banning {iso} keeps it balancing only the housekeeping CPUs."
            ),
        ),
        Spec::of(
            "isolate-workqueue-cpumask",
            "workqueue-cpumask",
            format!("Run unbound kernel workqueues on housekeeping CPUs {hk}"),
            None,
            list(hk),
            "boot",
            vec!["bound (per-CPU) workqueues still run where they are queued; only unbound work moves".into()],
            format!(
                "Unbound kernel work (writeback, crypto, many drivers' deferred work) runs on any CPU in the workqueue cpumask; limiting it to {hk} keeps it from preempting the workload on {iso}."
            ),
        ),
        Spec::of(
            "isolate-systemd-cpu-affinity",
            "systemd-cpu-affinity",
            format!("Run system services on housekeeping CPUs {hk}"),
            None,
            list(hk),
            "systemd-dropin",
            vec![
                "PID 1 reads CPUAffinity= when it starts or re-executes (systemctl daemon-reexec); services started before keep their CPUs: audit says pending-reboot until then".into(),
                format!("the workload's own unit must then name the isolated CPUs itself (CPUAffinity={iso} in its drop-in), or it inherits {hk}"),
            ],
            format!(
                "Every service inherits PID 1's CPU affinity; restricting it to {hk} keeps logging, monitoring and cron work off the isolated CPUs {iso}."
            ),
        ),
        Spec::of(
            "isolate-thread-affinity",
            "thread-affinity",
            format!("Move the threads already running to housekeeping CPUs {hk}"),
            None,
            list(hk),
            "runtime",
            vec![
                "moves every movable thread running at apply, the workload's too if it already runs: name its threads in target.exclude (regular expressions, as tuned's ps_blacklist), or start it after apply on its CPUs".into(),
                "runtime only: threads started later inherit their parent's CPUs (isolate-systemd-cpu-affinity covers services); apply it again after a restart of long-running daemons".into(),
            ],
            format!(
                "Processes started before the other knobs took effect keep running on {iso} until moved; tuned's cpu-partitioning moves them the same way (isolated_cores with ps_blacklist)."
            ),
        ),
    ];
    // After the interrupts, before the workqueues: the NIC's own knobs.
    let at = specs
        .iter()
        .position(|s| s.kind == "irqbalance")
        .map_or(specs.len(), |i| i + 1);
    specs.splice(at..at, nics.specs(iso, hk));
    let note = format!(
        "planned by `{}`: isolated {iso}, housekeeping {hk}; review, commit, then apply",
        cx.command
    );
    specs
        .into_iter()
        .map(|spec| {
            let Spec { id, kind, title, target, set, persistence, caveats, why } = spec;
            let doc = Doc {
                id: &id,
                title,
                kind,
                target,
                set,
                hosts: vec![cx.host],
                persistence,
                caveats,
                why,
                history: vec![History {
                    date: cx.date,
                    action: "noted",
                    hosts: vec![cx.host],
                    note: note.clone(),
                }],
            };
            let yaml = serde_yaml::to_string(&doc).expect("a knob document serializes");
            KnobFile {
                id: id.clone(),
                kind,
                text: format!(
                    "# Planned by `{}` on {} for {}, from its topology.\n# Review it, commit it, then `hostknob apply {id}`.\n{yaml}",
                    cx.command, cx.date, cx.host
                ),
            }
        })
        .collect()
}
