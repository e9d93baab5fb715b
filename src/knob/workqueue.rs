//! `workqueue-cpumask`: where unbound kernel work runs. The global
//! `/sys/devices/virtual/workqueue/cpumask` bounds every unbound workqueue;
//! workqueues created with `WQ_SYSFS` have a directory there, and the
//! unbound ones among them a `cpumask` of their own (matched by glob).
//!
//! The kernel's words (Documentation/core-api/workqueue.rst, "Affinity
//! Scopes"; kernel/workqueue.c `wq_unbound_cpumask_store`, `wq_cpumask_store`):
//! the files hold a hex mask in 32-bit words, most significant first
//! (`ffffffff,ffffffff`); a write is parsed by `cpumask_parse` (EINVAL for
//! text that is not a mask, EOVERFLOW for a bit past `nr_cpu_ids`); the
//! global mask is intersected with the possible CPUs and refused (EINVAL)
//! when nothing is left; isolated CPUs are kept "on purpose" when asked for.
//! A workqueue's own mask is kept as written and used intersected with the
//! global one (the global one when that is empty). Values compare as CPU lists.

use serde::Deserialize;

use super::{
    Blocker, FieldError, HostCtx, KindName, KnobKind, ReadValue, Spec, Survey, Target, WriteMode,
};
use crate::cpulist::CpuList;
use crate::schema::{Persistence, Scalar};

pub const WQ_DIR: &str = "/sys/devices/virtual/workqueue";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    workqueues: Option<Vec<String>>,
}

#[derive(Debug)]
pub struct WorkqueueCpumask {
    /// `None`: the global mask.
    pub workqueues: Option<Vec<String>>,
    pub cpus: CpuList,
}

/// A CPU list as the hex mask `cpumask_parse` takes: 32-bit words, most
/// significant first, comma-separated (one word holds at most 32 bits).
pub fn to_mask(cpus: &CpuList) -> String {
    let Some(&last) = cpus.as_slice().last() else {
        return "0".into();
    };
    let mut words = vec![0u32; last as usize / 32 + 1];
    for &c in cpus.as_slice() {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut out: Vec<String> = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        out.push(if i == 0 {
            format!("{w:x}")
        } else {
            format!("{w:08x}")
        });
    }
    out.join(",")
}

/// A mask as the kernel prints it, as a CPU list (`None`: not a mask).
pub fn mask_cpus(raw: &str) -> Option<CpuList> {
    CpuList::parse_mask(raw.trim()).ok()
}

fn check_pattern(field: &str, p: &str) -> Result<(), FieldError> {
    let ok = !p.is_empty()
        && p != "."
        && p != ".."
        && p.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '*' | '?' | '[' | ']')
        });
    if !ok {
        return Err(FieldError::new(
            field,
            format!(
                "{p:?} is not a workqueue name or glob (letters, digits, _ - . : and * ? [ ] only; no `/`)"
            ),
        ));
    }
    glob::Pattern::new(p)
        .map(|_| ())
        .map_err(|e| FieldError::new(field, format!("{p:?}: bad glob: {e}")))
}

impl Spec for WorkqueueCpumask {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let workqueues = target.and_then(|t| t.workqueues);
        if let Some(w) = &workqueues {
            if w.is_empty() {
                return Err(FieldError::new(
                    "target.workqueues",
                    "empty list: name workqueues (globs such as writeback or *) or leave out \
                     target for the global mask",
                ));
            }
            for p in w {
                check_pattern("target.workqueues", p)?;
            }
        }
        let cpus = match CpuList::parse(&set.0) {
            Ok(l) if l.is_empty() => {
                return Err(FieldError::new(
                    "set",
                    "empty CPU list: the kernel refuses an empty global mask (EINVAL); give the \
                     housekeeping CPUs, such as 0-3",
                ));
            }
            Ok(l) => l,
            Err(e) => {
                return Err(FieldError::new(
                    "set",
                    format!(
                        "{:?} is not a CPU list ({e}); give the housekeeping CPUs such as 0-3,8 \
                         (hostknob writes the hex mask the kernel takes)",
                        set.0
                    ),
                ));
            }
        };
        Ok(WorkqueueCpumask { workqueues, cpus })
    }
}

