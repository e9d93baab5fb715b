//! One thread's CPU affinity or scheduling policy, through the root seam:
//! what `thread-affinity` and `thread-policy` read and write. A thread is
//! named by its logical path `/proc/PID/task/TID/affinity@START` (or
//! `.../sched@START`), START being its start time (clock ticks since boot,
//! field 22 of its `stat`, proc(5)): a thread that exited, or a new one that
//! got its number, reads as absent and is never written. The affinity is
//! `Cpus_allowed_list` of its `status`; the policy, RT priority and nice are
//! fields 41, 40 and 19 of its `stat`. On the live host a write is
//! `sched_setaffinity(2)`, or `sched_setscheduler(2)` and `setpriority(2)`;
//! in a captured tree the file's line stands for it, as plain files stand
//! for attributes there.

use std::io;

use crate::cpulist::CpuList;
use crate::root::{Root, is_absent};

/// A thread name pattern, or why the `regex` crate refuses it, in one line
/// (the crate's message draws a caret under the pattern; its last line says why).
pub fn name_pattern(p: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(p).map_err(|e| {
        let text = e.to_string();
        let why = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or(&text);
        why.trim_start_matches("error: ").to_string()
    })
}

/// `include/linux/sched.h`: the thread's affinity is fixed by the kernel
/// (per-CPU kernel threads); `sched_setaffinity` answers EINVAL.
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// What of a thread a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attr {
    /// Its allowed CPUs.
    Affinity,
    /// Its scheduling policy, RT priority and nice ([`Sched`]).
    Sched,
}

impl Attr {
    fn word(self) -> &'static str {
        match self {
            Attr::Affinity => "affinity",
            Attr::Sched => "sched",
        }
    }

    /// The file of a captured tree that stands for it.
    fn file(self) -> &'static str {
        match self {
            Attr::Affinity => "status",
            Attr::Sched => "stat",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskPath {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub attr: Attr,
}

impl TaskPath {
    pub fn text(&self) -> String {
        format!(
            "/proc/{}/task/{}/{}@{}",
            self.pid,
            self.tid,
            self.attr.word(),
            self.start
        )
    }

    fn dir(&self) -> String {
        format!("/proc/{}/task/{}", self.pid, self.tid)
    }
}

pub fn parse_path(path: &str) -> Option<TaskPath> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, rest) = rest.split_once("/task/")?;
    let (tid, rest) = rest.split_once('/')?;
    let (word, start) = rest.split_once('@')?;
    let attr = [Attr::Affinity, Attr::Sched]
        .into_iter()
        .find(|a| a.word() == word)?;
    Some(TaskPath {
        pid: pid.parse().ok()?,
        tid: tid.parse().ok()?,
        start: start.parse().ok()?,
        attr,
    })
}

/// The fields of a thread's `stat` the kind needs (proc(5)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    pub state: char,
    pub flags: u64,
    pub start: u64,
    /// Fields 19, 40 and 41; `None` in a stat line cut short.
    pub sched: Option<Sched>,
}

/// `comm` is in parentheses and may hold any byte, `)` too: the fields
/// start after the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    Some(Stat {
        comm,
        state: rest.first()?.chars().next()?,
        flags: rest.get(6)?.parse().ok()?,
        start: rest.get(19)?.parse().ok()?,
        sched: (|| {
            Some(Sched {
                policy: Policy::from_number(rest.get(38)?.parse().ok()?),
                rt_priority: rest.get(37)?.parse().ok()?,
                nice: rest.get(16)?.parse().ok()?,
            })
        })(),
    })
}

/// A thread's stat; `None` when it is gone.
pub fn stat(root: &Root, pid: u32, tid: u32) -> io::Result<Option<Stat>> {
    // The kernel cuts a name at 15 bytes, maybe inside a UTF-8 character.
    match root.read(&format!("/proc/{pid}/task/{tid}/stat")) {
        Ok(b) => parse_stat(&String::from_utf8_lossy(&b))
            .map(Some)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a stat line")),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A thread's `Cpus_allowed_list`; `None` when it is gone.
pub fn allowed(root: &Root, pid: u32, tid: u32) -> io::Result<Option<CpuList>> {
    let path = format!("/proc/{pid}/task/{tid}/status");
    let text = match root.read_string(&path) {
        Ok(t) => t,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path} has no Cpus_allowed_list"),
            )
        })?;
    CpuList::parse(line.trim())
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {e}")))
}

