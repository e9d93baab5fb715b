//! Knob kinds behind one interface, [`KnobKind`]: each kind says which files
//! it controls on a host, what they hold now and what they should hold
//! ([`KnobKind::survey`]); reading, planning and validating follow from that.
//!
//! A new kind is one new file implementing [`KnobKind`] and [`Spec`], plus one
//! line in the `kinds!` registry below.

pub mod boot;
pub mod bootloader;
pub mod bound;
mod ctx;
pub mod ignored;
pub(crate) mod msr_field;
pub(crate) mod names;
pub(crate) mod nic;
pub(crate) mod nic_queue;
pub mod rules;
pub(crate) mod threads;
pub mod udev_rule;

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cpulist::{CpuList, Group};
use crate::schema::{KnobDoc, Persistence};

pub use ctx::{CpuIdle, HostCtx, PolicyInfo, ReadValue, state_path};
pub use names::{REWRITE_CAP, check_name, check_service_name, too_large_to_rewrite};

/// Every knob kind: its module and type, its name in `KindName` and in the
/// manifest's `kind:`. A new kind is one file implementing [`KnobKind`] and
/// [`Spec`] and one line here.
macro_rules! kinds {
    ($($module:ident :: $kind:ident => $variant:ident $name:literal,)*) => {
        $(pub(crate) mod $module;)*

        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum KindName {
            $(#[serde(rename = $name)] $variant,)*
        }

        impl KindName {
            pub const ALL: [KindName; [$($name),*].len()] = [$(KindName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(KindName::$variant => $name,)*
                }
            }
        }

        /// Reads a knob document with its kind's types.
        pub fn build(kind: KindName, doc: &str) -> Result<Box<dyn KnobKind>, BuildError> {
            match kind {
                $(KindName::$variant => build_as::<$module::$kind>(doc),)*
            }
        }
    };
}

kinds! {
    cpuidle::CpuidleState => CpuidleState "cpuidle-state",
    cpufreq_governor::CpufreqGovernor => CpufreqGovernor "cpufreq-governor",
    cpufreq_epp::CpufreqEpp => CpufreqEpp "cpufreq-epp",
    pm_qos_resume::PmQosResumeLatency => PmQosResumeLatency "pm-qos-resume-latency",
    thp::Thp => Thp "thp",
    sysctl::Sysctl => Sysctl "sysctl",
    sysfs::Sysfs => Sysfs "sysfs",
    allocator::Allocator => Allocator "allocator",
    module_param::ModuleParam => ModuleParam "module-param",
    pm_qos::PmQos => PmQos "pm-qos",
    kernel_cmdline::KernelCmdline => KernelCmdline "kernel-cmdline",
    workqueue::WorkqueueCpumask => WorkqueueCpumask "workqueue-cpumask",
    systemd_affinity::SystemdCpuAffinity => SystemdCpuAffinity "systemd-cpu-affinity",
    irq_affinity::IrqAffinity => IrqAffinity "irq-affinity",
    irqbalance::Irqbalance => Irqbalance "irqbalance",
    cpufreq_limit::CpufreqMin => CpufreqMin "cpufreq-min",
    cpufreq_max::CpufreqMax => CpufreqMax "cpufreq-max",
    turbo::Turbo => Turbo "turbo",
    epb::Epb => Epb "epb",
    uncore_freq::UncoreFreq => UncoreFreq "uncore-freq",
    msr_c1e::C1e => C1e "c1e",
    msr_pkg_cstate_limit::PackageCstateLimit => PackageCstateLimit "package-cstate-limit",
    msr_c1_demotion::C1Demotion => C1Demotion "c1-demotion",
    msr_c1_undemotion::C1Undemotion => C1Undemotion "c1-undemotion",
    msr_hwp_min::HwpMin => HwpMin "hwp-min",
    msr_hwp_max::HwpMax => HwpMax "hwp-max",
    msr_prefetchers::Prefetchers => Prefetchers "prefetchers",
    thread_affinity::ThreadAffinity => ThreadAffinity "thread-affinity",
    nic_channels::NicChannels => NicChannels "nic-channels",
    nic_coalesce::NicCoalesce => NicCoalesce "nic-coalesce",
    nic_ring::NicRing => NicRing "nic-ring",
    nic_feature::NicFeature => NicFeature "nic-feature",
    rps::Rps => Rps "rps",
    xps::Xps => Xps "xps",
    block::Block => Block "block",
    thread_policy::ThreadPolicy => ThreadPolicy "thread-policy",
    sched_tunable::SchedTunable => SchedTunable "sched-tunable",
    module::Module => Module "module",
}

impl KindName {
    pub fn parse(text: &str) -> Option<KindName> {
        KindName::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl fmt::Display for KindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A problem with one field of a knob; the manifest turns it into
/// `file:line: field: message`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Why a target cannot be brought to the desired value on this host.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum Blocker {
    /// The thing does not exist here (no such state, no cpufreq, module not loaded).
    NotApplicable(String),
    /// It exists, but this host does not accept the desired value.
    Unsupported(String),
    /// It exists but cannot be read (permission, I/O error): its value is
    /// unknown, so it can be neither judged nor restored.
    Unreadable(String),
}

impl Blocker {
    /// The reason, in words.
    pub fn reason(&self) -> &str {
        match self {
            Blocker::NotApplicable(r) | Blocker::Unsupported(r) | Blocker::Unreadable(r) => r,
        }
    }
}

/// How apply would write a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Write the value into an existing kernel attribute (sysfs, /proc/sys).
    Attribute,
    /// Create or replace a whole file (a systemd drop-in); `before: None` means
    /// the file did not exist and reverting removes it.
    File,
    /// Open the device, write the value and keep it open (`/dev/cpu_dma_latency`).
    Hold,
    /// One field of a model-specific register on one scope domain
    /// (`/dev/cpu/N/msr@0x1fc[1:1]`): read-modify-write of only its bits
    /// (`crate::msr::write`); `before` is the whole register as found.
    Msr,
    /// One thread's allowed CPUs (`/proc/PID/task/TID/affinity@START`,
    /// `crate::task`): `sched_setaffinity(2)`; a thread that is gone needs nothing.
    Affinity,
    /// One thread's policy, RT priority and nice
    /// (`/proc/PID/task/TID/sched@START`, `crate::task::Sched`):
    /// `sched_setscheduler(2)`, `setpriority(2)`; as `Affinity` otherwise.
    Sched,
}

impl WriteMode {
    /// A thread's attribute: the thread may exit at any moment, and its
    /// number names another thread after a reboot.
    pub fn is_thread(self) -> bool {
        matches!(self, WriteMode::Affinity | WriteMode::Sched)
    }
}

/// One file a knob controls on this host (or, for allocator knobs, one
/// process environment it can only observe).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Target {
    /// Logical path under the root.
    pub path: String,
    /// The CPUs this file acts for (a per-CPU file, or a cpufreq policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    /// What the file is, when a CPU has several (an idle state's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The value now, in the same words as `desired`; `None` when absent or unreadable.
    pub current: Option<String>,
    pub desired: String,
    /// The knob is in effect on this target.
    pub in_effect: bool,
    /// The text apply writes; `None` when this target cannot be written (observe only).
    pub write: Option<String>,
    /// The text that restores the current value (what a journal records).
    pub restore: Option<String>,
    pub mode: WriteMode,
    pub blocker: Option<Blocker>,
}

