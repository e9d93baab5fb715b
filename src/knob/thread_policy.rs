//! `thread-policy`: the scheduling policy, real-time priority and nice of
//! running threads, as tuned's scheduler plugin sets them for its
//! `group.NAME=` rules (tuned/plugins/plugin_scheduler.py, `_tune_process_rt`),
//! the threads chosen by name exactly as `thread-affinity` chooses them
//! (`super::threads`). Each thread's own policy, priority and nice are
//! journaled by its path (`/proc/PID/task/TID/sched@START`) and put back by
//! revert. A thread the kernel refuses to change (EPERM, EINVAL) is named
//! and left out; SCHED_DEADLINE and sched_ext threads are left alone (one
//! `sched_setscheduler(2)` could not put them back).

use serde::Deserialize;

use super::threads::{Chooser, TargetDoc};
use super::{FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode};
use crate::schema::Persistence;
use crate::task::{self, Attr, Policy, Sched, TaskPath};

/// `set:` of a thread-policy knob.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySet {
    policy: String,
    priority: Option<i64>,
    nice: Option<i64>,
}

#[derive(Debug)]
pub struct ThreadPolicy {
    threads: Chooser,
    policy: Policy,
    /// 1-99 for fifo and rr, 0 otherwise.
    priority: u32,
    /// `None`: each thread keeps its own.
    nice: Option<i32>,
}

/// sched(7): `sched_get_priority_min/max` of SCHED_FIFO and SCHED_RR.
const RT_PRIORITIES: std::ops::RangeInclusive<i64> = 1..=99;
/// setpriority(2): nice runs from -20 (most favourable) to 19.
const NICE: std::ops::RangeInclusive<i64> = -20..=19;

impl Spec for ThreadPolicy {
    type Target = TargetDoc;
    type Set = PolicySet;

    fn new(target: Option<TargetDoc>, set: PolicySet) -> Result<Self, FieldError> {
        let words: Vec<&str> = Policy::SETTABLE.iter().map(|(w, _)| *w).collect();
        let word = set.policy.trim();
        let policy = Policy::parse(word).ok_or_else(|| {
            FieldError::new(
                "set.policy",
                format!(
                    "{word:?} is not a policy: give one of {}{}",
                    words.join(", "),
                    crate::spelling::did_you_mean(word, words.iter().copied())
                ),
            )
        })?;
        let priority = match (policy.is_rt(), set.priority) {
            (true, Some(p)) if RT_PRIORITIES.contains(&p) => p as u32,
            (true, Some(p)) => {
                return Err(FieldError::new(
                    "set.priority",
                    format!("{p} is outside 1-99, the real-time priorities of {word} (sched(7))"),
                ));
            }
            (true, None) => {
                return Err(FieldError::new(
                    "set.priority",
                    format!("{word} needs a priority, 1-99 (higher runs first; `chrt -m` lists the range)"),
                ));
            }
            // sched_setscheduler(2): sched_priority must be 0 for the others.
            (false, Some(0) | None) => 0,
            (false, Some(p)) => {
                return Err(FieldError::new(
                    "set.priority",
                    format!(
                        "{word} takes no priority ({p} given): only fifo and rr have one; a normal \
                         thread is weighed by its nice (set.nice)"
                    ),
                ));
            }
        };
        let nice = match (policy, set.nice) {
            (_, None) => None,
            (p, Some(_)) if p.is_rt() || p == Policy::Idle => {
                return Err(FieldError::new(
                    "set.nice",
                    format!(
                        "nice does not weigh a {word} thread (sched(7)); leave it out, or set it with \
                         policy other or batch"
                    ),
                ));
            }
            (_, Some(n)) if NICE.contains(&n) => Some(n as i32),
            (_, Some(n)) => {
                return Err(FieldError::new(
                    "set.nice",
                    format!("{n} is outside -20..19, the nice values (setpriority(2))"),
                ));
            }
        };
        Ok(ThreadPolicy {
            threads: Chooser::new(target)?,
            policy,
            priority,
            nice,
        })
    }
}

impl ThreadPolicy {
    /// What `now` becomes: this knob's policy, priority and nice, the
    /// thread's own nice where the knob gives none.
    fn wanted(&self, now: &Sched) -> Sched {
        Sched {
            policy: self.policy,
            rt_priority: self.priority,
            nice: self.nice.unwrap_or(now.nice),
        }
    }

    /// The real-time throttling that bounds every FIFO/RR thread
    /// (Documentation/scheduler/sched-rt-group.rst), in words.
    fn throttling(&self, host: &HostCtx) -> Option<String> {
        if !self.policy.is_rt() {
            return None;
        }
        let runtime = host.text("/proc/sys/kernel/sched_rt_runtime_us");
        let period = host.text("/proc/sys/kernel/sched_rt_period_us");
        Some(match (runtime.as_deref(), period.as_deref()) {
            (Some("-1"), _) => "RT throttling is off here (kernel.sched_rt_runtime_us -1): a busy \
                                FIFO/RR thread can keep its CPU from every normal thread, kernel \
                                workers included"
                .into(),
            (Some(r), p) => format!(
                "RT throttling: kernel.sched_rt_runtime_us is {r} of kernel.sched_rt_period_us {}: \
                 the FIFO/RR threads of a CPU together run at most {r} µs of every period, then wait \
                 for the next while normal threads run (-1 lifts the limit)",
                p.unwrap_or("(not readable here; 1000000 by default)")
            ),
            (None, _) => "RT throttling: kernel.sched_rt_runtime_us cannot be read here; the kernel's \
                          default is 950000 of every 1000000 µs for FIFO/RR threads"
                .into(),
        })
    }
}

