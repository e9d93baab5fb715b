//! `irq-affinity`: where device interrupts may run. IRQs are chosen by what
//! they serve, never by number (numbers change between boots and hosts):
//! action names as `/proc/interrupts` shows them (globs), a network
//! device's MSI vectors (`/sys/class/net/NAME/device/msi_irqs`), or every
//! movable IRQ; `default: true` also sets `/proc/irq/default_smp_affinity`
//! for IRQs that appear later. The kernel's rules, with their sources, are in
//! `rules.rs`.

use serde::Deserialize;

use super::{
    FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec, Survey, Target, WriteMode,
    check_name,
};
use crate::cpulist::CpuList;
use crate::inventory::irq::{self, IrqRow};
use crate::root::Root;
use crate::schema::{Persistence, Scalar};

pub const DEFAULT_AFFINITY: &str = "/proc/irq/default_smp_affinity";
const INTERRUPTS: &str = "/proc/interrupts";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    actions: Vec<String>,
    #[serde(default)]
    netdev: Vec<String>,
    #[serde(default)]
    all: bool,
    /// With `all`: action globs left to another knob (isolate's NIC queue one).
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    default: bool,
}

#[derive(Debug)]
pub struct IrqAffinity {
    actions: Vec<(String, glob::Pattern)>,
    netdev: Vec<String>,
    all: bool,
    exclude: Vec<(String, glob::Pattern)>,
    default: bool,
    cpus: CpuList,
}

impl Spec for IrqAffinity {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let t = target.unwrap_or_default();
        if t.actions.is_empty() && t.netdev.is_empty() && !t.all && !t.default {
            return Err(FieldError::new(
                "target",
                "names no IRQs: give target.actions (globs of /proc/interrupts action names such as `nvme0q*`), target.netdev (network devices), `all: true` or `default: true`",
            ));
        }
        if t.all && (!t.actions.is_empty() || !t.netdev.is_empty()) {
            return Err(FieldError::new(
                "target.all",
                "`all: true` already takes every movable IRQ: drop target.actions and target.netdev, or `all`",
            ));
        }
        if !t.all && !t.exclude.is_empty() {
            return Err(FieldError::new(
                "target.exclude",
                "leaves IRQs out of `all: true` only: add `all: true`, or drop target.exclude",
            ));
        }
        let actions = globs("target.actions", &t.actions)?;
        let exclude = globs("target.exclude", &t.exclude)?;
        for n in &t.netdev {
            check_name("target.netdev", n, "network device")?;
        }
        let text = set.0.trim();
        let cpus = match CpuList::parse(text) {
            Ok(l) if !l.is_empty() => l,
            Ok(_) => {
                return Err(FieldError::new(
                    "set",
                    "empty CPU list: the kernel never lets an IRQ have no CPU; give CPUs such as 0-3,8",
                ));
            }
            Err(e) => {
                return Err(FieldError::new(
                    "set",
                    format!("{text:?} is not a CPU list ({e}); give CPUs such as 0-3,8"),
                ));
            }
        };
        Ok(IrqAffinity {
            actions,
            netdev: t.netdev,
            all: t.all,
            exclude,
            default: t.default,
            cpus,
        })
    }
}

/// Action name globs of `field`, each checked.
fn globs(field: &str, texts: &[String]) -> Result<Vec<(String, glob::Pattern)>, FieldError> {
    texts
        .iter()
        .map(|a| {
            if a.trim().is_empty() || a.contains(char::is_whitespace) {
                return Err(FieldError::new(
                    field,
                    format!("{a:?} is not an action name pattern (no spaces; e.g. `virtio0-input.*`, `nvme0q*`)"),
                ));
            }
            let p = glob::Pattern::new(a)
                .map_err(|e| FieldError::new(field, format!("{a:?} is not a glob: {e}")))?;
            Ok((a.clone(), p))
        })
        .collect()
}