impl Target {
    /// A target that is not there: its CPUs or file do not exist on this host.
    pub fn absent(path: String, cpus: Option<CpuList>, desired: &str, reason: String) -> Target {
        Target {
            path,
            cpus,
            label: None,
            current: None,
            desired: desired.to_string(),
            in_effect: false,
            write: None,
            restore: None,
            mode: WriteMode::Attribute,
            blocker: Some(Blocker::NotApplicable(reason)),
        }
    }
}

impl Target {
    /// A target that exists but cannot be read.
    pub fn unreadable(path: String, cpus: Option<CpuList>, desired: &str, error: &str) -> Target {
        let reason = format!("cannot read {path}: {error}");
        Target {
            blocker: Some(Blocker::Unreadable(reason)),
            ..Target::absent(path, cpus, desired, String::new())
        }
    }
}

/// Everything a knob controls on one host.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Survey {
    pub targets: Vec<Target>,
    /// Facts that matter for the change (a service restart needed, a hold process).
    pub notes: Vec<String>,
}

/// One write apply would make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Write {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What restoring writes; `None` for a file that did not exist.
    pub before: Option<String>,
    pub after: String,
    pub mode: WriteMode,
    /// What [`KnobKind::read_back`] shows once the write took (`disabled` for
    /// a `1` written to `disable`); check it with [`KnobKind::confirms`].
    pub expect: String,
}

