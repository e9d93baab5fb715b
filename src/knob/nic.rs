//! What the NIC kinds share: which interfaces a knob targets (by name
//! pattern, driver, PCI address or every physical NIC; names change, the
//! driver and the bus address do not), and one knob over ethtool values
//! (`nic-channels`, `nic-coalesce`, `nic-ring`, `nic-feature`), each value
//! a [`crate::ethtool::Field`] apply writes through the ioctl live and the
//! captured state file under `--root`.

use crate::schema::Persistence;
use std::collections::BTreeMap;

use serde::Deserialize;

use super::{FieldError, HostCtx, KindName, Survey, Target, WriteMode};
use crate::cpulist::CpuList;
use crate::ethtool::{self, Field, Section, State};

const NET_DIR: &str = "/sys/class/net";

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
    if field == "target.interfaces" && !text.contains('*') && text.chars().count() > 15 {
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
        names.retain(|n| self.matches(host, n));
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
            // Every channel count in one request: the kernel checks them together.
            if self.section == Section::Channels {
                let fields: Vec<&str> = self.values.keys().map(String::as_str).collect();
                let pairs: Vec<(&str, String)> = self
                    .values
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.clone()))
                    .collect();
                let field = ethtool::channels::field(&ifname, &fields);
                survey
                    .targets
                    .push(target(&field, &state, &ethtool::channels::words(&pairs)));
                continue;
            }
            let start = survey.targets.len();
            for (name, want) in &self.values {
                match self.section {
                    Section::Features => survey
                        .targets
                        .extend(super::nic_feature::targets(&ifname, &state, name, want)),
                    _ => {
                        let field = Field::new(&ifname, self.section, name);
                        survey.targets.push(target(&field, &state, want));
                    }
                }
            }
            if self.section == Section::Coalesce
                && let Ok(Some(s)) = &state
            {
                super::nic_coalesce::check(host, self, s, &mut survey.targets[start..]);
            }
        }
        survey
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
                Ok(self.0.survey(host))
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

/// `target:` of the per-queue kinds (`rps`, `xps`): interfaces as
/// [`NicTargetDoc`], and queue numbers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueTargetDoc {
    interfaces: Option<String>,
    driver: Option<String>,
    pci: Option<String>,
    physical: Option<bool>,
    /// Queue numbers (`0-3`); every queue when absent.
    queues: Option<String>,
}

/// The checked form of [`QueueTargetDoc`].
#[derive(Debug)]
pub struct QueueSel {
    pub sel: NicSel,
    pub queues: Option<CpuList>,
}

impl QueueSel {
    pub fn new(doc: Option<QueueTargetDoc>) -> Result<QueueSel, FieldError> {
        let Some(t) = doc else {
            return Ok(QueueSel {
                sel: NicSel::new(None)?,
                queues: None,
            });
        };
        let queues = match &t.queues {
            Some(q) => Some(CpuList::parse(q).map_err(|e| {
                FieldError::new("target.queues", format!("{q:?} is not a queue list ({e})"))
            })?),
            None => None,
        };
        let doc = NicTargetDoc {
            interfaces: t.interfaces,
            driver: t.driver,
            pci: t.pci,
            physical: t.physical,
        };
        Ok(QueueSel {
            sel: NicSel::new(Some(doc))?,
            queues,
        })
    }

    /// `ens2f0 rx queues 0-3`, `driver ice every tx queue`.
    pub fn summary(&self, dir: &str) -> String {
        match &self.queues {
            Some(q) => format!("{} {dir} queues {q}", self.sel.summary()),
            None => format!("{} every {dir} queue", self.sel.summary()),
        }
    }

