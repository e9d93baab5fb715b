//! What a knob's `verify.expect` promises, in a form verify can check
//! (`verify::expect` checks it against a run).
//!
//! ```yaml
//! verify:
//!   probe: wakeup
//!   expect:                  # one, or a list
//!     metric: p50            # p50 | p95 | p99 | p999 | max | mean (default p50)
//!     change: lower          # lower | higher | no-higher | no-lower | ceiling | floor
//!     by: 20 µs              # lower, higher: at least this much (ns, µs/us, ms, s, or %);
//!                            # no-higher, no-lower: the tolerance (default 5 %)
//!   note: light calls paid a flat wakeup tax   # prose, for people
//! ```
//!
//! `ceiling` takes `below: 50 µs` (the applied leg's metric at most that) and
//! `floor` takes `above:`. A prose string with a number in it is refused: prose
//! cannot be checked, and a misread one reports "met" for a regression.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The statistic of each leg that a verdict or an expectation compares.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    #[default]
    P50,
    P95,
    P99,
    P999,
    Max,
    Mean,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P95 => "p95",
            Metric::P99 => "p99",
            Metric::P999 => "p999",
            Metric::Max => "max",
            Metric::Mean => "mean",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Lower,
    Higher,
    NoHigher,
    NoLower,
    Ceiling,
    Floor,
}

/// An amount: nanoseconds, or a fraction of the as-found value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    Ns(f64),
    Fraction(f64),
}

impl Amount {
    pub fn parse(text: &str) -> Result<Amount, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (digits, unit) = (&t[..split], t[split..].trim());
        let value: f64 = digits
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0 && digits.len() <= 12)
            .ok_or_else(|| format!("`{t}` is not a positive amount such as `20 µs` or `10 %`"))?;
        let scale = match unit {
            "ns" => 1.0,
            "µs" | "μs" | "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "%" => return Ok(Amount::Fraction(value / 100.0)),
            "" => return Err(format!("`{t}` needs a unit: ns, µs (or us), ms, s, or %")),
            other => {
                return Err(format!(
                    "`{other}` is not a unit: use ns, µs (or us), ms, s, or %"
                ));
            }
        };
        Ok(Amount::Ns(value * scale))
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Amount::Ns(ns) if *ns >= 1e6 => write!(f, "{} ms", ns / 1e6),
            Amount::Ns(ns) => write!(f, "{} µs", ns / 1e3),
            Amount::Fraction(x) => write!(f, "{} %", x * 100.0),
        }
    }
}

impl Serialize for Amount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for Amount {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Amount".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An amount with its unit: `20 µs` or `10 %`."
        })
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        let v = serde_yaml::Value::deserialize(d)?;
        match v {
            serde_yaml::Value::String(s) => Amount::parse(&s).map_err(serde::de::Error::custom),
            serde_yaml::Value::Number(n) => Err(serde::de::Error::custom(format!(
                "`{n}` needs a unit: write `{n} µs` or `{n} %`"
            ))),
            _ => Err(serde::de::Error::custom(
                "expected an amount such as `20 µs` or `10 %`",
            )),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub metric: Metric,
    pub change: Change,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Amount>,
}

impl Expect {
    /// The fields each change needs and allows; `Err` names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let (needs, allowed): (&str, [bool; 3]) = match self.change {
            Change::Lower | Change::Higher => ("by", [true, false, false]),
            // `by`: the tolerance (default: verify's minimum effect, 5 %).
            Change::NoHigher | Change::NoLower => ("", [true, false, false]),
            Change::Ceiling => ("below", [false, true, false]),
            Change::Floor => ("above", [false, false, true]),
        };
        let given = [
            self.by.is_some(),
            self.below.is_some(),
            self.above.is_some(),
        ];
        for (i, name) in ["by", "below", "above"].into_iter().enumerate() {
            if given[i] && !allowed[i] {
                return Err((
                    name,
                    format!("`{name}` does not go with `change: {}`", self.change_str()),
                ));
            }
        }
        if !needs.is_empty() && !given.iter().zip(allowed).any(|(g, a)| *g && a) {
            return Err((
                "change",
                format!(
                    "`change: {}` needs `{needs}:` (for example `{needs}: 20 µs`)",
                    self.change_str()
                ),
            ));
        }
        for (name, v) in [("below", self.below), ("above", self.above)] {
            if let Some(Amount::Fraction(_)) = v {
                return Err((
                    name,
                    format!("`{name}` is a latency (µs, ms), not a percentage"),
                ));
            }
        }
        Ok(())
    }

    pub fn change_str(&self) -> &'static str {
        match self.change {
            Change::Lower => "lower",
            Change::Higher => "higher",
            Change::NoHigher => "no-higher",
            Change::NoLower => "no-lower",
            Change::Ceiling => "ceiling",
            Change::Floor => "floor",
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let m = self.metric.as_str();
        match (self.change, self.by, self.below, self.above) {
            (Change::Lower, Some(by), ..) => write!(f, "{m} lower by at least {by}"),
            (Change::Higher, Some(by), ..) => write!(f, "{m} higher by at least {by}"),
            (Change::NoHigher, Some(by), ..) => write!(f, "{m} no higher, within {by}"),
            (Change::NoLower, Some(by), ..) => write!(f, "{m} no lower, within {by}"),
            (Change::NoHigher, ..) => write!(f, "{m} no higher"),
            (Change::NoLower, ..) => write!(f, "{m} no lower"),
            (Change::Ceiling, _, Some(b), _) => write!(f, "{m} at most {b}"),
            (Change::Floor, _, _, Some(a)) => write!(f, "{m} at least {a}"),
            _ => write!(f, "{m} {}", self.change_str()),
        }
    }
}

