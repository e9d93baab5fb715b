//! `module-param`: a kernel module parameter,
//! `/sys/module/<module>/parameters/<param>` (built-in modules have them too,
//! e.g. `haltpoll`'s `guest_halt_poll_ns` in a KVM guest). The kernel's
//! rules ([`super::rules`]): `-` and `_` in a module name are the same (the
//! directory has `_`), and a bool parameter reads back `Y`/`N` whatever word
//! set it, so a bool compares as a bool.

use serde::Deserialize;

use super::rules::{module_dir_name, param_bool};
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
        format!("/sys/module/{}", module_dir_name(&self.module))
    }
    fn path(&self) -> String {
        format!("{}/parameters/{}", self.dir(), self.param)
    }

    /// What to write where the file now reads `current`: a bool parameter
    /// (it reads `Y`/`N`) gets `Y`/`N`, so the read-back is the kernel's word.
    fn write_for(&self, current: &str) -> String {
        match (is_bool_print(current), param_bool(&self.value)) {
            (true, Some(b)) => if b { "Y" } else { "N" }.to_string(),
            _ => self.value.clone(),
        }
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

/// How the kernel prints a bool parameter (`param_get_bool`).
fn is_bool_print(text: &str) -> bool {
    matches!(text.trim(), "Y" | "N")
}

/// Whether a value read from the file is the value wanted.
fn same_param(want: &str, read: &str) -> bool {
    let read = read.trim();
    read == want
        || (is_bool_print(read) && param_bool(want).is_some() && param_bool(want) == param_bool(read))
}

impl KnobKind for ModuleParam {
    fn confirms(&self, expect: &str, read: &str) -> bool {
        same_param(expect, read)
    }

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
            Persistence::ModprobeD,
        ]
    }

    fn module_load(&self) -> Option<super::rules::module::ModuleLoad> {
        Some(super::rules::module::ModuleLoad {
            module: self.module.clone(),
            options: vec![(self.param.clone(), self.value.clone())],
            load: false,
        })
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
                in_effect: same_param(&self.value, &v),
                path,
                cpus: None,
                label: None,
                restore: Some(v.clone()),
                write: Some(self.write_for(&v)),
                current: Some(v),
                desired: self.value.clone(),
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
