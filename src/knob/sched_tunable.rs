//! `sched-tunable`: one of the scheduler's tunables (kernel/sched/debug.c),
//! where the host's kernel has it ([`crate::sched_tunables`]: the names and
//! places by release). On the live host debugfs is mounted for the run
//! where it is not, and unmounted when hostknob exits, so the host is left
//! as found.

use super::{Blocker, FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode};
use crate::sched_tunables::{DEBUGFS, SCHED_DIR, TUNABLES, Tunable, Where, check_value, locate, mount_for, tunable};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    name: String,
}

#[derive(Debug)]
pub struct SchedTunable {
    tunable: &'static Tunable,
    value: u64,
}

impl Spec for SchedTunable {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let names = || TUNABLES.iter().map(|t| t.name);
        let Some(t) = target else {
            return Err(FieldError::new("target", format!("give target.name, one of {}", names().collect::<Vec<_>>().join(", "))));
        };
        let tunable = tunable(t.name.trim()).ok_or_else(|| {
            FieldError::new(
                "target.name",
                format!(
                    "{:?} is not a scheduler tunable of kernel/sched/debug.c: give one of {}{}",
                    t.name,
                    names().collect::<Vec<_>>().join(", "),
                    crate::spelling::did_you_mean(&t.name, names())
                ),
            )
        })?;
        let value = check_value(tunable.name, &set.0).map_err(|e| FieldError::new("set", format!("{:?}: {e}", set.0.trim())))?;
        Ok(SchedTunable { tunable, value })
    }
}

impl SchedTunable {
    fn locate_here(&self, host: &HostCtx) -> Where {
        match locate(self.tunable.name, &host.kernel_release()) {
            // No release in the tree: where the files are says.
            Where::Unknown => {
                let proc = self.tunable.proc.map(|p| format!("/proc/sys/kernel/{p}"));
                match proc.filter(|p| host.root.exists(p)) {
                    Some(p) => Where::At(p),
                    None => Where::At(format!("{SCHED_DIR}/{}", self.tunable.name)),
                }
            }
            w => w,
        }
    }
}

impl KnobKind for SchedTunable {
    fn kind(&self) -> KindName {
        KindName::SchedTunable
    }

    fn desired(&self) -> String {
        self.value.to_string()
    }

    fn target_summary(&self) -> String {
        format!("scheduler {}", self.tunable.name)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        // debugfs is no place for tmpfiles.d or sysctl.d: apply at boot mounts it.
        &[Persistence::Runtime, Persistence::Boot]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        mount_for(host.root, path);
        Ok(host.root.read_trimmed(path)?.map(|raw| self.normalize(&raw)))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let desired = self.desired();
        let release = host.text("/proc/sys/kernel/osrelease").unwrap_or_else(|| "release unknown".into());
        let path = match self.locate_here(host) {
            Where::At(p) => p,
            Where::Gone(why) => {
                survey.targets.push(Target::absent(
                    format!("{SCHED_DIR}/{}", self.tunable.name),
                    None,
                    &desired,
                    format!("not on this kernel ({release}): {why}"),
                ));
                return Ok(survey);
            }
            Where::Unknown => unreachable!("resolved by locate_here"),
        };
        let proc = path.starts_with("/proc/");
        let (lo, hi) = if proc { self.tunable.proc_range } else { self.tunable.debugfs_range };
        mount_for(host.root, &path);
        let current = match host.root.read_trimmed(&path) {
            Ok(Some(v)) => v,
            Ok(None) => {
                let why = if proc {
                    format!("{path} is absent: a kernel built without CONFIG_SCHED_DEBUG (or CONFIG_NUMA_BALANCING) has no such sysctl")
                } else if !host.root.exists(SCHED_DIR) {
                    format!("{SCHED_DIR} is absent: debugfs is not mounted here (the kernel lacks CONFIG_DEBUG_FS, or a capture holds no debugfs)")
                } else {
                    format!("{path} is absent: a kernel built without CONFIG_NUMA_BALANCING, or CONFIG_SMP, has none")
                };
                survey.targets.push(Target::absent(path, None, &desired, why));
                return Ok(survey);
            }
            Err(e) => {
                let mut t = Target::unreadable(path.clone(), None, &desired, &e.to_string());
                if e.raw_os_error() == Some(libc::EPERM) {
                    t.blocker = Some(Blocker::Unreadable(format!(
                        "cannot read {path}: {e}; kernel lockdown (Secure Boot) closes debugfs: see /sys/kernel/security/lockdown"
                    )));
                }
                survey.targets.push(t);
                return Ok(survey);
            }
        };
        let blocker = (self.value < lo || self.value > hi).then(|| {
            Blocker::Unsupported(format!("{} is outside {lo}..{hi}, what this kernel's {path} takes", self.value))
        });
        survey.targets.push(Target {
            path: path.clone(),
            cpus: None,
            label: None,
            in_effect: current == desired,
            current: Some(current.clone()),
            desired: desired.clone(),
            write: Some(desired),
            restore: Some(current),
            mode: WriteMode::Attribute,
            blocker,
        });
        if !proc && self.tunable.rescaled {
            survey.notes.push(format!(
                "the kernel sets {} again to its boot value times the tunable_scaling factor whenever a CPU \
                 goes on- or offline or a root domain is rebuilt (cpuset partitions): kernel/sched/fair.c \
                 `update_sysctl` from `rq_online_fair`/`rq_offline_fair` undoes a debugfs write, and audit \
                 then finds drift; apply again after such a change",
                self.tunable.name
            ));
        }
        if !proc && host.root.is_live() {
            survey.notes.push(format!("{path} is in debugfs: hostknob mounts it at {DEBUGFS} for the run where it is not mounted, and unmounts it again"));
        }
        Ok(survey)
    }
}

