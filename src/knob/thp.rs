//! `thp`: transparent huge pages, `enabled` or `defrag` (or `shmem_enabled`),
//! top-level or for one page size (`hugepages-<size>kB/enabled`). The file
//! lists every choice with the one in force bracketed (`always [madvise]
//! never`): that choice is the value.
//!
//! transhuge.rst: a size's `enabled` is `inherit` (follow the top level) or
//! its own choice, which overrides the top level, `never` included; so a
//! top-level knob is in effect only where no size grants more huge pages
//! than it does, and each such size is a target of its own.

use serde::Deserialize;

use super::boot::{BootValue, KernelConfig, cmdline_param};
use super::{
    ATTRIBUTE_PERSISTENCE, Blocker, FieldError, HostCtx, KindName, KnobKind, ReadValue, Service,
    Spec, Survey, Target, WriteMode,
};
use crate::inventory::bracketed;
use crate::inventory::thp_size_dirs;
use crate::schema::Persistence;

pub const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    setting: Setting,
    /// One page size (`64kB`, `2M`): its `hugepages-<size>kB/<setting>`.
    #[serde(default)]
    size: Option<crate::schema::Scalar>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    Enabled,
    Defrag,
    ShmemEnabled,
}

impl Setting {
    fn file(self) -> &'static str {
        match self {
            Setting::Enabled => "enabled",
            Setting::Defrag => "defrag",
            Setting::ShmemEnabled => "shmem_enabled",
        }
    }
}

#[derive(Debug)]
pub struct Thp {
    pub setting: Setting,
    /// The page size in kB, for a per-size knob.
    pub size_kb: Option<u64>,
    pub value: String,
}

/// `64kB`, `64K`, `2M`, `2MB`, `2048kB` as kB: a power of two, 8 kB or more.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[digits.len()..];
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a page size (such as 64kB or 2M)"))?;
    let kb = match unit.to_ascii_lowercase().as_str() {
        "k" | "kb" | "kib" => Some(n),
        "m" | "mb" | "mib" => n.checked_mul(1024),
        _ => None,
    }
    .ok_or_else(|| format!("{text:?}: give the size in kB or MB (such as 64kB or 2M)"))?;
    if kb < 8 || !kb.is_power_of_two() {
        return Err(format!(
            "{text:?} is not a huge page size (a power of two, 8 kB or more)"
        ));
    }
    Ok(kb)
}

/// How many huge pages a choice of `enabled` allows: `always` > `madvise` > `never`.
fn grants(choice: &str) -> Option<u8> {
    match choice {
        "never" => Some(0),
        "madvise" => Some(1),
        "always" => Some(2),
        _ => None,
    }
}

/// The size `thp_anon=` gives `kb` at boot, if it names it
/// (`thp_anon=16K-64K:always;128K,512K:inherit;...`, transhuge.rst).
fn thp_anon(param: &str, kb: u64) -> Option<String> {
    for part in param.split(';') {
        let (sizes, choice) = part.split_once(':')?;
        for s in sizes.split(',') {
            let (lo, hi) = s.split_once('-').unwrap_or((s, s));
            let (Ok(lo), Ok(hi)) = (parse_size(lo), parse_size(hi)) else {
                continue;
            };
            if (lo..=hi).contains(&kb) {
                return Some(choice.to_string());
            }
        }
    }
    None
}

impl Spec for Thp {
    type Target = TargetDoc;
    type Set = String;

