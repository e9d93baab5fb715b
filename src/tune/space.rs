//! The search space file: knobs (a manifest id, or `kind` + `target` as in
//! a knob file) with candidate values (a list, or a numeric range with a
//! step). Every value is checked by its kind before anything runs; every
//! problem is reported as `file:line: field: message`.
//!
//! ```yaml
//! knobs:
//!   - id: thp-madvise                  # a knob of --manifest, its `set:` replaced
//!     values: [always, madvise, never]
//!   - kind: sysctl
//!     target: {name: kernel.msgmax}
//!     range: {from: 8192, to: 65536, step: 8192}
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;

use super::design::{MAX_KNOBS, MAX_VALUES};
use crate::knob::KindName;
use crate::manifest::{Knob, Manifest, ManifestError, ManifestErrors, Source, variant};
use crate::schema::Scalar;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    knobs: Vec<EntryDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    id: Option<String>,
    kind: Option<String>,
    target: Option<Value>,
    values: Option<Vec<Scalar>>,
    range: Option<Range>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    from: i64,
    to: i64,
    step: i64,
}

/// One knob of the space, every value checked by its kind.
pub struct Entry {
    pub id: String,
    /// The entry's line in the space file, and its place in `knobs`.
    pub line: usize,
    pub index: usize,
    pub base: Knob,
    pub values: Vec<String>,
    /// The knob once per value (`set:` replaced).
    pub variants: Vec<Knob>,
}

/// A knob of the space that is not searched, and why (its values unchecked).
pub struct Skipped {
    pub id: String,
    pub line: usize,
    pub reason: String,
}

pub struct Space {
    pub file: PathBuf,
    pub text: String,
    pub entries: Vec<Entry>,
    pub skipped: Vec<Skipped>,
}

enum Parsed {
    Searched(Box<Entry>),
    Skipped(Skipped),
}

/// Why a kind cannot be searched by switching it between legs.
pub fn not_runtime(kind: KindName) -> Option<&'static str> {
    match kind {
        KindName::KernelCmdline => Some("needs a reboot: kernel command line"),
        KindName::Allocator => Some("takes effect when the service restarts: allocator drop-in"),
        KindName::SystemdCpuAffinity => {
            Some("takes effect when PID 1 re-executes or the host boots: systemd CPUAffinity=")
        }
        KindName::Irqbalance => Some("takes effect when irqbalance restarts: its environment file"),
        _ => None,
    }
}

/// Reads and checks a space file; knob ids resolve in `manifest`.
pub fn load(file: &Path, manifest: Option<&Manifest>) -> Result<Space, ManifestErrors> {
    let one = |line, message: String| {
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            line,
            field: None,
            message,
        }])
    };
    let text = std::fs::read_to_string(file).map_err(|e| one(None, e.to_string()))?;
    let source = Source {
        file: file.to_path_buf(),
        first_line: 1,
        text: text.clone(),
    };
    let doc: Doc =
        serde_yaml::from_str(&text).map_err(|e| ManifestErrors(vec![source.yaml_error(&e)]))?;
    if doc.knobs.is_empty() || doc.knobs.len() > MAX_KNOBS {
        return Err(ManifestErrors(vec![source.error(
            "knobs",
            format!("give 1 to {MAX_KNOBS} knobs (got {})", doc.knobs.len()),
        )]));
    }
    let mut errors = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut skipped = Vec::new();
    for (i, e) in doc.knobs.into_iter().enumerate() {
        let at = |f: &str| format!("knobs[{i}]{}{f}", if f.is_empty() { "" } else { "." });
        match entry(&source, e, manifest, &at).map(|p| match p {
            Parsed::Searched(mut e) => {
                e.index = i;
                Parsed::Searched(e)
            }
            s => s,
        }) {
            Ok(Parsed::Searched(e)) => {
                if entries.iter().any(|o| o.id == e.id) {
                    errors.push(source.error(&at("id"), format!("{} is given twice", e.id)));
                } else {
                    entries.push(*e);
                }
            }
            Ok(Parsed::Skipped(s)) => skipped.push(s),
            Err(mut es) => errors.append(&mut es),
        }
    }
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    Ok(Space {
        file: file.to_path_buf(),
        text,
        entries,
        skipped,
    })
}