    /// The queues of `ifname` it selects (`prefix` `rx-` or `tx-`) as the
    /// interface will have them after the `nic-channels` writes planned
    /// before, or why not: a queue it names that the interface lacks.
    pub fn queues(&self, host: &HostCtx, ifname: &str, prefix: &str) -> Result<Vec<u32>, String> {
        let (have, pending) = queues_after(host, ifname, prefix);
        let Some(want) = &self.queues else {
            return Ok(have);
        };
        let missing: Vec<u32> = want
            .as_slice()
            .iter()
            .copied()
            .filter(|q| !have.contains(q))
            .collect();
        if !missing.is_empty() {
            let word = prefix.trim_end_matches('-');
            let list = |l: Vec<u32>| match l.is_empty() {
                true => "none".to_string(),
                false => l.into_iter().collect::<CpuList>().to_string(),
            };
            let when = if pending {
                " after this apply's nic-channels change"
            } else {
                ""
            };
            return Err(format!(
                "{ifname} has no {word} queue {} (it has {}{when}: /sys/class/net/{ifname}/queues)",
                list(missing),
                list(have)
            ));
        }
        Ok(want.as_slice().to_vec())
    }
}

/// `ifname`'s queues of one direction after the `nic-channels` writes
/// planned so far (`HostCtx::assume_written`), and whether such a write
/// changes them ([`ethtool::queues`]).
pub fn queues_after(host: &HostCtx, ifname: &str, prefix: &str) -> (Vec<u32>, bool) {
    let have = queue_numbers(host, ifname, prefix);
    let under = Field::new(ifname, Section::Channels, "").path();
    let requests: Vec<Vec<(String, u32)>> = host
        .assumed_under(&under)
        .into_iter()
        .filter_map(|(path, v)| ethtool::channels::parse(&Field::parse(&path)?.name, &v).ok())
        .collect();
    let Some(from) = requests
        .first()
        .and_then(|_| ethtool::read(host.root, ifname).ok().flatten())
        .and_then(|s| s.channels)
    else {
        return (have, false);
    };
    let to = requests
        .iter()
        .fold(from, |c, r| ethtool::channels::with(&c, r));
    // The kernel's queues follow the counts (ethtool::queues::sync_tree).
    let after: Vec<u32> = (0..ethtool::channels::queue_count(prefix, &to)).collect();
    let changed = after != have;
    (after, changed)
}

/// A queue's file that a `nic-channels` write of this apply makes: written
/// once it exists, right after that write (`apply::requeue`).
pub fn made_by_channels(host: &HostCtx, path: &str) -> bool {
    let dir = path.rsplit_once('/').map_or(path, |(d, _)| d);
    !host.root.exists(dir)
}

/// The target of a file [`made_by_channels`].
pub fn after_channels(path: String, desired: &str) -> Target {
    let why = format!(
        "{path} is made by this apply's nic-channels change: planned and written right after it"
    );
    Target::absent(path, None, desired, why)
}

/// The numbers of `ifname`'s queues of one direction (`rx-`, `tx-`).
pub fn queue_numbers(host: &HostCtx, ifname: &str, prefix: &str) -> Vec<u32> {
    let listed = host
        .root
        .read_dir(&format!("{NET_DIR}/{ifname}/queues"))
        .unwrap_or_default();
    crate::inventory::numbered(&listed, prefix)
}

/// How the per-queue kinds (rps, xps) persist: tmpfiles.d writes at boot
/// only; the queues' files are made again with the device, which the udev
/// rule follows.
pub const QUEUE_PERSISTENCE: &[Persistence] = &[
    Persistence::Runtime,
    Persistence::UdevReapply,
    Persistence::Tmpfiles,
];

