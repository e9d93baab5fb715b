//! `block`: a block device's request-queue settings (`/sys/block/DEV/queue/`),
//! on the devices chosen by name, transport, `rotational` or all disks. The
//! kernel's rules (what each file takes, which queues have it, the order)
//! are the data of [`SETTINGS`], each citing its source; numbers take a bound
//! (`{at-least: 4096}`) as tuned's `readahead=>4096` does.

use serde::Deserialize;

use super::bound::{BOUND_PERSISTENCE, SetDoc, Setting};
use super::udev_rule::{RuleLine, UdevRule};
use super::{
    FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec, Survey, Target, WriteMode,
};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    name: Option<String>,
    transport: Option<String>,
    rotational: Option<bool>,
    all: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetBlock {
    scheduler: Option<Scalar>,
    read_ahead_kb: Option<SetDoc>,
    nr_requests: Option<SetDoc>,
    rq_affinity: Option<SetDoc>,
    nomerges: Option<SetDoc>,
    wbt_lat_usec: Option<SetDoc>,
    add_random: Option<SetDoc>,
    iostats: Option<SetDoc>,
    max_sectors_kb: Option<SetDoc>,
}

/// One numeric `queue/` file and what the kernel takes (block/blk-sysfs.c).
pub struct Rule {
    pub file: &'static str,
    pub min: i128,
    pub max: i128,
    /// Only blk-mq queues have it: a bio-based queue (device-mapper linear
    /// or crypt, md, zram) has no requests; since 6.11 the file is hidden
    /// there (`blk_mq_queue_attr_visible`), before that writes fail.
    pub mq_only: bool,
    /// The scheduler sets it again when it changes: written after it.
    pub after_scheduler: bool,
    pub rule: &'static str,
}

/// The numeric settings in the order they are written (after `scheduler`).
pub const SETTINGS: [Rule; 8] = [
    Rule {
        file: "nr_requests",
        min: 4,
        max: u32::MAX as i128,
        mq_only: true,
        after_scheduler: true,
        rule: "queue_requests_store: blk-mq queues only; under BLKDEV_MIN_RQ (4) it is raised to 4; \
               with a scheduler at most MAX_SCHED_RQ (2048), with `none` at most the hardware \
               queue depth (blk_mq_update_nr_requests, block/blk-mq.c); a scheduler change sets \
               it to the new scheduler's default (block/elevator.c), so it is written after",
    },
    Rule {
        file: "wbt_lat_usec",
        min: 0,
        max: i64::MAX as i128,
        mq_only: true,
        after_scheduler: true,
        rule: "queue_wb_lat_store: microseconds, 0 turns writeback throttling off (-1, the \
               default, reads back as the default's number, so it is no value to set); \
               bfq turns throttling off when chosen (wbt_disable_default), so it is written \
               after the scheduler",
    },
    Rule {
        file: "read_ahead_kb",
        min: 0,
        max: u32::MAX as i128,
        mq_only: false,
        after_scheduler: false,
        rule: "queue_ra_store: kept in pages (ra_pages = kb >> (PAGE_SHIFT - 10)), so a value \
               that is not a multiple of the page size reads back rounded down; a stacked \
               device-mapper device gets its own at creation (dm_table_set_restrictions), \
               not its parts'",
    },
    Rule {
        file: "rq_affinity",
        min: 0,
        max: 2,
        mq_only: true,
        after_scheduler: false,
        rule: "queue_rq_affinity_store: 0 completes anywhere, 1 on the submitting CPU's \
               cache group, 2 on the submitting CPU itself",
    },
    Rule {
        file: "nomerges",
        min: 0,
        max: 2,
        mq_only: false,
        after_scheduler: false,
        rule: "queue_nomerges_store: 0 merges, 1 only simple one-hit merges, 2 none",
    },
    Rule {
        file: "add_random",
        min: 0,
        max: 1,
        mq_only: false,
        after_scheduler: false,
        rule: "queue_feature_store (QUEUE_FLAG_ADD_RANDOM / BLK_FEAT_ADD_RANDOM): 0 or 1",
    },
    Rule {
        file: "iostats",
        min: 0,
        max: 1,
        mq_only: false,
        after_scheduler: false,
        rule: "queue_feature_store (BLK_FEAT_IO_STAT): 0 or 1",
    },
    Rule {
        file: "max_sectors_kb",
        min: 4,
        max: u32::MAX as i128,
        mq_only: false,
        after_scheduler: false,
        rule: "queue_max_sectors_store: at least a page (4 KiB on x86) and at most \
               max_hw_sectors_kb (min_not_zero with max_dev_sectors); a stacked \
               device-mapper device's max_hw_sectors_kb is the smallest of its parts' \
               (blk_stack_limits, block/blk-settings.c)",
    },
];