    fn new(target: Option<TargetDoc>, set: String) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.setting (enabled, defrag or shmem_enabled)",
            )
        })?;
        super::cpufreq_governor::check_word("set", &set, "THP choice")?;
        if set.contains(['[', ']']) {
            return Err(FieldError::new(
                "set",
                format!("{set:?}: give the choice alone, without brackets"),
            ));
        }
        let size_kb = match &t.size {
            None => None,
            Some(s) => Some(parse_size(&s.0).map_err(|m| FieldError::new("target.size", m))?),
        };
        if size_kb.is_some() && t.setting == Setting::Defrag {
            return Err(FieldError::new(
                "target.size",
                "defrag has no per-size file: a size takes setting enabled or shmem_enabled",
            ));
        }
        if size_kb.is_none() && set == "inherit" {
            return Err(FieldError::new(
                "set",
                "inherit is a choice of a size's file: give target.size too",
            ));
        }
        Ok(Thp {
            setting: t.setting,
            size_kb,
            value: set,
        })
    }
}

impl Thp {
    fn path(&self) -> String {
        match self.size_kb {
            Some(kb) => format!("{THP_DIR}/hugepages-{kb}kB/{}", self.setting.file()),
            None => format!("{THP_DIR}/{}", self.setting.file()),
        }
    }

    /// Sizes whose own `enabled` grants more huge pages than this top-level
    /// knob: each is a target that should hold the knob's value.
    fn overriding_sizes(&self, host: &HostCtx, survey: &mut Survey) {
        let Some(want) = grants(&self.value) else {
            return;
        };
        for (kb, dir) in thp_size_dirs(&host.list(THP_DIR)) {
            let path = format!("{THP_DIR}/{dir}/enabled");
            let Some(raw) = host.text(&path) else {
                continue;
            };
            let current = self.normalize(&raw);
            if grants(&current).is_none_or(|g| g <= want) {
                continue;
            }
            survey.notes.push(format!(
                "{dir}/enabled is `{current}`, which overrides the top-level choice for \
                 {kb} kB pages: the knob writes `{}` there",
                self.value
            ));
            survey.targets.push(Target {
                path,
                cpus: None,
                label: Some(dir),
                current: Some(current.clone()),
                desired: self.value.clone(),
                in_effect: false,
                write: Some(self.value.clone()),
                restore: Some(current),
                mode: WriteMode::Attribute,
                blocker: None,
            });
        }
    }
}

impl KnobKind for Thp {
    fn kind(&self) -> KindName {
        KindName::Thp
    }

    fn desired(&self) -> String {
        self.value.clone()
    }

    fn target_summary(&self) -> String {
        self.path()
            .trim_start_matches("/sys/kernel/mm/")
            .to_string()
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        match (self.setting, self.size_kb) {
            (Setting::Enabled, _) => &[
                Persistence::Runtime,
                Persistence::Tmpfiles,
                Persistence::Cmdline,
            ],
            _ => ATTRIBUTE_PERSISTENCE,
        }
    }

    fn cmdline_args(&self) -> Option<Vec<String>> {
        match (self.setting, self.size_kb) {
            (Setting::Enabled, None) => Some(vec![format!("transparent_hugepage={}", self.value)]),
            (Setting::Enabled, Some(kb)) => Some(vec![format!("thp_anon={kb}K:{}", self.value)]),
            _ => None,
        }
    }

