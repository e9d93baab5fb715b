//! What the MSR kinds share: one field of one register per scope domain.
//!
//! Each kind says, for the host's CPU model, which field it owns, the bits
//! it wants there, the scope of the register and what must hold before it
//! may write ([`Resolved`]); this file finds the CPU model, groups the
//! selected CPUs into scope domains, reads the register on every CPU of each
//! and makes one target per domain (path `/dev/cpu/N/msr@0xREG[HI:LO]`,
//! written by `crate::msr::write`). Scopes are pepc's (`sname` of each
//! feature in `pepclibs/msr/*.py`, commit 01b1f794).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Blocker, CpuSel, FieldError, HostCtx, Survey, Target, WriteMode, offline_target};
use crate::cpulist::CpuList;
use crate::inventory::CPU_DIR;
use crate::msr::model::{self, Model};
use crate::msr::write::{self as w, Field};
use crate::msr::{self, Msrs};
use crate::schema::{Persistence, Scalar};

/// MSRs reset at boot: a boot unit re-applies them (`persist/boot_unit.rs`).
pub const MSR_PERSISTENCE: &[Persistence] = &[Persistence::Runtime, Persistence::Boot];

pub use crate::msr::model::Scope;

/// The current value of a domain whose copies differ (a CPU brought online
/// since, which intel_idle set up afresh): audit calls it drift.
pub const DIFFERS: &str = "differs between CPUs";

/// A condition on another (or the same) register that must hold on each
/// domain before the field may be written.
#[derive(Clone, Debug)]
pub struct Guard {
    pub field: Field,
    /// The value the field must have.
    pub want: u64,
    /// Why the write is refused when it does not.
    pub refusal: &'static str,
}

/// A rule on each CPU's registers before the write: the registers it reads
/// and, given the bits wanted and their values, the refusal if it fails.
#[derive(Clone, Debug)]
pub struct Check {
    pub regs: &'static [u32],
    pub refuse: fn(u64, &[u64]) -> Option<String>,
}

/// One kind's field on this CPU model.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub field: Field,
    pub scope: Scope,
    pub want: u64,
    /// The field's values in words (`on`, `PC6`); others show as numbers.
    pub words: Vec<(u64, String)>,
    pub label: String,
    pub guards: Vec<Guard>,
    pub checks: Vec<Check>,
}

impl Resolved {
    pub fn word(&self, bits: u64) -> String {
        self.words
            .iter()
            .find(|(v, _)| *v == bits)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| bits.to_string())
    }
}

/// The CPU as `/proc/cpuinfo` describes it, and each CPU's place.
pub struct CpuId {
    pub vendor: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub flags: Vec<String>,
    /// processor -> (physical id, core id)
    places: BTreeMap<u32, (Option<u32>, Option<u32>)>,
    /// The first online CPU's cpufreq scaling driver.
    pub driver: Option<String>,
    /// Distinct `die_id`s among package 0's CPUs, read only where a
    /// scope depends on it ([`model::package_scope`]).
    dies_in_package0: usize,
}

impl CpuId {
    pub fn read(host: &HostCtx) -> Result<CpuId, String> {
        let text = host
            .root
            .read_string("/proc/cpuinfo")
            .map_err(|e| format!("/proc/cpuinfo: {e}"))?;
        let mut id = CpuId {
            vendor: None,
            family: None,
            model: None,
            flags: Vec::new(),
            places: BTreeMap::new(),
            dies_in_package0: 1,
            driver: host.online().as_slice().first().and_then(|c| {
                host.text(&format!("{CPU_DIR}/cpu{c}/cpufreq/scaling_driver"))
                    .map(|d| d.trim().to_string())
            }),
        };
        for (n, block) in text.split("\n\n").enumerate() {
            let mut place = (None, None, None);
            for line in block.lines() {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                let v = v.trim();
                match (k.trim(), n) {
                    ("processor", _) => place.0 = v.parse().ok(),
                    ("physical id", _) => place.1 = v.parse().ok(),
                    ("core id", _) => place.2 = v.parse().ok(),
                    ("vendor_id", 0) => id.vendor = Some(v.to_string()),
                    ("cpu family", 0) => id.family = v.parse().ok(),
                    ("model", 0) => id.model = v.parse().ok(),
                    ("flags", 0) => id.flags = v.split_whitespace().map(str::to_string).collect(),
                    _ => {}
                }
            }
            if let Some(p) = place.0 {
                id.places.insert(p, (place.1, place.2));
            }
        }
        if model::package_scope(id.family.unwrap_or(0), id.model.unwrap_or(0), 2) == Scope::Die {
            let mut dies: Vec<String> = id
                .places
                .iter()
                .filter(|(_, (package, _))| *package == Some(0))
                .filter_map(|(cpu, _)| host.text(&format!("{CPU_DIR}/cpu{cpu}/topology/die_id")))
                .collect();
            dies.sort();
            dies.dedup();
            id.dies_in_package0 = dies.len();
        }
        Ok(id)
    }