/// A target that plan cannot bring to the desired value, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Blocked {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    pub blocker: Blocker,
}

/// The exact writes that bring this host to the desired value.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Plan {
    pub writes: Vec<Write>,
    pub blocked: Vec<Blocked>,
    pub notes: Vec<String>,
}

/// Services that set the same things and may undo a knob.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    Tuned,
    PowerProfilesDaemon,
    Tlp,
    Cpupower,
    Irqbalance,
}

impl Service {
    pub const ALL: [Service; 5] = [
        Service::Tuned,
        Service::PowerProfilesDaemon,
        Service::Tlp,
        Service::Cpupower,
        Service::Irqbalance,
    ];

    /// The ones that set CPU frequency and power settings.
    pub const POWER: [Service; 4] = [
        Service::Tuned,
        Service::PowerProfilesDaemon,
        Service::Tlp,
        Service::Cpupower,
    ];

    pub fn unit(self) -> &'static str {
        match self {
            Service::Tuned => "tuned.service",
            Service::PowerProfilesDaemon => "power-profiles-daemon.service",
            Service::Tlp => "tlp.service",
            Service::Cpupower => "cpupower.service",
            Service::Irqbalance => "irqbalance.service",
        }
    }

    /// The process name (`/proc/PID/comm`, at most 15 bytes) of its daemon, if it has one.
    pub fn comm(self) -> Option<&'static str> {
        match self {
            Service::Tuned => Some("tuned"),
            Service::PowerProfilesDaemon => Some("power-profiles-"),
            Service::Irqbalance => Some("irqbalance"),
            Service::Tlp | Service::Cpupower => None,
        }
    }
}

/// A knob kind: the one interface that reading, auditing and (later) apply use.
pub trait KnobKind: Send + Sync + fmt::Debug {
    fn kind(&self) -> KindName;

    /// The desired value in words (`disabled`, `performance`, `50 µs`).
    fn desired(&self) -> String;

    /// What the knob acts on, in words (`C6 on CPUs all`).
    fn target_summary(&self) -> String;

    /// Every file this knob controls on this host, its current and desired
    /// value. Errors are bad input (a sysctl that does not exist, a sysfs path
    /// that leads out of `/sys`): the caller reports them and exits 1.
    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError>;

    /// The persistence mechanisms that can hold this kind across a reboot.
    fn persistence_allowed(&self) -> &'static [Persistence];

    /// Kernel command-line arguments that set this knob at boot, if any.
    fn cmdline_args(&self) -> Option<Vec<String>> {
        None
    }

    /// The value this knob's file gets at the next boot, when the kernel's
    /// build configuration or command line decides it ([`boot::BootValue`]).
    fn boot_value(&self, _host: &HostCtx) -> Option<boot::BootValue> {
        None
    }

    /// Configured for the next boot but not running yet: the detail (the
    /// file and line that configure it, what runs now); `None` otherwise.
    /// audit asks it of a knob in `drift`, which becomes `pending-reboot`.
    fn pending_reboot(&self, _host: &HostCtx) -> Option<String> {
        None
    }

    /// For a kind whose change is the next boot's configuration (a boot
    /// loader's file): `Ok` naming the files and lines that hold it, `Err`
    /// saying what lacks it; `None` for every other kind.
    fn boot_config(&self, _host: &HostCtx) -> Option<Result<String, String>> {
        None
    }

