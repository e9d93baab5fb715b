//! systemd drop-ins: the `Environment=` drop-in `persist` writes for
//! allocator knobs (the same file apply writes), and its check.

use super::Artifact;
use crate::knob::{Target, WriteMode};
use crate::manifest::Knob;
use crate::schema::Persistence;

pub(super) fn artifact(
    knob: &Knob,
    notes: Vec<String>,
    targets: &[&Target],
) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = Persistence::SystemdDropin;
    let write = |t: &&Target| t.write.clone().unwrap_or_default();
    let t = targets
        .iter()
        .find(|t| t.mode == WriteMode::File)
        .ok_or_else(|| format!("{id}: no drop-in to write here"))?;
    let unit = t
        .path
        .rsplit('/')
        .nth(1)
        .and_then(|d| d.strip_suffix(".d"))
        .unwrap_or("the service")
        .to_string();
    Ok(Artifact {
        knob: id.clone(),
        mechanism,
        path: Some(t.path.clone()),
        content: write(t),
        // The manager's own configuration is read when PID 1 re-executes.
        commands: if unit == "system.conf" {
            vec!["systemctl daemon-reexec".into()]
        } else {
            vec![
                "systemctl daemon-reload".into(),
                format!("systemctl restart {unit}"),
            ]
        },
        notes,
        replaces: Vec::new(),
    })
}

/// `Ok` when the unit's drop-ins hold the knob's value.
pub(super) fn check(writable: &[&Target]) -> Result<String, String> {
    let dropins: Vec<&&Target> = writable
        .iter()
        .filter(|t| t.mode == crate::knob::WriteMode::File)
        .collect();
    if !dropins.is_empty() && dropins.iter().all(|t| t.in_effect) {
        Ok("the unit's drop-ins set it".into())
    } else {
        Err("no drop-in sets it".into())
    }
}