/// `transport:` and the kernel names its driver gives disks.
pub const TRANSPORTS: [(&str, &str, &str); 8] = [
    ("nvme", "nvme*", "drivers/nvme/host/core.c (nvme%dn%d)"),
    (
        "sd",
        "sd*",
        "drivers/scsi/sd.c (sd_format_disk_name: SCSI, SATA, SAS, USB disks)",
    ),
    (
        "vd",
        "vd*",
        "drivers/block/virtio_blk.c (virtblk_name_format(\"vd\"))",
    ),
    ("xvd", "xvd*", "drivers/block/xen-blkfront.c (xvd)"),
    ("dm", "dm-*", "drivers/md/dm.c (dm-%d)"),
    ("md", "md*", "drivers/md/md.c (md%d, md_NAME)"),
    ("mmc", "mmcblk*", "drivers/mmc/core/block.c (mmcblk%d)"),
    ("loop", "loop*", "drivers/block/loop.c (loop%d)"),
];

#[derive(Debug)]
pub struct Block {
    name: Option<glob::Pattern>,
    transport: Option<&'static str>,
    rotational: Option<bool>,
    scheduler: Option<String>,
    /// (index in [`SETTINGS`], setting), in that order.
    numbers: Vec<(usize, Setting)>,
}

fn check_number(field: &str, rule: &Rule, text: &str) -> Result<(), FieldError> {
    match super::bound::integer(text) {
        Some(n) if n >= rule.min && n <= rule.max => Ok(()),
        _ => Err(FieldError::new(
            field,
            format!(
                "{text:?}: {} takes a whole number from {} to {} ({})",
                rule.file, rule.min, rule.max, rule.rule
            ),
        )),
    }
}

impl Spec for Block {
    type Target = TargetDoc;
    type Set = SetBlock;

    fn new(target: Option<TargetDoc>, set: SetBlock) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.name (a glob such as nvme*n1), target.transport, \
                 target.rotational or target.all: true",
            )
        })?;
        if t.all == Some(false) {
            return Err(FieldError::new(
                "target.all",
                "`all: false` selects nothing: leave it out, or choose by name, transport or rotational",
            ));
        }
        if t.name.is_none() && t.transport.is_none() && t.rotational.is_none() && t.all.is_none() {
            return Err(FieldError::new(
                "target",
                "choose devices: name, transport, rotational or all: true",
            ));
        }
        let name = t
            .name
            .map(|n| {
                if n.is_empty() || n == "." || n == ".." || !n.chars().all(crate::name::block_name_char) {
                    return Err(FieldError::new(
                        "target.name",
                        format!(
                            "{n:?} is not a block device name or glob (like nvme*n1 or sd[ab]): \
                             letters, digits and _ . : + @ ! - with the glob characters * ? [ ] ^ \
                             only (no `/`, no quote, blank or newline, which would end a udev \
                             rule's value or line)"
                        ),
                    ));
                }
                glob::Pattern::new(&n)
                    .map_err(|e| FieldError::new("target.name", format!("{n:?}: bad glob: {e}")))
            })
            .transpose()?;
        let transport = t
            .transport
            .map(|tr| {
                TRANSPORTS
                    .iter()
                    .find(|(n, _, _)| *n == tr)
                    .map(|(n, _, _)| *n)
                    .ok_or_else(|| {
                        let known: Vec<&str> = TRANSPORTS.iter().map(|t| t.0).collect();
                        FieldError::new(
                            "target.transport",
                            format!("unknown transport {tr:?}; known: {}", known.join(", ")),
                        )
                    })
            })
            .transpose()?;
        let scheduler = set.scheduler.map(|s| s.0.trim().to_string());
        if let Some(s) = &scheduler {
            let ok = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
            if !ok {
                return Err(FieldError::new(
                    "set.scheduler",
                    format!("{s:?} is not an I/O scheduler name (none, mq-deadline, kyber, bfq)"),
                ));
            }
        }
        let docs = [
            set.nr_requests,
            set.wbt_lat_usec,
            set.read_ahead_kb,
            set.rq_affinity,
            set.nomerges,
            set.add_random,
            set.iostats,
            set.max_sectors_kb,
        ];
        let mut numbers = Vec::new();
        for (i, doc) in docs.into_iter().enumerate() {
            let Some(doc) = doc else { continue };
            let rule = &SETTINGS[i];
            let field = format!("set.{}", rule.file);
            let setting = Setting::parse(&field, doc)?;
            match &setting {
                Setting::Value(v) => check_number(&field, rule, v)?,
                Setting::Bound(b) => {
                    for (name, n) in [("at-least", b.at_least), ("at-most", b.at_most)] {
                        if let Some(n) = n {
                            check_number(&format!("{field}.{name}"), rule, &n.to_string())?;
                        }
                    }
                    if rule.after_scheduler && scheduler.is_some() {
                        return Err(FieldError::new(
                            &field,
                            format!(
                                "a bound on {} with a scheduler: changing the scheduler sets {} \
                                 to that scheduler's default, so the value it is compared with \
                                 is not known before the write; give it a value",
                                rule.file, rule.file
                            ),
                        ));
                    }
                }
            }
            numbers.push((i, setting));
        }
        if scheduler.is_none() && numbers.is_empty() {
            return Err(FieldError::new(
                "set",
                "nothing to set: give scheduler or a queue setting such as read_ahead_kb",
            ));
        }
        Ok(Block {
            name,
            transport,
            rotational: t.rotational,
            scheduler,
            numbers,
        })
    }
}