/// Why an IRQ's affinity cannot be written here (`isolate` asks too), by
/// the rules of `rules::irq`: no file, no write bit, or managed by debugfs.
pub fn unmovable(root: &Root, irq: u32) -> Option<Unmovable> {
    let path = format!("/proc/irq/{irq}/smp_affinity_list");
    match root.mode(&path) {
        Err(_) => Some(Unmovable::NoFile),
        Ok(m) if m & 0o200 == 0 => Some(Unmovable::ReadOnly),
        // Before 6.12 the file stays 0644; the IRQ debugfs says managed
        // where the kernel has it (rules::irq::MANAGED_DEBUGFS).
        Ok(_) if managed_by_debugfs(root, irq) => Some(Unmovable::ReadOnly),
        Ok(_) => None,
    }
}

fn managed_by_debugfs(root: &Root, irq: u32) -> bool {
    let (dir, flag) = super::rules::irq::MANAGED_DEBUGFS;
    root.read_trimmed(&format!("{dir}/{irq}"))
        .ok()
        .flatten()
        .is_some_and(|t| t.lines().any(|l| l.trim() == flag))
}

/// Why an IRQ is left out of the knob.
#[derive(Debug, PartialEq, Eq)]
pub enum Unmovable {
    /// No `smp_affinity_list` (no proc directory, or not an SMP IRQ).
    NoFile,
    /// The file lacks the owner's write bit: managed, or a chip that cannot move.
    ReadOnly,
}

/// One selected IRQ and what it serves.
struct Selected<'a> {
    row: &'a IrqRow,
}

impl IrqAffinity {
    fn list_path(irq: u32) -> String {
        format!("/proc/irq/{irq}/smp_affinity_list")
    }

    /// The MSI vectors of a network device: its device's `msi_irqs`, or its
    /// parent's (a virtio NIC hangs from the PCI function that owns them).
    fn netdev_irqs(host: &HostCtx, name: &str) -> Result<Vec<u32>, String> {
        let dev = format!("/sys/class/net/{name}");
        if !host.root.exists(&dev) {
            return Err(format!("no network device {name} on this host ({dev})"));
        }
        let mut places = vec![format!("{dev}/device/msi_irqs")];
        // The device directory: `NAME/device`, else the one the class link
        // leads into (`.../virtio2/net/eth0` -> `.../virtio2`).
        let device = host.root.resolve(&format!("{dev}/device")).ok().or_else(|| {
            let real = host.root.resolve(&dev).ok()?;
            real.strip_suffix(&format!("/net/{name}")).map(str::to_string)
        });
        if let Some(d) = device {
            places.push(format!("{d}/msi_irqs"));
            places.push(format!("{}/msi_irqs", crate::root::split_parent(&d).0));
        }
        places.dedup();
        for p in &places {
            if host.root.is_dir(p) {
                let mut irqs: Vec<u32> = host.list(p).iter().filter_map(|n| n.parse().ok()).collect();
                irqs.sort_unstable();
                return Ok(irqs);
            }
        }
        Err(format!(
            "{name} lists no MSI vectors ({}): target its IRQs by action name instead",
            places.join(", ")
        ))
    }

    fn matches(&self, row: &IrqRow) -> bool {
        self.actions
            .iter()
            .any(|(_, p)| row.actions.iter().any(|a| p.matches(a)))
    }

    fn excluded(&self, row: &IrqRow) -> bool {
        self.exclude
            .iter()
            .any(|(_, p)| row.actions.iter().any(|a| p.matches(a)))
    }

    /// The CPUs of an IRQ's affinity that lie within `set` (its affinity
    /// when it is already within, `set` when none does): what apply writes,
    /// so node-local and per-queue pinning inside the set is kept.
    fn within(&self, current: &CpuList, online: &CpuList) -> CpuList {
        let kept: CpuList = current
            .as_slice()
            .iter()
            .copied()
            .filter(|c| self.cpus.contains(*c))
            .collect();
        match kept.as_slice().iter().any(|c| online.contains(*c)) {
            true => kept,
            false => self.cpus.clone(),
        }
    }

    fn describe(row: &IrqRow) -> String {
        match row.actions.as_slice() {
            [] => format!("IRQ {} ({})", row.irq, row.chip),
            a => format!("IRQ {} {}", row.irq, a.join(",")),
        }
    }

