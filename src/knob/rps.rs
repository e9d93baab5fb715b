//! `rps`: receive packet steering per receive queue (`queues/rx-N/rps_cpus`,
//! a CPU mask) and its flow table for RFS (`rps_flow_cnt`), from
//! Documentation/networking/scaling.rst. The queues are those the NIC has
//! after the apply's `nic-channels` writes (planned again after them:
//! `apply/requeue.rs`).

use serde::Deserialize;

use super::nic_queue::{self, QueueSel, QueueTargetDoc};
use super::{
    Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target,
};
use super::rules;
use crate::cpulist::CpuList;
use crate::schema::Persistence;


/// The CPUs in the knob's words, the mask written, and a note on what the kernel drops.
type Planned = (String, String, Option<String>);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping such as {cpus: 2-3} or {cpus: 2-3, flow_cnt: 4096}")]
pub struct RpsSet {
    /// CPUs that process the queue's packets, or `none` (RPS off).
    cpus: Option<String>,
    /// Flows in the queue's RFS table; the kernel rounds up to a power of two.
    flow_cnt: Option<u32>,
}

#[derive(Debug)]
pub struct Rps {
    sel: QueueSel,
    cpus: Option<CpuSel>,
    flow_cnt: Option<u32>,
}

impl Spec for Rps {
    type Target = QueueTargetDoc;
    type Set = RpsSet;

    fn new(target: Option<QueueTargetDoc>, set: RpsSet) -> Result<Self, FieldError> {
        let sel = QueueSel::new(target)?;
        if set.cpus.is_none() && set.flow_cnt.is_none() {
            return Err(FieldError::new("set", "empty: give cpus, flow_cnt or both"));
        }
        let cpus = nic_queue::cpus_set(set.cpus.as_deref())?;
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
            cpus,
            flow_cnt: set.flow_cnt,
        })
    }
}

impl Rps {
    /// The CPUs to write, in the knob's words and as the mask written, and
    /// a note when the kernel keeps fewer than asked: `store_rps_map` drops
    /// isolated CPUs ([`rules::rps`]), so the plan writes and audit judges
    /// what it keeps. `Err`: it would keep none and refuse the write.
    fn cpus_word(&self, host: &HostCtx) -> Option<Result<Planned, String>> {
        let asked = match self.cpus.as_ref()? {
            CpuSel::All => host.online().clone(),
            CpuSel::List(l) => l.clone(),
        };
        let mut cpus = asked.clone();
        let mut note = None;
        if !asked.is_empty()
            && let Some((dropped, why)) = rules::rps::dropped(&host.kernel_release(), host.cmdline().unwrap_or(""))
        {
            cpus = asked.as_slice().iter().copied().filter(|c| !dropped.contains(*c)).collect();
            let gone: CpuList = asked.as_slice().iter().copied().filter(|c| dropped.contains(*c)).collect();
            if cpus.is_empty() {
                return Some(Err(format!(
                    "rps cpus {asked} are all isolated ({why}): the kernel keeps no CPU of the mask and refuses it (EINVAL; {})",
                    rules::rps::SOURCE
                )));
            }
            if !gone.is_empty() {
                note = Some(format!(
                    "rps cpus {}: the kernel keeps {cpus} and drops isolated CPUs {gone} ({why}; {}): planned and audited as {cpus}",
                    self.cpus.as_ref().map(|c| c.to_string()).unwrap_or_default(),
                    rules::rps::SOURCE
                ));
            }
        }
        let words = if cpus.is_empty() { "none".into() } else { cpus.to_string() };
        Some(Ok((words, super::workqueue::to_mask(&cpus), note)))
    }

    fn file_target(&self, host: &HostCtx, path: String, want: &str, write: String) -> Target {
        if nic_queue::made_by_channels(host, &path) {
            return nic_queue::after_channels(path, want);
        }
        let why = format!("{path} does not exist (a kernel without CONFIG_RPS)");
        let words = |raw: &str| self.normalize_at(&path, raw);
        nic_queue::queue_file(host.root.read_trimmed(&path), path.clone(), want, write, words, Some(Blocker::NotApplicable(why)))
    }

    fn normalize_at(&self, path: &str, raw: &str) -> String {
        if path.ends_with("/rps_cpus") {
            nic_queue::mask_words(raw)
        } else {
            raw.trim().to_string()
        }
    }
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
        self.sel.summary("rx")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        nic_queue::QUEUE_PERSISTENCE
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        if let Some(CpuSel::List(l)) = &self.cpus {
            nic_queue::beyond_possible(host, l, KindName::Rps)?;
        }
        if let Some(t) = nic_queue::offline_cpus(host, self.cpus.as_ref(), &self.desired()) {
            survey.targets.push(t);
            return Ok(survey);
        }
        let names = self.sel.sel.select(host);
        if names.is_empty() {
            survey.targets.push(self.sel.sel.none_here(&self.desired()));
        }
        let cpus = match self.cpus_word(host) {
            Some(Err(why)) => {
                survey.targets.push(Target {
                    blocker: Some(Blocker::Unsupported(why)),
                    ..Target::absent("/sys/class/net".into(), None, &self.desired(), String::new())
                });
                return Ok(survey);
            }
            Some(Ok((words, mask, note))) => {
                survey.notes.extend(note);
                Some((words, mask))
            }
            None => None,
        };
        for ifname in names {
            let queues = match self.sel.queues(host, &ifname, "rx-") {
                Ok(q) => q,
                Err(why) => {
                    survey.targets.push(nic_queue::queue_refusal(&ifname, &self.desired(), why));
                    continue;
                }
            };
            let dir = format!("/sys/class/net/{ifname}/queues");
            for q in queues {
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