/// `verify.expect` as written: one expectation, a list, or (legacy) prose.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Expectations(pub Vec<Expect>);

impl<'de> Deserialize<'de> for Expectations {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Expectations, D::Error> {
        use serde::de::Error;
        let v = serde_yaml::Value::deserialize(d)?;
        let one = |v: serde_yaml::Value| -> Result<Expect, D::Error> {
            let e: Expect = serde_yaml::from_value(v).map_err(D::Error::custom)?;
            e.validate().map_err(|(_, msg)| D::Error::custom(msg))?;
            Ok(e)
        };
        match v {
            serde_yaml::Value::String(s) if s.chars().any(|c| c.is_ascii_digit()) => {
                Err(D::Error::custom(format!(
                    "`{s}` is prose, which verify cannot check; write it as \
                     `{{metric: p50, change: lower, by: 20 µs}}` (see the manifest reference) \
                     and keep the words in `verify.note`"
                )))
            }
            // Prose without a number promises nothing checkable: it is a note.
            serde_yaml::Value::String(_) => Ok(Expectations::default()),
            serde_yaml::Value::Sequence(items) => items
                .into_iter()
                .map(one)
                .collect::<Result<_, _>>()
                .map(Expectations),
            v @ serde_yaml::Value::Mapping(_) => Ok(Expectations(vec![one(v)?])),
            _ => Err(D::Error::custom(
                "expected `{metric: p50, change: lower, by: 20 µs}` or a list of them",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Expectations, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn one_or_a_list_each_with_its_metric() {
        let both =
            parse("[{metric: p50, change: no-higher}, {metric: p99, change: lower, by: 10 us}]")
                .unwrap()
                .0;
        assert_eq!((both[0].metric, both[1].metric), (Metric::P50, Metric::P99));
        assert_eq!(both[1].by, Some(Amount::Ns(10_000.0)));
        let one = parse("{change: ceiling, below: 120 µs}").unwrap().0;
        assert_eq!((one.len(), one[0].metric), (1, Metric::P50));
        let e = parse("{metric: p99, change: lower, by: 1.5 ms}")
            .unwrap()
            .0
            .remove(0);
        assert_eq!(e.to_string(), "p99 lower by at least 1.5 ms");
        assert_eq!(serde_json::to_value(&e).unwrap()["by"], "1.5 ms");
    }

    #[test]
    fn bad_forms_are_refused_with_the_fix() {
        let err = parse("p50 lower by at least 300 µs").unwrap_err();
        assert!(
            err.contains("metric: p50, change: lower, by: 20 µs") && err.contains("note"),
            "{err}"
        );
        assert_eq!(parse("fewer complaints").unwrap(), Expectations::default());
        for (yaml, says) in [
            ("{change: lower}", "needs `by:`"),
            (
                "{change: ceiling, by: 5 µs}",
                "`by` does not go with `change: ceiling`",
            ),
            ("{change: ceiling, below: 5 %}", "not a percentage"),
            ("{change: lower, by: 20}", "needs a unit"),
            ("{change: lower, by: -3 µs}", "not a positive amount"),
            (
                "{change: lower, by: 3 furlongs}",
                "`furlongs` is not a unit",
            ),
            ("{change: sideways, by: 3 µs}", "unknown variant `sideways`"),
            (
                "{change: lower, by: 3 µs, metrc: p99}",
                "unknown field `metrc`",
            ),
            (
                "{metric: p42, change: lower, by: 3 µs}",
                "unknown variant `p42`",
            ),
            (
                "{change: lower, by: 99999999999999999999 µs}",
                "not a positive amount",
            ),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }
}
