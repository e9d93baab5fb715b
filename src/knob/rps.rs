//! `rps`: receive packet steering per receive queue (`queues/rx-N/rps_cpus`,
//! a CPU mask) and its flow table for RFS (`rps_flow_cnt`), from
//! Documentation/networking/scaling.rst. The queues are those the NIC has
//! when the plan is made: a `nic-channels` change goes first (`rules::phase`).

use serde::Deserialize;

use super::nic::{NicSel, NicTargetDoc};
use super::{
    CpuSel, FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target, WriteMode,
};
use crate::cpulist::CpuList;
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpsTargetDoc {
    interfaces: Option<String>,
    driver: Option<String>,
    pci: Option<String>,
    physical: Option<bool>,
    /// Receive queue numbers (`0-3`); every queue when absent.
    queues: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpsSet {
    /// CPUs that process the queue's packets, or `none` (RPS off).
    cpus: Option<String>,
    /// Flows in the queue's RFS table; the kernel rounds up to a power of two.
    flow_cnt: Option<u32>,
}

#[derive(Debug)]
pub struct Rps {
    sel: NicSel,
    queues: Option<CpuList>,
    cpus: Option<CpuSel>,
    flow_cnt: Option<u32>,
}

impl Spec for Rps {
    type Target = RpsTargetDoc;
    type Set = RpsSet;

    fn new(target: Option<RpsTargetDoc>, set: RpsSet) -> Result<Self, FieldError> {
        let (sel, queues) = match target {
            Some(t) => {
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
                (NicSel::new(Some(doc))?, queues)
            }
            None => (NicSel::new(None)?, None),
        };
        if set.cpus.is_none() && set.flow_cnt.is_none() {
            return Err(FieldError::new("set", "empty: give cpus, flow_cnt or both"));
        }
        let cpus = match set.cpus.as_deref().map(str::trim) {
            None => None,
            Some("none") => Some(CpuSel::List(CpuList::default())),
            Some(t) => Some(CpuSel::parse("set.cpus", t)?),
        };
        // net/core/net-sysfs.c, store_rps_dev_flow_table_cnt: roundup_pow_of_two.
        if let Some(n) = set.flow_cnt
            && n != 0
            && !n.is_power_of_two()
        {
            return Err(FieldError::new(
                "set.flow_cnt",
                format!(
                    "{n}: the kernel rounds the table up to a power of two and reads back {}; give that",
                    n.next_power_of_two()
                ),
            ));
        }
        Ok(Rps {
            sel,
            queues,
            cpus,
            flow_cnt: set.flow_cnt,
        })
    }
}

/// A mask as the kernel prints it, in the knob's words: a CPU list or `none`.
fn mask_words(raw: &str) -> String {
    match super::workqueue::mask_cpus(raw) {
        Some(l) if l.is_empty() => "none".into(),
        Some(l) => l.to_string(),
        None => raw.trim().to_string(),
    }
}

impl Rps {
    fn cpus_word(&self, host: &HostCtx) -> Option<(String, String)> {
        let cpus = match self.cpus.as_ref()? {
            CpuSel::All => host.online().clone(),
            CpuSel::List(l) => l.clone(),
        };
        let words = if cpus.is_empty() { "none".into() } else { cpus.to_string() };
        Some((words, super::workqueue::to_mask(&cpus)))
    }

    fn file_target(&self, host: &HostCtx, path: String, want: &str, write: String) -> Target {
        match host.root.read_trimmed(&path) {
            Ok(Some(raw)) => {
                let current = self.normalize_at(&path, &raw);
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
            Ok(None) => {
                let why = format!("{path} does not exist (a kernel without CONFIG_RPS)");
                Target::absent(path, None, want, why)
            }
            Err(e) => Target::unreadable(path, None, want, &e.to_string()),
        }
    }

    fn normalize_at(&self, path: &str, raw: &str) -> String {
        if path.ends_with("/rps_cpus") {
            mask_words(raw)
        } else {
            raw.trim().to_string()
        }
    }
}

/// CPUs the host can never have: the kernel parses the mask over its CPU
/// bits and refuses more (net/core/net-sysfs.c, store_rps_map: bitmap_parse
/// over nr_cpumask_bits, -EOVERFLOW). A bad value, not a state of the host.
fn beyond_possible(host: &HostCtx, cpus: &CpuList) -> Result<(), FieldError> {
    let file = "/sys/devices/system/cpu/possible";
    let Some(possible) = host.text(file).and_then(|t| CpuList::parse(&t).ok()) else {
        return Ok(());
    };
    let beyond = CpuList::new(
        cpus.as_slice()
            .iter()
            .copied()
            .filter(|c| !possible.contains(*c))
            .collect(),
    );
    if beyond.is_empty() {
        return Ok(());
    }
    Err(FieldError::new(
        "set.cpus",
        format!(
            "CPUs {beyond} are beyond this host's possible CPUs {possible} ({file}): the \
             kernel refuses the mask (store_rps_map in net/core/net-sysfs.c)"
        ),
    ))
}

impl KnobKind for Rps {
    fn kind(&self) -> KindName {
        KindName::Rps
    }

    fn desired(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.cpus {
            parts.push(match c {
                CpuSel::List(l) if l.is_empty() => "cpus none".to_string(),
                c => format!("cpus {c}"),
            });
        }
        if let Some(n) = self.flow_cnt {
            parts.push(format!("flow_cnt {n}"));
        }
        parts.join(", ")
    }

    fn target_summary(&self) -> String {
        match &self.queues {
            Some(q) => format!("{} rx queues {q}", self.sel.summary()),
            None => format!("{} every rx queue", self.sel.summary()),
        }
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        // tmpfiles.d writes at boot only; the queues' files are made again
        // with the device, which the udev rule follows.
        &[
            Persistence::Runtime,
            Persistence::UdevReapply,
            Persistence::Tmpfiles,
        ]
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        if let Some(CpuSel::List(l)) = &self.cpus {
            beyond_possible(host, l)?;
            let (_, missing) = CpuSel::List(l.clone()).split(host.online());
            if !missing.is_empty() {
                survey.targets.push(Target {
                    blocker: Some(super::Blocker::Unsupported(format!(
                        "CPUs {missing} are not online on this host"
                    ))),
                    ..Target::absent("/sys/class/net".into(), None, &self.desired(), String::new())
                });
                return Ok(survey);
            }
        }
        let names = self.sel.select(host);
        if names.is_empty() {
            survey.targets.push(self.sel.none_here(&self.desired()));
        }
        let cpus = self.cpus_word(host);
        for ifname in names {
            let dir = format!("/sys/class/net/{ifname}/queues");
            let listed = host.root.read_dir(&dir).unwrap_or_default();
            let queues = crate::inventory::numbered(&listed, "rx-");
            for q in queues
                .into_iter()
                .filter(|q| self.queues.as_ref().is_none_or(|l| l.contains(*q)))
            {
                if let Some((words, mask)) = &cpus {
                    let path = format!("{dir}/rx-{q}/rps_cpus");
                    survey.targets.push(self.file_target(host, path, words, mask.clone()));
                }
                if let Some(n) = self.flow_cnt {
                    let path = format!("{dir}/rx-{q}/rps_flow_cnt");
                    let n = n.to_string();
                    survey.targets.push(self.file_target(host, path, &n, n.clone()));
                }
            }
        }
        Ok(survey)
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        Ok(host
            .root
            .read_trimmed(path)?
            .map(|raw| self.normalize_at(path, &raw)))
    }
}