    /// The scope of a package-scoped feature of 0xE2 or 0x1FC on this CPU (die on CLX-AP).
    pub fn package_scope(&self) -> Scope {
        model::package_scope(
            self.family.unwrap_or(0),
            self.model.unwrap_or(0),
            self.dies_in_package0,
        )
    }

    /// The scope of C1 demotion/undemotion on this CPU model.
    pub fn c1_demotion_scope(&self) -> Scope {
        model::c1_demotion_scope(self.family.unwrap_or(0), self.model.unwrap_or(0))
    }

    pub fn model(&self) -> Option<&'static Model> {
        model::lookup(self.family?, self.model?)
    }

    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub fn family_model(&self) -> String {
        format!(
            "family {} model {:#x}",
            self.family.unwrap_or(0),
            self.model.unwrap_or(0)
        )
    }

    /// The model-table entry, or why the kind cannot know its bits here.
    pub fn require_model(&self) -> Result<&'static Model, Blocker> {
        self.model().ok_or_else(|| {
            Blocker::Unsupported(format!(
                "{} is not in the MSR model table (src/msr/model.rs): its bits are not known, so nothing is written",
                self.family_model()
            ))
        })
    }

    /// The CPU's domain key for `scope`: sysfs topology first, then cpuinfo.
    fn domain(&self, host: &HostCtx, cpu: u32, scope: Scope) -> Option<(u32, u32, u32)> {
        let topo = |name: &str| -> Option<u32> {
            host.text(&format!("{CPU_DIR}/cpu{cpu}/topology/{name}"))?
                .parse()
                .ok()
        };
        let info = self.places.get(&cpu).copied().unwrap_or((None, None));
        let package = || topo("physical_package_id").or(info.0);
        match scope {
            Scope::Thread => Some((cpu, 0, 0)),
            Scope::Package => Some((package()?, 0, 0)),
            Scope::Die => Some((package()?, topo("die_id")?, 0)),
            // Named by the first CPU sharing its L2 (pepc reads index2 too).
            Scope::Module => {
                let shared =
                    host.text(&format!("{CPU_DIR}/cpu{cpu}/cache/index2/shared_cpu_list"))?;
                let first = *CpuList::parse(shared.trim()).ok()?.as_slice().first()?;
                Some((package()?, u32::MAX, first))
            }
            Scope::Core => Some((
                package()?,
                topo("die_id").unwrap_or(0),
                topo("core_id").or(info.1)?,
            )),
        }
    }
}

/// `target:` of the single-field kinds: only `cpus`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpusTarget {
    #[serde(default)]
    pub cpus: Option<Scalar>,
}

pub fn cpus_of(cpus: Option<Scalar>) -> Result<CpuSel, FieldError> {
    match cpus {
        Some(s) => CpuSel::parse("target.cpus", &s.0),
        None => Ok(CpuSel::All),
    }
}

/// `set: on|off`.
pub fn on_off(set: &Scalar) -> Result<bool, FieldError> {
    match set.0.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(FieldError::new(
            "set",
            format!("{other:?} is not `on` or `off`"),
        )),
    }
}

