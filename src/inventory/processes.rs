//! The busiest processes sharing the host: one pass over `/proc/PID/stat`, no
//! sampling delay, so this is accumulated CPU time since each process started.

use serde::{Deserialize, Serialize};

use super::Reader;
use crate::root::DirHandle;

const SHOWN: usize = 5;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Processes {
    pub count: usize,
    pub by_cpu_time: Vec<Process>,
    pub by_rss: Vec<Process>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Process {
    pub pid: i32,
    pub comm: String,
    pub cpu_time_s: f64,
    pub rss_kib: u64,
    pub threads: i64,
}

/// The PIDs in `/proc`, read by one or more threads ([`Table::read`] each).
pub struct Table<'r> {
    // One directory handle: each `PID/stat` is then a two-name lookup.
    dir: DirHandle<'r>,
    pids: Vec<String>,
    tick: u64,
    page_kib: u64,
}

impl<'r> Table<'r> {
    /// `None` when `/proc` cannot be listed (then [`summarize`] says so).
    pub fn list(ctx: &Reader<'r>) -> Option<Table<'r>> {
        let names = ctx.root.read_dir("/proc").ok()?;
        let dir = ctx.root.dir_handle("/proc").ok()?;
        Some(Table {
            dir,
            pids: names
                .into_iter()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                .collect(),
            tick: ticks_per_second(),
            page_kib: page_size() / 1024,
        })
    }

    pub fn pids(&self) -> &[String] {
        &self.pids
    }

    /// One process; `None` if it ended during the pass (or its file is not
    /// what proc(5) says).
    pub fn read(&self, pid: &String) -> Option<Process> {
        let bytes = self.dir.read_record(&format!("{pid}/stat")).ok()?;
        let st = parse_stat(&bytes)?;
        Some(Process {
            pid: st.pid,
            comm: st.comm,
            cpu_time_s: (st.utime + st.stime) as f64 / self.tick as f64,
            rss_kib: st.rss * self.page_kib,
            threads: st.threads,
        })
    }
}

/// The busiest of the processes read; `None` (said in `not_exposed`) when
/// there were none.
pub fn summarize(ctx: &Reader, mut all: Vec<Process>) -> Option<Processes> {
    if all.is_empty() {
        ctx.not_exposed("processes", "/proc/PID/stat");
        return None;
    }
    let count = all.len();
    all.sort_by(|a, b| {
        b.cpu_time_s
            .total_cmp(&a.cpu_time_s)
            .then(a.pid.cmp(&b.pid))
    });
    let by_cpu_time = all.iter().take(SHOWN).cloned().collect();
    all.sort_by(|a, b| b.rss_kib.cmp(&a.rss_kib).then(a.pid.cmp(&b.pid)));
    let by_rss = all.into_iter().take(SHOWN).collect();
    Some(Processes {
        count,
        by_cpu_time,
        by_rss,
    })
}

pub fn ticks_per_second() -> u64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

pub fn page_size() -> u64 {
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// The fields of `/proc/PID/stat` used here.
struct Stat {
    pid: i32,
    comm: String,
    utime: u64,
    stime: u64,
    threads: i64,
    rss: u64,
}

/// `pid (comm) state ppid ...` (proc(5)); `comm` may hold spaces and `)`, so
/// the fields are counted from its last `)`. Only the six used fields are
/// parsed (a general parser of all 52 cost more than the reads on a 2-CPU host).
fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let text = std::str::from_utf8(bytes).ok()?;
    let open = text.find(" (")?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 2..close)?.to_string();
    // After `) `: field 3 (state) is index 0, so field N is index N - 3.
    let rest: Vec<&str> = text[close + 1..]
        .split_ascii_whitespace()
        .take(22)
        .collect();
    let field = |n: usize| rest.get(n - 3).copied();
    Some(Stat {
        pid,
        comm,
        utime: field(14)?.parse().ok()?,
        stime: field(15)?.parse().ok()?,
        threads: field(20)?.parse().ok()?,
        rss: field(24)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_stat;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = b"4242 (tmux: server) (x) S 1 4242 4242 0 -1 4194560 2180 0 0 0 \
                     1234 567 0 0 20 0 3 0 1630 13430784 1117 18446744073709551615 1 1 0 0 0 0 0 \
                     3674112 134433283 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!(st.comm, "tmux: server) (x");
        assert_eq!(
            (st.utime, st.stime, st.threads, st.rss),
            (1234, 567, 3, 1117)
        );
        assert!(parse_stat(b"12 (cut").is_none());
        assert!(parse_stat(b"12 (short) S 1 2 3").is_none());
    }
}
