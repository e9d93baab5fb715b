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
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    // /etc/passwd read directly, not getpwuid(3): that would load the host's
    // NSS modules into the static binary (docs/install.md). A user known
    // only to sssd or LDAP is named by uid.
    let passwd = crate::root::read_system_file("/etc/passwd");
    match passwd.as_deref().and_then(|text| passwd_name(text, uid)) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// The name passwd(5) text gives `uid`: the first line whose third field is it.
fn passwd_name(passwd: &str, uid: u32) -> Option<&str> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields
            .next()
            .filter(|n| !n.is_empty() && !n.starts_with(['+', '-', '#']))?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid).then_some(name)
    })
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
        samples: None,
        // Filled in by `Session::record`, the one writer.
        identity: ledger::Identity::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::passwd_name;

    #[test]
    fn the_user_name_is_the_first_passwd_line_with_the_uid() {
        let passwd = "# local\nroot:x:0:0:root:/root:/bin/bash\n+nis::::::\n\
            broken line\nsre:x:1000:1000::/home/sre:/bin/sh\nalias:x:1000:1000::/:/bin/sh\n";
        assert_eq!(passwd_name(passwd, 0), Some("root"));
        assert_eq!(passwd_name(passwd, 1000), Some("sre"));
        assert_eq!(passwd_name(passwd, 65534), None);
    }
}