    fn target_for(&self, host: &HostCtx, s: &Selected) -> Target {
        let path = Self::list_path(s.row.irq);
        let desired = self.cpus.to_string();
        let effective = host
            .text(&format!("/proc/irq/{}/effective_affinity_list", s.row.irq))
            .and_then(|t| CpuList::parse(&t).ok());
        let label = match &effective {
            Some(e) => format!("{} (effective {e})", Self::describe(s.row)),
            None => Self::describe(s.row),
        };
        match host.value(&path) {
            ReadValue::Value(v) => {
                let current = self.normalize(&v);
                // In effect when within the set (rules::irq::WITHIN).
                let (in_effect, write) = match CpuList::parse(&current) {
                    Ok(c) => (
                        !c.is_empty() && c.as_slice().iter().all(|x| self.cpus.contains(*x)),
                        self.within(&c, host.online()).to_string(),
                    ),
                    Err(_) => (false, desired.clone()),
                };
                Target {
                    in_effect,
                    path,
                    cpus: None,
                    label: Some(label),
                    restore: Some(v),
                    current: Some(current),
                    desired,
                    write: Some(write),
                    mode: WriteMode::Attribute,
                    blocker: None,
                }
            }
            ReadValue::Absent => Target::absent(path, None, &desired, "gone".into()),
            ReadValue::Unreadable(e) => Target::unreadable(path, None, &desired, &e),
        }
    }

    fn default_target(&self, host: &HostCtx) -> Target {
        let desired = self.cpus.to_string();
        match host.value(DEFAULT_AFFINITY) {
            ReadValue::Value(v) => {
                let current = CpuList::parse_mask(&v)
                    .map(|l| l.to_string())
                    .unwrap_or_else(|_| v.clone());
                Target {
                    in_effect: current == desired,
                    path: DEFAULT_AFFINITY.into(),
                    cpus: None,
                    label: Some("IRQs set up later".into()),
                    write: Some(irq::cpus_mask(self.cpus.as_slice(), &v)),
                    restore: Some(v),
                    current: Some(current),
                    desired,
                    mode: WriteMode::Attribute,
                    blocker: None,
                }
            }
            ReadValue::Absent => Target::absent(
                DEFAULT_AFFINITY.into(),
                None,
                &desired,
                format!("{DEFAULT_AFFINITY} does not exist here (a kernel without SMP, or a capture without /proc/irq)"),
            ),
            ReadValue::Unreadable(e) => Target::unreadable(DEFAULT_AFFINITY.into(), None, &desired, &e),
        }
    }
}

/// How managed IRQs are kept off CPUs instead of by this knob.
const MANAGED_HINT: &str = "the kernel manages their affinity (or their chip cannot move them): \
     keep them off isolated CPUs with `isolcpus=managed_irq,CPUS` on the kernel command line \
     (a `kernel-cmdline` knob)";

impl KnobKind for IrqAffinity {
    fn kind(&self) -> KindName {
        KindName::IrqAffinity
    }

    fn desired(&self) -> String {
        self.cpus.to_string()
    }

    fn target_summary(&self) -> String {
        let mut parts = Vec::new();
        if self.all {
            let but: Vec<&str> = self.exclude.iter().map(|(a, _)| a.as_str()).collect();
            parts.push(match but.is_empty() {
                true => "all movable IRQs".to_string(),
                false => format!("all movable IRQs but {}", but.join(" ")),
            });
        }
        if !self.actions.is_empty() {
            let names: Vec<&str> = self.actions.iter().map(|(a, _)| a.as_str()).collect();
            parts.push(format!("IRQs {}", names.join(" ")));
        }
        if !self.netdev.is_empty() {
            parts.push(format!("IRQs of {}", self.netdev.join(" ")));
        }
        if self.default {
            parts.push("the default affinity".into());
        }
        parts.join(", ")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        // IRQ numbers change between boots: only a boot unit, which
        // re-resolves the IRQs by name, persists this knob.
        &[Persistence::Runtime, Persistence::Boot]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Irqbalance, Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        CpuList::parse(raw.trim())
            .map(|l| l.to_string())
            .unwrap_or_else(|_| raw.trim().to_string())
    }

