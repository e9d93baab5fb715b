//! `pm-qos`: the global CPU latency request, `/dev/cpu_dma_latency`. A request
//! holds only while the process that wrote it keeps the file open; the value
//! read back is the aggregate of all requests (the smallest), and
//! 2000000000 µs means nobody asks for anything. `hostknob hold` owns the
//! request by keeping the file open; audit names the processes that hold it
//! open (`/proc/PID/fd`).

use super::{
    Blocker, FieldError, HostCtx, KindName, KnobKind, Service, Spec, Survey, Target, WriteMode,
};
use crate::schema::Persistence;

use crate::inventory::{PM_QOS_DEVICE as DEVICE, parse_pm_qos_request as parse_request};
/// `PM_QOS_CPU_LATENCY_DEFAULT_VALUE`: no request.
pub const NO_REQUEST: i64 = 2_000_000_000;

#[derive(Debug)]
pub struct PmQos {
    pub max_latency_us: i64,
}

impl Spec for PmQos {
    type Target = std::collections::BTreeMap<String, serde_yaml::Value>;
    type Set = i64;

    fn new(target: Option<Self::Target>, set: i64) -> Result<Self, FieldError> {
        if let Some(key) = target.as_ref().and_then(|t| t.keys().next()) {
            return Err(FieldError::new(
                &format!("target.{key}"),
                "pm-qos has no target fields: the request is global (leave target out or {})",
            ));
        }
        if !(0..NO_REQUEST).contains(&set) {
            return Err(FieldError::new(
                "set",
                format!("{set} µs is outside 0..{NO_REQUEST}"),
            ));
        }
        Ok(PmQos {
            max_latency_us: set,
        })
    }
}

impl KnobKind for PmQos {
    fn kind(&self) -> KindName {
        KindName::PmQos
    }

    fn desired(&self) -> String {
        self.max_latency_us.to_string()
    }

    fn target_summary(&self) -> String {
        format!("{DEVICE} (global CPU latency request, µs)")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::Runtime, Persistence::Hold]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        Ok(parse_request(&host.root.read(path)?).map(|v| v.to_string()))
    }

    /// The aggregate is the strictest request: ours holds when it is at most ours.
    fn confirms(&self, expect: &str, read: &str) -> bool {
        match (expect.parse::<i64>(), read.parse::<i64>()) {
            (Ok(e), Ok(r)) => r <= e,
            _ => false,
        }
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let mut survey = Survey::default();
        // Opening adds a request at the default value, which changes nothing.
        let current = match host.root.read_device(DEVICE, 64) {
            Ok(bytes) => parse_request(&bytes),
            Err(e) if crate::root::is_absent(&e) => {
                survey.targets.push(Target::absent(
                    DEVICE.into(),
                    None,
                    &desired,
                    format!("no {DEVICE} here (kernel without it, or not in this capture)"),
                ));
                return Ok(survey);
            }
            Err(e) => {
                survey.targets.push(Target::absent(
                    DEVICE.into(),
                    None,
                    &desired,
                    format!("cannot read {DEVICE}: {}", super::ctx::describe_io(&e)),
                ));
                return Ok(survey);
            }
        };
        let Some(current) = current else {
            survey.targets.push(Target::absent(
                DEVICE.into(),
                None,
                &desired,
                format!("{DEVICE} holds no readable value"),
            ));
            return Ok(survey);
        };
        let holders = holders(host);
        survey.notes.push(if holders.is_empty() {
            format!(
                "nobody holds {DEVICE} open: the aggregate is no request of ours; \
                 `hostknob hold KNOB` holds one"
            )
        } else {
            format!("{DEVICE} is held open by {}", holders.join(", "))
        });
        // Any request at least as strict as ours keeps the constraint in force.
        let in_effect = current <= self.max_latency_us;
        survey.targets.push(Target {
            in_effect,
            path: DEVICE.into(),
            cpus: None,
            label: None,
            current: Some(current.to_string()),
            desired,
            write: Some(self.max_latency_us.to_string()),
            restore: None,
            mode: WriteMode::Hold,
            blocker: None::<Blocker>,
        });
        Ok(survey)
    }
}

/// Processes with the device open (`PID (comm)`), from `/proc/PID/fd`.
pub fn holders(host: &HostCtx) -> Vec<String> {
    let mut out = Vec::new();
    for p in host.processes() {
        let dir = format!("/proc/{}/fd", p.pid);
        let open = host.list(&dir).iter().any(|fd| {
            host.root
                .read_link(&format!("{dir}/{fd}"))
                .is_ok_and(|t| t.as_os_str() == DEVICE)
        });
        if open {
            out.push(format!("PID {} ({})", p.pid, p.comm));
        }
    }
    out
}