    /// Why `p`, a mechanism [`Self::persistence_allowed`] leaves out, cannot hold this knob.
    fn persistence_refused(&self, _p: Persistence) -> Option<&'static str> {
        None
    }

    /// The udev rule that sets it when its devices appear (`persistence: udev-rule`).
    fn udev_rule(&self) -> Option<udev_rule::UdevRule> {
        None
    }

    /// The module this knob loads or gives options at load (the
    /// `modprobe.d` and `modules-load.d` files); `None` for other kinds.
    fn module_load(&self) -> Option<rules::module::ModuleLoad> {
        None
    }

    /// Services that may set the same thing.
    fn services(&self) -> &'static [Service] {
        &[]
    }

    /// A read value in the words of `desired` (e.g. the bracketed choice).
    fn normalize(&self, raw: &str) -> String {
        raw.trim().to_string()
    }

    /// The current value per CPU group (or per file), grouped like inventory.
    fn read(&self, host: &HostCtx) -> Result<Vec<Current>, FieldError> {
        Ok(group_current(&self.survey(host)?.targets))
    }

    /// The writes that would bring this host to the desired value.
    fn plan(&self, host: &HostCtx) -> Result<Plan, FieldError> {
        let survey = self.survey(host)?;
        let mut plan = Plan {
            notes: survey.notes,
            ..Plan::default()
        };
        for t in survey.targets {
            if let Some(blocker) = t.blocker {
                plan.blocked.push(Blocked {
                    path: t.path,
                    cpus: t.cpus,
                    blocker,
                });
            } else if let Some(after) = t.write.clone().filter(|after| self.needs_write(&t, after))
            {
                let expect = match t.mode {
                    WriteMode::File => after.trim().to_string(),
                    _ => t.desired,
                };
                plan.writes.push(Write {
                    path: t.path,
                    cpus: t.cpus,
                    label: t.label,
                    before: t.restore,
                    after,
                    mode: t.mode,
                    expect,
                });
            }
        }
        Ok(plan)
    }

    /// Whether `plan` writes `after` to this target: when the knob is not in
    /// effect there. A kind whose file configures the next boot writes it
    /// whenever its content differs, in effect now or not.
    fn needs_write(&self, target: &Target, _after: &str) -> bool {
        !target.in_effect
    }

    /// What this host cannot do for this knob (empty: it can take it everywhere).
    fn validate(&self, host: &HostCtx) -> Result<Vec<Blocked>, FieldError> {
        Ok(self.plan(host)?.blocked)
    }

    /// Reads a written path back, in the words of `desired` (the fact after a
    /// write); a whole file (`WriteMode::File`) comes back trimmed.
    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        Ok(host
            .root
            .read_trimmed(path)?
            .map(|raw| self.normalize(&raw)))
    }

    /// Whether a value read back shows the write took (`Write::expect`).
    fn confirms(&self, expect: &str, read: &str) -> bool {
        expect == read
    }

    /// A write the kernel refused with `errno`, nothing changed: `Some`
    /// (why, in words) when this target is left out and the apply goes on,
    /// as for a managed IRQ before Linux 6.12; `None` fails the apply.
    fn leaves_out(&self, _write: &Write, _errno: i32) -> Option<String> {
        None
    }
}

/// A kind's manifest form: its `target` and `set` types and how to check them.
pub trait Spec: KnobKind + Sized + 'static {
    type Target: DeserializeOwned;
    type Set: DeserializeOwned;
    fn new(target: Option<Self::Target>, set: Self::Set) -> Result<Self, FieldError>;

    /// The knob's id, for a kind whose file is named after it.
    fn named(self, _id: &str) -> Self {
        self
    }
}

/// Why a kind could not be built from its document.
pub enum BuildError {
    Yaml(serde_yaml::Error),
    Field(FieldError),
}

fn build_as<K: Spec>(doc: &str) -> Result<Box<dyn KnobKind>, BuildError> {
    let parsed: KnobDoc<K::Target, K::Set> = serde_yaml::from_str(doc).map_err(BuildError::Yaml)?;
    Ok(Box::new(
        K::new(parsed.target, parsed.set)
            .map_err(BuildError::Field)?
            .named(&parsed.id),
    ))
}

/// Current values grouped: CPUs that agree, or files that agree.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Current {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// `None`: absent or unreadable.
    pub value: Option<String>,
}