/// The offered schedulers of a `queue/scheduler` file and the chosen one
/// (`none [mq-deadline] kyber`, block/elevator.c `elv_iosched_show`).
pub fn schedulers(text: &str) -> (Vec<String>, Option<String>) {
    let mut chosen = None;
    let offered = text
        .split_whitespace()
        .map(
            |w| match w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                Some(c) => {
                    chosen = Some(c.to_string());
                    c.to_string()
                }
                None => w.to_string(),
            },
        )
        .collect::<Vec<String>>();
    // A tree written by apply (a capture's copy) holds the bare name.
    if chosen.is_none() && offered.len() == 1 {
        chosen = offered.first().cloned();
    }
    (offered, chosen)
}

impl Block {
    /// The devices of `/sys/block` this knob chooses, in name order. A
    /// removable one (a CD drive, a card reader) or one holding nothing
    /// (`size` 0: an unattached loop device) only when named by `name`.
    fn devices(&self, host: &HostCtx) -> Vec<String> {
        let mut names = host.list("/sys/block");
        names.sort();
        names.retain(|dev| {
            let attr = |f: &str| {
                host.root
                    .read_trimmed(&format!("/sys/block/{dev}/{f}"))
                    .ok()
                    .flatten()
            };
            if let Some(p) = &self.name {
                if !p.matches(dev) {
                    return false;
                }
            } else if attr("removable").as_deref() == Some("1")
                || attr("size").as_deref() == Some("0")
            {
                return false;
            }
            if let Some(tr) = self.transport {
                let (_, glob, _) = TRANSPORTS.iter().find(|t| t.0 == tr).expect("checked");
                if !glob::Pattern::new(glob).expect("constant").matches(dev) {
                    return false;
                }
            }
            if let Some(r) = self.rotational {
                let want = if r { "1" } else { "0" };
                if attr("queue/rotational").as_deref() != Some(want) {
                    return false;
                }
            }
            true
        });
        names
    }

    fn selector(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = &self.name {
            parts.push(format!("name {}", n.as_str()));
        }
        if let Some(t) = self.transport {
            parts.push(format!("transport {t}"));
        }
        if let Some(r) = self.rotational {
            parts.push(format!("rotational {r}"));
        }
        if parts.is_empty() {
            parts.push("every disk".into());
        }
        parts.join(", ")
    }

    /// Why a device has no `file`: a bio-based queue (no `mq/`) has no requests.
    fn absent_reason(host: &HostCtx, dev: &str, file: &str) -> String {
        if host.root.is_dir(&format!("/sys/block/{dev}/mq")) {
            return format!("{dev} has no queue/{file} (not in this kernel)");
        }
        let parts = host.list(&format!("/sys/block/{dev}/slaves"));
        let stacked = if parts.is_empty() {
            String::new()
        } else {
            format!(
                "; it is stacked on {}: set the request queue there",
                parts.join(", ")
            )
        };
        format!(
            "{dev} is bio-based (no blk-mq queue: device-mapper linear/crypt, md, zram): it has no \
             queue/{file}, the kernel shows it only for blk-mq queues (block/blk-sysfs.c){stacked}"
        )
    }

