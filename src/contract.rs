//! JSON contracts: every machine-readable output carries `"schema": N`, its
//! version (as `inventory` always has). The registry of outputs and their JSON
//! Schemas is `commands::schema` (it names types of every module; this stays a leaf).

use serde::Serialize;

/// Every output's version; bumped when a field changes meaning or goes away
/// (new fields do not bump it).
pub const VERSION: u32 = 1;
const _: () = assert!(crate::inventory::SCHEMA_VERSION == VERSION);

/// An output type and the name of its contract.
pub trait Contract {
    const NAME: &'static str;
    /// The type has its own `schema` field (inventory).
    const EMBEDDED: bool = false;
}

/// The output with its `schema` field first (unless the type has its own).
#[derive(Serialize)]
#[serde(untagged)]
pub enum Versioned<'a, T> {
    Wrapped {
        schema: u32,
        #[serde(flatten)]
        body: &'a T,
    },
    Embedded(&'a T),
}

impl<'a, T: Contract> Versioned<'a, T> {
    pub fn new(body: &'a T) -> Self {
        if T::EMBEDDED {
            Versioned::Embedded(body)
        } else {
            Versioned::Wrapped {
                schema: VERSION,
                body,
            }
        }
    }
}

/// Set when the command rendered its own document (`render::machine`): a
/// probe that prints a partial result and then fails gets no second document
/// after it, so stdout stays one parseable document.
pub static DOCUMENT_RENDERED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A command that failed, on stdout when `--format json` (or yaml) was asked
/// for: automation reads the reason there, as it reads the output on success.
/// The same line goes to stderr.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ErrorReport {
    /// What failed, as hostknob says it on stderr (without the `hostknob: ` prefix).
    pub error: String,
    /// The process's exit code (1).
    pub exit_code: i32,
}

impl ErrorReport {
    /// The report as `format` asks (`json` or `yaml`); None for the others.
    pub fn render(&self, format: &str) -> Option<String> {
        let v = Versioned::new(self);
        match format {
            "json" => serde_json::to_string_pretty(&v).ok().map(|t| t + "\n"),
            "yaml" => serde_yaml::to_string(&v).ok(),
            _ => None,
        }
    }
}
