//! `thread-affinity`: moves running threads off CPUs, as tuned's scheduler
//! plugin does for `isolated_cores` (tuned/plugins/plugin_scheduler.py,
//! `_set_all_obj_affinity`): every thread whose name (`comm`) matches
//! `target.include` (default: all) and not `target.exclude` (tuned's
//! `ps_whitelist`/`ps_blacklist`, regular expressions searched in the
//! name) gets its allowed CPUs intersected with `set`, or `set` when they
//! do not meet. Threads the kernel pins (`PF_NO_SETAFFINITY`: per-CPU
//! kernel threads) and zombies are left out and counted; so is hostknob's
//! own process. Runtime only: a thread started later inherits its
//! parent's affinity, so pair it with `systemd-cpu-affinity`.

use super::threads::{Chooser, LeftOut, TargetDoc};
use super::{Blocker, FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode};
use crate::cpulist::CpuList;
use crate::schema::{Persistence, Scalar};
use crate::task::{self, Attr, PF_NO_SETAFFINITY, TaskPath};

#[derive(Debug)]
pub struct ThreadAffinity {
    threads: Chooser,
    cpus: CpuList,
}

impl Spec for ThreadAffinity {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let text = set.0.trim();
        let cpus = match CpuList::parse(text) {
            Ok(l) if !l.is_empty() => l,
            Ok(_) => return Err(FieldError::new("set", "empty CPU list: a thread needs a CPU to run on; give the housekeeping CPUs such as 0-3")),
            Err(e) => return Err(FieldError::new("set", format!("{text:?} is not a CPU list ({e}); give the housekeeping CPUs such as 0-3"))),
        };
        Ok(ThreadAffinity {
            threads: Chooser::new(target)?,
            cpus,
        })
    }
}

impl ThreadAffinity {
    /// tuned's `_get_intersect_affinity`: what the thread may keep of `set`,
    /// else all of `set` its cpuset allows (the kernel refuses CPUs outside
    /// it with EINVAL); `None` when its cpuset allows none of `set`.
    fn wanted(&self, now: &CpuList, online: &CpuList, cpuset: Option<&CpuList>) -> Option<CpuList> {
        let keep: Vec<u32> = now.as_slice().iter().copied().filter(|c| self.cpus.contains(*c)).collect();
        let list = if keep.is_empty() {
            self.cpus
                .as_slice()
                .iter()
                .copied()
                .filter(|c| online.contains(*c) && cpuset.is_none_or(|s| s.contains(*c)))
                .collect()
        } else {
            keep
        };
        (!list.is_empty()).then(|| CpuList::new(list))
    }

    fn notes(&self, out: &LeftOut, confined: usize, moved: usize, total: usize) -> Vec<String> {
        let mut n = vec![format!(
            "{total} threads chosen, {moved} of them also allowed outside CPUs {}",
            self.cpus
        )];
        if out.skipped > 0 {
            n.push(format!("{} kernel threads are pinned to their CPU by the kernel (PF_NO_SETAFFINITY) and left alone", out.skipped));
        }
        n.extend(out.notes());
        if confined > 0 {
            n.push(format!(
                "{confined} threads are kept by their cpuset to CPUs outside {} (pinned containers) and left alone",
                self.cpus
            ));
        }
        n.push("runtime only: threads started later inherit their parent's affinity; systemd-cpu-affinity sets it for what systemd starts".into());
        n
    }
}

impl KnobKind for ThreadAffinity {
    fn kind(&self) -> KindName {
        KindName::ThreadAffinity
    }

    fn desired(&self) -> String {
        format!("within {}", self.cpus)
    }

    fn target_summary(&self) -> String {
        self.threads.summary("every movable thread")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::Runtime]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        CpuList::parse(raw.trim()).map_or_else(|_| raw.trim().to_string(), |l| l.to_string())
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        task::content(host.root, path)
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        task::same_cpus(expect, read)
    }

    /// A thread the kernel will not move (EBUSY: SCHED_DEADLINE must span
    /// its root domain, kernel/sched/syscalls.c `dl_task_check_affinity`;
    /// EINVAL: its cpuset or the kernel pins it, `__set_cpus_allowed_ptr`)
    /// is named and left out; the other threads still move.
    fn leaves_out(&self, write: &super::Write, errno: i32) -> Option<String> {
        let why = match errno {
            libc::EBUSY => "EBUSY: a SCHED_DEADLINE thread keeps every CPU of its root domain",
            libc::EINVAL => "EINVAL: its cpuset or the kernel does not allow those CPUs",
            _ => return None,
        };
        let t = task::parse_path(&write.path)?;
        let who = write.label.clone().unwrap_or_else(|| format!("thread {}", t.tid));
        Some(format!(
            "{who} (pid {} tid {}): the kernel refused CPUs {} ({why}); left where it runs",
            t.pid, t.tid, write.after
        ))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let online = host.online().clone();
        if !self.cpus.as_slice().iter().any(|c| online.contains(*c)) {
            let mut t = Target::absent("/proc".into(), None, &self.desired(), String::new());
            t.blocker = Some(Blocker::Unsupported(format!("none of CPUs {} is online on this host (online: {online})", self.cpus)));
            survey.targets.push(t);
            return Ok(survey);
        }
        let mut confined = 0;
        let mut moved = 0;
        let targets = &mut survey.targets;
        let walked = self.threads.walk(host, |st| st.flags & PF_NO_SETAFFINITY != 0, |pid, tid, st| {
            let path = TaskPath { pid, tid, start: st.start, attr: Attr::Affinity }.text();
            let now = match task::allowed(host.root, pid, tid) {
                Ok(Some(l)) => l,
                Ok(None) => return,
                Err(e) => {
                    targets.push(Target::unreadable(path, None, &self.desired(), &e.to_string()));
                    return;
                }
            };
            let Some(want) = self.wanted(&now, &online, task::cpuset(host.root, pid, tid).as_ref()) else {
                confined += 1;
                return;
            };
            let in_effect = now.as_slice().iter().all(|c| self.cpus.contains(*c));
            moved += usize::from(!in_effect);
            let (now, want) = (now.to_string(), want.to_string());
            targets.push(super::threads::thread_target(path, st, (pid, tid), (&now, &want, in_effect), WriteMode::Affinity));
        });
        let Some(out) = walked else {
            survey.targets.push(super::threads::no_threads_here(&self.desired()));
            return Ok(survey);
        };
        let total = survey.targets.len();
        survey.notes = self.notes(&out, confined, moved, total);
        Ok(survey)
    }
}