/// One target per scope domain of the selected CPUs: the register read on
/// every CPU of it, `resolve` giving the kind's field for this CPU model.
pub fn survey(
    host: &HostCtx,
    cpus: &CpuSel,
    desired: &str,
    resolve: impl Fn(&CpuId) -> Result<Resolved, Blocker>,
) -> Result<Survey, FieldError> {
    let (here, missing) = cpus.split(host.online());
    let mut survey = Survey::default();
    survey.targets.extend(offline_target(&missing, desired));
    let Some(&first) = here.as_slice().first() else {
        return Ok(survey);
    };
    let whole = |path: String, blocker: Blocker| Target {
        blocker: Some(blocker),
        ..Target::absent(path, Some(here.clone()), desired, String::new())
    };
    let id = match CpuId::read(host) {
        Ok(id) => id,
        Err(e) => {
            survey.targets.push(Target::unreadable(
                "/proc/cpuinfo".into(),
                Some(here.clone()),
                desired,
                &e,
            ));
            return Ok(survey);
        }
    };
    if id.vendor.as_deref() != Some("GenuineIntel") {
        let what = id.vendor.as_deref().unwrap_or("not an x86 CPU");
        survey.targets.push(whole(
            msr::device(first),
            Blocker::NotApplicable(format!("these are Intel MSRs; this CPU is {what}")),
        ));
        return Ok(survey);
    }
    let r = match resolve(&id) {
        Ok(r) => r,
        Err(b) => {
            survey.targets.push(whole(msr::device(first), b));
            return Ok(survey);
        }
    };
    let path0 = w::path(first, r.field);
    if let Some(why) = w::lockdown(host.root).or_else(|| w::allow_writes(host.root)) {
        survey.targets.push(whole(path0, Blocker::Unsupported(why)));
        return Ok(survey);
    }
    let msrs = match Msrs::open(host.root, first) {
        Ok(m) => m,
        Err(why) => {
            survey.targets.push(whole(path0, Blocker::Unsupported(why)));
            return Ok(survey);
        }
    };
    let domains = match domains(host, &id, host.online(), r.scope) {
        Ok(d) => d,
        Err(why) => {
            survey.targets.push(whole(path0, Blocker::Unsupported(why)));
            return Ok(survey);
        }
    };
    for domain in domains {
        let chosen: Vec<u32> = domain
            .iter()
            .copied()
            .filter(|c| here.contains(*c))
            .collect();
        if chosen.is_empty() {
            continue;
        }
        survey
            .targets
            .push(domain_target(&msrs, &r, &domain, &chosen, desired));
    }
    survey.notes.push(format!(
        "{}: MSR {:#x} bits {}, one per {} (pepc); read-only check: {}",
        r.label,
        r.field.reg,
        r.field.bits_text(),
        r.scope.as_str(),
        msr::rdmsr(first, r.field.reg)
    ));
    Ok(survey)
}

/// Online CPUs grouped by `scope`, each group in CPU order.
fn domains(
    host: &HostCtx,
    id: &CpuId,
    online: &CpuList,
    scope: Scope,
) -> Result<Vec<Vec<u32>>, String> {
    let mut groups: BTreeMap<(u32, u32, u32), Vec<u32>> = BTreeMap::new();
    for &cpu in online.as_slice() {
        let key = id.domain(host, cpu, scope).ok_or_else(|| {
            format!(
                "the {} of CPU {cpu} is unknown (no topology or cache/index2 in sysfs, nor /proc/cpuinfo), so the CPUs sharing its register are not known",
                scope.as_str()
            )
        })?;
        groups.entry(key).or_default().push(cpu);
    }
    let mut out: Vec<Vec<u32>> = groups.into_values().collect();
    out.sort();
    Ok(out)
}

