//! Plain names a manifest gives (modules, parameters, services), checked
//! before they reach a path or a unit file.

use super::FieldError;

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
