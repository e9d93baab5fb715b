//! The host facts a knob's `when:` can name, read on demand with inventory's
//! own readers: a condition on `idle_driver` reads one file, not the whole
//! inventory, and each group of facts is read at most once per command.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::cpuinfo::{self, CpuInfo};
use super::{CPU_DIR, Reader, arch, cpu, host, memory, numbered};
use crate::root::Root;

/// Where host labels live under the root: one `key=value` per line.
pub const LABELS_FILE: &str = "/etc/hostknob/labels";

/// A fact as read on this host, or why it is unknown here.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Text(String),
    Number(u64),
    Bool(bool),
    /// A kernel release: its text and its leading numbers (`6.18.44-fc` -> 6, 18, 44).
    Release(String, Vec<u64>),
    Bytes(u64),
    /// A model number and the model table's name for it, when it has one.
    Model(u32, Option<&'static str>),
    /// Not known here: the file looked for, or what is missing.
    Unknown(String),
}

impl Value {
    /// The fact's text when it is known and textual (a release's text).
    pub fn known_text(self) -> Option<String> {
        match self {
            Value::Text(t) | Value::Release(t, _) => Some(t),
            _ => None,
        }
    }
}

/// The CPU identity from `/proc/cpuinfo`, read once.
#[derive(Default)]
struct Identity {
    vendor_id: Option<String>,
    family: Option<u32>,
    model: Option<u32>,
    virtualized: Option<bool>,
    architecture: Option<String>,
    /// ARM: the core types (several on big.LITTLE), else the model name.
    core_names: Vec<String>,
}

pub struct Facts<'r> {
    reader: Reader<'r>,
    identity: OnceLock<Option<Identity>>,
    labels: OnceLock<Result<BTreeMap<String, String>, String>>,
}

