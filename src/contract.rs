//! JSON contracts: every machine-readable output carries `"schema": N`, its
//! version (as `inventory` always has), and `hostknob schema NAME` prints the
//! JSON Schema generated from the Rust type that produces it.

use schemars::{JsonSchema, Schema};
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

macro_rules! contracts {
    ($($name:literal $([$embedded:ident])? => $ty:ty),* $(,)?) => {
        $(impl Contract for $ty {
            const NAME: &'static str = $name;
            const EMBEDDED: bool = false $(|| stringify!($embedded).len() > 0)?;
        })*
        /// Every contract's name, in the order `hostknob schema` lists them.
        pub const NAMES: &[&str] = &[$($name),*];
        /// The JSON Schema of the contract called `name`.
        pub fn schema(name: &str) -> Option<Schema> {
            match name {
                $($name => Some(versioned::<$ty>($name)),)*
                _ => None,
            }
        }
    };
}

contracts! {
    "inventory" [embedded] => crate::inventory::Inventory,
    "capture" => crate::capture::CaptureReport,
    "knobs" => crate::render::audit::KnobList<'_>,
    "audit" => crate::audit::Report,
    "apply" => crate::apply::ApplyOutcome,
    "revert" => crate::apply::RevertOutcome,
    "persist" => crate::persist::Artifact,
    "persist-change" => crate::apply::install::PersistOutcome,
    "probe-wakeup" => crate::probe::wakeup::WakeupResult,
    "probe-timer" => crate::probe::timer::TimerResult,
    "probe-rpc" => crate::probe::rpc::RpcResult,
    "probe-idle-cpu" => crate::probe::idle_cpu::IdleCpuResult,
    "probe-rss" => crate::probe::rss::PidResult,
    "probe-rss-self" => crate::probe::rss::SelfBurstResult,
    "verify" => crate::verify::Report,
    "report" => crate::report::FleetReport,
}

/// The type's schema with the `schema` field required and pinned to its id.
fn versioned<T: JsonSchema>(name: &str) -> Schema {
    let mut s = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    s.insert(
        "title".into(),
        format!("hostknob {name} output, schema {VERSION}").into(),
    );
    if let Some(props) = s.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.insert(
            "schema".into(),
            serde_json::json!({
                "description": "The output's schema version.",
                "type": "integer",
                "const": VERSION
            }),
        );
    }
    match s.get_mut("required").and_then(|r| r.as_array_mut()) {
        Some(req) if req.iter().any(|r| r == "schema") => {}
        Some(req) => req.insert(0, "schema".into()),
        None => {
            s.insert("required".into(), serde_json::json!(["schema"]));
        }
    }
    s
}