    /// Read back within the set (the write may keep a narrower affinity).
    fn confirms(&self, expect: &str, read: &str) -> bool {
        match (CpuList::parse(expect), CpuList::parse(read)) {
            (Ok(e), Ok(r)) => !r.is_empty() && r.as_slice().iter().all(|c| e.contains(*c)),
            _ => expect == read,
        }
    }

    fn leaves_out(&self, write: &super::Write, errno: i32) -> Option<String> {
        let irq = write
            .path
            .strip_prefix("/proc/irq/")?
            .strip_suffix("/smp_affinity_list")?;
        let name = match errno {
            libc::EIO => "EIO",
            libc::EPERM => "EPERM",
            _ => return None,
        };
        let what = write.label.clone().unwrap_or_else(|| format!("IRQ {irq}"));
        Some(format!(
            "{what}: the kernel refused the write ({name}): a managed IRQ (before Linux 6.12 its \
             file stays writable), left out as tuned and irqbalance do; {MANAGED_HINT}"
        ))
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        let raw = host.root.read_trimmed(path)?;
        Ok(raw.map(|r| match path {
            DEFAULT_AFFINITY => CpuList::parse_mask(&r)
                .map(|l| l.to_string())
                .unwrap_or(r),
            _ => self.normalize(&r),
        }))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let desired = self.cpus.to_string();
        let online = host.online();
        let offline: Vec<u32> = self
            .cpus
            .as_slice()
            .iter()
            .copied()
            .filter(|c| !online.contains(*c))
            .collect();
        // rules::irq::ONE_ONLINE: the kernel needs one online CPU in the mask.
        let unsupported = (offline.len() == self.cpus.len()).then(|| {
            super::Blocker::Unsupported(format!(
                "no CPU of {} is online here (online: {online}): the kernel would silently pick its default affinity for a mask with no online CPU, so `set` needs at least one online CPU",
                self.cpus
            ))
        });
        if !offline.is_empty() && unsupported.is_none() {
            survey.notes.push(format!(
                "CPUs {} of the set are not online now: the IRQs run on its online CPUs, and on those when they come online",
                CpuList::new(offline)
            ));
        }
        if self.default {
            survey.targets.push(self.default_target(host));
        }
        if self.all || !self.actions.is_empty() || !self.netdev.is_empty() {
            self.survey_irqs(host, &mut survey);
        }
        if survey.targets.is_empty() {
            survey.targets.push(Target::absent(
                INTERRUPTS.into(),
                None,
                &desired,
                format!("no IRQ matches {} on this host", self.target_summary()),
            ));
        }
        if let Some(b) = unsupported {
            for t in survey.targets.iter_mut().filter(|t| t.blocker.is_none()) {
                t.blocker = Some(b.clone());
            }
        }
        Ok(survey)
    }
}

