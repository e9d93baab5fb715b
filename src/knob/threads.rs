//! Threads chosen by name, the one rule `thread-affinity` and
//! `thread-policy` share, as tuned's scheduler plugin chooses them
//! (tuned/plugins/plugin_scheduler.py, `_set_all_obj_affinity`): a process
//! by its name (`comm`), then each of its threads by its own; `include`
//! (default: all) and `exclude` are regular expressions searched in the
//! name (tuned's `ps_whitelist`/`ps_blacklist`); `exclude-cgroup` ones in
//! the cgroup file of the process and then of the thread, its lines last to
//! first joined by `,` as tuned's `cgroup_ps_blacklist` reads it
//! (python-linux-procfs `load_cgroups`: `0::/kubepods.slice/...`). Zombies
//! and hostknob's own process are left out and counted, as is what the kind
//! skips.

use serde::Deserialize;

use super::{FieldError, HostCtx};
use crate::task::{self, Stat};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default, rename = "exclude-cgroup")]
    pub exclude_cgroup: Vec<String>,
}

#[derive(Debug)]
pub struct Chooser {
    include: Vec<regex::Regex>,
    exclude: Vec<regex::Regex>,
    exclude_cgroup: Vec<regex::Regex>,
}

fn patterns(field: &str, list: &[String]) -> Result<Vec<regex::Regex>, FieldError> {
    list.iter()
        .map(|p| {
            if p.is_empty() {
                return Err(FieldError::new(
                    field,
                    "an empty pattern matches every thread: leave it out",
                ));
            }
            task::name_pattern(p).map_err(|why| {
                FieldError::new(field, format!("{p:?} is not a regular expression: {why}"))
            })
        })
        .collect()
}

/// Why threads were left out, counted for the survey's notes.
#[derive(Default)]
pub struct LeftOut {
    /// Left out by the kind's own rule (`walk`'s `skip`).
    pub skipped: usize,
    pub excluded: usize,
    pub in_cgroup: usize,
    pub not_included: usize,
    pub zombies: usize,
    pub own: usize,
}

impl LeftOut {
    /// The notes every choosing kind gives (the kind says its `skipped`).
    pub fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.excluded > 0 {
            n.push(format!(
                "{} threads match target.exclude and are left alone",
                self.excluded
            ));
        }
        if self.in_cgroup > 0 {
            n.push(format!(
                "{} threads are in cgroups matching target.exclude-cgroup and are left alone",
                self.in_cgroup
            ));
        }
        if self.not_included > 0 {
            n.push(format!(
                "{} threads match no target.include pattern and are left alone",
                self.not_included
            ));
        }
        if self.zombies > 0 {
            n.push(format!("{} zombie threads left alone", self.zombies));
        }
        if self.own > 0 {
            n.push("hostknob's own threads are left alone".into());
        }
        n
    }
}

impl Chooser {
    pub fn new(target: Option<TargetDoc>) -> Result<Chooser, FieldError> {
        let t = target.unwrap_or_default();
        Ok(Chooser {
            include: patterns("target.include", &t.include)?,
            exclude: patterns("target.exclude", &t.exclude)?,
            exclude_cgroup: patterns("target.exclude-cgroup", &t.exclude_cgroup)?,
        })
    }

    /// Whether thread `tid` of `pid` is in a cgroup `exclude-cgroup` leaves
    /// alone; a file that cannot be read is the empty text, as for tuned.
    fn in_excluded_cgroup(&self, host: &HostCtx, pid: u32, tid: u32) -> bool {
        if self.exclude_cgroup.is_empty() {
            return false;
        }
        let text = host
            .root
            .read_string(&format!("/proc/{pid}/task/{tid}/cgroup"))
            .unwrap_or_default();
        let joined = text.lines().rev().collect::<Vec<_>>().join(",");
        self.exclude_cgroup.iter().any(|r| r.is_match(&joined))
    }

    fn chosen(&self, comm: &str) -> Result<(), bool> {
        if !self.include.is_empty() && !self.include.iter().any(|r| r.is_match(comm)) {
            return Err(false);
        }
        if self.exclude.iter().any(|r| r.is_match(comm)) {
            return Err(true);
        }
        Ok(())
    }

