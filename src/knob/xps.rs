//! `xps`: transmit packet steering per transmit queue, by CPU
//! (`queues/tx-N/xps_cpus`: the CPUs whose packets use the queue) or by
//! receive queue (`xps_rxqs`: packets of flows received on those rx
//! queues), from Documentation/networking/scaling.rst (XPS) and
//! net/core/net-sysfs.c. The queues are those the NIC has after the
//! apply's `nic-channels` writes (`rules::phase`).

use serde::Deserialize;

use super::nic_queue::{self, QueueSel, QueueTargetDoc};
use super::{Blocker, CpuSel, FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target};
use crate::cpulist::CpuList;
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping such as {cpus: 0-3} or {cpus: 0-3, rxqs: 0-3}")]
pub struct XpsSet {
    /// CPUs whose packets go out on the queue, `all` or `none` (XPS by CPU off).
    cpus: Option<String>,
    /// Receive queue numbers whose flows send on the queue, or `none`.
    rxqs: Option<String>,
}

#[derive(Debug)]
pub struct Xps {
    sel: QueueSel,
    cpus: Option<CpuSel>,
    rxqs: Option<CpuList>,
}

impl Spec for Xps {
    type Target = QueueTargetDoc;
    type Set = XpsSet;

    fn new(target: Option<QueueTargetDoc>, set: XpsSet) -> Result<Self, FieldError> {
        let sel = QueueSel::new(target)?;
        if set.cpus.is_none() && set.rxqs.is_none() {
            return Err(FieldError::new("set", "empty: give cpus, rxqs or both"));
        }
        let cpus = nic_queue::cpus_set(set.cpus.as_deref())?;
        let rxqs = match set.rxqs.as_deref().map(str::trim) {
            None => None,
            Some("none") => Some(CpuList::default()),
            Some(t) => Some(CpuList::parse(t).map_err(|e| {
                FieldError::new("set.rxqs", format!("{t:?} is not a receive queue list or none ({e})"))
            })?),
        };
        Ok(Xps { sel, cpus, rxqs })
    }
}

/// Why a tx queue has no XPS file: net/core/net-sysfs.c creates `xps_cpus`
/// and `xps_rxqs` only with CONFIG_XPS, and since Linux 6.2 shows them
/// only on a device with more than one tx queue (`xps_queue_show`,
/// `netif_is_multiqueue`; ENOENT before).
fn no_xps(ifname: &str, file: &str) -> Blocker {
    Blocker::Unsupported(format!(
        "{ifname} has no {file}: XPS needs a device with more than one tx queue and a kernel \
         with CONFIG_XPS (net/core/net-sysfs.c)"
    ))
}

impl Xps {
    fn file(&self, host: &HostCtx, ifname: &str, path: String, want: &str, write: String) -> Target {
        if nic_queue::made_by_channels(host, &path) {
            return nic_queue::after_channels(path, want);
        }
        let file = path.rsplit('/').next().unwrap_or_default().to_string();
        let read = host.root.read_trimmed(&path);
        // The kernel answers a read of a queue no traffic class maps with
        // EINVAL, of a single-queue device with ENOENT (net-sysfs.c `xps_cpus_show`).
        if let Err(e) = &read
            && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT))
        {
            return Target {
                blocker: Some(no_xps(ifname, &file)),
                ..Target::absent(path, None, want, String::new())
            };
        }
        nic_queue::queue_file(read, path, want, write, nic_queue::mask_words, Some(no_xps(ifname, &file)))
    }
}

impl KnobKind for Xps {
    fn kind(&self) -> KindName {
        KindName::Xps
    }

    fn desired(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.cpus {
            parts.push(match c {
                CpuSel::List(l) => format!("cpus {}", nic_queue::list_words(l)),
                c => format!("cpus {c}"),
            });
        }
        if let Some(q) = &self.rxqs {
            parts.push(format!("rxqs {}", nic_queue::list_words(q)));
        }
        parts.join(", ")
    }

    fn target_summary(&self) -> String {
        self.sel.summary("tx")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        nic_queue::QUEUE_PERSISTENCE
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let desired = self.desired();
        if let Some(CpuSel::List(l)) = &self.cpus {
            nic_queue::beyond_possible(host, l, KindName::Xps)?;
        }
        if let Some(t) = nic_queue::offline_cpus(host, self.cpus.as_ref(), &desired) {
            survey.targets.push(t);
            return Ok(survey);
        }
        let names = self.sel.sel.select(host);
        if names.is_empty() {
            survey.targets.push(self.sel.sel.none_here(&desired));
        }
        let cpus = self.cpus.as_ref().map(|c| match c {
            CpuSel::All => host.online().clone(),
            CpuSel::List(l) => l.clone(),
        });
        for ifname in names {
            let refuse = |why| nic_queue::queue_refusal(&ifname, &desired, why);
            let queues = match self.sel.queues(host, &ifname, "tx-") {
                Ok(q) => q,
                Err(why) => {
                    survey.targets.push(refuse(why));
                    continue;
                }
            };
            // `xps_rxqs_store` parses the mask over the device's rx queues
            // (`bitmap_parse(..., dev->num_rx_queues)`: EOVERFLOW past them).
            if let Some(rxqs) = &self.rxqs {
                let (have, _) = nic_queue::queues_after(host, &ifname, "rx-");
                if let Some(q) = rxqs.as_slice().iter().find(|q| !have.contains(q)) {
                    let n = have.len();
                    survey.targets.push(refuse(format!(
                        "{ifname} has no rx queue {q} for xps_rxqs (it has {n})"
                    )));
                    continue;
                }
            }
            let dir = format!("/sys/class/net/{ifname}/queues");
            for q in queues {
                for (file, list) in [("xps_cpus", &cpus), ("xps_rxqs", &self.rxqs)] {
                    if let Some(l) = list {
                        let path = format!("{dir}/tx-{q}/{file}");
                        let mask = super::workqueue::to_mask(l);
                        survey.targets.push(self.file(host, &ifname, path, &nic_queue::list_words(l), mask));
                    }
                }
            }
        }
        Ok(survey)
    }

    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        Ok(host.root.read_trimmed(path)?.map(|raw| nic_queue::mask_words(&raw)))
    }
}