impl<'r> Facts<'r> {
    pub fn new(root: &'r Root) -> Facts<'r> {
        Facts {
            reader: Reader::new(root),
            identity: OnceLock::new(),
            labels: OnceLock::new(),
        }
    }

    fn identity(&self) -> Option<&Identity> {
        self.identity
            .get_or_init(|| {
                let text = self.reader.root.read_string("/proc/cpuinfo").ok()?;
                let info: CpuInfo = cpuinfo::parse_all(&text);
                let first = info
                    .entries
                    .first()
                    .map(|e| e.or_common(&info.machine.common))
                    .unwrap_or_else(|| info.machine.common.clone());
                let online = cpu::online_ahead(&self.reader).unwrap_or_default();
                let id = arch::identify(&info, &online);
                let core_names = match &id.core_types {
                    Some(types) => types.iter().map(|t| t.model.clone()).collect(),
                    None if id
                        .architecture
                        .as_deref()
                        .is_some_and(|a| a.starts_with("arm")) =>
                    {
                        id.model_name.iter().cloned().collect()
                    }
                    None => Vec::new(),
                };
                Some(Identity {
                    vendor_id: id.vendor_id,
                    family: first.family,
                    model: first.model,
                    virtualized: first.hypervisor_flag,
                    architecture: id.architecture,
                    core_names,
                })
            })
            .as_ref()
    }

    /// The labels file: absent is no labels; a malformed line is an error
    /// naming the file and the line.
    pub fn labels(&self) -> Result<&BTreeMap<String, String>, String> {
        self.labels
            .get_or_init(|| read_labels(self.reader.root))
            .as_ref()
            .map_err(String::clone)
    }

    /// How many CPUs the running kernel keeps apart: `isolated` (isolcpus=)
    /// and `nohz_full`, together; unknown when neither file is there.
    fn isolated_cpus(&self) -> Value {
        let lists: Vec<_> = ["isolated", "nohz_full"]
            .iter()
            .filter_map(|f| cpu::kernel_cpulist(&self.reader, &format!("{CPU_DIR}/{f}")))
            .collect();
        if lists.is_empty() {
            return Value::Unknown(format!(
                "unknown (no {CPU_DIR}/isolated or {CPU_DIR}/nohz_full)"
            ));
        }
        let all = lists
            .iter()
            .flat_map(|l| l.as_slice().iter().copied())
            .collect();
        Value::Number(crate::cpulist::CpuList::new(all).len() as u64)
    }

    /// One fact by its name in a manifest (`label.KEY` for labels).
    pub fn get(&self, fact: &str) -> Value {
        let unknown = |what: &str| Value::Unknown(format!("unknown ({what})"));
        let no_cpuinfo = || unknown("no /proc/cpuinfo");
        let text = |path: &str| match self.reader.text(path) {
            Some(t) if !t.is_empty() => Value::Text(t),
            _ => unknown(&format!("no {path}")),
        };
        let id = || self.identity();
        match fact {
            "vendor" => match id().and_then(|i| i.vendor_id.clone()) {
                Some(v) => Value::Text(v),
                None => no_cpuinfo(),
            },
            "family" => match id().and_then(|i| i.family) {
                Some(f) => Value::Number(f.into()),
                None => unknown("no `cpu family` in /proc/cpuinfo"),
            },
            "model" => match id().and_then(|i| Some((i.family?, i.model?))) {
                Some((f, m)) if id().is_some_and(is_intel) => {
                    Value::Model(m, crate::msr::model::lookup(f, m).map(|t| t.name))
                }
                Some((_, m)) => Value::Model(m, None),
                None => unknown("no `model` in /proc/cpuinfo"),
            },
            "microarchitecture" => match id().map(microarchitecture) {
                Some(Some(u)) => Value::Text(u),
                Some(None) => unknown("not in hostknob's tables for this CPU"),
                None => no_cpuinfo(),
            },
            "hybrid" => {
                let pmus = cpu::hybrid(&self.reader).is_some_and(|k| k.len() > 1);
                let arm = id().is_some_and(|i| i.core_names.len() > 1);
                Value::Bool(pmus || arm)
            }
            "virtualized" => match id() {
                Some(i) => Value::Bool(i.virtualized.unwrap_or(false)),
                None => no_cpuinfo(),
            },
            "hypervisor" => self.hypervisor(),
            "idle_driver" => text(&format!("{CPU_DIR}/cpuidle/current_driver")),
            "idle_governor" => match self
                .reader
                .text(&format!("{CPU_DIR}/cpuidle/current_governor"))
            {
                Some(g) => Value::Text(g),
                None => text(&format!("{CPU_DIR}/cpuidle/current_governor_ro")),
            },
            "cpufreq_driver" => match self.first_policy() {
                Some(p) => text(&format!("{p}/scaling_driver")),
                None => unknown("no cpufreq policy"),
            },
            "cpufreq_mode" => {
                let status = ["intel_pstate", "amd_pstate"]
                    .iter()
                    .find_map(|d| self.reader.text(&format!("{CPU_DIR}/{d}/status")));
                match status {
                    Some(s) => Value::Text(s),
                    None => unknown("no intel_pstate or amd_pstate status"),
                }
            }
            "kernel" => match host::release(&self.reader, None) {
                Some(r) => {
                    let parts = release_numbers(&r);
                    Value::Release(r, parts)
                }
                None => unknown("no /proc/sys/kernel/osrelease or /proc/version"),
            },
            "arch" => match id().and_then(|i| i.architecture.clone()) {
                Some(a) => Value::Text(a),
                None => no_cpuinfo(),
            },
            "numa_nodes" => match self.reader.dir(memory::NODE_DIR) {
                Some(names) if !numbered(&names, "node").is_empty() => {
                    Value::Number(numbered(&names, "node").len() as u64)
                }
                _ => unknown(&format!("no {}/node*", memory::NODE_DIR)),
            },
            "isolated_cpus" => self.isolated_cpus(),
            "memory" => match memory::meminfo(&self.reader) {
                Some(m) => Value::Bytes(m.mem_total),
                None => unknown("no /proc/meminfo"),
            },
            _ => match fact.strip_prefix("label.") {
                Some(key) => match self.labels() {
                    Ok(l) => match l.get(key) {
                        Some(v) => Value::Text(v.clone()),
                        None => unknown(&format!("no label {key} in {LABELS_FILE}")),
                    },
                    Err(e) => Value::Unknown(e),
                },
                None => unknown("not a fact hostknob reads"),
            },
        }
    }

    fn first_policy(&self) -> Option<String> {
        let dir = format!("{CPU_DIR}/cpufreq");
        let ids = numbered(&self.reader.dir(&dir)?, "policy");
        Some(format!("{dir}/policy{}", ids.first()?))
    }

    /// `none` on bare metal; Xen's `/sys/hypervisor/type`; else DMI's
    /// `sys_vendor` (`QEMU`, `Amazon EC2`, ...) where the guest has one.
    fn hypervisor(&self) -> Value {
        match self.identity() {
            None => return Value::Unknown("unknown (no /proc/cpuinfo)".into()),
            Some(i) if i.virtualized != Some(true) => return Value::Text("none".into()),
            Some(_) => {}
        }
        for path in ["/sys/hypervisor/type", "/sys/class/dmi/id/sys_vendor"] {
            if let Some(t) = self.reader.text(path).filter(|t| !t.is_empty()) {
                return Value::Text(t);
            }
        }
        Value::Unknown(
            "unknown (a virtual machine without /sys/hypervisor/type or DMI sys_vendor)".into(),
        )
    }
}

fn is_intel(i: &Identity) -> bool {
    i.vendor_id.as_deref() == Some("GenuineIntel")
}

/// `6.18.44-fc-v595` -> [6, 18, 44]: the dotted numbers before anything else.
pub fn release_numbers(release: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in release.split('.') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        match digits.parse() {
            Ok(n) => out.push(n),
            Err(_) => break,
        }
        if digits.len() != part.len() {
            break;
        }
    }
    out
}