fn domain_target(
    msrs: &Msrs,
    r: &Resolved,
    domain: &[u32],
    chosen: &[u32],
    desired: &str,
) -> Target {
    let cpus = CpuList::new(domain.to_vec());
    let path = w::path(domain[0], r.field);
    let blocked = |b: Blocker| Target {
        blocker: Some(b),
        ..Target::absent(path.clone(), Some(cpus.clone()), desired, String::new())
    };
    if chosen.len() != domain.len() {
        let left = CpuList::new(
            domain
                .iter()
                .copied()
                .filter(|c| !chosen.contains(c))
                .collect(),
        );
        return blocked(Blocker::Unsupported(format!(
            "MSR {:#x} is one per {} and CPUs {cpus} share it: writing it for CPUs {} would change CPUs {left} too; select whole {}s",
            r.field.reg,
            r.scope.as_str(),
            CpuList::new(chosen.to_vec()),
            r.scope.as_str()
        )));
    }
    let mut regs: Vec<u32> = vec![r.field.reg];
    regs.extend(r.guards.iter().map(|g| g.field.reg));
    regs.extend(r.checks.iter().flat_map(|c| c.regs.iter().copied()));
    let mut values: Vec<u64> = Vec::new();
    for &cpu in domain {
        let read = msrs.read(cpu, &regs);
        match read.iter().find_map(|v| v.as_ref().err()) {
            Some(e) if e.contains("EIO") || e.contains("not in the capture") => {
                return blocked(Blocker::Unsupported(e.clone()));
            }
            Some(e) => {
                return blocked(Blocker::Unreadable(format!("cannot read {path}: {e}")));
            }
            None => {}
        }
        let read: Vec<u64> = read.into_iter().map(|v| v.unwrap_or(0)).collect();
        for (g, v) in r.guards.iter().zip(&read[1..]) {
            if g.field.get(*v) != g.want {
                return blocked(Blocker::Unsupported(format!(
                    "{} (MSR {:#x} bit{} {} reads {:#x} on CPU {cpu})",
                    g.refusal,
                    g.field.reg,
                    if g.field.hi == g.field.lo { "" } else { "s" },
                    if g.field.hi == g.field.lo {
                        g.field.lo.to_string()
                    } else {
                        g.field.bits_text()
                    },
                    g.field.get(*v)
                )));
            }
        }
        let mut rest = &read[1 + r.guards.len()..];
        for c in &r.checks {
            let (mine, after) = rest.split_at(c.regs.len());
            rest = after;
            if let Some(why) = (c.refuse)(r.want, mine) {
                return blocked(Blocker::Unsupported(format!("{why} (CPU {cpu})")));
            }
        }
        values.push(read[0]);
    }
    let bits: Vec<u64> = values.iter().map(|v| r.field.get(*v)).collect();
    // Each CPU's copy is written; one journalled value restores them only
    // when they agree, so a domain whose copies differ is left alone.
    if let Some((cpu, b)) = domain.iter().zip(&bits).find(|(_, b)| **b != bits[0]) {
        return Target {
            current: Some(format!("{DIFFERS} {cpus}")),
            ..blocked(Blocker::Unsupported(format!(
                "MSR {:#x}{}: the copies of CPUs {cpus} differ before the write ({} on CPU {}, {} on CPU {cpu}), so one value could not restore them; make them agree first (wrmsr -p N)",
                r.field.reg,
                r.field.bits_text(),
                r.word(bits[0]),
                domain[0],
                r.word(*b)
            )))
        };
    }
    let current = r.word(bits[0]);
    Target {
        in_effect: bits.iter().all(|b| *b == r.want),
        path,
        cpus: Some(cpus),
        label: Some(r.label.clone()),
        current: Some(current),
        desired: desired.to_string(),
        write: Some(w::field_text(r.want)),
        restore: Some(w::register_text(values[0])),
        mode: WriteMode::Msr,
        blocker: None,
    }
}

/// The field at `path` now, in the kind's words.
pub fn read_back(
    host: &HostCtx,
    path: &str,
    resolve: impl Fn(&CpuId) -> Result<Resolved, Blocker>,
) -> std::io::Result<Option<String>> {
    let id = CpuId::read(host).map_err(std::io::Error::other)?;
    let r = resolve(&id).map_err(|b| std::io::Error::other(b.reason().to_string()))?;
    let bits = w::read_field(host.root, path).map_err(std::io::Error::other)?;
    Ok(Some(r.word(bits)))
}

/// Implements [`super::KnobKind`] for an MSR kind from its `resolve`,
/// `cpus`, `desired` and `summary`.
macro_rules! msr_kind {
    ($ty:ty, $kind:expr) => {
        impl $crate::knob::KnobKind for $ty {
            fn kind(&self) -> $crate::knob::KindName {
                $kind
            }

            fn desired(&self) -> String {
                self.desired_words()
            }

            fn target_summary(&self) -> String {
                self.summary()
            }

            fn persistence_allowed(&self) -> &'static [$crate::schema::Persistence] {
                $crate::knob::msr_field::MSR_PERSISTENCE
            }

            fn survey(
                &self,
                host: &$crate::knob::HostCtx,
            ) -> Result<$crate::knob::Survey, $crate::knob::FieldError> {
                $crate::knob::msr_field::survey(host, &self.cpus, &self.desired_words(), |id| {
                    self.resolve(id)
                })
            }

            fn read_back(
                &self,
                host: &$crate::knob::HostCtx,
                path: &str,
            ) -> std::io::Result<Option<String>> {
                $crate::knob::msr_field::read_back(host, path, |id| self.resolve(id))
            }
        }
    };
}
pub(crate) use msr_kind;

/// `set:` of `hwp-min`/`hwp-max`: a performance level, 0-255.
pub fn hwp_value(set: &Scalar) -> Result<u64, FieldError> {
    match set.0.trim().parse::<u64>() {
        Ok(n) if n <= 255 => Ok(n),
        _ => Err(FieldError::new(
            "set",
            format!(
                "{:?} is not an HWP performance level: give 0-255 (the CPU's levels are in MSR 0x771, IA32_HWP_CAPABILITIES)",
                set.0.trim()
            ),
        )),
    }
}

