//! What the NIC kinds share: which interfaces a knob targets (by name
//! pattern, driver, PCI address or every physical NIC; names change, the
//! driver and the bus address do not), and one knob over ethtool values
//! (`nic-channels`, `nic-coalesce`, `nic-ring`, `nic-feature`), each value
//! a [`crate::ethtool::Field`] apply writes through the ioctl live and the
//! captured state file under `--root`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{FieldError, HostCtx, Survey, Target, WriteMode};
use crate::ethtool::{self, Field, Section, State};

pub const NET_DIR: &str = "/sys/class/net";

/// `target:` of every NIC kind. The fields given must all match.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicTargetDoc {
    /// A glob over interface names (`ens1f*`).
    pub interfaces: Option<String>,
    /// The driver's name (`mlx5_core`, `ice`).
    pub driver: Option<String>,
    /// The device's PCI address (`0000:3b:00.0`, a glob).
    pub pci: Option<String>,
    /// `true`: every interface with a device (not virtual, not loopback).
    pub physical: Option<bool>,
}

/// The checked form of [`NicTargetDoc`].
#[derive(Debug, Clone)]
pub struct NicSel {
    interfaces: Option<glob::Pattern>,
    driver: Option<String>,
    pci: Option<glob::Pattern>,
    physical: bool,
    summary: String,
}

fn pattern(field: &str, text: &str) -> Result<glob::Pattern, FieldError> {
    if text.is_empty() || text.contains('/') || text.contains('\0') {
        return Err(FieldError::new(
            field,
            format!("{text:?} is not an interface pattern (a name or a glob such as ens1f*)"),
        ));
    }
    // include/uapi/linux/if.h: IFNAMSIZ 16, the NUL included; `*` may stand for less.
    if field == "target.interfaces" && !text.contains(['*', '?', '[']) && text.chars().count() > 15
    {
        return Err(FieldError::new(
            field,
            format!("{text:?} is longer than an interface name can be (15 characters, IFNAMSIZ)"),
        ));
    }
    glob::Pattern::new(text).map_err(|e| FieldError::new(field, format!("{text:?}: {e}")))
}