    /// What the knob acts on, in words.
    pub fn summary(&self, every: &str) -> String {
        let show = |v: &[regex::Regex]| v.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(";");
        let cgroups = match self.exclude_cgroup.is_empty() {
            true => String::new(),
            false => format!(" outside cgroups {}", show(&self.exclude_cgroup)),
        };
        let who = match (self.include.is_empty(), self.exclude.is_empty()) {
            (true, true) => every.into(),
            (true, false) => format!("threads but {}", show(&self.exclude)),
            (false, true) => format!("threads {}", show(&self.include)),
            (false, false) => format!(
                "threads {} but {}",
                show(&self.include),
                show(&self.exclude)
            ),
        };
        format!("{who}{cgroups}")
    }

    /// Calls `each(pid, tid, stat)` for every chosen thread under `/proc`,
    /// in number order, but those `skip` leaves out; `None` when the tree
    /// has no threads (a capture keeps no `/proc/PID`).
    pub fn walk(
        &self,
        host: &HostCtx,
        skip: impl Fn(&Stat) -> bool,
        mut each: impl FnMut(u32, u32, &Stat),
    ) -> Option<LeftOut> {
        let threads = task::threads(host.root);
        if threads.is_empty() {
            return None;
        }
        let own = host.root.is_live().then(std::process::id);
        let mut out = LeftOut::default();
        // tuned chooses processes by their name first, then their threads by theirs.
        // Err(None): in an excluded cgroup; Err(Some(excluded)): by name.
        let mut process: Option<(u32, Option<Result<(), Option<bool>>>)> = None;
        for (pid, tid) in threads {
            if Some(pid) == own {
                out.own += 1;
                continue;
            }
            // A thread may exit at any moment: gone is not an error.
            let Ok(Some(st)) = task::stat(host.root, pid, tid) else {
                continue;
            };
            if st.state == 'Z' || st.state == 'X' {
                out.zombies += 1;
                continue;
            }
            if skip(&st) {
                out.skipped += 1;
                continue;
            }
            if process.is_none_or(|(p, _)| p != pid) {
                let main = match task::stat(host.root, pid, pid) {
                    Ok(Some(_)) if self.in_excluded_cgroup(host, pid, pid) => Some(Err(None)),
                    Ok(Some(m)) => Some(self.chosen(&m.comm).map_err(Some)),
                    // The process is exiting: its threads with it.
                    _ => None,
                };
                process = Some((pid, main));
            }
            let Some(Some(by_process)) = process.map(|(_, c)| c) else {
                continue;
            };
            let by_thread = || {
                if tid != pid && self.in_excluded_cgroup(host, pid, tid) {
                    return Err(None);
                }
                self.chosen(&st.comm).map_err(Some)
            };
            match by_process.and_then(|_| by_thread()) {
                Err(None) => out.in_cgroup += 1,
                Err(Some(true)) => out.excluded += 1,
                Err(Some(false)) => out.not_included += 1,
                Ok(()) => each(pid, tid, &st),
            }
        }
        Some(out)
    }
}

/// One thread's target: its path under /proc, labelled by name and ids.
pub(crate) fn thread_target(
    path: String,
    st: &Stat,
    (pid, tid): (u32, u32),
    (now, want, in_effect): (&str, &str, bool),
    mode: super::WriteMode,
) -> super::Target {
    super::Target {
        path,
        cpus: None,
        label: Some(format!("{} ({pid}/{tid})", st.comm)),
        current: Some(now.to_string()),
        desired: want.to_string(),
        in_effect,
        write: Some(want.to_string()),
        restore: Some(now.to_string()),
        mode,
        blocker: None,
    }
}

/// What a thread kind says where the tree keeps no /proc/PID.
pub(crate) fn no_threads_here(desired: &str) -> super::Target {
    super::Target::absent(
        "/proc".into(),
        None,
        desired,
        "no threads under /proc here (a capture keeps no /proc/PID)".into(),
    )
}
