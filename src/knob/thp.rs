//! `thp`: transparent huge pages, `enabled` or `defrag` (or `shmem_enabled`).
//! The file lists every choice with the one in force bracketed
//! (`always [madvise] never`): that choice is the value.

use serde::Deserialize;

use super::{
    ATTRIBUTE_PERSISTENCE, Blocker, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service,
    Spec, Survey, Target, WriteMode,
};
use crate::inventory::bracketed;
use crate::schema::Persistence;

pub const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    setting: Setting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    Enabled,
    Defrag,
    ShmemEnabled,
}

impl Setting {
    fn file(self) -> &'static str {
        match self {
            Setting::Enabled => "enabled",
            Setting::Defrag => "defrag",
            Setting::ShmemEnabled => "shmem_enabled",
        }
    }
}

#[derive(Debug)]
pub struct Thp {
    pub setting: Setting,
    pub value: String,
}

impl Spec for Thp {
    type Target = TargetDoc;
    type Set = String;

    fn new(target: Option<TargetDoc>, set: String) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.setting (enabled, defrag or shmem_enabled)",
            )
        })?;
        super::cpufreq_governor::check_word("set", &set, "THP choice")?;
        if set.contains(['[', ']']) {
            return Err(FieldError::new(
                "set",
                format!("{set:?}: give the choice alone, without brackets"),
            ));
        }
        Ok(Thp {
            setting: t.setting,
            value: set,
        })
    }
}

impl KnobKind for Thp {
    fn kind(&self) -> KindName {
        KindName::Thp
    }

    fn desired(&self) -> String {
        self.value.clone()
    }

    fn target_summary(&self) -> String {
        format!("transparent_hugepage/{}", self.setting.file())
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        match self.setting {
            Setting::Enabled => &[
                Persistence::Runtime,
                Persistence::Tmpfiles,
                Persistence::Cmdline,
            ],
            _ => ATTRIBUTE_PERSISTENCE,
        }
    }

    fn cmdline_args(&self) -> Option<Vec<String>> {
        (self.setting == Setting::Enabled)
            .then(|| vec![format!("transparent_hugepage={}", self.value)])
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        bracketed(raw).unwrap_or_else(|| raw.trim().to_string())
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let path = format!("{THP_DIR}/{}", self.setting.file());
        let mut survey = Survey::default();
        let raw = match host.value(&path) {
            ReadValue::Value(v) => v,
            ReadValue::Absent => {
                survey.targets.push(Target::absent(
                    path,
                    None,
                    &self.value,
                    "no transparent huge pages here (kernel without THP, or not in this capture)"
                        .into(),
                ));
                return Ok(survey);
            }
            ReadValue::Unreadable(e) => {
                survey
                    .targets
                    .push(Target::unreadable(path, None, &self.value, &e));
                return Ok(survey);
            }
        };
        let choices: Vec<String> = raw
            .split_whitespace()
            .map(|w| w.trim_matches(['[', ']']).to_string())
            .collect();
        let current = self.normalize(&raw);
        let blocker = (!choices.contains(&self.value)).then(|| {
            Blocker::Unsupported(format!(
                "{} is not a choice here (choices: {})",
                self.value,
                choices.join(" ")
            ))
        });
        survey.targets.push(Target {
            in_effect: current == self.value,
            path,
            cpus: None,
            label: None,
            restore: Some(current.clone()),
            current: Some(current),
            desired: self.value.clone(),
            write: Some(self.value.clone()),
            mode: WriteMode::Attribute,
            blocker,
        });
        Ok(survey)
    }
}
