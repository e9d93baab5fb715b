//! saptune's notes beside hostknob, read only: which notes are active and
//! which files their lines set, so audit can say per knob when a note sets
//! the same file (agreeing or not). hostknob never refuses over a note.
//!
//! The note format is saptune-note(5) (saptune 3): INI, `[section]` lines,
//! `key = value` options, `#` comments; a section with tags
//! (`[sysctl:os=15-SP1:arch=ppc64le]`) applies only where they match, and is
//! skipped here. Read narrowly: `[sysctl]` keys, `[vm]` `THP`, `[cpu]`
//! `governor`. Notes are looked up as saptune does: `/etc/saptune/extra/ID.conf`
//! (custom), `/var/lib/saptune/working/notes/ID`, `/usr/share/saptune/notes/ID`;
//! `/etc/saptune/override/ID` replaces a note's values (an empty value: the
//! file is left alone).

use serde::Serialize;

use crate::knob::{HostCtx, Target};
use crate::manifest::Knob;

/// An active note's line that sets a knob's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SaptuneSetting {
    pub note: String,
    pub file: String,
    pub line: usize,
    pub section: String,
    pub key: String,
    pub value: String,
    /// The knob's file the line sets.
    pub path: String,
    /// Whether the note sets what the knob sets there.
    pub agrees: bool,
}

/// One option line of an active note.
struct NoteLine {
    note: String,
    file: String,
    line: usize,
    section: String,
    key: String,
    value: String,
}

impl NoteLine {
    /// Whether this line sets `path`.
    fn sets(&self, path: &str) -> bool {
        match (self.section.as_str(), self.key.as_str()) {
            ("sysctl", k) => path == format!("/proc/sys/{}", k.replace('.', "/")),
            ("vm", "THP") => path == "/sys/kernel/mm/transparent_hugepage/enabled",
            ("cpu", "governor") => {
                path.starts_with("/sys/devices/system/cpu/")
                    && path.ends_with("/cpufreq/scaling_governor")
            }
            _ => false,
        }
    }
}

/// The active notes (empty when saptune is absent) and their lines.
#[derive(Default)]
pub struct Notes {
    pub active: Vec<String>,
    lines: Vec<NoteLine>,
}

const SYSCONFIG: &str = "/etc/sysconfig/saptune";

impl Notes {
    pub fn read(host: &HostCtx) -> Notes {
        let root = host.root;
        // The package's notes first: where /etc/saptune is not seen (the
        // pod), saptune's absence is known from them alone.
        let installed = root.is_dir("/usr/share/saptune/notes")
            || (root.shows("/etc/saptune") && root.is_dir("/etc/saptune"));
        if !installed {
            return Notes::default();
        }
        let mut active: Vec<String> = Vec::new();
        let config = host.text(SYSCONFIG).unwrap_or_default();
        // NOTE_APPLY_ORDER holds the notes of the solutions too (saptune 3).
        for key in ["NOTE_APPLY_ORDER", "TUNE_FOR_NOTES"] {
            for n in setting(&config, key).split_whitespace() {
                if !active.iter().any(|a| a == n) {
                    active.push(n.to_string());
                }
            }
        }
        let mut applied = host.list("/run/saptune/saved_state");
        applied.sort();
        for n in applied {
            if !active.contains(&n) {
                active.push(n);
            }
        }
        let mut lines = Vec::new();
        for id in &active {
            let found = [
                format!("/etc/saptune/extra/{id}.conf"),
                format!("/var/lib/saptune/working/notes/{id}"),
                format!("/usr/share/saptune/notes/{id}"),
            ]
            .into_iter()
            .find_map(|f| Some((root.read_string(&f).ok()?, f)));
            let Some((text, file)) = found else { continue };
            let mut mine = parse(id, &file, &text);
            let over = format!("/etc/saptune/override/{id}");
            if let Ok(text) = root.read_string(&over) {
                for o in parse(id, &over, &text) {
                    mine.retain(|l| !(l.section == o.section && l.key == o.key));
                    if !o.value.is_empty() {
                        mine.push(o);
                    }
                }
            }
            lines.extend(mine);
        }
        Notes { active, lines }
    }

    /// Every active note's line that sets one of the knob's files.
    pub fn settings(&self, knob: &Knob, targets: &[Target]) -> Vec<SaptuneSetting> {
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut out: Vec<SaptuneSetting> = Vec::new();
        for l in &self.lines {
            let Some(t) = targets
                .iter()
                .find(|t| t.blocker.is_none() && l.sets(&t.path))
            else {
                continue;
            };
            let want = words(&t.desired);
            out.push(SaptuneSetting {
                note: l.note.clone(),
                file: l.file.clone(),
                line: l.line,
                section: l.section.clone(),
                key: l.key.clone(),
                value: l.value.clone(),
                path: t.path.clone(),
                agrees: words(&l.value) == want || words(&knob.spec.normalize(&l.value)) == want,
            });
        }
        out
    }
}

/// `KEY="value"` of a sysconfig file.
fn setting(config: &str, key: &str) -> String {
    config
        .lines()
        .find_map(|l| {
            let v = l.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?;
            Some(v.trim().trim_matches('"').trim().to_string())
        })
        .unwrap_or_default()
}

/// The `key = value` lines of the sections read; later lines win.
fn parse(note: &str, file: &str, text: &str) -> Vec<NoteLine> {
    let mut out: Vec<NoteLine> = Vec::new();
    let mut section = String::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        if !matches!(section.as_str(), "sysctl" | "vm" | "cpu") {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let key = k.trim().to_string();
        out.retain(|o| !(o.section == section && o.key == key));
        out.push(NoteLine {
            note: note.to_string(),
            file: file.to_string(),
            line: i + 1,
            section: section.clone(),
            key,
            value: v.trim().to_string(),
        });
    }
    out
}
