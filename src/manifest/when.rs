//! `when:`: the host facts a knob (or a profile) needs, as a mapping
//! `fact: condition`; every condition must hold. A condition is a scalar
//! (equality, or a comparison written as a string: `">=6.1"`, `"!=haltpoll"`)
//! or a list (any of). Facts are read by `inventory::facts`; a knob whose
//! conditions fail is `not-applicable`, with the failing condition named.

use std::fmt;

use serde::Serialize;
use serde_yaml::Value as Yaml;

use crate::inventory::facts::{Facts, Value, model_base};
use crate::knob::FieldError;

/// Every fact a condition may name, besides `label.KEY`.
pub const FACTS: [&str; 16] = [
    "vendor",
    "family",
    "model",
    "microarchitecture",
    "hybrid",
    "virtualized",
    "hypervisor",
    "idle_driver",
    "idle_governor",
    "cpufreq_driver",
    "cpufreq_mode",
    "kernel",
    "arch",
    "numa_nodes",
    "isolated_cpus",
    "memory",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => o == Equal,
            Op::Ne => o != Equal,
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
        }
    }
}

/// The value a test compares with, in the fact's own terms.
#[derive(Clone, Debug, PartialEq)]
enum Want {
    /// Compared as written (`fold`: without regard to case).
    Text {
        text: String,
        fold: bool,
    },
    Number(u64),
    Bool(bool),
    /// A release's numbers; fewer numbers name the whole series (`6.1`: 6.1.x).
    Release(Vec<u64>),
    Bytes(u64),
    /// A model's name in hostknob's model table, lower case.
    ModelName(String),
}

#[derive(Clone, Debug, PartialEq)]
struct Test {
    op: Op,
    want: Want,
    /// As the manifest wrote it, for messages.
    written: String,
}

/// One `fact: condition`; any of its tests may hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub fact: String,
    tests: Vec<Test>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct When {
    pub conditions: Vec<Condition>,
}

/// One condition as evaluated on a host.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ConditionResult {
    /// `idle_driver == intel_idle`, `kernel >= 6.1`, `vendor in [intel, amd]`.
    pub condition: String,
    pub holds: bool,
    /// The fact on this host (`haltpoll`), or `unknown (...)` with what is missing.
    pub host: String,
}

/// Every condition in order, each with the host's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub results: Vec<ConditionResult>,
    /// A fact that could not be read for a reason the user must fix (a
    /// malformed labels file): the command fails with it.
    pub error: Option<String>,
}

impl Outcome {
    pub fn holds(&self) -> bool {
        self.results.iter().all(|r| r.holds)
    }

    pub fn matched(&self) -> impl Iterator<Item = &ConditionResult> {
        self.results.iter().filter(|r| r.holds)
    }

    pub fn failed(&self) -> Option<&ConditionResult> {
        self.results.iter().find(|r| !r.holds)
    }

    /// `when: idle_driver == intel_idle; this host: haltpoll`, when one fails.
    pub fn detail(&self) -> Option<String> {
        self.failed()
            .map(|f| format!("when: {}; this host: {}", f.condition, f.host))
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fact = &self.fact;
        match self.tests.as_slice() {
            [t] => write!(f, "{fact} {} {}", t.op.as_str(), t.written),
            many if many.iter().all(|t| t.op == Op::Eq) => {
                let list: Vec<&str> = many.iter().map(|t| t.written.as_str()).collect();
                write!(f, "{fact} in [{}]", list.join(", "))
            }
            many => {
                let list: Vec<String> = many
                    .iter()
                    .map(|t| format!("{fact} {} {}", t.op.as_str(), t.written))
                    .collect();
                f.write_str(&list.join(" or "))
            }
        }
    }
}

impl When {
    /// Reads `when:` (at `field`): a non-empty mapping of known facts to
    /// conditions; the error names the fact or the list item at fault.
    pub fn parse(field: &str, v: &Yaml) -> Result<When, FieldError> {
        let Yaml::Mapping(map) = v else {
            return Err(FieldError::new(
                field,
                "give a mapping of facts to conditions, e.g. {idle_driver: intel_idle, kernel: \">=6.1\"}",
            ));
        };
        if map.is_empty() {
            return Err(FieldError::new(
                field,
                "empty: name at least one fact, or leave `when` out",
            ));
        }
        let mut conditions = Vec::new();
        for (k, cond) in map {
            let Some(fact) = k.as_str() else {
                return Err(FieldError::new(field, "a fact's name must be a string"));
            };
            let at = format!("{field}.{fact}");
            check_fact(&at, fact)?;
            let tests = match cond {
                Yaml::Sequence(items) if items.is_empty() => {
                    return Err(FieldError::new(&at, "empty list: give at least one value"));
                }
                Yaml::Sequence(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| parse_test(&format!("{at}[{i}]"), fact, item))
                    .collect::<Result<Vec<_>, _>>()?,
                one => vec![parse_test(&at, fact, one)?],
            };
            conditions.push(Condition {
                fact: fact.to_string(),
                tests,
            });
        }
        Ok(When { conditions })
    }

