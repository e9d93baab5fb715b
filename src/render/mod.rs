//! Renderers: tables for people, YAML/JSON for machines (stable field names,
//! documented in the README).

pub mod inventory;
pub mod probe;

use anyhow::Result;
use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Modify, Style, Width};

/// Long values (command lines, mitigation texts) wrap instead of widening every row.
const VALUE_WIDTH: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Yaml,
    Json,
}

/// Serializes for machines; `None` for the table format (the caller renders).
pub fn machine<T: Serialize>(format: Format, value: &T) -> Result<Option<String>> {
    Ok(match format {
        Format::Table => None,
        Format::Json => Some(serde_json::to_string_pretty(value)? + "\n"),
        Format::Yaml => Some(serde_yaml::to_string(value)?),
    })
}

/// A titled two-column table of facts.
pub fn facts(title: &str, rows: &[(String, String)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut b = Builder::new();
    for (k, v) in rows {
        b.push_record([k.as_str(), v.as_str()]);
    }
    let mut table = b.build();
    table
        .with(Style::blank())
        .with(Modify::new(Columns::one(1)).with(Width::wrap(VALUE_WIDTH).keep_words(true)));
    format!("{title}\n{table}\n\n")
}

/// A titled table with a header row.
pub fn grid(title: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut b = Builder::new();
    b.push_record(header.iter().map(|h| h.to_string()));
    for r in rows {
        b.push_record(r);
    }
    format!("{title}\n{}\n\n", b.build().with(Style::sharp()))
}

pub const NOT_EXPOSED: &str = "not exposed";

pub fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => NOT_EXPOSED.to_string(),
    }
}
