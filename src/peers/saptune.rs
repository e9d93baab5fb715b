//! saptune's notes, read only: which notes are active and which files
//! their lines set (audit says per knob when a note sets the same file).
//!
//! The note format is saptune-note(5) (saptune 3): INI, `[section]` lines,
//! `key = value` options, `#` comments; a section with tags
//! (`[sysctl:os=15-SP1:arch=ppc64le]`) applies only where they match, and is
//! skipped here. Read narrowly: `[sysctl]` keys, `[vm]` `THP`, `[cpu]`
//! `governor`. Notes are looked up as saptune does: `/etc/saptune/extra/ID.conf`
//! (custom), `/var/lib/saptune/working/notes/ID`, `/usr/share/saptune/notes/ID`;
//! `/etc/saptune/override/ID` replaces a note's values (an empty value: the
//! file is left alone).

use crate::root::Root;

/// saptune's service on this host: why it is taken as present, and the
/// solutions or notes it is configured to tune for.
pub struct Service {
    pub evidence: Vec<String>,
    pub profile: Option<String>,
}

/// saptune has no daemon: `saptune.service` applies its notes at boot and
/// keeps what it changed in `/run/saptune/saved_state/`.
pub fn service(root: &Root) -> Option<Service> {
    let mut evidence = Vec::new();
    for w in root
        .read_dir("/etc/systemd/system")
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(".wants"))
    {
        let link = format!("/etc/systemd/system/{w}/saptune.service");
        if root.read_link(&link).is_ok() || root.exists(&link) {
            evidence.push(format!("enabled ({link})"));
        }
    }
    // Where /run/saptune is not seen (the pod), only a host with saptune's
    // package asks for it: elsewhere it is absent, not unknown.
    let installed = || root.is_dir("/usr/share/saptune/notes");
    let mut applied = if root.shows("/run/saptune") || installed() {
        root.read_dir("/run/saptune/saved_state")
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    applied.sort();
    if !applied.is_empty() {
        evidence.push(format!(
            "applied now (/run/saptune/saved_state: {})",
            applied.join(", ")
        ));
    }
    if evidence.is_empty() {
        return None;
    }
    let config = root
        .read_string("/etc/sysconfig/saptune")
        .unwrap_or_default();
    let setting = |key: &str| {
        config.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
            let v = v.trim().trim_matches('"').trim();
            (!v.is_empty()).then(|| v.to_string())
        })
    };
    let profile = match (setting("TUNE_FOR_SOLUTIONS"), setting("TUNE_FOR_NOTES")) {
        (Some(s), Some(n)) => Some(format!("solutions {s}; notes {n}")),
        (Some(s), None) => Some(format!("solutions {s}")),
        (None, Some(n)) => Some(format!("notes {n}")),
        (None, None) => setting("NOTE_APPLY_ORDER").map(|n| format!("notes {n}")),
    };
    Some(Service { evidence, profile })
}

/// One option line of an active note.
pub struct NoteLine {
    pub note: String,
    pub file: String,
    pub line: usize,
    pub section: String,
    pub key: String,
    pub value: String,
}

impl NoteLine {
    /// Whether this line sets `path`.
    pub fn sets(&self, path: &str) -> bool {
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
    pub lines: Vec<NoteLine>,
}

const SYSCONFIG: &str = "/etc/sysconfig/saptune";

impl Notes {
    pub fn read(root: &Root) -> Notes {
        // The package's notes first: where /etc/saptune is not seen (the
        // pod), saptune's absence is known from them alone.
        let installed = root.is_dir("/usr/share/saptune/notes")
            || (root.shows("/etc/saptune") && root.is_dir("/etc/saptune"));
        if !installed {
            return Notes::default();
        }
        let mut active: Vec<String> = Vec::new();
        let config = root.read_string(SYSCONFIG).unwrap_or_default();
        // NOTE_APPLY_ORDER holds the notes of the solutions too (saptune 3).
        for key in ["NOTE_APPLY_ORDER", "TUNE_FOR_NOTES"] {
            for n in setting(&config, key).split_whitespace() {
                if !active.iter().any(|a| a == n) {
                    active.push(n.to_string());
                }
            }
        }
        let mut applied = root
            .read_dir("/run/saptune/saved_state")
            .unwrap_or_default();
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