impl NicSel {
    pub fn new(doc: Option<NicTargetDoc>) -> Result<NicSel, FieldError> {
        let doc = doc.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.interfaces (a name or glob), target.driver, target.pci or \
                 target.physical: true",
            )
        })?;
        if doc.interfaces.is_none()
            && doc.driver.is_none()
            && doc.pci.is_none()
            && doc.physical != Some(true)
        {
            return Err(FieldError::new(
                "target",
                "names no interface: give interfaces, driver, pci or physical: true",
            ));
        }
        if let Some(d) = &doc.driver {
            super::check_name("target.driver", d, "driver")?;
        }
        let mut words = Vec::new();
        let interfaces = match &doc.interfaces {
            Some(p) => {
                words.push(p.clone());
                Some(pattern("target.interfaces", p)?)
            }
            None => None,
        };
        let pci = match &doc.pci {
            Some(p) => {
                words.push(format!("pci {p}"));
                Some(pattern("target.pci", p)?)
            }
            None => None,
        };
        if let Some(d) = &doc.driver {
            words.push(format!("driver {d}"));
        }
        if doc.physical == Some(true) {
            words.push("physical NICs".into());
        }
        Ok(NicSel {
            interfaces,
            driver: doc.driver,
            pci,
            physical: doc.physical == Some(true),
            summary: words.join(", "),
        })
    }

    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The interfaces of this host it selects, in name order.
    pub fn select(&self, host: &HostCtx) -> Vec<String> {
        let mut names = host.root.read_dir(NET_DIR).unwrap_or_default();
        names.sort();
        // A name the kernel could not give (a crafted tree's) is no interface:
        // it would reach plans, journals and persisted files.
        names.retain(|n| crate::name::check_ifname(n).is_ok() && self.matches(host, n));
        names
    }

    fn matches(&self, host: &HostCtx, name: &str) -> bool {
        if self.interfaces.as_ref().is_some_and(|p| !p.matches(name)) {
            return false;
        }
        let dir = format!("{NET_DIR}/{name}");
        if let Some(d) = &self.driver {
            let found = host
                .root
                .read_link(&format!("{dir}/device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
            if found.as_deref() != Some(d.as_str()) {
                return false;
            }
        }
        let resolved = host.root.resolve(&dir).unwrap_or_default();
        if let Some(p) = &self.pci
            && !resolved.split('/').any(|c| c.contains(':') && p.matches(c))
        {
            return false;
        }
        !self.physical || (!resolved.starts_with("/sys/devices/virtual/") && !resolved.is_empty())
    }

    /// The target when nothing here matches.
    pub fn none_here(&self, desired: &str) -> Target {
        Target::absent(
            NET_DIR.into(),
            None,
            desired,
            format!("no interface here matches {}", self.summary),
        )
    }
}

/// The driver's name in messages.
pub fn driver_of(state: &State, ifname: &str) -> String {
    state.driver_name(ifname)
}

/// A knob over ethtool values of one section: `values` by field name, in
/// the words [`Field::value`] reads.
#[derive(Debug)]
pub struct EthtoolKnob {
    pub section: Section,
    pub sel: NicSel,
    pub values: BTreeMap<String, String>,
}

impl EthtoolKnob {
    pub fn desired(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn survey(&self, host: &HostCtx) -> Survey {
        self.survey_with(host, |ifname, state| self.targets_on(ifname, state))
    }

    /// The targets on every interface selected, `each` making one
    /// interface's (a kind with rules of its own passes its own).
    pub fn survey_with(
        &self,
        host: &HostCtx,
        each: impl Fn(&str, &Result<Option<State>, String>) -> Vec<Target>,
    ) -> Survey {
        let mut survey = Survey::default();
        if matches!(self.section, Section::Channels | Section::Rings) {
            survey
                .notes
                .push(ethtool::channels::RESETS_LINK.replace("{}", self.section.as_str()));
        }
        let names = self.sel.select(host);
        if names.is_empty() {
            survey.targets.push(self.sel.none_here(&self.desired()));
        }
        for ifname in names {
            let state = ethtool::read(host.root, &ifname);
            survey.targets.extend(each(&ifname, &state));
        }
        survey
    }

    /// One target per value on `ifname`; every channel count in one request,
    /// as the kernel checks them together.
    pub fn targets_on(&self, ifname: &str, state: &Result<Option<State>, String>) -> Vec<Target> {
        if self.section == Section::Channels {
            let fields: Vec<&str> = self.values.keys().map(String::as_str).collect();
            let pairs: Vec<(&str, String)> = self
                .values
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            let field = ethtool::channels::field(ifname, &fields);
            return vec![target(&field, state, &ethtool::channels::words(&pairs))];
        }
        self.values
            .iter()
            .map(|(name, want)| target(&Field::new(ifname, self.section, name), state, want))
            .collect()
    }
}

/// One value's target: its current value, or why it cannot take `want`.
pub fn target(field: &Field, state: &Result<Option<State>, String>, want: &str) -> Target {
    let path = field.path();
    let name = match field.name.contains(',') {
        true => field.section.as_str(),
        false => field.name.as_str(),
    };
    let label = Some(format!("{} {name}", field.ifname));
    let state = match state {
        Ok(Some(s)) => s,
        Ok(None) => {
            let why = format!(
                "{}: this capture holds no ethtool state ({})",
                field.ifname,
                ethtool::state_path(&field.ifname)
            );
            return Target {
                label,
                ..Target::absent(path, None, want, why)
            };
        }
        Err(e) => {
            return Target {
                label,
                ..Target::unreadable(path, None, want, e)
            };
        }
    };
    let current = field.value(state);
    let blocker = match &current {
        None => Some(super::Blocker::Unsupported(format!(
            "{} {} is not supported by {} ({})",
            field.ifname,
            field.name,
            driver_of(state, &field.ifname),
            field.check_command()
        ))),
        Some(_) => refused(field, state, want).map(super::Blocker::Unsupported),
    };
    Target {
        path,
        cpus: None,
        label,
        in_effect: current.as_deref() == Some(want),
        restore: current.clone(),
        current,
        desired: want.to_string(),
        write: Some(want.to_string()),
        mode: WriteMode::Attribute,
        blocker,
    }
}

/// Why the driver would refuse `want` (EINVAL above the reported maximum,
/// EOPNOTSUPP for a fixed feature: net/ethtool/channels.c, rings.c,
/// features.c), from what it reports.
fn refused(field: &Field, state: &State, want: &str) -> Option<String> {
    let n = field.name.as_str();
    let driver = driver_of(state, &field.ifname);
    let max = match field.section {
        Section::Channels => return ethtool::channels::refusal(field, state, want),
        Section::Rings => state.rings.as_ref().and_then(|r| r.get(n)).map(|p| p.max),
        Section::Features => {
            let word = state.features.as_ref()?.get(n)?;
            return ethtool::feature_fixed(word).then(|| {
                format!(
                    "{} {n} is fixed {} by {driver} ({})",
                    field.ifname,
                    if ethtool::feature_on(word) {
                        "on"
                    } else {
                        "off"
                    },
                    field.check_command()
                )
            });
        }
        Section::Coalesce => None,
    }?;
    let v: u32 = want.parse().ok()?;
    (v > max).then(|| {
        format!(
            "{} {n} {v} is above the maximum {max} {driver} reports ({})",
            field.ifname,
            field.check_command()
        )
    })
}

/// Reads a value back through ethtool (the ioctl live, the state file in a tree).
pub fn read_back(host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
    ethtool::content(host.root, path)
}

/// Defines a kind over [`EthtoolKnob`]: its `KnobKind` delegates to it.
macro_rules! ethtool_kind {
    ($kind:ident, $name:ident) => {
        $crate::knob::nic::ethtool_kind!(
            $kind,
            $name,
            |k: &$crate::knob::nic::EthtoolKnob, host: &$crate::knob::HostCtx| { k.survey(host) }
        );
    };
    ($kind:ident, $name:ident, $survey:expr) => {
        impl $crate::knob::KnobKind for $kind {
            fn kind(&self) -> $crate::knob::KindName {
                $crate::knob::KindName::$name
            }

            fn desired(&self) -> String {
                self.0.desired()
            }

            fn target_summary(&self) -> String {
                self.0.sel.summary().to_string()
            }

            fn survey(
                &self,
                host: &$crate::knob::HostCtx,
            ) -> Result<$crate::knob::Survey, $crate::knob::FieldError> {
                Ok(($survey)(&self.0, host))
            }

            fn persistence_allowed(&self) -> &'static [$crate::schema::Persistence] {
                &[
                    $crate::schema::Persistence::Runtime,
                    $crate::schema::Persistence::LinkFile,
                    $crate::schema::Persistence::UdevReapply,
                ]
            }

            fn services(&self) -> &'static [$crate::knob::Service] {
                &[$crate::knob::Service::Tuned]
            }

            fn read_back(
                &self,
                host: &$crate::knob::HostCtx,
                path: &str,
            ) -> std::io::Result<Option<String>> {
                $crate::knob::nic::read_back(host, path)
            }
        }
    };
}
pub(crate) use ethtool_kind;