/// Intel: the model table's name without its variant (`SAPPHIRERAPIDS_X`
/// -> `sapphirerapids`); AMD: the Zen generation by the family and model
/// ranges Linux uses (`arch/x86/kernel/cpu/amd.c`, `bsp_init_amd`); ARM:
/// the core's name (`neoverse-n1`).
fn microarchitecture(i: &Identity) -> Option<String> {
    let (family, model) = (i.family, i.model);
    match i.vendor_id.as_deref() {
        Some("GenuineIntel") => {
            let name = crate::msr::model::lookup(family?, model?)?.name;
            Some(model_base(name).to_ascii_lowercase())
        }
        Some("AuthenticAMD" | "HygonGenuine") => {
            let m = model?;
            let zen = match family? {
                0x17 if matches!(m, 0x00..=0x2f | 0x50..=0x5f) => "zen",
                0x17 if matches!(m, 0x30..=0x4f | 0x60..=0x7f | 0x90..=0x91 | 0xa0..=0xaf) => {
                    "zen2"
                }
                0x19 if matches!(m, 0x00..=0x0f | 0x20..=0x5f) => "zen3",
                0x19 if matches!(m, 0x10..=0x1f | 0x60..=0xaf) => "zen4",
                0x1a if matches!(m, 0x00..=0x2f | 0x40..=0x4f | 0x60..=0x7f) => "zen5",
                _ => return None,
            };
            Some(zen.into())
        }
        _ => i.core_names.first().map(|n| n.to_ascii_lowercase()),
    }
}

/// `SAPPHIRERAPIDS_X` -> `SAPPHIRERAPIDS`, `ATOM_CRESTMONT_X` -> `ATOM_CRESTMONT`,
/// `ALDERLAKE` -> `ALDERLAKE`: the variant suffix is one or two letters.
pub fn model_base(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((base, variant)) if variant.len() <= 2 => base,
        _ => name,
    }
}

/// `key=value` per line; `#` starts a comment line; blank lines are skipped.
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let at = |m: String| format!("{LABELS_FILE}:{}: {m}", i + 1);
        let Some((k, v)) = l.split_once('=') else {
            return Err(at(format!("{l:?} is not `key=value` (one label per line)")));
        };
        let (k, v) = (k.trim(), v.trim());
        let key_ok = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
        if !key_ok {
            return Err(at(format!(
                "{k:?} is not a label key (letters, digits, `_`, `-`, `.`, `/`)"
            )));
        }
        if let Some(prev) = out.insert(k.to_string(), v.to_string()) {
            return Err(at(format!("label {k} given twice ({prev:?} above)")));
        }
    }
    Ok(out)
}