impl WorkqueueCpumask {
    /// The files the knob names here: (path, label), and the names a glob
    /// matched that have no `cpumask` (bound workqueues).
    fn files(&self, host: &HostCtx) -> (Vec<(String, String)>, Vec<String>) {
        let Some(patterns) = &self.workqueues else {
            return (vec![(format!("{WQ_DIR}/cpumask"), "global".into())], vec![]);
        };
        let pats: Vec<glob::Pattern> = patterns
            .iter()
            .map(|p| glob::Pattern::new(p).expect("checked at load"))
            .collect();
        let mut files = Vec::new();
        let mut bound = Vec::new();
        for name in host.list(WQ_DIR) {
            if !pats.iter().any(|p| p.matches(&name))
                || !host.root.is_dir(&format!("{WQ_DIR}/{name}"))
            {
                continue;
            }
            // `power` and `subsystem` are the device's own entries, not workqueues.
            if matches!(name.as_str(), "power" | "subsystem") {
                continue;
            }
            let path = format!("{WQ_DIR}/{name}/cpumask");
            if host.root.exists(&path) {
                files.push((path, name));
            } else if host.root.exists(&format!("{WQ_DIR}/{name}/per_cpu")) {
                bound.push(name);
            }
        }
        (files, bound)
    }

    /// Why this host cannot take the mask, if it cannot.
    fn refusal(&self, host: &HostCtx) -> Option<String> {
        let possible = host
            .text("/sys/devices/system/cpu/possible")
            .and_then(|t| CpuList::parse(&t).ok())
            .unwrap_or_else(|| host.online().clone());
        let beyond: Vec<u32> = self
            .cpus
            .as_slice()
            .iter()
            .copied()
            .filter(|c| !possible.contains(*c))
            .collect();
        if !beyond.is_empty() {
            return Some(format!(
                "CPUs {} are not possible on this host (possible: {possible}): the kernel refuses a \
                 mask bit past nr_cpu_ids (EOVERFLOW)",
                CpuList::new(beyond)
            ));
        }
        let online = host.online();
        if !self.cpus.as_slice().iter().any(|c| online.contains(*c)) {
            return Some(format!(
                "none of CPUs {} is online (online: {online}): unbound work would have no CPU of \
                 the mask to run on",
                self.cpus
            ));
        }
        None
    }

    fn notes(&self, host: &HostCtx, files: &[(String, String, String)]) -> Vec<String> {
        let mut notes = Vec::new();
        for (path, _, raw) in files {
            notes.push(format!("{path} reads {raw} (the kernel's hex mask)"));
        }
        let isolated = host
            .text(&format!("{WQ_DIR}/cpumask_isolated"))
            .and_then(|t| mask_cpus(&t))
            .unwrap_or_default();
        let overlap: Vec<u32> = self
            .cpus
            .as_slice()
            .iter()
            .copied()
            .filter(|c| isolated.contains(*c))
            .collect();
        if !overlap.is_empty() {
            notes.push(format!(
                "CPUs {} are in cpumask_isolated (isolated cpuset partitions): the kernel keeps \
                 them in a written mask on purpose, so unbound work would run there",
                CpuList::new(overlap)
            ));
        }
        if self.workqueues.is_none()
            && let (Some(req), Some(eff)) = (
                host.text(&format!("{WQ_DIR}/cpumask_requested"))
                    .and_then(|t| mask_cpus(&t)),
                host.text(&format!("{WQ_DIR}/cpumask"))
                    .and_then(|t| mask_cpus(&t)),
            )
            && req != eff
        {
            notes.push(format!(
                "cpumask_requested is {req} but cpumask is {eff}: the kernel excludes isolated \
                 CPUs from what was requested"
            ));
        }
        if let Some(global) = self
            .workqueues
            .as_ref()
            .and(host.text(&format!("{WQ_DIR}/cpumask")))
            .and_then(|t| mask_cpus(&t))
            && !self.cpus.as_slice().iter().any(|c| global.contains(*c))
        {
            notes.push(format!(
                "the global workqueue mask is {global}, which shares no CPU with {}: the kernel \
                 runs these workqueues on the global mask instead",
                self.cpus
            ));
        }
        notes
    }
}

impl KnobKind for WorkqueueCpumask {
    fn kind(&self) -> KindName {
        KindName::WorkqueueCpumask
    }

