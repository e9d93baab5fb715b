//! Checks of names a manifest gives (modules, parameters, services) and
//! the size cap of files a kind rewrites whole.

use super::{Blocker, FieldError};

/// A plain name (module, parameter, service): no path separators, no `..`.
pub fn check_name(field: &str, text: &str, what: &str) -> Result<(), FieldError> {
    let ok = !text.is_empty()
        && text != "."
        && text != ".."
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | ':'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{text:?} is not a {what} name (letters, digits, _ - . @ : only)"),
        ))
    }
}
/// A service unit name as systemd's `unit_name_is_valid` (src/basic/unit-name.c)
/// takes it: under 256 bytes, a non-empty prefix before the last `.` (so
/// `.service` is no unit: its drop-in directory would never be read), no `@`
/// first, and the `.service` suffix; characters as `check_name`.
pub fn check_service_name(field: &str, text: &str) -> Result<(), FieldError> {
    check_name(field, text, "systemd unit")?;
    let prefix = text.strip_suffix(".service").unwrap_or("");
    if prefix.is_empty() || prefix.starts_with('@') || text.len() >= 256 {
        return Err(FieldError::new(
            field,
            format!(
                "{text:?} is not a service unit name: systemd wants NAME.service with a \
                 non-empty NAME not starting with @, under 256 characters (unit_name_is_valid)"
            ),
        ));
    }
    Ok(())
}

/// The largest configuration file a kind rewrites whole (a BLS entry, an
/// irqbalance environment file: a few hundred bytes as shipped). Apply keeps
/// a file's text before, written and read back, and the journal keeps each:
/// a 15 MB file took 300-550 MB, past the 100 MB docs/safety.md promises.
pub const REWRITE_CAP: usize = 1 << 20;

/// Why `text` of `path` is too large to rewrite, if it is.
pub fn too_large_to_rewrite(path: &str, text: &str) -> Option<Blocker> {
    (text.len() > REWRITE_CAP).then(|| {
        Blocker::Unsupported(format!(
            "{path} is {} bytes: hostknob rewrites configuration files of at most {} MiB \
             (docs/safety.md), and this one is not a file the boot loader or service expects",
            text.len(),
            REWRITE_CAP >> 20
        ))
    })
}
