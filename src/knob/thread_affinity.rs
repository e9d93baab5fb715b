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

use serde::Deserialize;

use super::{Blocker, FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode};
use crate::cpulist::CpuList;
use crate::schema::{Persistence, Scalar};
use crate::task::{self, PF_NO_SETAFFINITY, TaskPath};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

#[derive(Debug)]
pub struct ThreadAffinity {
    include: Vec<regex::Regex>,
    exclude: Vec<regex::Regex>,
    cpus: CpuList,
}

fn patterns(field: &str, list: &[String]) -> Result<Vec<regex::Regex>, FieldError> {
    list.iter()
        .map(|p| {
            if p.is_empty() {
                return Err(FieldError::new(field, "an empty pattern matches every thread: leave it out"));
            }
            crate::task::name_pattern(p).map_err(|why| FieldError::new(field, format!("{p:?} is not a regular expression: {why}")))
        })
        .collect()
}

impl Spec for ThreadAffinity {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let t = target.unwrap_or_default();
        let text = set.0.trim();
        let cpus = match CpuList::parse(text) {
            Ok(l) if !l.is_empty() => l,
            Ok(_) => return Err(FieldError::new("set", "empty CPU list: a thread needs a CPU to run on; give the housekeeping CPUs such as 0-3")),
            Err(e) => return Err(FieldError::new("set", format!("{text:?} is not a CPU list ({e}); give the housekeeping CPUs such as 0-3"))),
        };
        Ok(ThreadAffinity {
            include: patterns("target.include", &t.include)?,
            exclude: patterns("target.exclude", &t.exclude)?,
            cpus,
        })
    }
}

/// Why threads were left out, counted for the survey's notes.
#[derive(Default)]
struct LeftOut {
    pinned: usize,
    excluded: usize,
    not_included: usize,
    zombies: usize,
    own: usize,
    /// Kept by their cpuset to CPUs outside `set` (a pinned container).
    confined: usize,
}

impl ThreadAffinity {
    fn chosen(&self, comm: &str) -> Result<(), bool> {
        if !self.include.is_empty() && !self.include.iter().any(|r| r.is_match(comm)) {
            return Err(false);
        }
        if self.exclude.iter().any(|r| r.is_match(comm)) {
            return Err(true);
        }
        Ok(())
    }

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

    fn notes(&self, out: &LeftOut, moved: usize, total: usize) -> Vec<String> {
        let mut n = vec![format!(
            "{total} threads chosen, {moved} of them also allowed outside CPUs {}",
            self.cpus
        )];
        if out.pinned > 0 {
            n.push(format!("{} kernel threads are pinned to their CPU by the kernel (PF_NO_SETAFFINITY) and left alone", out.pinned));
        }
        if out.excluded > 0 {
            n.push(format!("{} threads match target.exclude and are left alone", out.excluded));
        }
        if out.not_included > 0 {
            n.push(format!("{} threads match no target.include pattern and are left alone", out.not_included));
        }
        if out.zombies > 0 {
            n.push(format!("{} zombie threads left alone", out.zombies));
        }
        if out.confined > 0 {
            n.push(format!(
                "{} threads are kept by their cpuset to CPUs outside {} (pinned containers) and left alone",
                out.confined, self.cpus
            ));
        }
        if out.own > 0 {
            n.push("hostknob's own threads are left alone".into());
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
        let show = |v: &[regex::Regex]| v.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(";");
        match (self.include.is_empty(), self.exclude.is_empty()) {
            (true, true) => "every movable thread".into(),
            (true, false) => format!("threads but {}", show(&self.exclude)),
            (false, true) => format!("threads {}", show(&self.include)),
            (false, false) => format!("threads {} but {}", show(&self.include), show(&self.exclude)),
        }
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
        let threads = task::threads(host.root);
        if threads.is_empty() {
            survey.targets.push(Target::absent(
                "/proc".into(),
                None,
                &self.desired(),
                "no threads under /proc here (a capture keeps no /proc/PID)".into(),
            ));
            return Ok(survey);
        }
        let own = host.root.is_live().then(std::process::id);
        let mut out = LeftOut::default();
        let mut moved = 0;
        // tuned chooses processes by their name first, then their threads by theirs.
        let mut process: Option<(u32, Option<Result<(), bool>>)> = None;
        for (pid, tid) in threads {
            if Some(pid) == own {
                out.own += 1;
                continue;
            }
            // A thread may exit at any moment: gone is not an error.
            let Ok(Some(st)) = task::stat(host.root, pid, tid) else { continue };
            if st.state == 'Z' || st.state == 'X' {
                out.zombies += 1;
                continue;
            }
            if st.flags & PF_NO_SETAFFINITY != 0 {
                out.pinned += 1;
                continue;
            }
            if process.is_none_or(|(p, _)| p != pid) {
                let main = match task::stat(host.root, pid, pid) {
                    Ok(Some(m)) => Some(self.chosen(&m.comm)),
                    // The process is exiting: its threads with it.
                    _ => None,
                };
                process = Some((pid, main));
            }
            let Some(Some(by_process)) = process.map(|(_, c)| c) else { continue };
            match by_process.and_then(|_| self.chosen(&st.comm)) {
                Err(true) => {
                    out.excluded += 1;
                    continue;
                }
                Err(false) => {
                    out.not_included += 1;
                    continue;
                }
                Ok(()) => {}
            }
            let path = TaskPath { pid, tid, start: st.start }.text();
            let now = match task::allowed(host.root, pid, tid) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    survey.targets.push(Target::unreadable(path, None, &self.desired(), &e.to_string()));
                    continue;
                }
            };
            let Some(want) = self.wanted(&now, &online, task::cpuset(host.root, pid, tid).as_ref()) else {
                out.confined += 1;
                continue;
            };
            let in_effect = now.as_slice().iter().all(|c| self.cpus.contains(*c));
            moved += usize::from(!in_effect);
            survey.targets.push(Target {
                path,
                cpus: None,
                label: Some(format!("{} ({pid}/{tid})", st.comm)),
                current: Some(now.to_string()),
                desired: want.to_string(),
                in_effect,
                write: Some(want.to_string()),
                restore: Some(now.to_string()),
                mode: WriteMode::Affinity,
                blocker: None,
            });
        }
        let total = survey.targets.len();
        survey.notes = self.notes(&out, moved, total);
        Ok(survey)
    }
}