    /// Every condition against this host's facts (each fact read once, on demand).
    pub fn evaluate(&self, facts: &Facts) -> Outcome {
        let mut out = Outcome::default();
        for c in &self.conditions {
            let host = facts.get(&c.fact);
            if c.fact.starts_with("label.")
                && let Err(e) = facts.labels()
            {
                out.error.get_or_insert(e);
            }
            let holds = c.tests.iter().any(|t| test_holds(t, &host));
            out.results.push(ConditionResult {
                condition: c.to_string(),
                holds,
                host: describe(&host),
            });
        }
        out
    }
}

impl super::Knob {
    /// The knob's conditions on this host (none: an empty outcome, which
    /// holds); an error at its `when:` when a fact cannot be read (a
    /// malformed labels file).
    pub fn conditions(&self, facts: &Facts) -> Result<Outcome, super::ManifestError> {
        let Some(w) = &self.when else {
            return Ok(Outcome::default());
        };
        let out = w.evaluate(facts);
        match &out.error {
            Some(e) => Err(self.source.error("when", format!("cannot be checked: {e}"))),
            None => Ok(out),
        }
    }
}

fn check_fact(at: &str, fact: &str) -> Result<(), FieldError> {
    if FACTS.contains(&fact) {
        return Ok(());
    }
    if let Some(key) = fact.strip_prefix("label.") {
        let ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
        if ok {
            return Ok(());
        }
        return Err(FieldError::new(
            at,
            format!("{key:?} is not a label key (letters, digits, `_`, `-`, `.`, `/`)"),
        ));
    }
    Err(FieldError::new(
        at,
        format!(
            "unknown fact `{fact}`{}; known facts: {}, label.KEY",
            super::did_you_mean(fact, FACTS.iter().copied()),
            FACTS.join(", ")
        ),
    ))
}

