//! A manifest's `verify.probe` as a command: the user's own benchmark, run
//! by `verify` in each leg (`verify/command.rs`), its metric read from its
//! output. Checked whole at manifest load, so a bad regex or path is a
//! `file:line` error before anything runs.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::Probe;

/// `verify.probe`: a built-in probe's name, or a command.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ProbeSpec {
    Named(Probe),
    Command(Box<CommandProbe>),
}

impl Better {
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

impl ProbeSpec {
    /// The name `verify` reports: the probe's, or `command`.
    pub fn name(&self) -> &'static str {
        match self {
            ProbeSpec::Named(p) => p.as_str(),
            ProbeSpec::Command(_) => "command",
        }
    }
}

impl<'de> Deserialize<'de> for ProbeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProbeSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a probe name or a mapping {command: [...], metric: ..., unit: ...}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ProbeSpec, E> {
                Probe::deserialize(de::value::StrDeserializer::new(v)).map(ProbeSpec::Named)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<ProbeSpec, A::Error> {
                CommandProbe::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(|c| ProbeSpec::Command(Box::new(c)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether a larger metric is better (`ops/s`) or worse (a latency).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    #[default]
    Lower,
    Higher,
}

/// Where the metric is in the command's output.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricSource {
    /// A dotted path into a JSON document (`p99_us`, `.latency.p99_us`,
    /// `runs.0.p99`), leading dot optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// A regular expression with exactly one group: the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Read the file the command writes instead of its standard output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// `verify.probe: {command: [...], metric: ..., unit: ..., ...}`.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandProbe {
    /// The program and its arguments, run without a shell; with `shell: true`,
    /// one string given to `sh -c` (a string or a list of one).
    #[serde(deserialize_with = "command_line")]
    #[schemars(with = "CommandLine")]
    pub command: Vec<String>,
    pub metric: MetricSource,
    /// The metric's unit: `ns`, `µs` (`us`), `ms`, `s`, or any other word
    /// (`ops/s`, `req/s`) shown as given.
    pub unit: String,
    #[serde(default)]
    pub better: Better,
    /// Runs of the command per leg (default 1): the leg's values.
    #[serde(default = "one")]
    pub samples: usize,
    /// Each run's limit (default 30s): its process group is killed after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default)]
    pub shell: bool,
    /// The CPUs the command runs on; default: outside the knob's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
}

fn one() -> usize {
    1
}

/// `command:` as written: a list (program and arguments), or one string
/// (a script for `sh -c`, with `shell: true`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum CommandLine {
    Argv(Vec<String>),
    Script(String),
}

fn command_line<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match CommandLine::deserialize(d)? {
        CommandLine::Argv(v) => v,
        CommandLine::Script(s) => vec![s],
    })
}