    fn scheduler_target(
        &self,
        host: &HostCtx,
        dev: &str,
        want: &str,
    ) -> Result<Target, FieldError> {
        let path = format!("/sys/block/{dev}/queue/scheduler");
        let label = Some(format!("{dev} scheduler"));
        let bio_based = !host.root.is_dir(&format!("/sys/block/{dev}/mq"));
        let text = match host.value(&path) {
            ReadValue::Value(v) if !bio_based => v,
            ReadValue::Value(_) | ReadValue::Absent => {
                let mut t = Target::absent(
                    path,
                    None,
                    want,
                    Self::absent_reason(host, dev, "scheduler"),
                );
                t.label = label;
                return Ok(t);
            }
            ReadValue::Unreadable(e) => return Ok(Target::unreadable(path, None, want, &e)),
        };
        let (offered, chosen) = schedulers(&text);
        if !offered.iter().any(|o| o == want) {
            return Err(FieldError::new(
                "set.scheduler",
                format!(
                    "{dev} offers {} ({path}), not {want}: the kernel takes only a registered \
                     scheduler (block/elevator.c, elevator_change); load its module first \
                     (`modprobe {want}-iosched`, and modules-load.d for the next boot)",
                    offered.join(", ")
                ),
            ));
        }
        Ok(Target {
            in_effect: chosen.as_deref() == Some(want),
            path,
            cpus: None,
            label,
            restore: chosen.clone(),
            current: chosen,
            desired: want.to_string(),
            write: Some(want.to_string()),
            mode: WriteMode::Attribute,
            blocker: None,
        })
    }

    fn number_target(
        &self,
        host: &HostCtx,
        dev: &str,
        rule: &Rule,
        setting: &Setting,
        scheduler_changes: bool,
    ) -> Result<Target, FieldError> {
        let path = format!("/sys/block/{dev}/queue/{}", rule.file);
        let desired = setting.to_string();
        let label = Some(format!("{dev} {}", rule.file));
        // Before 6.11 a bio-based queue shows the blk-mq files and refuses writes.
        let bio_based = rule.mq_only && !host.root.is_dir(&format!("/sys/block/{dev}/mq"));
        let current = match host.value(&path) {
            ReadValue::Value(v) if !bio_based => v.trim().to_string(),
            ReadValue::Value(_) | ReadValue::Absent => {
                let mut t = Target::absent(
                    path,
                    None,
                    &desired,
                    Self::absent_reason(host, dev, rule.file),
                );
                t.label = label;
                return Ok(t);
            }
            ReadValue::Unreadable(e) => return Ok(Target::unreadable(path, None, &desired, &e)),
        };
        if rule.file == "max_sectors_kb" {
            let hw_path = format!("/sys/block/{dev}/queue/max_hw_sectors_kb");
            let hw = host
                .root
                .read_trimmed(&hw_path)
                .ok()
                .flatten()
                .and_then(|h| super::bound::integer(&h));
            let asked = match setting {
                Setting::Value(v) => super::bound::integer(v),
                Setting::Bound(b) => b.at_least,
            };
            if let (Some(hw), Some(asked)) = (hw, asked) {
                if asked > hw {
                    return Err(FieldError::new(
                        "set.max_sectors_kb",
                        format!(
                            "{asked} is above {dev}'s max_hw_sectors_kb {hw} ({hw_path}): the \
                             kernel refuses it ({})",
                            rule.rule
                        ),
                    ));
                }
            }
        }
        let (in_effect, write, blocker) = super::sysctl::judge(setting, &path, Some(&current));
        Ok(Target {
            // The scheduler's change resets it: written again after.
            in_effect: in_effect && !(rule.after_scheduler && scheduler_changes),
            path,
            cpus: None,
            label,
            restore: Some(current.clone()),
            current: Some(current),
            desired,
            write,
            mode: WriteMode::Attribute,
            blocker,
        })
    }
}

impl KnobKind for Block {
    fn kind(&self) -> KindName {
        KindName::Block
    }

    fn desired(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.scheduler {
            parts.push(format!("scheduler {s}"));
        }
        for (i, s) in &self.numbers {
            parts.push(format!("{} {s}", SETTINGS[*i].file));
        }
        parts.join(", ")
    }