/// An HWP_REQUEST field: architectural, so no model table, but HWP must be
/// on and the register must be the CPU's own request: not intel_pstate's
/// (which owns it), not overridden by the package request.
pub fn hwp_resolve(
    id: &CpuId,
    field: Field,
    perf: u64,
    label: &str,
    checks: Vec<Check>,
) -> Result<Resolved, Blocker> {
    if !id.has("hwp") {
        return Err(Blocker::Unsupported(
            "this CPU has no HWP (no `hwp` flag in /proc/cpuinfo): MSR 0x774 does not exist here"
                .into(),
        ));
    }
    if let Some(d) = id
        .driver
        .as_deref()
        .filter(|d| ["intel_pstate", "intel_cpufreq"].contains(d))
    {
        return Err(Blocker::NotApplicable(format!(
            "the scaling driver is {d}, which owns MSR 0x774: it rewrites min/max on every \
             policy update, EPP change, HWP dynamic boost, frequency update (passive mode) and \
             resume (drivers/cpufreq/intel_pstate.c); set cpufreq-min/cpufreq-max, which it \
             turns into HWP limits"
        )));
    }
    let mut all = vec![Check {
        regs: &[model::MSR_IA32_HWP_CAPABILITIES],
        refuse: hwp_capabilities,
    }];
    all.extend(checks);
    Ok(Resolved {
        field,
        scope: Scope::Thread,
        want: perf,
        words: Vec::new(),
        label: label.into(),
        guards: vec![Guard {
            field: Field::bit(model::MSR_IA32_PM_ENABLE, 0),
            want: 1,
            refusal: "HWP is not enabled (the firmware or the driver left it off), so MSR 0x774 is not in use",
        }],
        checks: all,
    })
}

/// IA32_HWP_CAPABILITIES (0x771): highest performance bits 7:0, lowest
/// bits 31:24 (Intel SDM vol. 3B, 15.4.3; pepc `HWPCapabilities.py`).
fn hwp_capabilities(want: u64, regs: &[u64]) -> Option<String> {
    let (highest, lowest) = (regs[0] & 0xff, (regs[0] >> 24) & 0xff);
    (want > highest || want < lowest).then(|| {
        format!(
            "{want} is outside this CPU's HWP performance levels {lowest}..{highest} \
             (IA32_HWP_CAPABILITIES, MSR 0x771: lowest bits 31:24, highest bits 7:0)"
        )
    })
}

/// Package control (MSR 0x774 bit 42) in use without the field's valid bit
/// (63 for min, 62 for max): the CPU takes the value from MSR 0x772
/// (pepc `HWPRequest.py`, `is_feature_pkg_controlled`).
fn pkg_controlled(value: u64, valid_bit: u32) -> Option<String> {
    (value >> 42 & 1 == 1 && value >> valid_bit & 1 == 0).then(|| {
        format!(
            "HWP package control is in use (MSR 0x774 bit 42 set, valid bit {valid_bit} clear): \
             the CPU takes this field from MSR 0x772 (HWP_REQUEST_PKG) and ignores 0x774"
        )
    })
}

/// `hwp-min`'s checks: not above the CPU's max (bits 15:8), not package controlled.
pub fn hwp_min_checks() -> Vec<Check> {
    vec![Check {
        regs: &[model::MSR_IA32_HWP_REQUEST],
        refuse: |want, regs| {
            let max = regs[0] >> 8 & 0xff;
            pkg_controlled(regs[0], 63).or_else(|| {
                (want > max).then(|| {
                    format!(
                        "hwp-min {want} is above the HWP max performance {max} (MSR 0x774 bits \
                         15:8): min may not exceed max; raise hwp-max first"
                    )
                })
            })
        },
    }]
}

/// `hwp-max`'s checks: not below the CPU's min (bits 7:0), not package controlled.
pub fn hwp_max_checks() -> Vec<Check> {
    vec![Check {
        regs: &[model::MSR_IA32_HWP_REQUEST],
        refuse: |want, regs| {
            let min = regs[0] & 0xff;
            pkg_controlled(regs[0], 62).or_else(|| {
                (want < min).then(|| {
                    format!(
                        "hwp-max {want} is below the HWP min performance {min} (MSR 0x774 bits \
                         7:0): max may not be under min; lower hwp-min first"
                    )
                })
            })
        },
    }]
}
