//! Renderers: tables for people, YAML/JSON for machines (stable field names,
//! documented in the README).

pub mod apply;
pub mod audit;
pub mod inventory;
pub mod markdown;
pub mod probe;
pub mod prometheus;
pub mod svg;
pub mod verify;

use anyhow::Result;
use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Modify, Style, Width};

/// Long values (command lines, mitigation texts) wrap instead of widening every row.
const VALUE_WIDTH: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Yaml,
    Json,
    /// Markdown tables (`report`).
    Markdown,
    /// Prometheus text exposition (`audit`).
    Prometheus,
}

/// Serializes for machines, with the output's `schema` first; `None` for
/// the table format (the caller renders).
pub fn machine<T: Serialize + crate::contract::Contract>(
    format: Format,
    value: &T,
) -> Result<Option<String>> {
    let value = crate::contract::Versioned::new(value);
    Ok(match format {
        Format::Table => None,
        Format::Json => Some(serde_json::to_string_pretty(&value)? + "\n"),
        Format::Yaml => Some(serde_yaml::to_string(&value)?),
        Format::Markdown | Format::Prometheus => anyhow::bail!(
            "--format {}: only {} renders it; use table, yaml or json here",
            if format == Format::Markdown {
                "markdown"
            } else {
                "prometheus"
            },
            if format == Format::Markdown {
                "`report`"
            } else {
                "`audit`"
            }
        ),
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

/// A CPU list, `none` when empty, "not exposed" when absent.
pub fn cpus(l: &Option<crate::cpulist::CpuList>) -> String {
    match l {
        None => NOT_EXPOSED.into(),
        Some(l) if l.is_empty() => "none".into(),
        Some(l) => l.to_string(),
    }
}

/// KiB as a person reads it: `48 KiB`, `1.0 MiB`, `23.5 GiB`.
pub fn kib(v: Option<u64>) -> String {
    match v {
        None => NOT_EXPOSED.into(),
        Some(k) if k >= 1024 * 1024 => format!("{:.1} GiB", k as f64 / (1024.0 * 1024.0)),
        Some(k) if k >= 1024 => format!("{:.1} MiB", k as f64 / 1024.0),
        Some(k) => format!("{k} KiB"),
    }
}

/// One cache row: name, type, size of one, instances, first instance's sharing.
pub fn cache_row(k: &crate::inventory::Cache) -> Vec<String> {
    vec![
        k.level
            .map(|l| format!("L{l}"))
            .unwrap_or_else(|| k.index.clone()),
        opt(&k.kind),
        kib(k.size_kib),
        k.instances.to_string(),
        k.shared_cpu_lists
            .first()
            .map(|l| l.to_string())
            .unwrap_or_default(),
    ]
}

/// `active (control: on)`, as inventory and the host document show SMT.
pub fn smt_state(c: &crate::inventory::Cpu) -> String {
    let state = match c.smt.active {
        Some(true) => "active",
        Some(false) => "inactive",
        None => NOT_EXPOSED,
    };
    match &c.smt.control {
        Some(ctl) => format!("{state} (control: {ctl})"),
        None => state.to_string(),
    }
}

/// `12 (8 cores x 1, 4 cores x 2)`: the core count with threads per core.
pub fn cores_text(c: &crate::inventory::Cpu) -> String {
    let hist: Vec<String> = c
        .threads_per_core_histogram
        .iter()
        .map(|(t, n)| format!("{n} cores x {t}"))
        .collect();
    match c.cores {
        Some(n) => format!("{n} ({})", hist.join(", ")),
        None => NOT_EXPOSED.into(),
    }
}
