//! `cpuidle-state`: disable or enable idle states, chosen by name or by exit
//! latency (never by index: state3 is C6 on one host and C1E on another).

use serde::Deserialize;

use super::{
    Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, ReadValue,
    Service, Spec, Survey, Target, WriteMode, state_path, offline_target,
};
use crate::cpulist::CpuList;
use crate::inventory::CPU_DIR;
use crate::inventory::par_map;
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    #[serde(default)]
    cpus: Option<Scalar>,
    states: StatesDoc,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatesDoc {
    #[serde(default)]
    names: Option<Vec<String>>,
    #[serde(default)]
    min_exit_latency_us: Option<i64>,
    /// Accepted only to explain why it is refused.
    #[serde(default)]
    index: Option<serde_yaml::Value>,
    #[serde(default)]
    indices: Option<serde_yaml::Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetDoc {
    Disabled,
    Enabled,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StateSel {
    Names(Vec<String>),
    MinExitLatency(u64),
}

#[derive(Debug)]
pub struct CpuidleState {
    pub cpus: CpuSel,
    pub states: StateSel,
    pub disable: bool,
}

impl Spec for CpuidleState {
    type Target = TargetDoc;
    type Set = SetDoc;

    fn new(target: Option<TargetDoc>, set: SetDoc) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.states ({names: [C6]} or {min_exit_latency_us: 300})",
            )
        })?;
        let cpus = match &t.cpus {
            Some(s) => CpuSel::parse("target.cpus", &s.0)?,
            None => CpuSel::All,
        };
        let s = t.states;
        if s.index.is_some() || s.indices.is_some() {
            let field = if s.index.is_some() {
                "target.states.index"
            } else {
                "target.states.indices"
            };
            return Err(FieldError::new(
                field,
                "idle states are chosen by `names` or `min_exit_latency_us`, never by index: \
                 the same index is a different state on another host",
            ));
        }
        let states = match (s.names, s.min_exit_latency_us) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "target.states",
                    "give `names` or `min_exit_latency_us`, not both",
                ));
            }
            (None, None) => {
                return Err(FieldError::new(
                    "target.states",
                    "give `names` (e.g. [C6]) or `min_exit_latency_us` (e.g. 300)",
                ));
            }
            (Some(names), None) => {
                if names.is_empty() {
                    return Err(FieldError::new(
                        "target.states.names",
                        "empty list: name at least one state",
                    ));
                }
                if let Some(bad) = names.iter().find(|n| n.trim().is_empty()) {
                    return Err(FieldError::new(
                        "target.states.names",
                        format!("{bad:?} is not a state name"),
                    ));
                }
                StateSel::Names(names)
            }
            (None, Some(us)) => {
                if us < 0 {
                    return Err(FieldError::new(
                        "target.states.min_exit_latency_us",
                        format!("{us} is negative: an exit latency is at least 0 µs"),
                    ));
                }
                StateSel::MinExitLatency(us as u64)
            }
        };
        Ok(CpuidleState {
            cpus,
            states,
            disable: set == SetDoc::Disabled,
        })
    }
}

fn word(disabled: bool) -> &'static str {
    if disabled { "disabled" } else { "enabled" }
}

impl StateSel {
    /// The one attribute selection needs: `name` or `latency`.
    fn attr(&self) -> &'static str {
        match self {
            StateSel::Names(_) => "name",
            StateSel::MinExitLatency(_) => "latency",
        }
    }

    fn matches(&self, value: Option<&str>) -> bool {
        let Some(v) = value else { return false };
        match self {
            StateSel::Names(names) => names.iter().any(|n| n == v),
            StateSel::MinExitLatency(min) => v.parse::<u64>().is_ok_and(|l| l >= *min),
        }
    }

    fn describe(&self) -> String {
        match self {
            StateSel::Names(n) => n.join(", "),
            StateSel::MinExitLatency(us) => format!("states with exit latency ≥ {us} µs"),
        }
    }

    fn none_here(&self) -> String {
        match self {
            StateSel::Names(n) => format!("no idle state named {} here", n.join(" or ")),
            StateSel::MinExitLatency(us) => {
                format!("no idle state with exit latency ≥ {us} µs here")
            }
        }
    }
}

