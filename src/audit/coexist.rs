//! tuned beside hostknob: what tuned's active profile sets, file by file, so
//! that audit can say per knob whether tuned agrees or fights, and apply can
//! refuse to fight it. The profile is read and translated in memory by
//! `peers::tuned` (the same reading `hostknob import tuned` does), each
//! translated setting surveyed as a knob of its kind: its files and values
//! are the kind's own, compared in the kind's words.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::knob::{HostCtx, KindName, Service, Target};
use crate::manifest::Knob;
use crate::peers::tuned::{
    self,
    ini::Opt,
    out::{KnobOut, s},
};
use crate::schema::Persistence;

/// tuned as found running or enabled (as `competing_managers` decides).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TunedState {
    /// `/etc/tuned/active_profile` (several names: tuned merges them in order).
    pub profile: Option<String>,
    /// What shows it active: a running process, an enabled unit.
    pub evidence: String,
    /// Why the profile's settings could not be read (then no knob is compared).
    pub unreadable: Option<String>,
}

/// The active tuned profile's setting of a knob's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TunedSetting {
    pub profile: String,
    /// The profile file and line of the option.
    pub file: String,
    pub line: usize,
    pub section: String,
    pub key: String,
    /// The option's value as the profile writes it.
    pub value: String,
    /// The file both set (the first where they differ, when they do).
    pub path: String,
    /// tuned's value for that file, in the knob's words.
    pub sets: String,
    /// Whether tuned sets what the knob sets there.
    pub agrees: bool,
}

impl TunedSetting {
    /// `sets vm.swappiness=10 at FILE:LINE`.
    pub fn cite(&self) -> String {
        format!(
            "tuned profile {} sets {}={} at {}:{}",
            self.profile, self.key, self.value, self.file, self.line
        )
    }
}

/// One translated setting of the active profile: its option line and the
/// files it sets with their values (the kind's `desired` and `write`).
struct Setting {
    profile: String,
    opt: Opt,
    kind: KindName,
    targets: Vec<Target>,
    /// The words a `[bootloader]` setting adds to `$tuned_params`.
    words: Vec<String>,
}

/// tuned, when active, and its profile's settings.
pub struct ActiveTuned {
    pub state: TunedState,
    settings: Vec<Setting>,
    /// `peers::tuned::reapply_sysctl`.
    reapply_sysctl: bool,
    /// `peers::tuned::systemd_file`.
    systemd_file: String,
}

impl Setting {
    /// This setting as audit names it: its profile line, the file, what it sets there.
    fn found(&self, path: String, sets: String, agrees: bool) -> TunedSetting {
        TunedSetting {
            profile: self.profile.clone(),
            file: self.opt.file.to_string(),
            line: self.opt.line,
            section: self.opt.section.to_string(),
            key: self.opt.key.clone(),
            value: self.opt.value.clone(),
            path,
            sets,
            agrees,
        }
    }
}

impl ActiveTuned {
    /// `None` when tuned is neither running nor enabled.
    pub fn read(host: &HostCtx) -> Option<ActiveTuned> {
        let wanted: BTreeSet<Service> = [Service::Tuned].into_iter().collect();
        let (_, evidence) = super::managers::detect_services(host, &wanted)
            .into_iter()
            .next()?;
        let profile = tuned::active_profile(host.root);
        // detect_services names the profile too; it has its own field here.
        let evidence = match evidence.split_once("; profile ") {
            Some((e, _)) => e.to_string(),
            None => evidence,
        };
        let mut out = ActiveTuned {
            state: TunedState {
                profile: profile.clone(),
                evidence,
                unreadable: None,
            },
            settings: Vec::new(),
            reapply_sysctl: tuned::reapply_sysctl(host.root),
            systemd_file: tuned::systemd_file(host.root),
        };
        if let Some(p) = profile
            && let Err(e) = out.load(host, &p)
        {
            out.state.unreadable = Some(format!("{e:#}"));
            out.settings.clear();
        }
        Some(out)
    }

    fn load(&mut self, host: &HostCtx, names: &str) -> anyhow::Result<()> {
        for (name, k) in tuned::writes(host.root, names)? {
            if let Some(s) = setting(host, &name, k) {
                self.settings.push(s);
            }
        }
        Ok(())
    }

    /// The profile's setting of this knob's files, when it sets any: the
    /// one that fights it, else the one that agrees. With several profiles
    /// active, a later one's setting of a file wins (tuned merges them so).
    pub fn setting(&self, knob: &Knob, targets: &[Target]) -> Option<TunedSetting> {
        if knob.kind == KindName::KernelCmdline {
            return self.cmdline(knob, targets);
        }
        let mut found = self.same_files(knob, targets)?;
        if !found.agrees
            && let Some(why) = self.yields(knob, targets)
        {
            found.agrees = true;
            found.sets = format!("{}, {why}", found.sets);
        }
        Some(found)
    }