/// CPUs the host can never have, in an rps or xps mask: the kernel parses
/// the mask over its CPU bits and refuses more (net/core/net-sysfs.c,
/// `store_rps_map` and `xps_cpus_store`: `bitmap_parse` over
/// `nr_cpumask_bits`, EOVERFLOW). A bad value, not a state of the host,
/// so a manifest error naming the line.
pub fn beyond_possible(host: &HostCtx, cpus: &CpuList, kind: KindName) -> Result<(), FieldError> {
    let file = "/sys/devices/system/cpu/possible";
    let Some(possible) = host.text(file).and_then(|t| CpuList::parse(&t).ok()) else {
        return Ok(());
    };
    let beyond: Vec<u32> = cpus
        .as_slice()
        .iter()
        .copied()
        .filter(|c| !possible.contains(*c))
        .collect();
    if beyond.is_empty() {
        return Ok(());
    }
    let store = match kind {
        KindName::Xps => "xps_cpus_store",
        _ => "store_rps_map",
    };
    Err(FieldError::new(
        "set.cpus",
        format!(
            "CPUs {} are beyond this host's possible CPUs {possible} ({file}): the kernel \
             refuses the {kind} mask ({store} in net/core/net-sysfs.c)",
            CpuList::new(beyond)
        ),
    ))
}

/// A refusal of CPUs that are not online: the kernel builds the RPS and
/// XPS maps from online CPUs only (net/core/net-sysfs.c `store_rps_map`:
/// `cpu_online_mask`; net/core/dev.c `__netif_set_xps_queue`: `online_mask`)
/// and refuses bits past the possible CPUs (`bitmap_parse`: EOVERFLOW).
pub fn offline_cpus(host: &HostCtx, cpus: Option<&super::CpuSel>, desired: &str) -> Option<Target> {
    let Some(super::CpuSel::List(l)) = cpus else {
        return None;
    };
    let (_, missing) = super::CpuSel::List(l.clone()).split(host.online());
    (!missing.is_empty()).then(|| Target {
        blocker: Some(super::Blocker::Unsupported(format!(
            "CPUs {missing} are not online on this host (the kernel maps online CPUs only)"
        ))),
        ..Target::absent(NET_DIR.into(), None, desired, String::new())
    })
}

/// A refused target on the queues of `ifname`.
pub fn queue_refusal(ifname: &str, desired: &str, why: String) -> Target {
    Target {
        blocker: Some(super::Blocker::Unsupported(why)),
        ..Target::absent(
            format!("{NET_DIR}/{ifname}/queues"),
            None,
            desired,
            String::new(),
        )
    }
}

/// A CPU or queue list in a mask's words: the list, or `none`.
pub fn list_words(l: &CpuList) -> String {
    if l.is_empty() {
        "none".into()
    } else {
        l.to_string()
    }
}

/// A mask as the kernel prints it, in the knob's words: a list or `none`.
pub fn mask_words(raw: &str) -> String {
    match super::workqueue::mask_cpus(raw) {
        Some(l) => list_words(&l),
        None => raw.trim().to_string(),
    }
}

/// One per-queue sysfs file as a target: `words` turns what the kernel
/// prints into the knob's words; `absent` says why a missing file cannot be
/// written.
pub fn queue_file(
    read: std::io::Result<Option<String>>,
    path: String,
    want: &str,
    write: String,
    words: impl Fn(&str) -> String,
    absent: Option<super::Blocker>,
) -> Target {
    match read {
        Ok(Some(raw)) => {
            let current = words(&raw);
            Target {
                path,
                cpus: None,
                label: None,
                in_effect: current == want,
                current: Some(current),
                desired: want.to_string(),
                write: Some(write),
                restore: Some(raw),
                mode: WriteMode::Attribute,
                blocker: None,
            }
        }
        Ok(None) => Target {
            blocker: absent,
            ..Target::absent(path, None, want, String::new())
        },
        Err(e) => Target::unreadable(path, None, want, &e.to_string()),
    }
}

/// `set.cpus` of the per-queue kinds: a CPU list, `all` or `none`.
pub fn cpus_set(text: Option<&str>) -> Result<Option<super::CpuSel>, FieldError> {
    Ok(match text.map(str::trim) {
        None => None,
        Some("none") => Some(super::CpuSel::List(CpuList::default())),
        Some(t) => Some(super::CpuSel::parse("set.cpus", t)?),
    })
}