/// `POLL 0 µs, C1 1 µs, ...` for one CPU, to say what a host has instead.
fn states_of(host: &HostCtx, cpu: u32, indices: &[u32]) -> String {
    let list: Vec<String> = indices
        .iter()
        .map(|&i| {
            let name = host
                .text(&state_path(cpu, i, "name"))
                .unwrap_or_else(|| format!("state{i}"));
            match host.text(&state_path(cpu, i, "latency")) {
                Some(l) => format!("{name} {l} µs"),
                None => name,
            }
        })
        .collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

impl KnobKind for CpuidleState {
    fn kind(&self) -> KindName {
        KindName::CpuidleState
    }

    fn desired(&self) -> String {
        word(self.disable).to_string()
    }

    fn target_summary(&self) -> String {
        format!("{} on CPUs {}", self.states.describe(), self.cpus)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        super::CPU_PERSISTENCE
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned, Service::Cpupower]
    }

    fn normalize(&self, raw: &str) -> String {
        match raw.trim() {
            "0" => "enabled".into(),
            "1" => "disabled".into(),
            other => other.to_string(),
        }
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let (here, missing) = self.cpus.split(host.online());
        let mut survey = Survey::default();
        // Only the attribute the selection needs is read for every state.
        let tables = host.idle_attr(self.states.attr());
        if tables.iter().all(|t| t.states.is_empty()) {
            let driver = host
                .text(&format!("{CPU_DIR}/cpuidle/current_driver"))
                .unwrap_or_else(|| "none".into());
            survey.targets.push(Target::absent(
                format!("{CPU_DIR}/cpu*/cpuidle"),
                Some(here),
                &desired,
                format!("no idle states on this host (cpuidle driver: {driver})"),
            ));
            survey.targets.extend(offline_target(&missing, &desired));
            return Ok(survey);
        }
        let chosen: Vec<(u32, u32, Option<String>)> = tables
            .iter()
            .filter(|t| here.contains(t.cpu))
            .flat_map(|t| {
                t.states
                    .iter()
                    .filter(|(_, v)| self.states.matches(v.as_deref()))
                    .map(|(i, v)| (t.cpu, *i, v.clone()))
            })
            .collect();
        let read = par_map(&chosen, |(cpu, index, value)| {
            let label = match &self.states {
                StateSel::Names(_) => value.clone(),
                StateSel::MinExitLatency(_) => host.text(&state_path(*cpu, *index, "name")),
            };
            (label, host.value(&state_path(*cpu, *index, "disable")))
        });
        for ((cpu, index, _), (label, disable)) in chosen.iter().zip(read) {
            let path = state_path(*cpu, *index, "disable");
            let (current, restore, blocker) = match disable {
                ReadValue::Value(v) => (Some(self.normalize(&v)), Some(v), None),
                ReadValue::Absent => (
                    None,
                    None,
                    Some(Blocker::Unsupported(
                        "this kernel has no `disable` file for the state".into(),
                    )),
                ),
                ReadValue::Unreadable(e) => (
                    None,
                    None,
                    Some(Blocker::Unreadable(format!("cannot read {path}: {e}"))),
                ),
            };
            survey.targets.push(Target {
                in_effect: current.as_deref() == Some(desired.as_str()),
                path,
                cpus: Some(CpuList::new(vec![*cpu])),
                label,
                current,
                desired: desired.clone(),
                write: Some(if self.disable { "1" } else { "0" }.into()),
                restore,
                mode: WriteMode::Attribute,
                blocker,
            });
        }
        let with_match: CpuList = chosen.iter().map(|(c, _, _)| *c).collect();
        let no_match: CpuList = here
            .as_slice()
            .iter()
            .copied()
            .filter(|c| !with_match.contains(*c))
            .collect();
        if let Some(first) = no_match.first() {
            let indices: Vec<u32> = tables
                .iter()
                .find(|t| t.cpu == first)
                .map(|t| t.states.iter().map(|(i, _)| *i).collect())
                .unwrap_or_default();
            survey.targets.push(Target::absent(
                format!("{CPU_DIR}/cpu{{{no_match}}}/cpuidle"),
                Some(no_match.clone()),
                &desired,
                format!(
                    "{} (CPU {first} has: {})",
                    self.states.none_here(),
                    states_of(host, first, &indices)
                ),
            ));
        }
        survey.targets.extend(offline_target(&missing, &desired));
        Ok(survey)
    }
}