    /// Why tuned's different value of a file does not stand, when it does
    /// not: what tuned writes last, or what systemd reads last.
    fn yields(&self, knob: &Knob, targets: &[Target]) -> Option<String> {
        match knob.kind {
            KindName::Sysctl if knob.persistence == Persistence::SysctlD && self.reapply_sysctl => {
                Some("then reapply_sysctl=1 (tuned-main.conf) has tuned write /etc/sysctl.d again, where this knob's file is".into())
            }
            KindName::SystemdCpuAffinity => {
                let ours: Vec<&str> = targets
                    .iter()
                    .map(|t| t.path.as_str())
                    .filter(|p| p.contains("/system.conf.d/"))
                    .collect();
                let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
                let after = match self.systemd_file.contains("/system.conf.d/") {
                    true => ours.iter().all(|p| name(p) > name(&self.systemd_file)),
                    false => true,
                };
                (after && !ours.is_empty()).then(|| {
                    format!(
                        "in {}, which this knob's drop-in overrides (systemd-system.conf(5): system.conf first, then the drop-ins in name order, the last setting wins)",
                        self.systemd_file
                    )
                })
            }
            _ => None,
        }
    }

    /// tuned's `[bootloader]` only adds its own words (`$tuned_params` in
    /// BLS entries, GRUB_CMDLINE_LINUX_DEFAULT's tuned part); it fights a
    /// kernel-cmdline knob only where both give one parameter different
    /// values.
    fn cmdline(&self, knob: &Knob, targets: &[Target]) -> Option<TunedSetting> {
        let ours = knob.spec.cmdline_args().unwrap_or_default();
        let key = |w: &str| w.split('=').next().unwrap_or(w).replace('_', "-");
        let path = targets.first().map(|t| t.path.clone()).unwrap_or_default();
        let mut agreeing = None;
        for s in self
            .settings
            .iter()
            .rev()
            .filter(|s| s.kind == KindName::KernelCmdline)
        {
            for w in &ours {
                let Some(theirs) = s.words.iter().find(|t| key(t) == key(w)) else {
                    continue;
                };
                let found = s.found(path.clone(), theirs.clone(), theirs == w);
                if !found.agrees {
                    return Some(found);
                }
                agreeing.get_or_insert(found);
            }
        }
        agreeing
    }

    /// tuned's setting of the same files as the knob's.
    fn same_files(&self, knob: &Knob, targets: &[Target]) -> Option<TunedSetting> {
        let mut agreeing = None;
        for t in targets.iter().filter(|t| t.blocker.is_none()) {
            let Some((s, theirs)) = self.settings.iter().rev().find_map(|s| {
                let theirs = s
                    .targets
                    .iter()
                    .find(|x| x.path == t.path && x.label == t.label)?;
                Some((s, theirs))
            }) else {
                continue;
            };
            let agrees = same(knob, &t.desired, theirs);
            let found = s.found(t.path.clone(), theirs.desired.clone(), agrees);
            if !agrees {
                return Some(found);
            }
            agreeing.get_or_insert(found);
        }
        agreeing
    }
}

/// A translated setting surveyed as a knob of its kind; `None` when its kind
/// does not build or survey here (then it sets no file hostknob knows).
fn setting(host: &HostCtx, profile: &str, k: KnobOut) -> Option<Setting> {
    let kind = KindName::parse(k.kind)?;
    let mut doc = serde_yaml::Mapping::new();
    let mut put = |key: &str, v: serde_yaml::Value| {
        doc.insert(serde_yaml::Value::String(key.into()), v);
    };
    put("id", s(&k.id));
    put("title", s(&k.id));
    put("kind", s(k.kind));
    if let Some(t) = k.target {
        put("target", t);
    }
    put("set", k.set);
    put("hosts", s("*"));
    put("persistence", s(k.persistence));
    put("why", s("tuned"));
    let text = serde_yaml::to_string(&serde_yaml::Value::Mapping(doc)).ok()?;
    let spec = crate::knob::build(kind, &text).ok()?;
    let targets = spec.survey(host).ok()?.targets;
    Some(Setting {
        profile: profile.to_string(),
        opt: k.lines.first()?.clone(),
        kind,
        targets,
        words: spec.cmdline_args().unwrap_or_default(),
    })
}

/// Whether tuned's value for a file is the knob's `desired`, in the knob's
/// words: as surveyed, or tuned's written text read as the knob reads it.
fn same(knob: &Knob, desired: &str, theirs: &Target) -> bool {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let want = words(desired);
    words(&theirs.desired) == want
        || theirs
            .write
            .as_deref()
            .is_some_and(|w| words(&knob.spec.normalize(w)) == want)
}
