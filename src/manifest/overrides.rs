//! Overrides of a knob's `set` and `target`: from a profile's `overrides:`
//! or from a local file (`/etc/hostknob/overrides/*.yaml` under --root, or
//! `--overrides DIR`), each a mapping `knob-id: {set: ..., target: ...}`.
//!
//! An overridden knob is built again by its kind from the merged document,
//! exactly as if the values were written in its file, so an override is
//! checked as strictly; its errors name the override's file and line.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::{Knob, ManifestError, ManifestErrors, Source, split_yaml_message};
use crate::knob::{self, BuildError};

/// Where local overrides live unless `--overrides DIR` says.
pub const LOCAL_DIR: &str = "/etc/hostknob/overrides";

/// Where a knob's value came from, when not from its own file.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Overridden {
    /// The file that set it: a profile (`profiles/NAME.yaml`) or a local override file.
    pub file: String,
    /// Line of the knob's entry in that file.
    pub line: usize,
    /// The fields it set: `set`, `target`.
    pub fields: Vec<String>,
    /// The profile, when the file is one; `null` for a local override file.
    pub profile: Option<String>,
}

impl Overridden {
    /// `set, target from FILE:LINE (profile P)`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} from {}:{}",
            self.fields.join(", "),
            self.file,
            self.line
        );
        if let Some(p) = &self.profile {
            s.push_str(&format!(" (profile {p})"));
        }
        s
    }
}

/// One entry of an overrides mapping: what it sets for which knob, and where.
#[derive(Clone, Debug)]
pub struct Entry {
    pub knob: String,
    pub set: Option<Value>,
    pub target: Option<Value>,
    /// The file's document, to locate errors in.
    pub source: Source,
    /// The entry's path in the document: `overrides.ID` (profile) or `ID` (local file).
    pub path: String,
    pub profile: Option<String>,
}

impl Entry {
    pub fn origin(&self) -> Overridden {
        let fields = [
            ("set", self.set.is_some()),
            ("target", self.target.is_some()),
        ];
        Overridden {
            file: self.source.file.display().to_string(),
            line: self.line(),
            fields: fields
                .iter()
                .filter(|f| f.1)
                .map(|f| f.0.to_string())
                .collect(),
            profile: self.profile.clone(),
        }
    }

    pub fn line(&self) -> usize {
        super::locate::line_of(&self.source.text, &self.path).unwrap_or(1) + self.source.first_line
            - 1
    }

    /// `FILE:LINE`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.source.file.display(), self.line())
    }

    /// An error at `field` inside this entry (`set`, `target.cpus`).
    pub fn error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let path = if field.is_empty() {
            self.path.clone()
        } else {
            format!("{}.{field}", self.path)
        };
        self.source.error(&path, message)
    }
}

/// Reads the entries of an overrides mapping found at `base` (`overrides` in
/// a profile, the whole document in a local file); every problem is returned.
pub fn entries(
    source: &Source,
    map: &Mapping,
    base: &str,
    profile: Option<&str>,
    errors: &mut Vec<ManifestError>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    for (k, v) in map {
        let Some(id) = k.as_str() else {
            errors.push(source.error(base, "a knob id must be a string"));
            continue;
        };
        let path = if base.is_empty() {
            id.to_string()
        } else {
            format!("{base}.{id}")
        };
        let Value::Mapping(fields) = v else {
            errors.push(source.error(
                &path,
                format!(
                    "{}: give a mapping `{{set: ..., target: ...}}`",
                    super::yaml_word(v)
                ),
            ));
            continue;
        };
        let mut entry = Entry {
            knob: id.to_string(),
            set: None,
            target: None,
            source: source.clone(),
            path: path.clone(),
            profile: profile.map(str::to_string),
        };
        for (f, value) in fields {
            match f.as_str() {
                Some("set") => entry.set = Some(value.clone()),
                Some("target") => entry.target = Some(value.clone()),
                other => errors.push(source.error(
                    &format!("{path}.{}", other.unwrap_or("?")),
                    format!(
                        "unknown field `{}`: an override sets `set` and `target` only \
                         (the rest of a knob is reviewed in its file)",
                        other.unwrap_or("?")
                    ),
                )),
            }
        }
        if entry.set.is_none() && entry.target.is_none() {
            errors.push(source.error(&path, "empty override: give `set`, `target` or both"));
            continue;
        }
        out.push(entry);
    }
    out
}