fn read_labels(root: &Root) -> Result<BTreeMap<String, String>, String> {
    match root.read_string(LABELS_FILE) {
        Ok(text) => parse_labels(&text),
        Err(e) if crate::root::is_absent(&e) => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{LABELS_FILE}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_numbers_stop_at_the_first_non_number() {
        assert_eq!(release_numbers("6.18.44-fc-v595"), vec![6, 18, 44]);
        assert_eq!(release_numbers("5.14.0-427.el9.x86_64"), vec![5, 14, 0]);
        assert_eq!(release_numbers("6.1-rc3"), vec![6, 1]);
        assert_eq!(release_numbers("4.19"), vec![4, 19]);
        assert!(release_numbers("linux").is_empty());
    }

    #[test]
    fn microarchitectures_by_vendor() {
        let id = |vendor: &str, family, model, cores: &[&str]| Identity {
            vendor_id: Some(vendor.into()),
            family: Some(family),
            model: Some(model),
            core_names: cores.iter().map(|c| c.to_string()).collect(),
            ..Identity::default()
        };
        let u = |i: Identity| microarchitecture(&i);
        // The corpus's AMD hosts: rome0, milan0, genoa0, turin0.
        assert_eq!(u(id("AuthenticAMD", 23, 49, &[])).as_deref(), Some("zen2"));
        assert_eq!(u(id("AuthenticAMD", 25, 1, &[])).as_deref(), Some("zen3"));
        assert_eq!(u(id("AuthenticAMD", 25, 17, &[])).as_deref(), Some("zen4"));
        assert_eq!(u(id("AuthenticAMD", 26, 2, &[])).as_deref(), Some("zen5"));
        assert_eq!(u(id("AuthenticAMD", 23, 1, &[])).as_deref(), Some("zen"));
        assert_eq!(u(id("AuthenticAMD", 21, 1, &[])), None);
        assert_eq!(
            u(id("GenuineIntel", 6, 0x8f, &[])).as_deref(),
            Some("sapphirerapids")
        );
        assert_eq!(
            u(id("GenuineIntel", 6, 0x9a, &[])).as_deref(),
            Some("alderlake")
        );
        assert_eq!(u(id("GenuineIntel", 6, 0x01, &[])), None);
        assert_eq!(
            u(id("ARM", 0, 0, &["Neoverse-N1"])).as_deref(),
            Some("neoverse-n1")
        );
    }

    #[test]
    fn model_names_lose_their_variant() {
        assert_eq!(model_base("SAPPHIRERAPIDS_X"), "SAPPHIRERAPIDS");
        assert_eq!(model_base("ATOM_CRESTMONT_X"), "ATOM_CRESTMONT");
        assert_eq!(model_base("ALDERLAKE"), "ALDERLAKE");
        assert_eq!(model_base("XEON_PHI_KNL"), "XEON_PHI_KNL");
    }

    #[test]
    fn labels_parse_and_bad_lines_name_their_line() {
        let l = parse_labels("# fleet labels\nrole=rpc\n\n rack = r12 \n").unwrap();
        assert_eq!(l.get("role").map(String::as_str), Some("rpc"));
        assert_eq!(l.get("rack").map(String::as_str), Some("r12"));
        let e = parse_labels("role=rpc\nrpc-node\n").unwrap_err();
        assert!(e.starts_with("/etc/hostknob/labels:2: "), "{e}");
        let e = parse_labels("a b=c\n").unwrap_err();
        assert!(e.contains(":1: ") && e.contains("not a label key"), "{e}");
        let e = parse_labels("role=rpc\nrole=db\n").unwrap_err();
        assert!(e.contains(":2: ") && e.contains("twice"), "{e}");
    }
}