    fn desired(&self) -> String {
        self.cpus.to_string()
    }

    fn target_summary(&self) -> String {
        match &self.workqueues {
            None => "unbound workqueues (global cpumask)".into(),
            Some(w) => format!("workqueues {}", w.join(", ")),
        }
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[
            Persistence::Runtime,
            Persistence::Boot,
            Persistence::Tmpfiles,
        ]
    }

    /// The kernel's hex mask as a CPU list; text that is no mask stays as read.
    fn normalize(&self, raw: &str) -> String {
        mask_cpus(raw).map_or_else(|| raw.trim().to_string(), |l| l.to_string())
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let mut survey = Survey::default();
        let (files, bound) = self.files(host);
        let refusal = self.refusal(host);
        let mut read = Vec::new();
        for (path, label) in files {
            match host.value(&path) {
                ReadValue::Value(raw) => {
                    let current = self.normalize(&raw);
                    read.push((path.clone(), label.clone(), raw.clone()));
                    let in_effect = current == desired;
                    survey.targets.push(Target {
                        in_effect,
                        blocker: refusal
                            .clone()
                            .filter(|_| !in_effect)
                            .map(Blocker::Unsupported),
                        path,
                        cpus: None,
                        label: Some(label),
                        current: Some(current),
                        desired: desired.clone(),
                        write: Some(to_mask(&self.cpus)),
                        restore: Some(raw),
                        mode: WriteMode::Attribute,
                    });
                }
                ReadValue::Absent => survey.targets.push(Target::absent(
                    path.clone(),
                    None,
                    &desired,
                    format!(
                        "no {path}: this kernel has no workqueue sysfs (CONFIG_SYSFS) or is older \
                         than 4.6"
                    ),
                )),
                ReadValue::Unreadable(e) => survey
                    .targets
                    .push(Target::unreadable(path, None, &desired, &e)),
            }
        }
        for name in &bound {
            survey.targets.push(Target::absent(
                format!("{WQ_DIR}/{name}/cpumask"),
                None,
                &desired,
                format!(
                    "{name} is a per-CPU (bound) workqueue: it has no cpumask, its work runs on \
                     the CPU that queued it"
                ),
            ));
        }
        if survey.targets.is_empty() {
            let listed: Vec<String> = host
                .list(WQ_DIR)
                .into_iter()
                .filter(|n| host.root.exists(&format!("{WQ_DIR}/{n}/cpumask")))
                .collect();
            survey.targets.push(Target::absent(
                format!(
                    "{WQ_DIR}/{{{}}}/cpumask",
                    self.workqueues.as_deref().unwrap_or_default().join(",")
                ),
                None,
                &desired,
                format!(
                    "no unbound WQ_SYSFS workqueue matches here (only workqueues created with \
                     WQ_SYSFS are listed under {WQ_DIR}; these have a cpumask: {})",
                    if listed.is_empty() {
                        "none".into()
                    } else {
                        listed.join(", ")
                    }
                ),
            ));
        }
        survey.notes = self.notes(host, &read);
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip_in_the_kernels_words() {
        for (list, mask) in [
            ("0", "1"),
            ("0-1", "3"),
            ("1", "2"),
            ("32", "1,00000000"),
            ("0-3,36", "10,0000000f"),
            ("0-63", "ffffffff,ffffffff"),
        ] {
            let l = CpuList::parse(list).unwrap();
            assert_eq!(to_mask(&l), mask, "{list}");
            assert_eq!(mask_cpus(mask).unwrap(), l, "{mask}");
        }
        // As a 2-CPU VM prints it, and as a 240-CPU host pads it.
        assert_eq!(mask_cpus("3\n").unwrap().to_string(), "0-1");
        assert_eq!(
            mask_cpus("0000,00000000,00000000,00000000,00000000,00000000,00000000,0000000f")
                .unwrap()
                .to_string(),
            "0-3"
        );
        assert!(mask_cpus("zz").is_none());
    }

    #[test]
    fn patterns_are_names_not_paths() {
        assert!(check_pattern("f", "writeback").is_ok());
        assert!(check_pattern("f", "nvme-*").is_ok());
        for bad in ["", "..", "a/b", "../cpumask", "a b", "[x"] {
            assert!(check_pattern("f", bad).is_err(), "{bad}");
        }
    }
}