    fn target_summary(&self) -> String {
        format!("block devices: {}", self.selector())
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        if self.numbers.iter().any(|(_, s)| s.bound().is_some()) {
            return BOUND_PERSISTENCE;
        }
        &[
            Persistence::Runtime,
            Persistence::Boot,
            Persistence::Tmpfiles,
            Persistence::UdevRule,
        ]
    }

    fn persistence_refused(&self, _p: Persistence) -> Option<&'static str> {
        let bound = self.numbers.iter().any(|(_, s)| s.bound().is_some());
        bound.then_some(super::bound::BOUND_WHY)
    }

    /// The selector as udev match keys: a name by `KERNEL`, a transport by
    /// the kernel names its driver gives ([`TRANSPORTS`], the same globs
    /// [`Block::devices`] uses), `rotational` by the queue's file; without a
    /// name, removable and empty devices are left out as here. blk-mq-only
    /// files go on a line of their own with `TEST=="mq"` (a bio-based queue
    /// has no `mq/` and refuses them).
    fn udev_rule(&self) -> Option<UdevRule> {
        let mut keys = vec![
            r#"ACTION=="add|change""#.to_string(),
            r#"SUBSYSTEM=="block""#.into(),
            r#"ENV{DEVTYPE}=="disk""#.into(),
        ];
        match &self.name {
            Some(n) => keys.push(format!("KERNEL==\"{}\"", n.as_str())),
            None => {
                keys.push(r#"ATTR{removable}=="0""#.into());
                keys.push(r#"ATTR{size}!="0""#.into());
            }
        }
        if let Some(tr) = self.transport {
            let (_, glob, _) = TRANSPORTS.iter().find(|t| t.0 == tr)?;
            keys.push(format!("KERNEL==\"{glob}\""));
        }
        if let Some(r) = self.rotational {
            keys.push(format!("ATTR{{queue/rotational}}==\"{}\"", u8::from(r)));
        }
        let (mut mq, mut any) = (Vec::new(), Vec::new());
        if let Some(s) = &self.scheduler {
            mq.push(("queue/scheduler".to_string(), s.clone()));
        }
        for (i, setting) in &self.numbers {
            let Setting::Value(v) = setting else {
                return None;
            };
            let rule = &SETTINGS[*i];
            let to = if rule.mq_only { &mut mq } else { &mut any };
            to.push((format!("queue/{}", rule.file), v.clone()));
        }
        let mut lines = Vec::new();
        if !mq.is_empty() {
            lines.push(RuleLine {
                only: Some(r#"TEST=="mq""#.into()),
                assign: mq,
            });
        }
        if !any.is_empty() {
            lines.push(RuleLine {
                only: None,
                assign: any,
            });
        }
        Some(UdevRule { keys, lines })
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        crate::inventory::bracketed(raw).unwrap_or_else(|| raw.trim().to_string())
    }

    fn confirms(&self, expect: &str, read: &str) -> bool {
        if expect == read {
            return true;
        }
        // A bound's target expects its words (`at least 4096`): the value
        // read back must satisfy it.
        self.numbers
            .iter()
            .filter_map(|(_, s)| s.bound())
            .any(|b| b.to_string() == expect && b.holds(read))
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let mut survey = Survey::default();
        let devices = self.devices(host);
        if devices.is_empty() {
            survey.targets.push(Target::absent(
                "/sys/block".into(),
                None,
                &self.desired(),
                format!("no block device here is chosen by {}", self.selector()),
            ));
            return Ok(survey);
        }
        for dev in &devices {
            let mut changes = false;
            if let Some(want) = &self.scheduler {
                let t = self.scheduler_target(host, dev, want)?;
                changes = t.blocker.is_none() && !t.in_effect;
                survey.targets.push(t);
            }
            for (i, setting) in &self.numbers {
                survey.targets.push(self.number_target(
                    host,
                    dev,
                    &SETTINGS[*i],
                    setting,
                    changes,
                )?);
            }
        }
        if self.scheduler.is_some() {
            survey.notes.push(
                "the scheduler is written before nr_requests and wbt_lat_usec, which a scheduler \
                 change resets (block/elevator.c)"
                    .into(),
            );
        }
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheduler_file_gives_the_offered_and_the_chosen() {
        let (offered, chosen) = schedulers("none [mq-deadline] kyber \n");
        assert_eq!(offered, ["none", "mq-deadline", "kyber"]);
        assert_eq!(chosen.as_deref(), Some("mq-deadline"));
        assert_eq!(schedulers("kyber").1.as_deref(), Some("kyber"));
    }
}
