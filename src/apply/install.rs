//! `persist --install` / `--remove`: the artifact's file written or removed
//! under the state lock, read back and recorded in the ledger.

use serde::Serialize;

use super::group::{Change, group};
use super::write::{self, Put};
use super::{ApplyError, Session, ledger_entry, validate, who};
use crate::manifest::{Knob, ledger};
use crate::persist::Artifact;

/// What `persist --install` or `--remove` did.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PersistOutcome {
    pub knob: String,
    pub path: String,
    /// `installed`, `unchanged` (already there, identical), `removed` or `absent`.
    pub action: &'static str,
    pub ledger: Option<String>,
}

/// Writes (`install`) or removes the artifact's file under the root, reads it
/// back, and records the change in the ledger.
pub fn install_or_remove(
    s: &Session,
    knob: &Knob,
    artifact: &Artifact,
    install: bool,
    wait: bool,
) -> Result<PersistOutcome, ApplyError> {
    let root = s.root();
    let Some(path) = artifact.path.as_deref() else {
        if knob.kind == crate::knob::KindName::KernelCmdline {
            return Err(ApplyError::Refused(format!(
                "{}: nothing to install: {}",
                knob.id,
                artifact.notes.join("; ")
            )));
        }
        return Err(ApplyError::Refused(format!(
            "hostknob never writes the boot loader's configuration: add `{}` with one of the \
             commands `hostknob persist {}` prints",
            artifact.content, knob.id
        )));
    };
    let ledger_path = ledger::path_for(&s.manifest_dir, &s.ctx.name);
    validate::permissions(root, [(path, true)], false)
        .and_then(|_| validate::ledger_writable(&ledger_path))
        .map_err(ApplyError::Refused)?;
    let _lock = s.lock(wait)?;
    let read = |p: &str| {
        write::content(root, p).map_err(|e| ApplyError::Refused(format!("cannot read {p}: {e}")))
    };
    let was = read(path)?;
    // This knob's files under an older name go too (only those whose header says so).
    let mut old = Vec::new();
    for p in &artifact.replaces {
        if let Some(text) = read(p)?.filter(|t| crate::persist::is_own(t, &knob.id)) {
            old.push((p.as_str(), text));
        }
    }
    let want = install.then_some(artifact.content.as_str());
    let mut outcome = PersistOutcome {
        knob: knob.id.clone(),
        path: path.to_string(),
        action: if install { "unchanged" } else { "absent" },
        ledger: None,
    };
    if was.as_deref() == want && old.is_empty() {
        return Ok(outcome);
    }
    // The directories an install makes are remembered, so a remove takes them away again.
    let made = match want {
        Some(_) => root.missing_dirs(path),
        None => Vec::new(),
    };
    let mut installed = Installed::read(s);
    let remove_dirs = match want {
        Some(_) => Vec::new(),
        None => installed.take(path),
    };
    let what = match want {
        Some(c) => Put::File(c),
        None => Put::Absent {
            created_dirs: &remove_dirs,
        },
    };
    if was.as_deref() != want {
        write::put(root, path, what, || match write::content(root, path) {
            Ok(now) if now.as_deref() == want => Ok(()),
            Ok(_) => Err("read back something else".into()),
            Err(e) => Err(format!("cannot read it back: {e}")),
        })
        .map_err(|f| ApplyError::Refused(f.why))?;
    }
    for (p, _) in &old {
        let gone = Put::Absent { created_dirs: &[] };
        write::put(root, p, gone, || match write::content(root, p) {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("it is still there".into()),
            Err(e) => Err(format!("cannot read it back: {e}")),
        })
        .map_err(|f| ApplyError::Refused(format!("{p}: {}", f.why)))?;
    }
    if install {
        installed.put(path, made);
    }
    if let Err(e) = installed.write(s) {
        eprintln!("hostknob: warning: {e}");
    }
    outcome.action = if install { "installed" } else { "removed" };
    if let (false, None, Some((p, _))) = (install, &was, old.first()) {
        outcome.path = p.to_string();
    }
    let mut changes = vec![Change {
        path,
        cpus: None,
        label: None,
        before: was.as_deref(),
        after: want,
    }];
    changes.retain(|c| c.before != c.after);
    changes.extend(old.iter().map(|(p, text)| Change {
        path: p,
        cpus: None,
        label: None,
        before: Some(text.as_str()),
        after: None,
    }));
    let changes = group(changes);
    let action = if install {
        ledger::Action::Persisted
    } else {
        ledger::Action::Unpersisted
    };
    s.record(&ledger_entry(&s.ctx.name, knob, action, changes, &who()))?;
    outcome.ledger = Some(ledger_path.display().to_string());
    Ok(outcome)
}

/// `installed.json` in the state directory: the directories each
/// `persist --install` made, per file.
struct Installed(std::collections::BTreeMap<String, Vec<String>>);

const INSTALLED_FILE: &str = "installed.json";

impl Installed {
    fn file(s: &Session) -> String {
        format!("{}/{INSTALLED_FILE}", s.state_dir.trim_end_matches('/'))
    }

    fn read(s: &Session) -> Installed {
        let map = s
            .root()
            .read_capped(&Self::file(s), 1 << 20)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Installed(map)
    }

    fn take(&mut self, path: &str) -> Vec<String> {
        self.0.remove(path).unwrap_or_default()
    }

    fn put(&mut self, path: &str, dirs: Vec<String>) {
        if !dirs.is_empty() {
            self.0.insert(path.to_string(), dirs);
        }
    }

    fn write(&self, s: &Session) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&self.0).map_err(|e| e.to_string())?;
        s.root()
            .replace_file(&Self::file(s), text.as_bytes())
            .map_err(|e| {
                format!(
                    "{}: cannot record the directories made: {e}",
                    s.root().host_path(&Self::file(s)).display()
                )
            })
    }
}
