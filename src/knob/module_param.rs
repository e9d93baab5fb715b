//! `module-param`: a kernel module parameter,
//! `/sys/module/<module>/parameters/<param>` (built-in modules have them too,
//! e.g. `haltpoll`'s `guest_halt_poll_ns` in a KVM guest).

use serde::Deserialize;

use super::{
    FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec, Survey, Target, WriteMode,
    check_name,
};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    module: String,
    param: String,
}

#[derive(Debug)]
pub struct ModuleParam {
    pub module: String,
    pub param: String,
    pub value: String,
}

impl ModuleParam {
    fn dir(&self) -> String {
        format!("/sys/module/{}", self.module)
    }
    fn path(&self) -> String {
        format!("/sys/module/{}/parameters/{}", self.module, self.param)
    }
}

impl Spec for ModuleParam {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new("target", "missing: give target.module and target.param")
        })?;
        check_name("target.module", &t.module, "module")?;
        check_name("target.param", &t.param, "parameter")?;
        let value = set.0.trim().to_string();
        if value.is_empty() || value.contains('\n') {
            return Err(FieldError::new("set", "give one non-empty value"));
        }
        Ok(ModuleParam {
            module: t.module,
            param: t.param,
            value,
        })
    }
}

impl KnobKind for ModuleParam {
    fn kind(&self) -> KindName {
        KindName::ModuleParam
    }

    fn desired(&self) -> String {
        self.value.clone()
    }

    fn target_summary(&self) -> String {
        format!("{}.{}", self.module, self.param)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[
            Persistence::Runtime,
            Persistence::Tmpfiles,
            Persistence::Cmdline,
        ]
    }

    fn cmdline_args(&self) -> Option<Vec<String>> {
        Some(vec![format!(
            "{}.{}={}",
            self.module, self.param, self.value
        )])
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let path = self.path();
        if !host.root.is_dir(&self.dir()) {
            survey.targets.push(Target::absent(
                path,
                None,
                &self.value,
                format!(
                    "module {} is not loaded here (no {})",
                    self.module,
                    self.dir()
                ),
            ));
            return Ok(survey);
        }
        match host.value(&path) {
            ReadValue::Value(v) => survey.targets.push(Target {
                in_effect: v == self.value,
                path,
                cpus: None,
                label: None,
                restore: Some(v.clone()),
                current: Some(v),
                desired: self.value.clone(),
                write: Some(self.value.clone()),
                mode: WriteMode::Attribute,
                blocker: None,
            }),
            ReadValue::Absent => {
                return Err(FieldError::new(
                    "target.param",
                    format!(
                        "module {} has no parameter {} on this host ({path} does not exist)",
                        self.module, self.param
                    ),
                ));
            }
            ReadValue::Unreadable(e) => {
                survey
                    .targets
                    .push(Target::unreadable(path, None, &self.value, &e))
            }
        }
        Ok(survey)
    }
}
