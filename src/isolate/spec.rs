//! One knob of isolate's manifest fragment before it is written, and the
//! YAML shapes its targets take: what knobs.rs and nic.rs both build.

use serde_yaml::{Mapping, Value};

use crate::cpulist::CpuList;

/// One knob of the fragment before it is written.
pub(super) struct Spec {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    pub target: Option<Value>,
    pub set: Value,
    pub persistence: &'static str,
    pub caveats: Vec<String>,
    pub why: String,
}

impl Spec {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn of(
        id: &str,
        kind: &'static str,
        title: String,
        target: Option<Value>,
        set: Value,
        persistence: &'static str,
        caveats: Vec<String>,
        why: String,
    ) -> Spec {
        let id = id.to_string();
        Spec {
            id,
            kind,
            title,
            target,
            set,
            persistence,
            caveats,
            why,
        }
    }
}

pub(super) fn map(pairs: &[(&str, Value)]) -> Value {
    let mut m = Mapping::new();
    for (k, v) in pairs {
        m.insert(Value::String((*k).into()), v.clone());
    }
    Value::Mapping(m)
}

pub(super) fn list(cpus: &CpuList) -> Value {
    Value::String(cpus.to_string())
}