/// `">=6.1"` -> (Ge, "6.1"); a bare value is equality.
fn split_op(s: &str) -> (Op, &str) {
    for (p, op) in [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("!=", Op::Ne),
        ("==", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
    ] {
        if let Some(rest) = s.strip_prefix(p) {
            return (op, rest.trim());
        }
    }
    (Op::Eq, s.trim())
}

fn parse_test(at: &str, fact: &str, v: &Yaml) -> Result<Test, FieldError> {
    let err = |m: String| Err(FieldError::new(at, m));
    let raw = match v {
        Yaml::String(s) => s.trim().to_string(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) if fact == "kernel" && n.is_f64() => {
            return err(format!(
                "{n}: write the release as a string (\"{n}\"): YAML reads 6.10 as the number 6.1"
            ));
        }
        Yaml::Number(n) => n.to_string(),
        Yaml::Null => return err("empty: give a value".into()),
        _ => {
            return err(
                "give a value, a comparison such as \">=6.1\", or a list of them (any of)".into(),
            );
        }
    };
    let (op, value) = split_op(&raw);
    if value.is_empty() {
        return err(format!("{raw:?}: nothing to compare with"));
    }
    if value.starts_with(['<', '>', '=', '!']) {
        return err(format!(
            "{raw:?} is not a comparison: write one of ==, !=, <, <=, >, >= then a value"
        ));
    }
    let ordered = || -> Result<(), FieldError> {
        if matches!(op, Op::Eq | Op::Ne) {
            Ok(())
        } else {
            Err(FieldError::new(
                at,
                format!(
                    "{raw:?}: {fact} is a name, compared only with == or != (or a list: any of)"
                ),
            ))
        }
    };
    let want = match fact {
        "family" | "numa_nodes" | "isolated_cpus" => {
            Want::Number(number(value).ok_or_else(|| {
                FieldError::new(
                    at,
                    format!("{raw:?}: {fact} is a number (decimal or 0x hex)"),
                )
            })?)
        }
        "model" => match number(value) {
            Some(n) => Want::Number(n),
            None => {
                ordered()?;
                Want::ModelName(model_name(at, value)?)
            }
        },
        "hybrid" | "virtualized" => {
            ordered()?;
            match value {
                "true" => Want::Bool(true),
                "false" => Want::Bool(false),
                _ => return err(format!("{raw:?}: {fact} is true or false")),
            }
        }
        "kernel" => Want::Release(release(value).ok_or_else(|| {
            FieldError::new(
                at,
                format!("{raw:?}: a kernel release is numbers with dots, such as 6.1 or 5.14.0"),
            )
        })?),
        "memory" => Want::Bytes(bytes(at, value)?),
        _ => {
            ordered()?;
            let fold = !fact.starts_with("label.")
                && matches!(fact, "vendor" | "microarchitecture" | "hypervisor" | "arch");
            Want::Text {
                text: value.to_string(),
                fold,
            }
        }
    };
    Ok(Test {
        op,
        want,
        written: value.to_string(),
    })
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn release(s: &str) -> Option<Vec<u64>> {
    s.split('.').map(|p| p.parse().ok()).collect()
}

/// `64GiB`, `512 MiB`, `1.5TiB`, `64GB` (powers of 1000).
fn bytes(at: &str, s: &str) -> Result<u64, FieldError> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = (s[..split].trim(), s[split..].trim());
    let scale: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => {
            return Err(FieldError::new(
                at,
                format!(
                    "{s:?}: give a size with its unit: B, KiB, MiB, GiB, TiB (or kB, MB, GB, TB), e.g. 64GiB"
                ),
            ));
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| FieldError::new(at, format!("{s:?}: {num:?} is not a number")))?;
    Ok((n * scale as f64).round() as u64)
}

/// A model name as hostknob's model table names it (`SAPPHIRERAPIDS_X`),
/// with or without its variant (`sapphirerapids`), in any case.
fn model_name(at: &str, s: &str) -> Result<String, FieldError> {
    let want = s.to_ascii_lowercase();
    let known = crate::msr::model::MODELS.iter().any(|m| {
        m.name.eq_ignore_ascii_case(&want) || model_base(m.name).eq_ignore_ascii_case(&want)
    });
    if known {
        return Ok(want);
    }
    let mut names: Vec<String> = crate::msr::model::MODELS
        .iter()
        .map(|m| model_base(m.name).to_ascii_lowercase())
        .collect();
    names.sort();
    names.dedup();
    Err(FieldError::new(
        at,
        format!(
            "{s:?} is not a model name hostknob knows{}; give the model number (e.g. 0x8f) or one of: {}",
            super::did_you_mean(&want, names.iter().map(String::as_str)),
            names.join(", ")
        ),
    ))
}

/// Aliases of a vendor or architecture, so `intel` matches `GenuineIntel`.
fn canonical(s: &str) -> String {
    let l = s.to_ascii_lowercase();
    match l.as_str() {
        "genuineintel" => "intel".into(),
        "authenticamd" => "amd".into(),
        "hygongenuine" => "hygon".into(),
        "x86_64" | "amd64" => "x86".into(),
        "aarch64" => "arm64".into(),
        _ => l,
    }
}

fn test_holds(t: &Test, host: &Value) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (&t.want, host) {
        (Want::Text { text, fold: true }, Value::Text(h)) => {
            Some(canonical(h).cmp(&canonical(text)))
        }
        (Want::Text { text, fold: false }, Value::Text(h)) => Some(h.as_str().cmp(text)),
        (Want::Number(n), Value::Number(h)) => Some(h.cmp(n)),
        (Want::Number(n), Value::Model(m, _)) => Some(u64::from(*m).cmp(n)),
        (Want::Bool(b), Value::Bool(h)) => Some(h.cmp(b)),
        (Want::Bytes(b), Value::Bytes(h)) => Some(h.cmp(b)),
        (Want::Release(want), Value::Release(_, have)) if !have.is_empty() => {
            // The host's release cut to as many numbers as written: `6.1` is the 6.1 series.
            let mut have = have.clone();
            have.resize(want.len(), 0);
            Some(have.cmp(want))
        }
        (Want::ModelName(want), Value::Model(_, name)) => {
            let is = name.is_some_and(|n| {
                n.eq_ignore_ascii_case(want) || model_base(n).eq_ignore_ascii_case(want)
            });
            Some(if is { Ordering::Equal } else { Ordering::Less })
        }
        _ => None,
    };
    ord.is_some_and(|o| t.op.holds(o))
}

fn describe(v: &Value) -> String {
    match v {
        Value::Text(t) => t.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Release(r, _) => r.clone(),
        Value::Bytes(b) => format!("{:.1} GiB (MemTotal)", *b as f64 / (1u64 << 30) as f64),
        Value::Model(m, Some(name)) => format!("{m} ({m:#x}, {name})"),
        Value::Model(m, None) => format!("{m} ({m:#x})"),
        Value::Unknown(why) => why.clone(),
    }
}

#[cfg(test)]
#[path = "when_tests.rs"]
mod tests;
