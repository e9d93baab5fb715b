use anyhow::{Result, bail};

use crate::cli::SchemaArgs;
use schemars::{JsonSchema, Schema};

use crate::contract::{self, Contract, VERSION};

pub fn run(args: &SchemaArgs) -> Result<i32> {
    let Some(name) = &args.name else {
        for n in NAMES {
            println!("{n}\tschema {}", contract::VERSION);
        }
        return Ok(0);
    };
    match schema(name) {
        Some(s) => println!("{}", serde_json::to_string_pretty(&s)?),
        None => bail!(
            "schema {name:?}: no such output; one of {}",
            NAMES.join(", ")
        ),
    }
    Ok(0)
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
    "knobs" => crate::audit::KnobList<'_>,
    "profiles" => crate::manifest::profile_list::ProfileList,
    "audit" => crate::audit::Report,
    "apply" => crate::apply::ApplyOutcome,
    "revert" => crate::apply::RevertOutcome,
    "persist" => crate::persist::Artifact,
    "persist-change" => crate::apply::install::PersistOutcome,
    "probe-wakeup" => crate::probe::wakeup::WakeupResult,
    "probe-timer" => crate::probe::timer::TimerResult,
    "probe-rpc" => crate::probe::rpc::RpcResult,
    "probe-noise" => crate::probe::noise::NoiseResult,
    "probe-idle-cpu" => crate::probe::idle_cpu::IdleCpuResult,
    "probe-rss" => crate::probe::rss::PidResult,
    "probe-rss-self" => crate::probe::rss::SelfBurstResult,
    "verify" => crate::verify::Report,
    "error" => crate::contract::ErrorReport,
    "verify-sweep" => crate::verify::sweep::SweepReport,
    "verify-bundle" => crate::verify::bundle::BundleReport,
    "tune" => crate::tune::output::TuneReport,
    "report" => crate::report::FleetReport,
    "isolate" => crate::isolate::IsolatePlan,
    "report-compare" => crate::report::FleetChange,
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
