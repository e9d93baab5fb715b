//! `probe idle-cpu`: a process's CPU use as a percentage of one core, from
//! `utime + stime` in `/proc/PID/stat` (all its threads) over consecutive
//! windows of wall time, as the idle-server evidence measured it.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::now_ns;
use crate::root::Root;
use crate::stats::Spread;

/// The fields of `/proc/PID/stat` the probes need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, clock ticks: with the pid, it names one process.
    pub start_ticks: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); utime is field 14, stime 15, starttime 22.
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        cpu_ticks: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

/// `Ok(None)` when the process is gone (no file, or a zombie).
pub fn read_stat(root: &Root, pid: i32) -> Result<Option<ProcStat>> {
    let path = format!("/proc/{pid}/stat");
    match root.read_string(&path) {
        Ok(text) => {
            let s = parse_stat(&text).with_context(|| format!("{path}: cannot parse {text:?}"))?;
            Ok((s.state != 'Z' && s.state != 'X').then_some(s))
        }
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) || crate::root::is_absent(&e) => Ok(None),
        Err(e) => Err(e).with_context(|| path),
    }
}

/// The process's stat, or a clear error naming the option when it does not exist.
pub fn first_stat(root: &Root, pid: i32, flag: &str) -> Result<ProcStat> {
    read_stat(root, pid)?.with_context(|| format!("{flag}: no such process (/proc/{pid}/stat)"))
}

/// Whether `pid` is still the process first seen with `start_ticks`.
pub fn same_process(root: &Root, pid: i32, start_ticks: u64) -> Result<Option<ProcStat>> {
    Ok(read_stat(root, pid)?.filter(|s| s.start_ticks == start_ticks))
}

pub fn clock_ticks_per_s() -> u64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

#[derive(Clone, Debug)]
pub enum Subject {
    Pid(i32),
    /// A command to spawn, measure, and kill at the end.
    Cmd(Vec<String>),
}

#[derive(Clone, Debug)]
pub struct Options {
    pub target: Subject,
    pub windows: usize,
    pub window: Duration,
    pub settle: Duration,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleCpuResult {
    pub probe: String,
    pub pid: i32,
    pub command: Option<Vec<String>>,
    pub settings: Settings,
    /// One entry per completed window.
    pub windows: Vec<Window>,
    /// Median (nearest rank) and range of the windows, % of one core.
    pub median_pct: Option<f64>,
    pub min_pct: Option<f64>,
    pub max_pct: Option<f64>,
    /// True when the process ended, or a signal (Ctrl-C) stopped the run,
    /// before every window completed.
    pub partial: bool,
    pub note: Option<String>,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: none did.
    pub interrupted: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub windows: usize,
    pub window_s: f64,
    pub settle_s: f64,
    pub clock_ticks_per_s: u64,
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    pub seconds: f64,
    pub cpu_ticks: u64,
    pub cpu_pct: f64,
}

/// Kills and reaps a spawned child however the probe ends.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(root: &Root, opts: &Options) -> Result<IdleCpuResult> {
    if opts.windows == 0 {
        bail!("--windows 0: at least one window is needed");
    }
    let (pid, command, _child, flag) = match &opts.target {
        Subject::Pid(p) => (*p, None, None, format!("--pid {p}")),
        Subject::Cmd(argv) => {
            let child = Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .with_context(|| format!("--cmd {}: cannot start", argv[0]))?;
            let pid = child.id() as i32;
            (
                pid,
                Some(argv.clone()),
                Some(Spawned(child)),
                format!("--cmd {}", argv[0]),
            )
        }
    };
    let hz = clock_ticks_per_s();
    let first = first_stat(root, pid, &flag)?;
    let gone = |k: usize| {
        format!(
            "{flag}: process {pid} exited during window {k} of {}; the result is partial",
            opts.windows
        )
    };
    let mut windows = Vec::new();
    let mut note = None;
    let mut interrupted = None;
    let _sleeper = super::interrupt::register();
    let ticker =
        crate::progress::Ticker::start("idle-cpu windows", Some(opts.windows as u64), || {});
    super::interrupt::sleep(opts.settle)?;
    let mut prev = same_process(root, pid, first.start_ticks)?;
    let mut prev_t = now_ns();
    for k in 1..=opts.windows {
        let Some(a) = prev else {
            note = Some(gone(k));
            break;
        };
        if !super::go_on(super::interrupt::sleep(opts.window))? {
            // Ctrl-C: the window under way is incomplete and left out;
            // with none complete there is nothing to report.
            if windows.is_empty() {
                super::check_cancelled()?;
            }
            interrupted = super::interrupted_by();
            break;
        }
        ticker.tick();
        let b = same_process(root, pid, first.start_ticks)?;
        let t = now_ns();
        let Some(b) = b else {
            note = Some(gone(k));
            break;
        };
        let seconds = (t - prev_t) as f64 / 1e9;
        let ticks = b.cpu_ticks.saturating_sub(a.cpu_ticks);
        windows.push(Window {
            seconds: (seconds * 1000.0).round() / 1000.0,
            cpu_ticks: ticks,
            cpu_pct: round2(ticks as f64 / hz as f64 / seconds * 100.0),
        });
        prev = Some(b);
        prev_t = t;
    }
    let spread = Spread::of(&windows.iter().map(|w| w.cpu_pct).collect::<Vec<_>>());
    Ok(IdleCpuResult {
        probe: super::Probe::IdleCpu.as_str().into(),
        pid,
        command,
        settings: Settings {
            windows: opts.windows,
            window_s: opts.window.as_secs_f64(),
            settle_s: opts.settle.as_secs_f64(),
            clock_ticks_per_s: hz,
            source: format!("utime + stime in /proc/{pid}/stat"),
        },
        median_pct: spread.as_ref().map(|s| s.median),
        min_pct: spread.as_ref().map(|s| s.min),
        max_pct: spread.as_ref().map(|s| s.max),
        partial: note.is_some() || interrupted.is_some(),
        windows,
        note,
        interrupted,
    })
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 98765 1000 200 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.cpu_ticks, s.start_ticks), ('S', 300, 98765));
        assert!(parse_stat("12 (x) S 1 2").is_none());
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn our_own_process_is_found_and_a_missing_one_is_named() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let me = std::process::id() as i32;
        let s = first_stat(&root, me, "--pid").unwrap();
        // The main thread's state: the test harness's waits while tests run.
        assert!(matches!(s.state, 'R' | 'S'), "{}", s.state);
        assert!(same_process(&root, me, s.start_ticks).unwrap().is_some());
        assert!(
            same_process(&root, me, s.start_ticks + 1)
                .unwrap()
                .is_none()
        );
        let e = first_stat(&root, 999_999_999, "--pid 999999999").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--pid 999999999: no such process (/proc/999999999/stat)"
        );
    }
}
