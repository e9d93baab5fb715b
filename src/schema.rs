//! The knob document as written in the manifest. Every struct rejects unknown
//! fields; values that serde cannot judge alone (ids, CPU lists, dates, host
//! lists) are checked afterwards, as `manifest::load` reads each knob.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

pub mod command;
pub mod expect;

/// One knob. `T` and `S` are the kind's own `target` and `set` types: the
/// document is read once with `serde_yaml::Value` for both (to learn the kind)
/// and once more with the kind's types, so their errors carry a line too.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobDoc<T, S> {
    pub id: String,
    pub title: String,
    pub kind: String,
    #[serde(default = "absent")]
    pub target: Option<T>,
    pub set: S,
    /// A list of host names (glob patterns allowed) or the string `"*"`.
    pub hosts: serde_yaml::Value,
    pub persistence: Persistence,
    #[serde(default)]
    pub caveats: Vec<String>,
    pub why: String,
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    #[serde(default)]
    pub verify: Option<Verify>,
    /// Host facts that must hold (`manifest::when`), checked after parsing.
    #[serde(default)]
    pub when: Option<serde_yaml::Value>,
}

fn absent<T>() -> Option<T> {
    None
}

/// What makes the knob survive a reboot.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Persistence {
    /// Nothing: a fact about the running kernel only.
    #[serde(rename = "runtime")]
    Runtime,
    /// A systemd-tmpfiles.d `w` line.
    #[serde(rename = "tmpfiles")]
    Tmpfiles,
    /// A sysctl.d file.
    #[serde(rename = "sysctl.d")]
    SysctlD,
    /// A systemd drop-in (`Environment=` for allocator knobs).
    #[serde(rename = "systemd-dropin")]
    SystemdDropin,
    /// Kernel command-line arguments.
    #[serde(rename = "cmdline")]
    Cmdline,
    /// A process (`hostknob hold`) keeps the request open.
    #[serde(rename = "hold")]
    Hold,
    /// A oneshot unit runs `hostknob apply KNOB` at boot, after drivers load,
    /// re-resolving states by name or latency and CPUs by list.
    #[serde(rename = "boot")]
    Boot,
    /// A systemd.link file udev applies whenever the NIC appears (NIC kinds).
    #[serde(rename = "link-file")]
    LinkFile,
    /// A udev rule applies the knob again whenever its NIC appears (rps, NIC kinds).
    #[serde(rename = "udev-reapply")]
    UdevReapply,
    /// A udev rule writes the settings (`ATTR{...}=`) whenever a chosen
    /// device appears or changes (block kinds).
    #[serde(rename = "udev-rule")]
    UdevRule,
    /// An `options` line in modprobe.d, which modprobe passes at the
    /// module's next load (module-param).
    #[serde(rename = "modprobe.d")]
    ModprobeD,
    /// A modules-load.d file: systemd-modules-load.service loads the module
    /// at every boot (module).
    #[serde(rename = "modules-load.d")]
    ModulesLoadD,
}

impl Persistence {
    pub fn as_str(self) -> &'static str {
        match self {
            Persistence::Runtime => "runtime",
            Persistence::Tmpfiles => "tmpfiles",
            Persistence::SysctlD => "sysctl.d",
            Persistence::SystemdDropin => "systemd-dropin",
            Persistence::Cmdline => "cmdline",
            Persistence::Hold => "hold",
            Persistence::Boot => "boot",
            Persistence::LinkFile => "link-file",
            Persistence::UdevReapply => "udev-reapply",
            Persistence::UdevRule => "udev-rule",
            Persistence::ModprobeD => "modprobe.d",
            Persistence::ModulesLoadD => "modules-load.d",
        }
    }
}

impl fmt::Display for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryEntry {
    /// `YYYY-MM-DD` or an RFC 3339 time.
    pub date: String,
    pub action: HistoryAction,
    /// A list of host names or `"*"`.
    #[schemars(with = "serde_json::Value")]
    pub hosts: serde_yaml::Value,
    #[serde(default)]
    pub note: Option<String>,
    /// How the change was made; the knob's `persistence` when absent.
    #[serde(default)]
    pub persistence: Option<Persistence>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HistoryAction {
    Applied,
    Reverted,
    Persisted,
    Verified,
    Noted,
}

#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verify {
    /// A built-in probe's name, or a command (`schema::command`).
    pub probe: command::ProbeSpec,
    /// What the probe should show, checked by `verify` (one or a list).
    #[serde(default)]
    pub expect: expect::Expectations,
    /// The expected effect in words, for people.
    #[serde(default)]
    pub note: Option<String>,
}

/// The probes, named by the registry beside them (`probe/mod.rs`).
pub use crate::probe::Probe;

/// Any YAML scalar (string, number, boolean) taken as the text it stands for:
/// `set: 0` and `set: "0"` mean the same write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                // An integer past u64 arrives as a float: written back as
                // 1 followed by 300 zeros, it would not be the number given.
                if !v.is_finite() || (v.fract() == 0.0 && v.abs() >= 18_446_744_073_709_551_616.0) {
                    return Err(E::custom(
                        "a number too large for any kernel setting (more than 20 digits); \
                         quote it if it is text",
                    ));
                }
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A date or time from the manifest or ledger, as Unix seconds.
/// A bare date counts as the end of that day (UTC): a boot on the same day
/// cannot be placed before or after it, so only a later day proves a reboot.
pub fn parse_when(text: &str) -> Result<(u64, bool), String> {
    let text = text.trim();
    if text.len() == 10 {
        let t = humantime::parse_rfc3339(&format!("{text}T23:59:59Z"))
            .map_err(|_| format!("{text:?} is not a date (YYYY-MM-DD)"))?;
        let secs = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| format!("{text:?} is before 1970"))?
            .as_secs();
        return Ok((secs, true));
    }
    let t = humantime::parse_rfc3339_weak(text)
        .map_err(|_| format!("{text:?} is not a date (YYYY-MM-DD) or an RFC 3339 time"))?;
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?
        .as_secs();
    Ok((secs, false))
}

/// Unix seconds as RFC 3339, UTC.
pub fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times() {
        let (d, whole_day) = parse_when("2026-07-10").unwrap();
        assert!(whole_day);
        assert_eq!(
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(d)
            )
            .to_string(),
            "2026-07-10T23:59:59Z"
        );
        let (t, whole_day) = parse_when("2026-07-10T09:14:03Z").unwrap();
        assert!(!whole_day);
        assert_eq!(d - t, 14 * 3600 + 45 * 60 + 56);
        assert!(parse_when("2026-13-10").is_err());
        assert!(parse_when("yesterday").is_err());
    }
}
