//! A thread's scheduling policy, RT priority and nice (`thread-policy`):
//! read from its `stat` (proc(5) fields 41 `policy`, 40 `rt_priority`, 19
//! `nice`), written with `sched_setscheduler(2)` and `setpriority(2)` on the
//! live host and as those fields (and field 18, `priority`, which the
//! kernel derives from them) in a captured tree.

use std::fmt;
use std::io;

use super::{TaskPath, Written, content, gone};
use crate::root::Root;

/// The policies of include/uapi/linux/sched.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    Other,
    Fifo,
    Rr,
    Batch,
    Idle,
    Deadline,
    /// sched_ext (`SCHED_EXT`, 7, Linux 6.12).
    Ext,
    Unknown(u32),
}

impl Policy {
    pub fn from_number(n: u32) -> Policy {
        match n {
            0 => Policy::Other,
            1 => Policy::Fifo,
            2 => Policy::Rr,
            3 => Policy::Batch,
            5 => Policy::Idle,
            6 => Policy::Deadline,
            7 => Policy::Ext,
            n => Policy::Unknown(n),
        }
    }

    pub fn number(self) -> u32 {
        match self {
            Policy::Other => 0,
            Policy::Fifo => 1,
            Policy::Rr => 2,
            Policy::Batch => 3,
            Policy::Idle => 5,
            Policy::Deadline => 6,
            Policy::Ext => 7,
            Policy::Unknown(n) => n,
        }
    }

    /// The policies a manifest may set, by their word.
    pub const SETTABLE: [(&'static str, Policy); 5] = [
        ("fifo", Policy::Fifo),
        ("rr", Policy::Rr),
        ("other", Policy::Other),
        ("batch", Policy::Batch),
        ("idle", Policy::Idle),
    ];

    pub fn parse(word: &str) -> Option<Policy> {
        Policy::SETTABLE
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, p)| *p)
    }

    /// Real-time: a priority 1-99, nice does not apply.
    pub fn is_rt(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    /// One `sched_setscheduler(2)` can set it (SCHED_DEADLINE needs
    /// `sched_setattr` and runtime parameters hostknob does not record).
    pub fn settable(self) -> bool {
        Policy::SETTABLE.iter().any(|(_, p)| *p == self)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Deadline => f.write_str("deadline"),
            Policy::Ext => f.write_str("ext"),
            Policy::Unknown(n) => write!(f, "policy-{n}"),
            p => f.write_str(
                Policy::SETTABLE
                    .iter()
                    .find(|(_, q)| q == p)
                    .map_or("?", |(w, _)| w),
            ),
        }
    }
}

/// A thread's scheduling: `fifo 10 nice 0`, `other nice -5`. Nice is kept
/// for RT threads too: the kernel keeps it, and it counts again once the
/// thread is back on a normal policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sched {
    pub policy: Policy,
    pub rt_priority: u32,
    pub nice: i32,
}

impl fmt::Display for Sched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.policy.is_rt() {
            write!(f, "{} {} nice {}", self.policy, self.rt_priority, self.nice)
        } else {
            write!(f, "{} nice {}", self.policy, self.nice)
        }
    }
}

impl Sched {
    /// The words [`Display`] writes.
    pub fn parse(text: &str) -> Option<Sched> {
        let w: Vec<&str> = text.split_whitespace().collect();
        let policy = Policy::parse(w.first()?)?;
        let (rt_priority, rest) = if policy.is_rt() {
            (w.get(1)?.parse().ok()?, &w[2..])
        } else {
            (0, &w[1..])
        };
        match rest {
            ["nice", n] => Some(Sched {
                policy,
                rt_priority,
                nice: n.parse().ok()?,
            }),
            _ => None,
        }
    }
}

pub(super) fn write_sched(
    root: &Root,
    t: &TaskPath,
    path: &str,
    value: &str,
) -> io::Result<Written> {
    let want = Sched::parse(value).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{value:?} is not a policy such as `fifo 10 nice 0` or `other nice 0`"),
        )
    })?;
    let Some(now) = content(root, path)? else {
        return Ok(Written::Gone);
    };
    if root.is_live() {
        return set_live(t.tid, &want, Sched::parse(&now));
    }
    let file = format!("{}/stat", t.dir());
    let text = root.read_string(&file)?;
    let close = text.rfind(')').ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{file}: not a stat line"),
        )
    })?;
    let mut fields: Vec<String> = text[close + 1..]
        .split_whitespace()
        .map(String::from)
        .collect();
    if fields.len() < 39 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{file}: no policy field"),
        ));
    }
    // kernel/sched: prio = 99 - rt_priority for RT, 120 + nice otherwise;
    // fs/proc/array.c shows prio - 100.
    let priority = if want.policy.is_rt() {
        -1 - want.rt_priority as i64
    } else {
        20 + want.nice as i64
    };
    fields[15] = priority.to_string();
    fields[16] = want.nice.to_string();
    fields[37] = want.rt_priority.to_string();
    fields[38] = want.policy.number().to_string();
    let new = format!("{} {}\n", &text[..=close], fields.join(" "));
    // In place, as a tree's plain file standing for an attribute is written.
    root.write_existing(&file, new.as_bytes())?;
    Ok(Written::Done)
}

/// `sched_setscheduler(2)` keeping the thread's SCHED_RESET_ON_FORK flag,
/// then `setpriority(2)` for its nice when that changes.
fn set_live(tid: u32, want: &Sched, now: Option<Sched>) -> io::Result<Written> {
    let check = |r: libc::c_int| -> io::Result<bool> {
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if gone(&e) {
            return Ok(false);
        }
        Err(e)
    };
    let tid = tid as libc::pid_t;
    let flags = match unsafe { libc::sched_getscheduler(tid) } {
        -1 => return check(-1).map(|_| Written::Gone),
        p => p & libc::SCHED_RESET_ON_FORK,
    };
    let param = libc::sched_param {
        sched_priority: want.rt_priority as libc::c_int,
    };
    let policy = want.policy.number() as libc::c_int | flags;
    if !check(unsafe { libc::sched_setscheduler(tid, policy, &param) })? {
        return Ok(Written::Gone);
    }
    if now.is_none_or(|n| n.nice != want.nice)
        && !check(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, want.nice) })?
    {
        return Ok(Written::Gone);
    }
    Ok(Written::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for text in [
            "fifo 10 nice 0",
            "rr 99 nice -5",
            "other nice 19",
            "batch nice 0",
            "idle nice 0",
        ] {
            assert_eq!(Sched::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "fifo nice 0",
            "other 3 nice 0",
            "deadline nice 0",
            "fifo 10",
            "other nice x",
        ] {
            assert_eq!(Sched::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_real_stat_line_reads_policy_priority_and_nice() {
        // fs/proc/array.c, do_task_stat: a ksoftirqd at SCHED_FIFO 2.
        let line = "16 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 3 0 0 -3 0 1 0 6 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 2 1 0 0 0";
        let s = super::super::parse_stat(line).unwrap();
        assert_eq!(
            s.sched,
            Some(Sched {
                policy: Policy::Fifo,
                rt_priority: 2,
                nice: 0
            })
        );
    }
}