/// The thread's affinity as a CPU list (or its [`Sched`] in words), if it
/// is still the thread the path names.
pub fn content(root: &Root, path: &str) -> io::Result<Option<String>> {
    let Some(t) = parse_path(path) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path} names no thread"),
        ));
    };
    let st = match stat(root, t.pid, t.tid)? {
        Some(s) if s.start == t.start => s,
        _ => return Ok(None),
    };
    match t.attr {
        Attr::Affinity => Ok(allowed(root, t.pid, t.tid)?.map(|l| l.to_string())),
        Attr::Sched => st.sched.map(|s| Some(s.to_string())).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}/stat has no policy field", t.dir()),
            )
        }),
    }
}

/// The CPUs the thread's cpuset lets it use (`cpuset.cpus.effective` of its
/// cgroup v2, the nearest ancestor that has the file, or the v1 cpuset
/// hierarchy's `cpuset.effective_cpus`); `None` when the tree says nothing.
pub fn cpuset(root: &Root, pid: u32, tid: u32) -> Option<CpuList> {
    let rel = root
        .read_string(&format!("/proc/{pid}/task/{tid}/cpuset"))
        .ok()?;
    let rel = rel.trim().trim_end_matches('/');
    if rel.split('/').any(|p| p == "..") {
        return None;
    }
    let read = |path: String| {
        root.read_string(&path)
            .ok()
            .and_then(|t| CpuList::parse(t.trim()).ok())
    };
    let mut dir = rel.to_string();
    loop {
        if let Some(l) = read(format!("/sys/fs/cgroup{dir}/cpuset.cpus.effective")) {
            return Some(l);
        }
        match dir.rfind('/') {
            Some(i) => dir.truncate(i),
            None => break,
        }
    }
    read(format!("/sys/fs/cgroup/cpuset{rel}/cpuset.effective_cpus"))
}

/// Whether two values of the thread attribute `path` names are the same
/// (CPU lists by their CPUs, policies by their words).
pub fn same_value(path: &str, a: &str, b: &str) -> bool {
    match parse_path(path).map(|t| t.attr) {
        Some(Attr::Sched) => Sched::parse(a).is_some_and(|x| Sched::parse(b) == Some(x)),
        _ => same_cpus(a, b),
    }
}

/// Why the kernel refuses a policy change (kernel/sched/syscalls.c,
/// `__sched_setscheduler`), for an errno it answers.
pub fn refused_policy_why(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::EPERM) => {
            "no CAP_SYS_NICE, or the thread's cgroup has no real-time runtime \
             (CONFIG_RT_GROUP_SCHED with cpu.rt_runtime_us 0), or the kernel keeps this \
             thread's policy"
        }
        _ => {
            "the kernel does not take that policy or priority for this thread (a CPU's stop \
             thread, migration/N, is never changed)"
        }
    }
}

/// Whether two CPU lists name the same CPUs (`0-2` and `0,1,2`).
pub fn same_cpus(a: &str, b: &str) -> bool {
    matches!((CpuList::parse(a), CpuList::parse(b)), (Ok(x), Ok(y)) if x == y)
}

/// What a write found.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    Done,
    /// The thread exited (or its number now names another one): nothing to do.
    Gone,
}

/// Sets the thread's affinity to `value` (a CPU list), or its policy (a [`Sched`]).
pub fn write(root: &Root, path: &str, value: &str) -> io::Result<Written> {
    let t = parse_path(path).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path} names no thread"),
        )
    })?;
    if t.attr == Attr::Sched {
        return write_sched(root, &t, path, value);
    }
    let list = value;
    let cpus = CpuList::parse(list)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{list:?}: {e}")))?;
    if content(root, path)?.is_none() {
        return Ok(Written::Gone);
    }
    if root.is_live() {
        return set_affinity(t.tid, &cpus);
    }
    let status = format!("{}/status", t.dir());
    let text = root.read_string(&status)?;
    let new: String = text
        .lines()
        .map(|l| {
            if l.starts_with("Cpus_allowed_list:") {
                format!("Cpus_allowed_list:\t{cpus}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    // In place, as a tree's plain file standing for an attribute is written.
    root.write_existing(&status, new.as_bytes())?;
    Ok(Written::Done)
}

/// Whether this process may set the thread's affinity or policy, asked
/// without changing it: on the live host, root (CAP_SYS_NICE) or the
/// thread's own user; in a tree, the file standing for it is writable.
pub fn probe(root: &Root, path: &str) -> io::Result<()> {
    let t = parse_path(path).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path} names no thread"),
        )
    })?;
    if !root.is_live() {
        return root.probe_write(&format!("{}/{}", t.dir(), t.attr.file()));
    }
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    // sched_setaffinity(2): EPERM unless the caller's effective uid owns the thread.
    let owner = std::fs::metadata(format!("/proc/{}/task/{}", t.pid, t.tid))
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    match owner {
        Ok(uid) if uid == unsafe { libc::geteuid() } => Ok(()),
        Ok(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `sched_setaffinity(2)` with a mask sized for the largest CPU number
/// (the glibc `cpu_set_t` stops at 1,024 CPUs).
fn set_affinity(tid: u32, cpus: &CpuList) -> io::Result<Written> {
    let top = cpus.as_slice().iter().max().copied().unwrap_or(0) as usize;
    let mut mask = vec![0u64; top / 64 + 1];
    for &c in cpus.as_slice() {
        mask[c as usize / 64] |= 1 << (c % 64);
    }
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            tid as libc::pid_t,
            mask.len() * 8,
            mask.as_ptr(),
        )
    };
    if r == 0 {
        return Ok(Written::Done);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        return Ok(Written::Gone);
    }
    Err(e)
}

