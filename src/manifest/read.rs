//! One knob document, read and checked. Every problem of the document is
//! reported, not just the first: serde stops at the first one (and names it
//! best, with its line and nested path), so when it fails the document is
//! read again field by field to find the others.

use serde_yaml::{Mapping, Value};

use super::when::When;
use super::{History, HostSel, Knob, ManifestError, Source, split_yaml_message};
use crate::knob::{self, BuildError, KindName, KnobKind};
use crate::schema::{HistoryEntry, KnobDoc, Persistence, Verify};

/// The fields a knob document may have; the first seven are required.
const FIELDS: [&str; 12] = [
    "id",
    "title",
    "kind",
    "set",
    "hosts",
    "persistence",
    "why",
    "target",
    "caveats",
    "history",
    "verify",
    "when",
];
const REQUIRED: usize = 7;

/// The kind and its own `target`/`set`, when they could be read.
type Spec = Option<(KindName, Box<dyn KnobKind>)>;

/// The common fields that could be read (`None`: missing or malformed,
/// already reported).
struct Fields {
    id: Option<String>,
    title: Option<String>,
    kind: Option<String>,
    hosts: Option<Value>,
    persistence: Option<Persistence>,
    caveats: Vec<String>,
    why: Option<String>,
    history: Vec<HistoryEntry>,
    verify: Option<Verify>,
    when: Option<Value>,
}

/// Reads one knob; every problem found in it is returned, sorted by line.
pub(super) fn read_knob(source: Source) -> Result<Knob, Vec<ManifestError>> {
    let mut errors = Vec::new();
    let (fields, spec) = match serde_yaml::from_str::<KnobDoc<Value, Value>>(&source.text) {
        Ok(doc) => {
            let fields = Fields {
                id: Some(doc.id),
                title: Some(doc.title),
                kind: Some(doc.kind),
                hosts: Some(doc.hosts),
                persistence: Some(doc.persistence),
                caveats: doc.caveats,
                why: Some(doc.why),
                history: doc.history,
                verify: doc.verify,
                when: doc.when,
            };
            let spec = kind_of(&source, fields.kind.as_deref(), &mut errors).and_then(|kind| {
                build(&source, kind, &source.text, &mut errors).map(|s| (kind, s))
            });
            (fields, spec)
        }
        Err(e) => {
            let first = source.yaml_error(&e);
            // A syntax error (or a document that is not a mapping) hides the rest.
            let Ok(Value::Mapping(map)) = serde_yaml::from_str::<Value>(&source.text) else {
                return Err(vec![first]);
            };
            let (fields, spec) = salvage(&source, &map, &mut errors);
            // The field serde stopped at is reported once, as serde named it.
            let top = first.field.as_deref().map(top_field);
            errors.retain(|e| top.is_none() || e.field.as_deref().map(top_field) != top);
            errors.push(first);
            (fields, spec)
        }
    };
    let knob = check(source, fields, spec, &mut errors);
    errors.sort_by_key(|e| e.line);
    match knob {
        Some(k) if errors.is_empty() => Ok(k),
        _ => Err(errors),
    }
}

/// `history[0].who` -> `history`.
fn top_field(field: &str) -> &str {
    field.split(['.', '[']).next().unwrap_or(field)
}

fn kind_of(
    source: &Source,
    kind: Option<&str>,
    errors: &mut Vec<ManifestError>,
) -> Option<KindName> {
    let kind = kind?;
    let parsed = KindName::parse(kind);
    if parsed.is_none() {
        errors.push(source.error(
            "kind",
            format!(
                "unknown kind {kind:?}{}; known kinds: {}",
                super::did_you_mean(kind, KindName::ALL.iter().map(|k| k.as_str())),
                KindName::ALL.map(|k| k.as_str()).join(", ")
            ),
        ));
    }
    parsed
}

/// The kind's own `target` and `set`, read from `text` (the document, or a
/// stand-in holding only them); errors are located in the document itself.
fn build(
    source: &Source,
    kind: KindName,
    text: &str,
    errors: &mut Vec<ManifestError>,
) -> Option<Box<dyn KnobKind>> {
    match knob::build(kind, text) {
        Ok(s) => Some(s),
        Err(BuildError::Field(e)) => {
            errors.push(source.field_error(e));
            None
        }
        Err(BuildError::Yaml(e)) if text == source.text => {
            errors.push(source.yaml_error(&e));
            None
        }
        Err(BuildError::Yaml(e)) => {
            let (field, message) = split_yaml_message(&e.to_string());
            errors.push(source.error(field.as_deref().unwrap_or("target"), message));
            None
        }
    }
}

/// One field read on its own: serde's message, located at the field.
fn field<T: serde::de::DeserializeOwned>(
    source: &Source,
    map: &Mapping,
    name: &str,
    errors: &mut Vec<ManifestError>,
) -> Option<T> {
    value_as(source, map.get(name)?, name, errors)
}

/// `v` (found at `name`) as a `T`, or an error naming `name` and the path inside it.
fn value_as<T: serde::de::DeserializeOwned>(
    source: &Source,
    v: &Value,
    name: &str,
    errors: &mut Vec<ManifestError>,
) -> Option<T> {
    match serde_yaml::from_value::<T>(v.clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            let (path, message) = split_yaml_message(&e.to_string());
            let path = match path {
                Some(p) if p.starts_with('[') => format!("{name}{p}"),
                Some(p) => format!("{name}.{p}"),
                None => name.to_string(),
            };
            errors.push(source.error(&path, message));
            None
        }
    }
}