/// At most this many runs per leg.
pub const MAX_SAMPLES: usize = 10_000;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl CommandProbe {
    pub fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| humantime::parse_duration(t).ok())
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    /// Nanoseconds per unit for a time unit; `None` for any other.
    pub fn ns_per_unit(&self) -> Option<f64> {
        ns_per_unit(&self.unit)
    }

    /// The JSON path's segments, the leading dot dropped.
    pub fn json_path(&self) -> Option<Vec<&str>> {
        let p = self.metric.json.as_deref()?;
        Some(p.strip_prefix('.').unwrap_or(p).split('.').collect())
    }

    /// Every problem, as (field under `verify.probe`, message).
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut bad = |f: &str, m: String| out.push((format!("verify.probe.{f}"), m));
        match (self.command.first(), self.shell) {
            (None, _) => bad("command", "empty: name the program to run".into()),
            (Some(p), _) if p.trim().is_empty() => {
                bad("command", "the program's name is empty".into())
            }
            (Some(_), true) if self.command.len() > 1 => bad(
                "command",
                "with `shell: true`, give one string (the script for `sh -c`)".into(),
            ),
            // A program's path with blanks is rare; a command line in one
            // string (as docs/verify.md writes `shell: true`'s) is the mistake.
            (Some(p), false) if self.command.len() == 1 && p.split_whitespace().count() > 1 => bad(
                "command",
                format!(
                    "{p:?} is a command line: run it with `shell: true`, or give the program \
                         and each argument as a list item ([program, arg, ...])"
                ),
            ),
            _ => {}
        }
        match (&self.metric.json, &self.metric.regex) {
            (Some(_), Some(_)) => bad(
                "metric",
                "give either `json` or `regex`, not both".into(),
            ),
            (None, None) => bad(
                "metric",
                "say where the number is: `{json: PATH}` or `{regex: RE}` (with `file: PATH` to read a file the command writes)".into(),
            ),
            (Some(_), None) => {
                if let Some(seg) = self.json_path()
                    && seg.iter().any(|s| s.is_empty())
                {
                    bad(
                        "metric.json",
                        format!(
                            "{:?} is not a dotted path (`p99_us`, `.latency.p99_us`)",
                            self.metric.json.as_deref().unwrap_or("")
                        ),
                    );
                }
            }
            (None, Some(re)) => match regex::Regex::new(re) {
                Err(e) => bad(
                    "metric.regex",
                    format!("not a regular expression: {}", e.to_string().replace('\n', " ")),
                ),
                Ok(r) if r.captures_len() != 2 => bad(
                    "metric.regex",
                    format!(
                        "{re:?} has {} groups: it needs exactly one, around the number (use `(?:...)` for the others)",
                        r.captures_len() - 1
                    ),
                ),
                Ok(_) => {}
            },
        }
        if self
            .metric
            .file
            .as_deref()
            .is_some_and(|f| !f.starts_with('/'))
        {
            bad(
                "metric.file",
                "must be an absolute path (the command runs in a directory of its own)".into(),
            );
        }
        if self.unit.trim().is_empty() {
            bad(
                "unit",
                "empty: declare the metric's unit (`µs`, `ms`, `ops/s`)".into(),
            );
        }
        if self.samples == 0 || self.samples > MAX_SAMPLES {
            bad(
                "samples",
                format!("{}: between 1 and {MAX_SAMPLES} runs per leg", self.samples),
            );
        }
        if let Some(t) = &self.timeout {
            match humantime::parse_duration(t) {
                Ok(d) if d.is_zero() => bad("timeout", "must be above zero".into()),
                Ok(_) => {}
                Err(e) => bad("timeout", format!("{t:?}: {e} (write `30s`, `2m`)")),
            }
        }
        if let Some(c) = &self.cpus
            && let Err(e) = crate::cpulist::CpuList::parse(c)
        {
            bad("cpus", format!("{c:?}: {e}"));
        }
        out
    }
}

/// Nanoseconds per `unit` for a time unit; `None` for any other.
pub fn ns_per_unit(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1.0),
        "µs" | "us" | "μs" => Some(1e3),
        "ms" => Some(1e6),
        "s" => Some(1e9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::CommandProbe;

    fn probe(yaml: &str) -> CommandProbe {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// docs/verify.md gives `shell: true`'s command as one string; it was
    /// refused ("invalid type: string, expected a sequence").
    #[test]
    fn a_shell_command_is_one_string_and_a_command_line_without_a_shell_is_refused() {
        let p =
            probe("{command: 'echo ms=1', shell: true, metric: {regex: 'ms=([0-9]+)'}, unit: ms}");
        assert_eq!(p.command, ["echo ms=1"]);
        assert!(p.check().is_empty(), "{:?}", p.check());
        let p = probe("{command: [echo, ms=1], metric: {regex: 'ms=([0-9]+)'}, unit: ms}");
        assert_eq!(p.command, ["echo", "ms=1"]);
        assert!(p.check().is_empty(), "{:?}", p.check());
        let p = probe("{command: 'echo ms=1', metric: {regex: 'ms=([0-9]+)'}, unit: ms}");
        let problems = p.check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "verify.probe.command");
        assert!(problems[0].1.contains("shell: true"), "{problems:?}");
        assert!(
            serde_yaml::from_str::<CommandProbe>("{command: 5, metric: {regex: x}, unit: ms}")
                .is_err()
        );
    }
}
