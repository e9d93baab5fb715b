//! `module`: a kernel module is loaded (tuned's `[modules]` with `+r`,
//! plugin_modules.py). Its state is `/sys/module/M` ([`rules::module`]).
//! hostknob loads and unloads no module: loading means finding the file and
//! its dependencies in modules.dep and passing modprobe.d's options
//! (modprobe's work, then finit_module(2)), and hostknob runs no module
//! tool. So a module not loaded is not-applicable, naming the command;
//! `persistence: modules-load.d` has systemd-modules-load.service load it at
//! every boot. Its options are `module-param` knobs (`modprobe.d`).

use serde::Deserialize;

use super::rules::module::{self as rules, Loaded, ModuleLoad, Shipped};
use super::rules::module_dir_name;
use super::{Blocker, FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target, WriteMode};
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    module: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDoc {
    loaded: bool,
    /// Unload and load again so load-time options take effect (tuned's `+r`).
    #[serde(default)]
    reload: bool,
}

#[derive(Debug)]
pub struct Module {
    pub module: String,
    pub reload: bool,
}

impl Spec for Module {
    type Target = TargetDoc;
    type Set = SetDoc;

    fn new(target: Option<TargetDoc>, set: SetDoc) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| FieldError::new("target", "missing: give target.module"))?;
        super::check_name("target.module", &t.module, "module")?;
        if t.module.contains(['.', '@', ':']) {
            return Err(FieldError::new(
                "target.module",
                format!(
                    "{:?} is not a module name (letters, digits, _ and - only: a module's \
                     file name before .ko)",
                    t.module
                ),
            ));
        }
        if !set.loaded {
            return Err(FieldError::new(
                "set.loaded",
                "only `true`: hostknob unloads no module it did not load; to keep a module \
                 out, blacklist it in modprobe.d (kmod modprobe.d(5) `blacklist`)",
            ));
        }
        Ok(Module {
            module: t.module,
            reload: set.reload,
        })
    }
}

impl Module {
    fn dir(&self) -> String {
        format!("/sys/module/{}", module_dir_name(&self.module))
    }

    fn desired_words(&self) -> &'static str {
        if self.reload { "reloaded" } else { "loaded" }
    }

    /// Why apply cannot load it here, naming what the operator runs instead:
    /// not-applicable (apply goes on with the other knobs, as for a
    /// `module-param` of a module not loaded), never a silent pass.
    fn not_loaded(&self, host: &HostCtx) -> Blocker {
        let m = &self.module;
        Blocker::NotApplicable(match rules::shipped(host, m) {
            Shipped::Missing(why) => format!("no module {m} for this kernel ({why})"),
            found => {
                let file = match found {
                    Shipped::Loadable(f) => format!(" ({f})"),
                    _ => String::new(),
                };
                format!(
                    "module {m}{file} is not loaded here, and hostknob loads no module (modprobe \
                     resolves its dependencies from modules.dep and passes modprobe.d's options \
                     to finit_module(2)): run `modprobe {m}`, or persist this knob with \
                     `persistence: modules-load.d` to load it at every boot"
                )
            }
        })
    }
}

impl KnobKind for Module {
    fn kind(&self) -> KindName {
        KindName::Module
    }

    fn desired(&self) -> String {
        self.desired_words().into()
    }

    fn target_summary(&self) -> String {
        format!("module {}", self.module)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::Runtime, Persistence::ModulesLoadD]
    }

    fn module_load(&self) -> Option<ModuleLoad> {
        Some(ModuleLoad {
            module: self.module.clone(),
            options: Vec::new(),
            load: true,
        })
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let m = &self.module;
        let (current, blocker) = match rules::loaded(host, m) {
            Loaded::Live { refcnt } if self.reload => (
                Some("loaded".to_string()),
                Some(Blocker::Unsupported(format!(
                    "reload: true: hostknob unloads no module (delete_module(2)){}; reload it \
                     yourself with `modprobe -r {m} && modprobe {m}` once nothing uses it",
                    refcnt
                        .map(|n| format!(", and {m} has {n} users now (refcnt)"))
                        .unwrap_or_default()
                ))),
            ),
            Loaded::Live { .. } => (Some("loaded".to_string()), None),
            Loaded::BuiltIn(why) if self.reload => (
                Some("built-in".to_string()),
                Some(Blocker::Unsupported(format!(
                    "reload: true: {m} is built into the kernel ({why}) and cannot be \
                     reloaded; its parameters are set at boot only (`{m}.PARAM=VALUE` on the \
                     kernel command line)"
                ))),
            ),
            Loaded::BuiltIn(_) => (Some("built-in".to_string()), None),
            Loaded::Changing(state) => (
                Some(state.clone()),
                Some(Blocker::Unsupported(format!(
                    "module {m} is {state} (initstate) now: try again once it is loaded"
                ))),
            ),
            Loaded::Absent => (None, Some(self.not_loaded(host))),
        };
        let mut survey = Survey::default();
        survey.targets.push(Target {
            path: self.dir(),
            cpus: None,
            label: None,
            in_effect: blocker.is_none() && current.is_some(),
            current,
            desired: self.desired_words().into(),
            write: None,
            restore: None,
            mode: WriteMode::Attribute,
            blocker,
        });
        Ok(survey)
    }
}
