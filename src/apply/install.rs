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
    let was = write::content(root, path)
        .map_err(|e| ApplyError::Refused(format!("cannot read {path}: {e}")))?;
    let want = install.then_some(artifact.content.as_str());
    let mut outcome = PersistOutcome {
        knob: knob.id.clone(),
        path: path.to_string(),
        action: if install { "unchanged" } else { "absent" },
        ledger: None,
    };
    if was.as_deref() == want {
        return Ok(outcome);
    }
    let what = match want {
        Some(c) => Put::File(c),
        None => Put::Absent { created_dirs: &[] },
    };
    write::put(root, path, what, || match write::content(root, path) {
        Ok(now) if now.as_deref() == want => Ok(()),
        Ok(_) => Err("read back something else".into()),
        Err(e) => Err(format!("cannot read it back: {e}")),
    })
    .map_err(|f| ApplyError::Refused(f.why))?;
    outcome.action = if install { "installed" } else { "removed" };
    let changes = group([Change {
        path,
        cpus: None,
        label: None,
        before: was.as_deref(),
        after: want,
    }]);
    let action = if install {
        ledger::Action::Persisted
    } else {
        ledger::Action::Unpersisted
    };
    s.record(&ledger_entry(&s.ctx.name, knob, action, changes, &who()))?;
    outcome.ledger = Some(ledger_path.display().to_string());
    Ok(outcome)
}