impl KnobKind for ThreadPolicy {
    fn kind(&self) -> KindName {
        KindName::ThreadPolicy
    }

    fn desired(&self) -> String {
        match (self.policy.is_rt(), self.nice) {
            (true, _) => format!("{} {}", self.policy, self.priority),
            (false, Some(n)) => format!("{} nice {n}", self.policy),
            (false, None) => self.policy.to_string(),
        }
    }

    fn target_summary(&self) -> String {
        self.threads.summary("every thread")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::Runtime, Persistence::Boot]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        task::content(host.root, path)
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        Sched::parse(expect).is_some_and(|e| Sched::parse(read) == Some(e))
    }

    /// kernel/sched/syscalls.c, `__sched_setscheduler`: EPERM (no
    /// CAP_SYS_NICE, or a cgroup without real-time runtime) and EINVAL
    /// leave that thread as it is, named; the others still change.
    fn leaves_out(&self, write: &super::Write, errno: i32) -> Option<String> {
        if !matches!(errno, libc::EPERM | libc::EINVAL) {
            return None;
        }
        let t = task::parse_path(&write.path)?;
        let who = write.label.clone().unwrap_or_else(|| format!("thread {}", t.tid));
        let code = if errno == libc::EPERM { "EPERM" } else { "EINVAL" };
        Some(format!(
            "{who} (pid {} tid {}): the kernel refused {} ({code}: {}); left as it is",
            t.pid,
            t.tid,
            write.after,
            task::refused_policy_why(Some(errno))
        ))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let (mut kept, mut changing) = (Vec::new(), 0);
        let targets = &mut survey.targets;
        let walked = self.threads.walk(
            host,
            |_| false,
            |pid, tid, st| {
                let path = TaskPath { pid, tid, start: st.start, attr: Attr::Sched }.text();
                let Some(now) = st.sched else {
                    targets.push(Target::unreadable(path, None, &self.desired(), "its stat has no policy field"));
                    return;
                };
                if !now.policy.settable() {
                    kept.push(format!("{} ({pid}/{tid}, {})", st.comm, now.policy));
                    return;
                }
                let want = self.wanted(&now);
                changing += usize::from(want != now);
                let in_effect = want == now;
                let (now, want) = (now.to_string(), want.to_string());
                targets.push(super::threads::thread_target(path, st, (pid, tid), (&now, &want, in_effect), WriteMode::Sched));
            },
        );
        let Some(out) = walked else {
            survey.targets.push(super::threads::no_threads_here(&self.desired()));
            return Ok(survey);
        };
        let total = survey.targets.len();
        survey.notes.push(format!("{total} threads chosen, {changing} of them not at {} now", self.desired()));
        survey.notes.extend(out.notes());
        if !kept.is_empty() {
            survey.notes.push(format!(
                "left alone, their policy is one a single sched_setscheduler(2) could not put back: {}",
                kept.join(", ")
            ));
        }
        survey.notes.extend(self.throttling(host));
        survey.notes.push(
            "for the threads running now: a thread started later takes its parent's policy (audit names those it finds not at it)"
                .into(),
        );
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(policy: &str, priority: Option<i64>, nice: Option<i64>) -> Result<ThreadPolicy, FieldError> {
        ThreadPolicy::new(
            None,
            PolicySet {
                policy: policy.into(),
                priority,
                nice,
            },
        )
    }

    #[test]
    fn priorities_and_nice_as_sched_setscheduler_takes_them() {
        assert_eq!(set("fifo", Some(1), None).unwrap().desired(), "fifo 1");
        assert_eq!(set("rr", Some(99), None).unwrap().desired(), "rr 99");
        for p in [0, 100] {
            assert!(set("fifo", Some(p), None).is_err(), "{p}");
        }
        assert!(set("rr", None, None).is_err(), "rr needs a priority");
        // The kernel takes sched_priority 0, and only 0, for the others.
        assert_eq!(set("other", Some(0), None).unwrap().desired(), "other");
        assert!(set("batch", Some(1), None).is_err());
        assert_eq!(set("batch", None, Some(-20)).unwrap().desired(), "batch nice -20");
        assert!(set("other", None, Some(20)).is_err());
        for p in ["fifo", "idle"] {
            let prio = (p == "fifo").then_some(5);
            assert!(set(p, prio, Some(0)).is_err(), "{p}: nice weighs other and batch only");
        }
    }
}