/// A CPU's value when it has several targets: `C6: disabled, C8: enabled`.
pub fn per_cpu_value(targets: &[&Target], value: impl Fn(&Target) -> Option<String>) -> String {
    if targets.len() == 1 {
        return value(targets[0]).unwrap_or_else(|| "absent".into());
    }
    targets
        .iter()
        .map(|t| {
            format!(
                "{}: {}",
                t.label.as_deref().unwrap_or(&t.path),
                value(t).unwrap_or_else(|| "absent".into())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Targets grouped by current value: per CPU where targets name CPUs, else per file.
pub fn group_current(targets: &[Target]) -> Vec<Current> {
    let mut out = Vec::new();
    let per_cpu = by_cpu(targets);
    let cpu_groups: Vec<Group<Option<String>>> =
        crate::cpulist::group(per_cpu.iter().map(|(cpu, ts)| (*cpu, cpu_current(ts))));
    for g in cpu_groups {
        out.push(Current {
            cpus: Some(g.cpus),
            paths: Vec::new(),
            value: g.value,
        });
    }
    let mut files: Vec<Current> = Vec::new();
    for t in targets.iter().filter(|t| t.cpus.is_none()) {
        match files.iter_mut().find(|c| c.value == t.current) {
            Some(c) => c.paths.push(t.path.clone()),
            None => files.push(Current {
                cpus: None,
                paths: vec![t.path.clone()],
                value: t.current.clone(),
            }),
        }
    }
    out.extend(files);
    out
}

fn cpu_current(ts: &[&Target]) -> Option<String> {
    if ts.iter().all(|t| t.current.is_none()) {
        return None;
    }
    Some(per_cpu_value(ts, |t| t.current.clone()))
}

/// Targets that name CPUs, per CPU in CPU order.
pub fn by_cpu(targets: &[Target]) -> Vec<(u32, Vec<&Target>)> {
    let mut map: std::collections::BTreeMap<u32, Vec<&Target>> = Default::default();
    for t in targets {
        if let Some(cpus) = &t.cpus {
            for &c in cpus.as_slice() {
                map.entry(c).or_default().push(t);
            }
        }
    }
    map.into_iter().collect()
}

/// `target.cpus`: `all` or a CPU list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSel {
    All,
    List(CpuList),
}

impl CpuSel {
    pub fn parse(field: &str, text: &str) -> Result<CpuSel, FieldError> {
        if text.trim() == "all" {
            return Ok(CpuSel::All);
        }
        match CpuList::parse(text) {
            Ok(l) if l.is_empty() => Err(FieldError::new(
                field,
                "empty CPU list: give `all` or CPUs such as 0-7,16-23",
            )),
            Ok(l) => Ok(CpuSel::List(l)),
            Err(e) => Err(FieldError::new(
                field,
                format!("{text:?} is not a CPU list ({e}); give `all` or CPUs such as 0-7,16-23"),
            )),
        }
    }

    /// The selected CPUs that are online here, and those that are not.
    pub fn split(&self, online: &CpuList) -> (CpuList, CpuList) {
        match self {
            CpuSel::All => (online.clone(), CpuList::default()),
            CpuSel::List(l) => {
                let (here, missing): (Vec<u32>, Vec<u32>) =
                    l.as_slice().iter().partition(|c| online.contains(**c));
                (CpuList::new(here), CpuList::new(missing))
            }
        }
    }
}

impl fmt::Display for CpuSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSel::All => f.write_str("all"),
            CpuSel::List(l) => write!(f, "{l}"),
        }
    }
}

/// The target for CPUs selected by the manifest but not online on this host.
pub fn offline_target(missing: &CpuList, desired: &str) -> Option<Target> {
    (!missing.is_empty()).then(|| {
        Target::absent(
            format!("/sys/devices/system/cpu/cpu{{{missing}}}"),
            Some(missing.clone()),
            desired,
            format!("CPUs {missing} are not online on this host"),
        )
    })
}

/// The per-CPU persistence set shared by attribute kinds.
pub const ATTRIBUTE_PERSISTENCE: &[Persistence] = &[Persistence::Runtime, Persistence::Tmpfiles];

/// cpuidle and cpufreq kinds: a boot unit first (it re-resolves states and
/// policies at each boot), tmpfiles.d (pins indexes and paths) still allowed.
pub const CPU_PERSISTENCE: &[Persistence] = &[
    Persistence::Runtime,
    Persistence::Boot,
    Persistence::Tmpfiles,
];

/// The first of a knob's targets the host refuses (a value it does not
/// accept, a file that cannot be read), as an error; not-applicable ones pass.
pub fn refusal(id: &str, blocked: &[Blocked]) -> Result<(), String> {
    let mut refused = blocked
        .iter()
        .filter(|b| !matches!(b.blocker, Blocker::NotApplicable(_)));
    let Some(b) = refused.next() else {
        return Ok(());
    };
    let reason = b.blocker.reason();
    let more = match refused.count() {
        0 => String::new(),
        n => format!(" (and {n} more files)"),
    };
    Err(format!("{id}: {}: {reason}{more}", b.path))
}
