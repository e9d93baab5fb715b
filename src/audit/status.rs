//! One status per CPU group or file, from what the host holds and what
//! persists it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cpulist::{self, CpuList};
use crate::knob::{Blocker, HostCtx, Target, per_cpu_value};
use crate::manifest::Knob;

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Unpersisted,
    NotApplicable,
    Drift,
    Unsupported,
    LostOnReboot,
    /// Reads as set, but the kernel is known to ignore it here (a disabled
    /// idle state under the `haltpoll` cpuidle governor).
    NotHonoured,
    /// The file exists but cannot be read (I/O error, not UTF-8): its value
    /// is unknown. audit exits 1.
    Unreadable,
    /// Configured for the next boot (a boot loader's file, PID 1's
    /// configuration), not running yet. audit exits 0, as for `unpersisted`.
    PendingReboot,
    /// A fact it depends on is in a path this audit does not see (the
    /// DaemonSet's pod: not mounted), so the verdict is not known here.
    /// audit exits 0: the host's own audit knows.
    Unknown,
}

impl Status {
    pub const ALL: [Status; 10] = [
        Status::Ok,
        Status::Unpersisted,
        Status::NotApplicable,
        Status::Drift,
        Status::Unsupported,
        Status::LostOnReboot,
        Status::NotHonoured,
        Status::Unreadable,
        Status::PendingReboot,
        Status::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unpersisted => "unpersisted",
            Status::NotApplicable => "not-applicable",
            Status::Drift => "drift",
            Status::Unsupported => "unsupported",
            Status::LostOnReboot => "lost-on-reboot",
            Status::NotHonoured => "not-honoured",
            Status::Unreadable => "unreadable",
            Status::PendingReboot => "pending-reboot",
            Status::Unknown => "unknown",
        }
    }

    /// Whether this status makes `audit` exit 2.
    pub fn fails(self) -> bool {
        matches!(
            self,
            Status::Drift | Status::Unsupported | Status::LostOnReboot | Status::NotHonoured
        )
    }

    /// Which of two statuses speaks for a knob: the one that needs attention most.
    pub(super) fn rank(self) -> u8 {
        match self {
            Status::NotApplicable => 0,
            Status::Ok => 1,
            Status::Unpersisted => 2,
            Status::PendingReboot => 3,
            Status::Unknown => 4,
            Status::Unsupported => 5,
            Status::Drift => 6,
            Status::LostOnReboot => 7,
            Status::NotHonoured => 8,
            Status::Unreadable => 9,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StatusGroup {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    pub status: Status,
    pub current: Option<String>,
    pub detail: String,
}

pub(super) struct Judged<'t> {
    pub(super) target: &'t Target,
    pub(super) status: Status,
    pub(super) detail: String,
}

pub(super) fn judge<'t>(target: &'t Target, persist: &Result<String, String>) -> Judged<'t> {
    let (status, detail) = match (&target.blocker, target.in_effect) {
        (Some(Blocker::NotApplicable(r)), _) => (Status::NotApplicable, r.clone()),
        (Some(Blocker::Unreadable(r)), _) => (Status::Unreadable, r.clone()),
        // An MSR domain whose copies differ lost the value on some CPU.
        (Some(Blocker::Unsupported(r)), false)
            if target
                .current
                .as_deref()
                .is_some_and(|c| c.starts_with(crate::knob::msr_field::DIFFERS)) =>
        {
            (Status::Drift, r.clone())
        }
        (Some(Blocker::Unsupported(r)), false) => (Status::Unsupported, r.clone()),
        (_, true) => match persist {
            Ok(_) => (Status::Ok, String::new()),
            Err(why) => (
                Status::Unpersisted,
                format!("in effect now, but gone at the next boot: {why}"),
            ),
        },
        (_, false) => (
            Status::Drift,
            format!(
                "is {}, should be {}",
                target.current.as_deref().unwrap_or("absent"),
                target.desired
            ),
        ),
    };
    Judged {
        target,
        status,
        detail,
    }
}

/// What persists a knob, once the kernel's boot value counts: nothing need
/// persist a value the kernel boots with (its build configuration, its
/// command line), so `unpersisted` is only for a value the next boot changes.
pub(super) fn with_boot_value(
    persist: Result<String, String>,
    knob: &Knob,
    host: &HostCtx,
) -> Result<String, String> {
    let Err(why) = persist else {
        return persist;
    };
    match knob.spec.boot_value(host) {
        Some(b) if b.value == knob.spec.desired() => {
            Ok(format!("the kernel boots with {}: {}", b.value, b.why))
        }
        Some(b) => Err(format!(
            "{why}; the kernel boots with {} ({})",
            b.value, b.why
        )),
        None => Err(why),
    }
}

/// Groups judged targets: per CPU where they name CPUs, else per file.
pub(super) fn groups(judged: &[Judged]) -> Vec<StatusGroup> {
    let mut out = Vec::new();
    let mut per_cpu: BTreeMap<u32, Vec<&Judged>> = BTreeMap::new();
    for j in judged {
        for &cpu in j.target.cpus.iter().flat_map(|c| c.as_slice()) {
            per_cpu.entry(cpu).or_default().push(j);
        }
    }
    // A CPU's status is its worst target's; its value names each target when it has several.
    let verdicts = per_cpu.into_iter().map(|(cpu, js)| {
        let worst = js
            .iter()
            .max_by_key(|j| j.status.rank())
            .expect("a CPU has targets");
        let targets: Vec<&Target> = js.iter().map(|j| j.target).collect();
        let value = if targets.iter().all(|t| t.current.is_none()) {
            None
        } else {
            Some(per_cpu_value(&targets, |t| t.current.clone()))
        };
        (cpu, (worst.status, worst.detail.clone(), value))
    });
    for g in cpulist::group(verdicts) {
        let (status, detail, current) = g.value;
        out.push(StatusGroup {
            cpus: Some(g.cpus),
            paths: Vec::new(),
            status,
            current,
            detail,
        });
    }
    for j in judged.iter().filter(|j| j.target.cpus.is_none()) {
        let key_current = j.target.current.clone();
        match out.iter_mut().find(|g| {
            g.cpus.is_none()
                && g.status == j.status
                && g.detail == j.detail
                && g.current == key_current
        }) {
            Some(g) => g.paths.push(j.target.path.clone()),
            None => out.push(StatusGroup {
                cpus: None,
                paths: vec![j.target.path.clone()],
                status: j.status,
                current: key_current,
                detail: j.detail.clone(),
            }),
        }
    }
    out
}

/// A knob configured for the next boot: its `drift` groups (what runs now)
/// become `pending-reboot`, with the knob's detail (where it is configured).
pub(super) fn pending(groups: &mut [StatusGroup], why: &str) {
    for g in groups.iter_mut().filter(|g| g.status == Status::Drift) {
        g.status = Status::PendingReboot;
        g.detail = why.to_string();
    }
}
