//! A knob read again with another `set:` value (the legs of a verify sweep):
//! the kind checks the value exactly as it checks the manifest's.

use serde_yaml::Value;

use super::{Knob, Source, read::read_knob};

/// The knob as if its document said `set: VALUE` (`VALUE` read as a YAML
/// scalar, so `5` is a number and `n/a` a word); the kind's message when it
/// refuses the value.
pub fn with_set(knob: &Knob, value: &str) -> Result<Knob, String> {
    let parsed: Value = match serde_yaml::from_str(value) {
        Ok(v @ (Value::Number(_) | Value::String(_) | Value::Bool(_))) => v,
        _ => Value::String(value.to_string()),
    };
    let Ok(Value::Mapping(mut doc)) = serde_yaml::from_str::<Value>(&knob.source.text) else {
        return Err(format!("{}: not a mapping", knob.source.file.display()));
    };
    doc.insert(Value::String("set".into()), parsed);
    let text = serde_yaml::to_string(&doc).map_err(|e| e.to_string())?;
    let source = Source {
        file: knob.source.file.clone(),
        first_line: knob.source.first_line,
        text,
    };
    read_knob(source).map_err(joined)
}

/// A knob read from a document written by hostknob (a `tune` space's
/// `kind`+`target` entry): the kind's messages when it refuses it.
pub fn from_text(file: &std::path::Path, first_line: usize, text: String) -> Result<Knob, String> {
    let source = Source {
        file: file.to_path_buf(),
        first_line,
        text,
    };
    read_knob(source).map_err(joined)
}

/// The loader's errors as one line, field first.
fn joined(errors: Vec<super::ManifestError>) -> String {
    errors
        .into_iter()
        .map(|e| match e.field {
            Some(f) => format!("{f}: {}", e.message),
            None => e.message,
        })
        .collect::<Vec<_>>()
        .join("; ")
}