fn entry(
    source: &Source,
    e: EntryDoc,
    manifest: Option<&Manifest>,
    at: &dyn Fn(&str) -> String,
) -> Result<Parsed, Vec<ManifestError>> {
    let err = |f: &str, m: String| vec![source.error(&at(f), m)];
    let line = crate::manifest::locate::line_of(&source.text, &at("")).unwrap_or(1);
    let values: Vec<String> = match (e.values, e.range) {
        (Some(_), Some(_)) => {
            return Err(err("range", "give `values` or `range`, not both".into()));
        }
        (None, None) => {
            return Err(err(
                "values",
                "give the candidate values: `values: [a, b]` or `range: {from, to, step}`".into(),
            ));
        }
        (Some(v), None) => v.into_iter().map(|s| s.0.trim().to_string()).collect(),
        (None, Some(r)) => range(&r).map_err(|m| err("range", m))?,
    };
    if values.is_empty() || values.len() > MAX_VALUES {
        return Err(err(
            "values",
            format!(
                "give 1 to {MAX_VALUES} values (got {}): each is a leg in every round of its race",
                values.len()
            ),
        ));
    }
    let base = match (&e.id, &e.kind) {
        (Some(_), Some(_)) => {
            return Err(err(
                "kind",
                "give a manifest `id` or a `kind` with its `target`, not both".into(),
            ));
        }
        (None, None) => {
            return Err(err(
                "",
                "give a manifest `id`, or a `kind` and its `target` as in a knob file".into(),
            ));
        }
        (Some(id), None) => {
            if e.target.is_some() {
                return Err(err("target", "a manifest knob keeps its own target: give `kind` instead of `id` to name another".into()));
            }
            match manifest.and_then(|m| m.get(id)) {
                Some(k) if not_runtime(k.kind).is_some() => {
                    return Ok(skip(id.clone(), line, k.kind));
                }
                Some(k) => variant::with_set(k, &k.spec.desired()).map_err(|m| err("id", m))?,
                None => {
                    let hint = manifest
                        .map(|m| m.did_you_mean(id))
                        .unwrap_or_else(|| " (no --manifest was given)".into());
                    return Err(err("id", format!("no knob {id} in the manifest{hint}")));
                }
            }
        }
        (None, Some(kind)) if KindName::parse(kind).and_then(not_runtime).is_some() => {
            let k = KindName::parse(kind).expect("parsed above");
            return Ok(skip(format!("{kind} (line {line})"), line, k));
        }
        (None, Some(kind)) => kind_knob(source, line, kind, e.target.as_ref(), &values[0], at)?,
    };
    let mut variants = Vec::new();
    let mut errors = Vec::new();
    for (j, v) in values.iter().enumerate() {
        if v.is_empty() {
            errors.push(source.error(&at(&format!("values[{j}]")), "empty value"));
        } else if values[..j].contains(v) {
            errors.push(source.error(&at(&format!("values[{j}]")), format!("{v} is given twice")));
        } else {
            match variant::with_set(&base, v) {
                Ok(k) => variants.push(k),
                Err(m) => errors.push(source.error(&at(&format!("values[{j}]")), m)),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Parsed::Searched(Box::new(Entry {
        id: base.id.clone(),
        line,
        index: 0,
        base,
        values,
        variants,
    })))
}

fn skip(id: String, line: usize, kind: KindName) -> Parsed {
    Parsed::Skipped(Skipped {
        id,
        line,
        reason: not_runtime(kind).unwrap_or_default().to_string(),
    })
}

/// The values of a range, from `from` to `to` inclusive.
fn range(r: &Range) -> Result<Vec<String>, String> {
    if r.step <= 0 {
        return Err(format!("step {}: give a positive step", r.step));
    }
    if r.to < r.from {
        return Err(format!("from {} is above to {}", r.from, r.to));
    }
    let n = (r.to - r.from) / r.step + 1;
    if n as usize > MAX_VALUES {
        return Err(format!(
            "{n} values from {} to {} by {}: at most {MAX_VALUES}",
            r.from, r.to, r.step
        ));
    }
    Ok((0..n).map(|k| (r.from + k * r.step).to_string()).collect())
}

/// A knob document for a `kind` + `target` entry, read by the manifest's own reader.
fn kind_knob(
    source: &Source,
    line: usize,
    kind: &str,
    target: Option<&Value>,
    first: &str,
    at: &dyn Fn(&str) -> String,
) -> Result<Knob, Vec<ManifestError>> {
    let err = |f: &str, m: String| vec![source.error(&at(f), m)];
    let Some(k) = KindName::parse(kind) else {
        return Err(err(
            "kind",
            format!(
                "unknown kind {kind:?} (kinds: {})",
                KindName::ALL.map(|k| k.as_str()).join(", ")
            ),
        ));
    };
    let target_text = target
        .map(|t| serde_yaml::to_string(t).unwrap_or_default())
        .unwrap_or_default();
    let id = format!("tune-{}-{}", k.as_str(), crate::name::slug(&target_text))
        .trim_end_matches('-')
        .to_string();
    let mut doc = serde_yaml::Mapping::new();
    let mut put = |key: &str, v: Value| {
        doc.insert(Value::String(key.into()), v);
    };
    put("id", Value::String(id));
    put(
        "title",
        Value::String(format!("{kind} searched by hostknob tune")),
    );
    put("kind", Value::String(kind.into()));
    if let Some(t) = target {
        put("target", t.clone());
    }
    // The first candidate; each one replaces it in turn (`variant::with_set`).
    put("set", Value::String(first.into()));
    put("hosts", Value::String("*".into()));
    put("persistence", Value::String("runtime".into()));
    put("why", Value::String("searched by hostknob tune".into()));
    let text = serde_yaml::to_string(&doc).map_err(|e| err("target", e.to_string()))?;
    variant::from_text(&source.file, line, text).map_err(|m| {
        let field = match m.split(':').next() {
            Some(f) if f.starts_with("target") => "target",
            Some("set") => "values[0]",
            _ => "kind",
        };
        err(field, m)
    })
}
