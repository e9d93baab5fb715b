//! The command probe: the user's own benchmark as verify's probe. Each leg
//! runs it `samples` times (no shell unless `shell: true`), on the CPUs the
//! manifest gives or outside the knob's target, each run in a process group
//! of its own that the timeout (or a signal) kills whole; the metric is read
//! from its standard output or the file it writes.
//!
//! The rounds compare "badness": the value itself when lower is better, its
//! inverse when higher is better, so the verdict rule (log ratios, applied /
//! as found, below 1 = improved) is unchanged. The samples are f64 from the
//! run to the report: nanoseconds for a time unit where lower is better, else
//! the value itself (lower better) or its inverse (higher better), so a ratio
//! metric of 0.0012 against 0.0014 stays 17 % apart (thousandths of the unit
//! rounded to integers made both 1).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::placement::Placement;
use crate::cpulist::CpuList;
use crate::probe::latency::LatencyRun;
use crate::schema::command::{Better, CommandProbe};

/// Bytes kept of each output stream (the rest is read and dropped).
pub const OUTPUT_CAP: usize = 1 << 20;
/// Bytes of standard error an error message quotes.
const STDERR_TAIL: usize = 2000;

/// Where the command ran and what it measured, for the report.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Placed {
    pub argv: Vec<String>,
    pub shell: bool,
    /// The CPUs the command (and what it starts) may run on.
    pub cpus: CpuList,
    pub why: String,
    pub unit: String,
    /// `lower` or `higher`: which way the metric is better.
    pub better: Better,
    /// Where the metric was read: `json PATH`, `regex RE`, in stdout or a file.
    pub metric: String,
    /// Runs per leg.
    pub samples: usize,
    pub timeout_ms: u64,
    /// Each leg's values in `unit`, per round: as found, applied.
    pub values: [Vec<Vec<f64>>; 2],
    /// The geometric means over the rounds of each leg's median value, in `unit`.
    pub geomean: [f64; 2],
}

/// The command's CPUs: the manifest's `cpus`, else every allowed CPU outside
/// the knob's target (as the waker), else the waker's CPU.
pub fn place(c: &CommandProbe, p: &Placement, allowed: &CpuList) -> Result<Placed> {
    let (cpus, why) = match &c.cpus {
        Some(text) => {
            let cpus = CpuList::parse(text)?;
            if let Some(bad) = cpus.as_slice().iter().find(|&&x| !allowed.contains(x)) {
                bail!(
                    "verify.probe.cpus {text}: CPU {bad} cannot run the command here (allowed: {allowed})"
                );
            }
            (cpus, "the manifest's `cpus`".to_string())
        }
        None => {
            let outside: CpuList = allowed
                .as_slice()
                .iter()
                .copied()
                .filter(|&x| p.target_cpus.as_ref().is_none_or(|t| !t.contains(x)))
                .collect();
            match (&p.target_cpus, outside.is_empty()) {
                (None, _) => (
                    allowed.clone(),
                    "every allowed CPU (the knob has no target CPUs)".into(),
                ),
                (Some(t), false) => (outside, format!("outside the knob's target CPUs {t}")),
                (Some(t), true) => (
                    std::iter::once(p.waker).collect(),
                    format!("the waker's CPU: every allowed CPU is in the knob's target {t}"),
                ),
            }
        }
    };
    let metric = match (&c.metric.json, &c.metric.regex) {
        (Some(j), _) => format!("json {j}"),
        (_, Some(r)) => format!("regex {r}"),
        _ => String::new(),
    };
    Ok(Placed {
        argv: c.command.clone(),
        shell: c.shell,
        cpus,
        why,
        unit: c.unit.clone(),
        better: c.better,
        metric: match &c.metric.file {
            Some(f) => format!("{metric} in {f}"),
            None => format!("{metric} in stdout"),
        },
        samples: c.samples,
        timeout_ms: c.timeout().as_millis() as u64,
        values: [Vec::new(), Vec::new()],
        geomean: [f64::NAN; 2],
    })
}

/// The command's placement, for a command probe.
pub fn placed(
    root: &crate::root::Root,
    c: Option<&CommandProbe>,
    p: &Placement,
) -> Result<Option<Placed>> {
    match c {
        Some(c) => Ok(Some(place(c, p, &crate::probe::Cpus::read(root)?.allowed)?)),
        None => Ok(None),
    }
}

