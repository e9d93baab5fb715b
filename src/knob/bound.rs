//! `set:` of a numeric knob: one value, or a bound (`{at-least: N}`,
//! `{at-most: N}`, or both) as tuned's `>N`/`<N` (tuned/plugins/base.py,
//! `_process_assignment_modifiers`): apply writes the bound only where the
//! current value is past it, so a host already beyond it is left alone and
//! revert has nothing of it to restore.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, Visitor};

use super::FieldError;
use crate::schema::{Persistence, Scalar};

/// `set:` as written: a scalar or a bound's map.
#[derive(Debug)]
pub enum SetDoc {
    Value(Scalar),
    Bound(BoundDoc),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BoundDoc {
    at_least: Option<Scalar>,
    at_most: Option<Scalar>,
}

impl<'de> Deserialize<'de> for SetDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SetDoc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value, or a bound such as {at-least: 2048} or {at-most: 100}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SetDoc, E> {
                Scalar::deserialize(v.into_deserializer()).map(SetDoc::Value)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<SetDoc, E> {
                Scalar::deserialize(v.into_deserializer()).map(SetDoc::Value)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SetDoc, E> {
                Scalar::deserialize(v.into_deserializer()).map(SetDoc::Value)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SetDoc, E> {
                Scalar::deserialize(v.into_deserializer()).map(SetDoc::Value)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SetDoc, E> {
                Scalar::deserialize(v.into_deserializer()).map(SetDoc::Value)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SetDoc, A::Error> {
                BoundDoc::deserialize(de::value::MapAccessDeserializer::new(map)).map(SetDoc::Bound)
            }
        }
        d.deserialize_any(V)
    }
}

/// A lower and/or upper bound on a whole number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub at_least: Option<i128>,
    pub at_most: Option<i128>,
}

/// One numeric setting: a value to write, or a bound to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    Value(String),
    Bound(Bound),
}

/// A whole number as the kernel's `kstrto*` take it (decimal, an optional sign).
pub fn integer(text: &str) -> Option<i128> {
    let t = text.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

impl Setting {
    /// `field` is where `set` is (`set`, `set.read_ahead_kb`); a value is kept
    /// as written (the kind checks it), a bound must be whole numbers in order.
    pub fn parse(field: &str, doc: SetDoc) -> Result<Setting, FieldError> {
        let b = match doc {
            SetDoc::Value(v) => return Ok(Setting::Value(v.0)),
            SetDoc::Bound(b) => b,
        };
        let number = |name: &str, s: Option<Scalar>| -> Result<Option<i128>, FieldError> {
            s.map(|s| {
                integer(&s.0).ok_or_else(|| {
                    FieldError::new(
                        &format!("{field}.{name}"),
                        format!("{:?} is not a whole number: a bound compares numbers", s.0),
                    )
                })
            })
            .transpose()
        };
        let bound = Bound {
            at_least: number("at-least", b.at_least)?,
            at_most: number("at-most", b.at_most)?,
        };
        match (bound.at_least, bound.at_most) {
            (None, None) => Err(FieldError::new(
                field,
                "an empty bound: give at-least, at-most or both",
            )),
            (Some(lo), Some(hi)) if lo > hi => Err(FieldError::new(
                field,
                format!("at-least {lo} is above at-most {hi}: no value satisfies both"),
            )),
            _ => Ok(Setting::Bound(bound)),
        }
    }

    pub fn bound(&self) -> Option<&Bound> {
        match self {
            Setting::Bound(b) => Some(b),
            Setting::Value(_) => None,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Value(v) => f.write_str(v),
            Setting::Bound(b) => write!(f, "{b}"),
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.at_least, self.at_most) {
            (Some(lo), Some(hi)) => write!(f, "at least {lo} and at most {hi}"),
            (Some(lo), None) => write!(f, "at least {lo}"),
            (None, Some(hi)) => write!(f, "at most {hi}"),
            (None, None) => f.write_str("any value"),
        }
    }
}

/// What a bound makes of the value a file holds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the bound: nothing to write.
    Satisfied,
    /// Past it: write this (the bound it is past).
    Write(String),
    /// Not one whole number (`4096 16384 4194304`, text): a bound cannot judge it.
    NotANumber,
}

impl Bound {
    pub fn judge(&self, current: &str) -> Verdict {
        let Some(v) = integer(current) else {
            return Verdict::NotANumber;
        };
        match (self.at_least, self.at_most) {
            (Some(lo), _) if v < lo => Verdict::Write(lo.to_string()),
            (_, Some(hi)) if v > hi => Verdict::Write(hi.to_string()),
            _ => Verdict::Satisfied,
        }
    }

    /// Whether a value read back satisfies the bound.
    pub fn holds(&self, read: &str) -> bool {
        self.judge(read) == Verdict::Satisfied
    }

    /// Why a file holding `current` cannot take a bound.
    pub fn not_a_number(&self, path: &str, current: &str) -> String {
        format!(
            "{path} holds {current:?}, not one whole number: `{self}` compares numbers; \
             set a value instead"
        )
    }
}

/// The mechanisms that can hold a bound across a reboot: a boot unit, which
/// applies the knob again and so judges the bound against what that boot
/// has; a file of fixed lines (sysctl.d, tmpfiles.d) would write the bound
/// even where the host boots above it, lowering it.
pub const BOUND_PERSISTENCE: &[Persistence] = &[Persistence::Runtime, Persistence::Boot];

/// Why a file of fixed lines cannot hold a bound, for the refusal.
pub const BOUND_WHY: &str = "a bound is judged against the value each boot has; a file of fixed \
     lines (sysctl.d, tmpfiles.d, a udev rule's ATTR assignment) would write it even where the \
     host boots beyond it";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Setting, FieldError> {
        Setting::parse("set", serde_yaml::from_str::<SetDoc>(yaml).unwrap())
    }

    #[test]
    fn a_bound_judges_whole_numbers_and_writes_the_bound_it_is_past() {
        let b = parse("{at-least: 2048}").unwrap();
        let b = b.bound().unwrap();
        assert_eq!(b.judge("4096"), Verdict::Satisfied);
        assert_eq!(b.judge("2048"), Verdict::Satisfied);
        assert_eq!(b.judge("128\n"), Verdict::Write("2048".into()));
        assert_eq!(b.judge("4096 16384"), Verdict::NotANumber);
        let r = parse("{at-least: -1, at-most: 10}").unwrap();
        let r = r.bound().unwrap();
        assert_eq!(r.judge("-2"), Verdict::Write("-1".into()));
        assert_eq!(r.judge("11"), Verdict::Write("10".into()));
        assert_eq!(r.judge("0"), Verdict::Satisfied);
        assert_eq!(r.to_string(), "at least -1 and at most 10");
        assert_eq!(parse("2048").unwrap(), Setting::Value("2048".into()));
    }

    #[test]
    fn bad_bounds_name_their_field() {
        let e = parse("{at-least: lots}").unwrap_err();
        assert_eq!(e.field, "set.at-least");
        let e = parse("{at-least: 10, at-most: 5}").unwrap_err();
        assert!(e.message.contains("no value satisfies both"), "{e:?}");
        assert!(parse("{}").is_err());
        let e = serde_yaml::from_str::<SetDoc>("{at-lest: 1}").unwrap_err();
        assert!(e.to_string().contains("unknown field `at-lest`"), "{e}");
    }
}