/// Reads a document serde refused, field by field: unknown and missing
/// fields, each field's type, and the kind's `target` and `set` (through a
/// stand-in document with only those and valid common fields).
fn salvage(source: &Source, map: &Mapping, errors: &mut Vec<ManifestError>) -> (Fields, Spec) {
    for key in map.keys() {
        match key.as_str() {
            Some(k) if FIELDS.contains(&k) => {}
            Some(k) => errors.push(source.error(
                k,
                format!(
                    "unknown field `{k}`{}, expected one of {}",
                    super::did_you_mean(k, FIELDS.iter().copied()),
                    FIELDS.map(|f| format!("`{f}`")).join(", ")
                ),
            )),
            None => errors.push(source.error("", "a field name must be a string")),
        }
    }
    for name in &FIELDS[..REQUIRED] {
        if !map.contains_key(*name) {
            errors.push(source.error(name, format!("missing field `{name}`")));
        }
    }
    let fields = Fields {
        id: field(source, map, "id", errors),
        title: field(source, map, "title", errors),
        kind: field(source, map, "kind", errors),
        hosts: map.get("hosts").cloned(),
        persistence: field(source, map, "persistence", errors),
        caveats: field(source, map, "caveats", errors).unwrap_or_default(),
        why: field(source, map, "why", errors),
        // Entry by entry, so each keeps its index and the good ones are checked.
        history: match map.get("history") {
            Some(Value::Sequence(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| value_as(source, v, &format!("history[{i}]"), errors))
                .collect(),
            _ => field(source, map, "history", errors).unwrap_or_default(),
        },
        verify: field::<Option<Verify>>(source, map, "verify", errors).flatten(),
        when: map.get("when").cloned(),
    };
    let spec = kind_of(source, fields.kind.as_deref(), errors).and_then(|kind| {
        let mut stand_in = Mapping::new();
        for (k, v) in [
            ("id", "x"),
            ("title", "x"),
            ("why", "x"),
            ("hosts", "*"),
            ("persistence", "runtime"),
            ("kind", kind.as_str()),
        ] {
            stand_in.insert(k.into(), v.into());
        }
        for k in ["target", "set"] {
            if let Some(v) = map.get(k) {
                stand_in.insert(k.into(), v.clone());
            }
        }
        let text = serde_yaml::to_string(&stand_in).ok()?;
        // A missing `set` is reported above.
        if !map.contains_key("set") {
            return None;
        }
        build(source, kind, &text, errors).map(|s| (kind, s))
    });
    (fields, spec)
}

pub(super) fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a knob id: lower-case letters, digits and `-`, at most 64"
        ))
    }
}

/// The checks made after parsing, each on what could be read; the knob when
/// everything needed was there.
fn check(source: Source, f: Fields, spec: Spec, errors: &mut Vec<ManifestError>) -> Option<Knob> {
    if let Some(id) = &f.id
        && let Err(m) = check_id(id)
    {
        errors.push(source.error("id", m));
    }
    for (name, text) in [("title", &f.title), ("why", &f.why)] {
        if text.as_ref().is_some_and(|t| t.trim().is_empty()) {
            errors.push(source.error(name, "empty: say it in words"));
        }
    }
    for (i, c) in f.caveats.iter().enumerate() {
        if c.trim().is_empty() {
            errors.push(source.error(&format!("caveats[{i}]"), "empty caveat"));
        }
    }
    let hosts = f.hosts.as_ref().and_then(|h| {
        HostSel::parse("hosts", h)
            .map_err(|e| errors.push(source.field_error(e)))
            .ok()
    });
    if let (Some((kind, spec)), Some(p)) = (&spec, f.persistence) {
        if !spec.persistence_allowed().contains(&p) {
            errors.push(source.error(
                "persistence",
                format!(
                    "{} cannot hold a {} knob{}; use one of: {}",
                    p,
                    kind,
                    spec.persistence_refused(p)
                        .map(|w| format!(" ({w})"))
                        .unwrap_or_default(),
                    spec.persistence_allowed()
                        .iter()
                        .map(|p| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        } else if p == Persistence::Cmdline && spec.cmdline_args().is_none() {
            errors.push(source.error(
                "persistence",
                format!("this {kind} knob has no kernel command-line form"),
            ));
        }
    }
    let mut history = Vec::new();
    for (i, h) in f.history.iter().enumerate() {
        let when = crate::schema::parse_when(&h.date)
            .map_err(|m| errors.push(source.error(&format!("history[{i}].date"), m)))
            .ok();
        let hosts = HostSel::parse(&format!("history[{i}].hosts"), &h.hosts)
            .map_err(|e| errors.push(source.field_error(e)))
            .ok();
        if let (Some((when, _)), Some(hosts)) = (when, hosts) {
            history.push(History {
                date: h.date.clone(),
                when,
                action: h.action,
                hosts,
                note: h.note.clone(),
                persistence: h
                    .persistence
                    .or(f.persistence)
                    .unwrap_or(Persistence::Runtime),
            });
        }
    }
    if let Some(v) = &f.verify
        && v.note.as_ref().is_some_and(|n| n.trim().is_empty())
    {
        errors.push(source.error("verify.note", "empty: say what the probe should show"));
    }
    let when = match &f.when {
        None => None,
        Some(v) => match When::parse("when", v) {
            Ok(w) => Some(w),
            Err(e) => {
                errors.push(source.field_error(e));
                return None;
            }
        },
    };
    if let Some(crate::schema::Verify {
        probe: crate::schema::command::ProbeSpec::Command(c),
        ..
    }) = &f.verify
    {
        for (field, m) in c.check() {
            errors.push(source.error(&field, m));
        }
    }
    let (kind, spec) = spec?;
    Some(Knob {
        id: f.id?,
        title: f.title?,
        kind,
        hosts: hosts?,
        persistence: f.persistence?,
        caveats: f.caveats,
        why: f.why?,
        history,
        verify: f.verify,
        source,
        spec,
        when,
        overrides: Vec::new(),
    })
}