/// One leg: `samples` runs, each a value in the unit and its sample.
pub fn run_leg(c: &CommandProbe, p: &Placed) -> Result<(LatencyRun, Vec<f64>)> {
    let cpus = &p.cpus;
    let mut values = Vec::with_capacity(c.samples);
    let mut samples = Vec::with_capacity(c.samples);
    for i in 0..c.samples {
        crate::probe::check_cancelled()?;
        let v = run_once(c, cpus)
            .with_context(|| format!("the command probe's run {} of {}", i + 1, c.samples))?;
        samples.push(to_sample(c, v)?);
        values.push(v);
    }
    let run = LatencyRun {
        samples,
        split: None,
        settings: serde_json::json!({
            "command": c.command,
            "shell": c.shell,
            "unit": c.unit,
            "better": c.better,
            "samples": c.samples,
            "timeout_ms": c.timeout().as_millis() as u64,
            "cpus": cpus.to_string(),
        }),
        warnings: Vec::new(),
        lost: None,
        evidence: None,
    };
    Ok((run, values))
}

/// The value as a sample of "badness" (see the module comment): ns for a
/// time unit where lower is better, else the value or its inverse.
pub fn to_sample(c: &CommandProbe, v: f64) -> Result<f64> {
    if !v.is_finite() || v < 0.0 {
        bail!("the metric read {v}: not a number of {}", c.unit);
    }
    match c.better {
        Better::Lower => Ok(v * c.ns_per_unit().unwrap_or(1.0)),
        Better::Higher if v > 0.0 => Ok(1.0 / v),
        Better::Higher => bail!(
            "the metric read 0 {}: with `better: higher` a zero cannot be compared (it is infinitely bad)",
            c.unit
        ),
    }
}

/// A sample (or a statistic of samples) back in the unit.
pub fn value_of(p: &Placed, sample: f64) -> f64 {
    match p.better {
        Better::Lower => sample / crate::schema::command::ns_per_unit(&p.unit).unwrap_or(1.0),
        Better::Higher => 1.0 / sample,
    }
}

/// A sample as a person reads it: the value in the unit, to four significant digits.
pub fn shown(p: &Placed, sample: f64) -> String {
    format!("{} {}", significant(value_of(p, sample)), p.unit)
}

/// Four significant digits: `1300`, `12.50`, `0.001200`; below 1e-4 or from
/// 1e9 in scientific form (`1.200e-5`), so a small value never reads 0.0000.
pub fn significant(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return format!("{v}");
    }
    if !(1e-4..1e9).contains(&a) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// The placement with each leg's geometric mean in the unit.
pub fn finish(mut p: Placed, a: &super::paired::Analysis) -> Placed {
    p.geomean = [a.baseline_geomean_ns, a.applied_geomean_ns].map(|g| value_of(&p, g));
    p
}

/// Each leg's compared metric in µs, where it is a time lower is better in
/// (every built-in probe; a command's time unit): what energy weighs.
pub fn metric_us(p: Option<&Placed>, a: &super::paired::Analysis) -> Option<[f64; 2]> {
    let time = |p: &Placed| {
        p.better == Better::Lower && crate::schema::command::ns_per_unit(&p.unit).is_some()
    };
    match p {
        Some(p) if !time(p) => None,
        _ => Some([a.baseline_geomean_ns / 1e3, a.applied_geomean_ns / 1e3]),
    }
}

fn spawn(c: &CommandProbe, cpus: &CpuList) -> Result<Child> {
    let mut cmd = match c.shell {
        true => {
            let mut s = Command::new("/bin/sh");
            s.arg("-c").arg(&c.command[0]);
            s
        }
        false => {
            let mut s = Command::new(&c.command[0]);
            s.args(&c.command[1..]);
            s
        }
    };
    let mask = mask_of(cpus);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: sched_setaffinity is async-signal-safe; the mask is owned by the closure.
    unsafe {
        cmd.pre_exec(move || {
            let rc = libc::sched_setaffinity(0, mask.len() * 8, mask.as_ptr().cast());
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().with_context(|| {
        format!(
            "starting {:?}",
            if c.shell { "/bin/sh" } else { &c.command[0] }
        )
    })
}

fn mask_of(cpus: &CpuList) -> Vec<u64> {
    let top = cpus.as_slice().last().copied().unwrap_or(0) as usize;
    let mut mask = vec![0u64; (top / 64 + 1).max(16)];
    for &c in cpus.as_slice() {
        mask[c as usize / 64] |= 1 << (c % 64);
    }
    mask
}

/// Reads a stream to its end, keeping the first `OUTPUT_CAP` bytes.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let (mut kept, mut cut, mut buf) = (Vec::new(), false, [0u8; 8192]);
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            let room = OUTPUT_CAP.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
            cut |= n > room;
        }
        (kept, cut)
    })
}