mod sched;
use sched::write_sched;
pub use sched::{Policy, Sched};

fn gone(e: &io::Error) -> bool {
    is_absent(e) || e.raw_os_error() == Some(libc::ESRCH)
}

/// The threads under `/proc`: (pid, tid) pairs, in number order.
pub fn threads(root: &Root) -> Vec<(u32, u32)> {
    let numbers =
        |dir: &str| crate::inventory::numbered(&root.read_dir(dir).unwrap_or_default(), "");
    numbers("/proc")
        .into_iter()
        .flat_map(|pid| {
            numbers(&format!("/proc/{pid}/task"))
                .into_iter()
                .map(move |tid| (pid, tid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_follow_the_last_parenthesis() {
        let s = parse_stat(
            "42 (a) b) c) S 1 42 42 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 1 0 9876 1000 10",
        )
        .unwrap();
        assert_eq!(s.comm, "a) b) c");
        assert_eq!(s.state, 'S');
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.start, 9876);
        assert_eq!(s.sched, None, "cut short before field 41");
    }

    #[test]
    fn paths_round_trip_and_refuse_others() {
        for attr in [Attr::Affinity, Attr::Sched] {
            let t = TaskPath {
                pid: 10,
                tid: 12,
                start: 345,
                attr,
            };
            assert_eq!(parse_path(&t.text()), Some(t));
        }
        assert_eq!(parse_path("/proc/10/task/12/policy@1"), None);
        assert_eq!(parse_path("/proc/10/task/12/status"), None);
        assert_eq!(parse_path("/proc/x/task/12/affinity@1"), None);
    }

    #[test]
    fn this_threads_affinity_reads_on_the_live_host() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let pid = std::process::id();
        let tid = unsafe { libc::gettid() } as u32;
        let s = stat(&root, pid, tid).unwrap().unwrap();
        let path = TaskPath {
            pid,
            tid,
            start: s.start,
            attr: Attr::Affinity,
        }
        .text();
        let now = content(&root, &path).unwrap().unwrap();
        assert!(CpuList::parse(&now).is_ok_and(|l| !l.is_empty()), "{now}");
        // Another start time: another thread, which is gone.
        let other = TaskPath {
            pid,
            tid,
            start: s.start + 1,
            attr: Attr::Affinity,
        }
        .text();
        assert_eq!(content(&root, &other).unwrap(), None);
        assert_eq!(write(&root, &other, "0").unwrap(), Written::Gone);
    }

    #[test]
    fn this_threads_policy_reads_on_the_live_host_as_the_kernel_says() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let pid = std::process::id();
        let tid = unsafe { libc::gettid() } as u32;
        let s = stat(&root, pid, tid).unwrap().unwrap();
        let path = TaskPath {
            pid,
            tid,
            start: s.start,
            attr: Attr::Sched,
        }
        .text();
        let now = Sched::parse(&content(&root, &path).unwrap().unwrap()).unwrap();
        // Fields 41 and 19 against sched_getscheduler(2) and getpriority(2).
        let policy = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
        assert_eq!(now.policy.number() as libc::c_int, policy);
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_eq!(now.nice, nice);
    }

    #[test]
    fn refusals_read_as_one_sentence() {
        for e in [Some(libc::EPERM), Some(libc::EINVAL)] {
            let why = refused_policy_why(e);
            assert!(!why.contains("  "), "{why:?}");
        }
    }
}