/// `set:` of the numeric kinds: field name to a number.
pub fn numbers(
    section: Section,
    fields: &[&str],
    set: BTreeMap<String, serde_yaml::Value>,
) -> Result<BTreeMap<String, String>, FieldError> {
    if set.is_empty() {
        return Err(FieldError::new(
            "set",
            format!("empty: give one or more of {}", fields.join(", ")),
        ));
    }
    let mut out = BTreeMap::new();
    for (k, v) in set {
        let field = format!("set.{k}");
        if !fields.contains(&k.as_str()) {
            return Err(FieldError::new(
                &field,
                format!(
                    "unknown {} field{}; known: {}",
                    section.as_str(),
                    crate::spelling::did_you_mean(&k, fields.iter().copied()),
                    fields.join(", ")
                ),
            ));
        }
        let text = match &v {
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::String(s) => s.clone(),
            serde_yaml::Value::Bool(b) => if *b { "on" } else { "off" }.to_string(),
            _ => String::new(),
        };
        let adaptive = k.starts_with("adaptive-");
        // The ioctl's fields are u32 (include/uapi/linux/ethtool.h).
        if !adaptive && text.parse::<u64>().is_ok_and(|n| n > u64::from(u32::MAX)) {
            return Err(FieldError::new(
                &field,
                format!(
                    "{text} is above {}, the largest value ethtool takes",
                    u32::MAX
                ),
            ));
        }
        let ok = if adaptive {
            matches!(text.as_str(), "on" | "off")
        } else {
            text.parse::<u32>().is_ok()
        };
        if !ok {
            let want = if adaptive {
                "on or off"
            } else {
                "a whole number"
            };
            return Err(FieldError::new(&field, format!("{text:?} is not {want}")));
        }
        out.insert(k, text);
    }
    Ok(out)
}
