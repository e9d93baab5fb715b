//! The busiest processes sharing the host: one pass over `/proc/PID/stat`, no
//! sampling delay, so this is accumulated CPU time since each process started.

use procfs::FromRead;
use serde::{Deserialize, Serialize};

use super::Reader;

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

pub fn read(ctx: &Reader) -> Option<Processes> {
    let names = ctx.root.read_dir("/proc").ok()?;
    let tick = ticks_per_second();
    let page_kib = page_size() / 1024;
    let mut all: Vec<Process> = names
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| {
            // Processes come and go during the pass: a vanished one is skipped.
            let bytes = ctx.root.read(&format!("/proc/{pid}/stat")).ok()?;
            let st = procfs::process::Stat::from_read(bytes.as_slice()).ok()?;
            Some(Process {
                pid: st.pid,
                comm: st.comm,
                cpu_time_s: (st.utime + st.stime) as f64 / tick as f64,
                rss_kib: st.rss * page_kib,
                threads: st.num_threads,
            })
        })
        .collect();
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