fn kill_group(child: &mut Child) {
    // The group is the child's pid (process_group(0)).
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait();
}

fn tail(stderr: &[u8]) -> String {
    let t = String::from_utf8_lossy(stderr);
    let t = t.trim_end();
    let start = t
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| t.len() - i <= STDERR_TAIL)
        .unwrap_or(t.len());
    match t[start..].trim() {
        "" => "(its standard error was empty)".to_string(),
        s => format!("its standard error ends:\n{s}"),
    }
}

/// One run: the value it printed, or why there is none.
pub fn run_once(c: &CommandProbe, cpus: &CpuList) -> Result<f64> {
    if let Some(f) = &c.metric.file {
        // A value left by an earlier run must not be read as this one's.
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => bail!("removing the metric file {f} before the run: {e}"),
        }
    }
    let mut child = spawn(c, cpus)?;
    let out = drain(child.stdout.take().context("the command's stdout")?);
    let err = drain(child.stderr.take().context("the command's stderr")?);
    let timeout = c.timeout();
    let end = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if Instant::now() >= end || crate::probe::cancelled() {
            kill_group(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // What it started may outlive it holding the pipes: the group goes too.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let (stdout, _) = out.join().unwrap_or_default();
    let (stderr, _) = err.join().unwrap_or_default();
    crate::probe::check_cancelled()?;
    let name = c.command.join(" ");
    let Some(status) = status else {
        bail!(
            "`{name}` did not finish within {} and was killed with its process group; {}",
            humantime::format_duration(timeout),
            tail(&stderr)
        );
    };
    if !status.success() {
        bail!("`{name}` failed ({status}); {}", tail(&stderr));
    }
    let text = match &c.metric.file {
        Some(f) => read_capped(f).with_context(|| {
            format!(
                "`{name}` exited 0 but its metric file {f} cannot be read; {}",
                tail(&stderr)
            )
        })?,
        None => String::from_utf8_lossy(&stdout).into_owned(),
    };
    parse(c, &text)
        .map_err(|why| anyhow::anyhow!("`{name}` printed no metric: {why}; {}", tail(&stderr)))
}

fn read_capped(path: &str) -> Result<String> {
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(OUTPUT_CAP as u64).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The metric in `text`, by JSON path or regex.
pub fn parse(c: &CommandProbe, text: &str) -> std::result::Result<f64, String> {
    if let Some(path) = c.json_path() {
        let doc: serde_json::Value = serde_json::from_str(text.trim())
            .map_err(|e| format!("the output is not one JSON document ({e})"))?;
        let mut at = &doc;
        for seg in &path {
            at = match at {
                serde_json::Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                v => v.get(seg),
            }
            .ok_or_else(|| format!("the JSON has no {:?} (at {seg:?})", path.join(".")))?;
        }
        return match at {
            serde_json::Value::Number(n) => n.as_f64().ok_or_else(|| "not a number".into()),
            serde_json::Value::String(s) => s
                .trim()
                .parse()
                .map_err(|_| format!("{:?} is {s:?}, not a number", path.join("."))),
            v => Err(format!("{:?} is {v}, not a number", path.join("."))),
        };
    }
    let re = c.metric.regex.as_deref().unwrap_or("");
    let r = regex::Regex::new(re).map_err(|e| e.to_string())?;
    let m = r
        .captures(text)
        .and_then(|cap| cap.get(1))
        .ok_or_else(|| format!("no match for the regex {re:?} (or its group matched nothing)"))?;
    m.as_str()
        .trim()
        .parse()
        .map_err(|_| format!("the regex {re:?} matched {:?}, not a number", m.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::command::MetricSource;

    fn probe(json: Option<&str>, regex: Option<&str>, better: Better) -> CommandProbe {
        CommandProbe {
            command: vec!["true".into()],
            metric: MetricSource {
                json: json.map(Into::into),
                regex: regex.map(Into::into),
                file: None,
            },
            unit: "µs".into(),
            better,
            samples: 1,
            timeout: None,
            shell: false,
            cpus: None,
        }
    }

    #[test]
    fn json_paths_with_or_without_the_dot_and_array_indices() {
        let doc = r#"{"latency": {"p99_us": 12.5, "runs": [3, "4.5"]}, "n": true}"#;
        for p in [".latency.p99_us", "latency.p99_us"] {
            assert_eq!(parse(&probe(Some(p), None, Better::Lower), doc), Ok(12.5));
        }
        assert_eq!(
            parse(&probe(Some("latency.runs.1"), None, Better::Lower), doc),
            Ok(4.5)
        );
        let e = parse(&probe(Some("latency.p50_us"), None, Better::Lower), doc).unwrap_err();
        assert!(e.contains("no \"latency.p50_us\""), "{e}");
        let e = parse(&probe(Some("n"), None, Better::Lower), doc).unwrap_err();
        assert!(e.contains("not a number"), "{e}");
    }

    #[test]
    fn regex_takes_its_one_group() {
        let c = probe(None, Some(r"avg-latency=([0-9.]+)"), Better::Lower);
        assert_eq!(
            parse(&c, "sockperf: Summary: avg-latency=23.456 (std-dev=1)"),
            Ok(23.456)
        );
        assert!(parse(&c, "nothing").unwrap_err().contains("no match"));
    }

    #[test]
    fn higher_is_better_inverts_so_a_lower_sample_is_better() {
        let c = probe(Some("x"), None, Better::Higher);
        let slow = to_sample(&c, 100.0).unwrap();
        let fast = to_sample(&c, 130.0).unwrap();
        assert!(fast < slow);
        assert!(to_sample(&c, 0.0).is_err());
        let lower = probe(Some("x"), None, Better::Lower);
        assert_eq!(to_sample(&lower, 12.5).unwrap(), 12_500.0, "µs become ns");
    }

    /// A placement of `c`, as verify makes it before the first leg.
    fn placed_for(c: &CommandProbe) -> Placed {
        let p = Placement {
            target_cpus: None,
            sleeper: 1,
            waker: 0,
            sleeper_neighbours: CpuList::default(),
            sleeper_isolated: false,
            why: String::new(),
            measured: None,
        };
        place(c, &p, &CpuList::parse("0-1").unwrap()).unwrap()
    }

    #[test]
    fn small_and_large_metrics_keep_their_precision() {
        // A ratio metric: 0.0012 and 0.0014 are 17 % apart, not both 1.
        for (unit, better, a, b) in [
            ("ratio", Better::Lower, 0.0012, 0.0014),
            ("ops/s", Better::Higher, 2.5e9, 2.5e9 * 1.0001),
            ("ops/s", Better::Higher, 0.0012, 0.0014),
            ("ms", Better::Higher, 0.0012, 0.0014),
        ] {
            let mut c = probe(Some("x"), None, better);
            c.unit = unit.into();
            let p = placed_for(&c);
            let (sa, sb) = (to_sample(&c, a).unwrap(), to_sample(&c, b).unwrap());
            let want = match better {
                Better::Lower => b / a,
                Better::Higher => a / b,
            };
            assert!(
                (sb / sa / want - 1.0).abs() < 1e-12,
                "{unit} {a} {b}: {sa} {sb}"
            );
            for (v, s) in [(a, sa), (b, sb)] {
                assert!((value_of(&p, s) / v - 1.0).abs() < 1e-15, "{unit}: {v} {s}");
            }
        }
    }

    #[test]
    fn a_sub_thousandth_metric_survives_the_rounds_and_the_json_exactly() {
        // Lower is better, not a time: the sample is the value itself, so
        // the leg figures and their JSON (a ledger's evidence) carry 0.0012
        // to the last bit; u64 figures could not hold it at all.
        let mut c = probe(Some("x"), None, Better::Lower);
        c.unit = "ratio".into();
        let p = placed_for(&c);
        let leg = |v: f64| vec![to_sample(&c, v).unwrap(); 3];
        let rounds: Vec<_> = (0..6).map(|_| (leg(0.0014), leg(0.0012))).collect();
        let rule = super::super::paired::Rule::default();
        let a = super::super::paired::analyze(&rounds, super::super::paired::Metric::P50, rule);
        assert_eq!(a.baseline.p50_ns, 0.0014);
        assert_eq!(a.applied.p50_ns, 0.0012);
        assert_eq!(value_of(&p, a.applied.round_p50_ns[5]), 0.0012);
        let json = serde_json::to_string(&a.applied).unwrap();
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["p50_ns"].as_f64(), Some(0.0012), "{json}");
        assert_eq!(back["max_ns"].as_f64(), Some(0.0012), "{json}");
        assert_eq!(shown(&p, a.applied.p50_ns), "0.001200 ratio");
    }

    #[test]
    fn values_print_to_four_significant_digits() {
        for (v, want) in [
            (1300.0, "1300"),
            (12.5, "12.50"),
            (0.0012, "0.001200"),
            (0.00014, "0.0001400"),
            (0.000012, "1.200e-5"),
            (0.0, "0"),
            (123456.7, "123457"),
            (2.5e9, "2.500e9"),
        ] {
            assert_eq!(significant(v), want, "{v}");
        }
    }
}
