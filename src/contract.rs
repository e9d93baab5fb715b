//! JSON contracts: every machine-readable output names its schema and version
//! (`"schema": "hostknob/audit/v1"`), and `hostknob schema NAME` prints the
//! JSON Schema generated from the Rust type that produces it.

use schemars::{JsonSchema, Schema};
use serde::Serialize;

/// Bumped when a field changes meaning or goes away; new fields do not bump it.
pub const VERSION: u32 = 1;

/// An output type and the name of its contract.
pub trait Contract {
    const NAME: &'static str;
}

/// `hostknob/NAME/vVERSION`, the value of every output's `schema` field.
pub fn id(name: &str) -> String {
    format!("hostknob/{name}/v{VERSION}")
}

/// The output with its `schema` field first.
#[derive(Serialize)]
pub struct Versioned<'a, T> {
    pub schema: String,
    #[serde(flatten)]
    pub body: &'a T,
}

impl<'a, T: Contract> Versioned<'a, T> {
    pub fn new(body: &'a T) -> Self {
        Versioned {
            schema: id(T::NAME),
            body,
        }
    }
}

macro_rules! contracts {
    ($($name:literal => $ty:ty),* $(,)?) => {
        $(impl Contract for $ty { const NAME: &'static str = $name; })*
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
    "inventory" => crate::inventory::Inventory,
    "capture" => crate::capture::CaptureReport,
    "knobs" => crate::render::audit::KnobList<'_>,
    "audit" => crate::audit::Report,
    "apply" => crate::apply::ApplyOutcome,
    "revert" => crate::apply::RevertOutcome,
    "persist" => crate::persist::Artifact,
    "persist-change" => crate::persist::PersistOutcome,
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
        .into_generator()
        .into_root_schema_for::<T>();
    let id = id(name);
    s.insert("title".into(), id.clone().into());
    if let Some(props) = s.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.insert(
            "schema".into(),
            serde_json::json!({ "const": id, "description": "This output's contract and version." }),
        );
    }
    match s.get_mut("required").and_then(|r| r.as_array_mut()) {
        Some(req) => req.insert(0, "schema".into()),
        None => {
            s.insert("required".into(), serde_json::json!(["schema"]));
        }
    }
    s
}