impl IrqAffinity {
    fn survey_irqs(&self, host: &HostCtx, survey: &mut Survey) {
        let desired = self.cpus.to_string();
        let Some(text) = host.text(INTERRUPTS) else {
            survey.targets.push(Target::absent(
                INTERRUPTS.into(),
                None,
                &desired,
                format!("{INTERRUPTS} is not readable on this host: no IRQ can be named"),
            ));
            return;
        };
        let table = irq::parse(&text);
        let mut by_netdev: Vec<u32> = Vec::new();
        for n in &self.netdev {
            match Self::netdev_irqs(host, n) {
                Ok(irqs) => by_netdev.extend(irqs),
                Err(why) => survey.targets.push(Target::absent(
                    format!("/sys/class/net/{n}"),
                    None,
                    &desired,
                    why,
                )),
            }
        }
        let (mut managed, mut no_file) = (Vec::new(), Vec::new());
        let mut selected = Vec::new();
        for row in &table.rows {
            if !(self.all || self.matches(row) || by_netdev.contains(&row.irq)) {
                continue;
            }
            // `all` means device IRQs: a row with no action serves nothing.
            if self.all && (row.actions.is_empty() || self.excluded(row)) {
                continue;
            }
            match unmovable(host.root, row.irq) {
                Some(Unmovable::ReadOnly) => managed.push(Self::describe(row)),
                Some(Unmovable::NoFile) => no_file.push(Self::describe(row)),
                None => selected.push(Selected { row }),
            }
        }
        let matched_any = !selected.is_empty() || !managed.is_empty() || !no_file.is_empty();
        if selected.is_empty() && !managed.is_empty() {
            // Nothing movable matched, only managed IRQs: nothing this knob can do.
            survey.targets.push(Target {
                blocker: Some(super::Blocker::Unsupported(format!(
                    "{} refuse affinity writes (EIO): {MANAGED_HINT}",
                    managed.join(", ")
                ))),
                ..Target::absent(INTERRUPTS.into(), None, &desired, String::new())
            });
        } else if !managed.is_empty() {
            survey.notes.push(format!(
                "left out: {} ({MANAGED_HINT})",
                managed.join(", ")
            ));
        }
        if !no_file.is_empty() {
            survey.notes.push(format!(
                "left out, no smp_affinity_list: {}",
                no_file.join(", ")
            ));
        }
        if self.all && !table.per_cpu.is_empty() {
            survey.notes.push(format!(
                "per-CPU interrupts stay on every CPU (no affinity file moves them): {}",
                table.per_cpu.join(" ")
            ));
        }
        for s in &selected {
            let t = self.target_for(host, s);
            // Outside the IRQ's own list: after an apply (the knob's CPUs) and
            // after a revert (the restored list) alike, the kernel moves it
            // only at its next interrupt.
            if let Some(current) = t.current.as_deref().and_then(|c| CpuList::parse(c).ok())
                && let Some(e) = host
                    .text(&format!("/proc/irq/{}/effective_affinity_list", s.row.irq))
                    .and_then(|t| CpuList::parse(&t).ok())
                && e.as_slice().iter().any(|c| !current.contains(*c))
            {
                survey.notes.push(format!(
                    "{}: effective affinity still {e}, outside its list {current}: the kernel \
                     moves it at its next interrupt",
                    Self::describe(s.row)
                ));
            }
            survey.targets.push(t);
        }
        if !matched_any && !self.all {
            let names: Vec<&str> = self.actions.iter().map(|(a, _)| a.as_str()).collect();
            if !names.is_empty() {
                survey.notes.push(format!(
                    "no action in {INTERRUPTS} matches {}",
                    names.join(" ")
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(target: &str, set: &str) -> Result<IrqAffinity, FieldError> {
        let t: Option<TargetDoc> = serde_yaml::from_str(target).unwrap();
        IrqAffinity::new(t, Scalar(set.into()))
    }

    #[test]
    fn manifest_checks() {
        assert!(doc("{actions: ['virtio*']}", "0").is_ok());
        assert!(doc("{all: true, default: true}", "0-3,8").is_ok());
        assert_eq!(doc("{}", "0").unwrap_err().field, "target");
        assert_eq!(doc("null", "0").unwrap_err().field, "target");
        assert_eq!(
            doc("{all: true, actions: [x]}", "0").unwrap_err().field,
            "target.all"
        );
        assert_eq!(doc("{actions: ['[']}", "0").unwrap_err().field, "target.actions");
        assert!(doc("{all: true, exclude: ['mlx5_comp*']}", "0").is_ok());
        assert_eq!(doc("{exclude: [x], default: true}", "0").unwrap_err().field, "target.exclude");
        assert_eq!(doc("{all: true, exclude: ['a b']}", "0").unwrap_err().field, "target.exclude");
        assert_eq!(doc("{netdev: ['../x']}", "0").unwrap_err().field, "target.netdev");
        assert_eq!(doc("{all: true}", "0-").unwrap_err().field, "set");
        assert_eq!(doc("{all: true}", "").unwrap_err().field, "set");
    }
}
