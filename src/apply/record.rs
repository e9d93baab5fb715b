//! The ledger entries apply, revert and persist append, and who made them.

use super::group::ChangeGroup;
use crate::manifest::{Knob, ledger};
use crate::schema::Persistence;

/// Who made the change: the user behind sudo, else the uid (and its name).
pub fn who() -> String {
    if let Ok(u) = std::env::var("SUDO_USER")
        && !u.trim().is_empty()
    {
        return u.trim().to_string();
    }
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => format!("uid {uid} ({})", u.name),
        _ => format!("uid {uid}"),
    }
}

pub fn ledger_entry(
    host: &str,
    knob: &Knob,
    action: ledger::Action,
    changes: Vec<ChangeGroup>,
    user: &str,
) -> ledger::Entry {
    ledger_entry_for(host, &knob.id, knob.persistence, action, changes, user)
}

pub(super) fn ledger_entry_for(
    host: &str,
    knob: &str,
    persistence: Persistence,
    action: ledger::Action,
    changes: Vec<ChangeGroup>,
    user: &str,
) -> ledger::Entry {
    ledger::Entry {
        timestamp: ledger::now_rfc3339(),
        // Given by the writer (`ledger_home::Home::append`).
        id: None,
        host: host.to_string(),
        knob: knob.to_string(),
        action,
        changes: changes.iter().map(ChangeGroup::to_ledger).collect(),
        persistence,
        user: Some(user.to_string()),
        hostknob: env!("CARGO_PKG_VERSION").to_string(),
        note: None,
        evidence: None,
        facts: None,
        // Filled in by `Session::record`, the one writer.
        identity: ledger::Identity::default(),
    }
}