    /// `enabled`: `transparent_hugepage=` on the command line, else the
    /// build's CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS/MADVISE/NEVER (mm/Kconfig);
    /// a size: `thp_anon=`, else `inherit` for the PMD size and `never` for
    /// the others (transhuge.rst); `defrag`: `madvise` (mm/huge_memory.c,
    /// `transparent_hugepage_flags`; no boot parameter sets it).
    fn boot_value(&self, host: &HostCtx) -> Option<BootValue> {
        let cmdline = host.cmdline().unwrap_or("");
        match (self.setting, self.size_kb) {
            (Setting::Enabled, None) => {
                if let Some(v) = cmdline_param(cmdline, "transparent_hugepage") {
                    return Some(BootValue {
                        value: v.to_string(),
                        why: format!("/proc/cmdline has transparent_hugepage={v}"),
                    });
                }
                let config = KernelConfig::read(host)?;
                ["ALWAYS", "MADVISE", "NEVER"].into_iter().find_map(|c| {
                    let name = format!("CONFIG_TRANSPARENT_HUGEPAGE_{c}");
                    config.is_y(&name).then(|| BootValue {
                        value: c.to_ascii_lowercase(),
                        why: format!(
                            "{name}=y in {} and no transparent_hugepage= on the command line",
                            config.source
                        ),
                    })
                })
            }
            (Setting::Enabled, Some(kb)) => {
                if let Some(v) = cmdline_param(cmdline, "thp_anon").and_then(|p| thp_anon(p, kb)) {
                    return Some(BootValue {
                        value: v,
                        why: "thp_anon= on /proc/cmdline".into(),
                    });
                }
                let pmd_kb = host
                    .text(&format!("{THP_DIR}/hpage_pmd_size"))?
                    .parse::<u64>()
                    .ok()?
                    / 1024;
                Some(BootValue {
                    value: if kb == pmd_kb { "inherit" } else { "never" }.into(),
                    why: format!(
                        "the kernel's default for {} pages (transhuge.rst), no thp_anon= on the command line",
                        if kb == pmd_kb { "PMD-sized" } else { "non-PMD" }
                    ),
                })
            }
            (Setting::Defrag, _) => Some(BootValue {
                value: "madvise".into(),
                why: "the kernel's default (mm/huge_memory.c); no boot parameter sets defrag"
                    .into(),
            }),
            (Setting::ShmemEnabled, _) => None,
        }
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Tuned]
    }

    fn normalize(&self, raw: &str) -> String {
        bracketed(raw).unwrap_or_else(|| raw.trim().to_string())
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let path = self.path();
        let mut survey = Survey::default();
        let raw = match host.value(&path) {
            ReadValue::Value(v) => v,
            ReadValue::Absent => {
                let why = match self.size_kb {
                    Some(kb) => {
                        let here: Vec<String> = thp_size_dirs(&host.list(THP_DIR))
                            .into_iter()
                            .map(|(_, d)| d)
                            .collect();
                        format!(
                            "no {kb} kB transparent huge pages here (sizes here: {})",
                            if here.is_empty() { "none".into() } else { here.join(" ") }
                        )
                    }
                    None => "no transparent huge pages here (kernel without THP, or not in this capture)".into(),
                };
                survey
                    .targets
                    .push(Target::absent(path, None, &self.value, why));
                return Ok(survey);
            }
            ReadValue::Unreadable(e) => {
                survey
                    .targets
                    .push(Target::unreadable(path, None, &self.value, &e));
                return Ok(survey);
            }
        };
        let choices: Vec<String> = raw
            .split_whitespace()
            .map(|w| w.trim_matches(['[', ']']).to_string())
            .collect();
        let current = self.normalize(&raw);
        let blocker = (!choices.contains(&self.value)).then(|| {
            Blocker::Unsupported(format!(
                "{} is not a choice here (choices: {})",
                self.value,
                choices.join(" ")
            ))
        });
        survey.targets.push(Target {
            in_effect: current == self.value,
            path,
            cpus: None,
            label: None,
            restore: Some(current.clone()),
            current: Some(current),
            desired: self.value.clone(),
            write: Some(self.value.clone()),
            mode: WriteMode::Attribute,
            blocker,
        });
        if self.setting == Setting::Enabled && self.size_kb.is_none() {
            self.overriding_sizes(host, &mut survey);
        }
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_thp_anon() {
        assert_eq!(parse_size("64kB"), Ok(64));
        assert_eq!(parse_size("2M"), Ok(2048));
        assert!(parse_size("65kB").is_err());
        assert!(parse_size("64").is_err());
        let p = "16K-64K:always;128K,512K:inherit;256K:madvise;1M-2M:never";
        assert_eq!(thp_anon(p, 32).as_deref(), Some("always"));
        assert_eq!(thp_anon(p, 512).as_deref(), Some("inherit"));
        assert_eq!(thp_anon(p, 2048).as_deref(), Some("never"));
        assert_eq!(thp_anon(p, 8), None);
    }
}
