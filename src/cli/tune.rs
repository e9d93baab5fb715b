//! `hostknob tune`'s options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{ChangeArgs, parse_percent};

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The search space: a YAML file of knobs (manifest ids, or kind + target)
    /// and their candidate values (a list, or a range with a step).
    #[arg(long, value_name = "FILE", required_unless_present = "replay")]
    pub space: Option<PathBuf>,
    /// Where the advice goes: a knob file per knob found, the report and
    /// every sample (an empty or new directory, or an earlier tune output).
    #[arg(long, value_name = "DIR", required_unless_present_any = ["replay", "plan"])]
    pub out: Option<PathBuf>,
    /// Run the short as-found pilot (nothing is written) and print the plan:
    /// candidates, legs, time, and the minimum detectable effect.
    #[arg(long, conflicts_with = "replay")]
    pub plan: bool,
    /// The probe: wakeup, timer, rpc, noise, or `command` (the command after `--`).
    #[arg(long, value_name = "PROBE", default_value = "wakeup")]
    pub probe: String,
    /// With `--probe command`: where the metric is in its output, `regex:RE`
    /// (one group: the number) or `json:PATH`.
    #[arg(long, value_name = "SPEC")]
    pub metric: Option<String>,
    /// With `--probe command`: the metric's unit (`ns`, `us`, `ms`, `s`, or any word such as `ops/s`).
    #[arg(long, value_name = "UNIT", default_value = "ms")]
    pub unit: String,
    /// With `--probe command`: which way the metric is better, `lower` or `higher`.
    #[arg(long, value_name = "WAY", default_value = "lower")]
    pub better: String,
    /// With `--probe command`: runs of the command per leg.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub samples: usize,
    /// A limit a step must not break, on another statistic of the same
    /// samples: `p99:no-higher:5%` (repeatable).
    #[arg(long, value_name = "METRIC:no-higher|no-lower:PCT")]
    pub guard: Vec<String>,
    /// The whole search's time (pilot and confirmation included): `30m`, `2h`.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
    pub budget: Duration,
    /// Derive every decision again from the samples recorded in DIR (an
    /// earlier `--out`), without touching the host; exit 1 if any differs.
    #[arg(long, value_name = "DIR", conflicts_with = "space")]
    pub replay: Option<PathBuf>,
    /// Also draw the search path (each comparison's ratio and interval) to DIR/tune-path.svg.
    #[arg(long)]
    pub svg: bool,
    /// Wait after setting a leg's state before probing.
    #[arg(long, default_value = "2s", value_parser = crate::probe::parse_seconds, value_name = "DURATION")]
    pub settle: Duration,
    /// Seed of the leg orders [default: from the clock; recorded].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// The smallest change worth a step.
    #[arg(long, default_value = "5%", value_parser = parse_percent, value_name = "PCT")]
    pub min_effect: f64,
    /// Wait for another hostknob holding the lock instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    /// The command (`--probe command`), or the built-in probe's options, after `--`.
    #[arg(last = true, value_name = "COMMAND | PROBE OPTIONS")]
    pub probe_args: Vec<String>,
    #[command(flatten)]
    pub change: ChangeArgs,
}