/// The local override files in `dir` (`*.yaml`, `*.yml`, sorted), read
/// strictly. `required`: the directory was named (`--overrides DIR`), so
/// its absence is an error; the default directory may be missing.
pub fn read_local(dir: &Path, required: bool) -> Result<Vec<Entry>, ManifestErrors> {
    let fail = |file: &Path, line: Option<usize>, message: String| {
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            line,
            field: None,
            message,
        }])
    };
    if !dir.is_dir() {
        if !required && !dir.exists() {
            return Ok(Vec::new());
        }
        return Err(fail(
            dir,
            None,
            "no such overrides directory (--overrides DIR, or HOSTKNOB_OVERRIDES)".into(),
        ));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| fail(dir, None, format!("cannot read: {e}")))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| super::is_yaml_name(&n.to_string_lossy()))
        })
        .collect();
    files.sort();
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for file in files {
        let text = match super::read_manifest_file(&file) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if let Some(line) = super::depth::too_deep(&text) {
            errors.push(ManifestError {
                file: file.clone(),
                line: Some(line),
                field: None,
                message: "nested too deep: an override file is a few levels deep".into(),
            });
            continue;
        }
        for (first_line, doc) in super::documents(&text) {
            let source = Source {
                file: file.clone(),
                first_line,
                text: doc,
            };
            match serde_yaml::from_str::<Value>(&source.text) {
                Ok(Value::Mapping(map)) => {
                    out.extend(entries(&source, &map, "", None, &mut errors));
                }
                Ok(other) => errors.push(source.error(
                    "",
                    format!(
                        "{}: an override file is a mapping `knob-id: {{set: ..., target: ...}}`",
                        super::yaml_word(&other)
                    ),
                )),
                Err(e) => errors.push(source.yaml_error(&e)),
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(ManifestErrors(errors))
    }
}

/// The knob's own `set` and `target`, merged with `entries` in order (a
/// later one wins): `set` is replaced; a `target` mapping replaces only the
/// keys it names, so `target: {cpus: 4-11}` keeps the knob's other target fields.
fn merged_doc(knob: &Knob, entries: &[&Entry]) -> Option<Mapping> {
    let Ok(Value::Mapping(mut doc)) = serde_yaml::from_str::<Value>(&knob.source.text) else {
        return None;
    };
    for e in entries {
        if let Some(set) = &e.set {
            doc.insert("set".into(), set.clone());
        }
        if let Some(target) = &e.target {
            match (doc.get_mut("target"), target) {
                (Some(Value::Mapping(old)), Value::Mapping(new)) => {
                    for (k, v) in new {
                        old.insert(k.clone(), v.clone());
                    }
                }
                _ => {
                    doc.insert("target".into(), target.clone());
                }
            }
        }
    }
    Some(doc)
}

/// The knob as its kind builds it with `entries` applied, or the error at
/// the override that gave the refused field.
fn build(knob: &Knob, entries: &[&Entry]) -> Result<Box<dyn crate::knob::KnobKind>, ManifestError> {
    let last = entries.last().expect("at least one override");
    let doc = merged_doc(knob, entries)
        .ok_or_else(|| last.error("", format!("knob {} could not be read again", knob.id)))?;
    let text = serde_yaml::to_string(&doc).map_err(|e| last.error("", e.to_string()))?;
    let (field, message) = match knob::build(knob.kind, &text) {
        Ok(spec) => return Ok(spec),
        Err(BuildError::Field(e)) => (e.field, e.message),
        Err(BuildError::Yaml(e)) => {
            let (field, message) = split_yaml_message(&e.to_string());
            (field.unwrap_or_default(), message)
        }
    };
    // The entry that gave the field, else the last one.
    let top = field.split(['.', '[']).next().unwrap_or("");
    let blamed = entries
        .iter()
        .rev()
        .find(|e| (top == "set" && e.set.is_some()) || (top == "target" && e.target.is_some()))
        .unwrap_or(last);
    Err(blamed.error(
        &field,
        format!(
            "{message} (override of {} knob {}, defined at {}:{})",
            knob.kind,
            knob.id,
            knob.source.file.display(),
            knob.source.first_line
        ),
    ))
}

/// Checks that `entries` would build the knob, without changing it.
pub fn check(knob: &Knob, entries: &[&Entry]) -> Result<(), ManifestError> {
    build(knob, entries).map(drop)
}

/// Applies `entries` (in order, a later one wins) to the knob and records
/// where each value came from.
pub fn apply(knob: &mut Knob, entries: &[&Entry]) -> Result<(), ManifestError> {
    if entries.is_empty() {
        return Ok(());
    }
    knob.spec = build(knob, entries)?;
    for e in entries {
        let o = e.origin();
        if !knob.overrides.contains(&o) {
            knob.overrides.push(o);
        }
    }
    Ok(())
}
