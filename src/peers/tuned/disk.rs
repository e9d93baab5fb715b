//! tuned's `[disk]` plugin and its `>N`/`<N` values, as block knobs and bounds.

use serde_yaml::Value;

use super::ini::Opt;
use super::load::Unit;
use super::out::{Out, map, s};

/// The disks earlier disk units took: tuned gives each disk to one
/// instance of the plugin, in the order of the merged profile (units/manager.py
/// `create`, plugins/base.py `assign_free_devices`; "each device can be
/// handled by max one instance", tuned issue #749).
#[derive(Default)]
pub(super) struct Claims {
    /// (unit, where its devices= is, its glob; `None`: every disk).
    earlier: Vec<(String, String, Option<String>)>,
}

/// The literal start of a glob, before its first wildcard.
fn literal(g: &str) -> &str {
    &g[..g.find(['*', '?', '[']).unwrap_or(g.len())]
}

/// Whether two globs may choose one name (conservative: unless their literal
/// starts differ, or they are two different plain names).
fn overlap(a: &str, b: &str) -> bool {
    let (la, lb) = (literal(a), literal(b));
    if la.len() == a.len() && lb.len() == b.len() {
        return a == b;
    }
    la.starts_with(lb) || lb.starts_with(la)
}

impl Claims {
    /// The block target of disk unit `u` given its `devices=` value (`dv`),
    /// or why its settings reach no disk hostknob can choose.
    pub(super) fn select(&mut self, u: &Unit, dv: Option<&str>) -> Result<Value, String> {
        // Where the unit is: its devices= line, else its first option.
        let at = (u.devices.as_ref().or(u.options.first()))
            .map(|d| d.at())
            .unwrap_or_default();
        if let Some(k) = u.keywords.iter().find(|k| k.key == "devices_udev_regex") {
            return Err(format!(
                "unit [{}] chooses its disks by devices_udev_regex ({}): a regular expression on the disk's udev properties (plugins/base.py _get_matching_devices), which the block kind's selector has no form for",
                u.name,
                k.at()
            ));
        }
        if let Some(k) = u.keywords.iter().find(|k| k.key == "priority") {
            return Err(format!(
                "unit [{}] has priority ({}): it changes which disk instance takes a disk first (units/manager.py), which hostknob does not follow",
                u.name,
                k.at()
            ));
        }
        // device_matcher.py: rules split at blanks and commas, `!` excludes,
        // no positive rule means every device; fnmatch on the kernel name.
        let rules: Vec<&str> = dv
            .unwrap_or("")
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|r| !r.is_empty())
            .collect();
        let dv = dv.unwrap_or("*");
        if let Some(n) = rules.iter().find(|r| r.starts_with('!')) {
            return Err(format!(
                "devices={dv}: `{n}` leaves disks out (plugins/hardware/device_matcher.py); the block kind's target.name is one glob with no exclusion"
            ));
        }
        let glob = match rules.as_slice() {
            [] | ["*"] => None,
            [g] if g.chars().all(crate::name::block_name_char) => Some(g.to_string()),
            [g] => {
                return Err(format!(
                    "devices={dv}: `{g}` is not a glob the block kind takes (kernel name characters and * ? [ ] only)"
                ));
            }
            _ => {
                return Err(format!(
                    "devices={dv}: several globs; the block kind's target.name is one glob: give a knob per glob"
                ));
            }
        };
        for (name, at_e, theirs) in &self.earlier {
            let why = match (theirs, &glob) {
                (None, _) => format!(
                    "[{name}] ({at_e}) comes first and takes every disk (no devices= is every disk), so [{}] tunes none: tuned gives each disk to one disk instance, in the profile's order (units/manager.py create, plugins/base.py assign_free_devices; tuned issue #749); [{name}]'s settings are imported for every disk",
                    u.name
                ),
                (Some(t), None) => format!(
                    "[{name}] ({at_e}) comes first and takes the disks {t}, so [{}] tunes every disk but those (tuned gives each disk to one disk instance, in order: plugins/base.py assign_free_devices); the block kind's selector cannot leave them out",
                    u.name
                ),
                (Some(t), Some(g)) if overlap(t, g) => format!(
                    "[{name}] ({at_e}) comes first and takes the disks {t}, which may be some of {g} (tuned gives each disk to one disk instance, in order: plugins/base.py assign_free_devices); the block kind's selector cannot leave them out",
                ),
                _ => continue,
            };
            self.earlier
                .push((u.name.clone(), at.clone(), glob.clone()));
            return Err(why);
        }
        self.earlier.push((u.name.clone(), at, glob.clone()));
        Ok(match glob {
            None => map(&[("all", Value::Bool(true))]),
            Some(g) => map(&[("name", s(&g))]),
        })
    }
}

/// tuned's `>N`/`<N` (base.py `_process_assignment_modifiers`): written only
/// when N is above (below) the current value; `None` for a plain value.
pub(super) fn bound(v: &str) -> Result<Option<Value>, String> {
    let key = match v.chars().next() {
        Some('>') => "at-least",
        Some('<') => "at-most",
        _ => return Ok(None),
    };
    let n = v[1..].trim();
    // A whole number as the bound kind takes it (knob::bound::integer; peers sit below knob).
    let digits = n.strip_prefix(['-', '+']).unwrap_or(n);
    let whole = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match whole.then(|| n.parse::<i128>().ok()).flatten() {
        Some(_) if v.len() > 1 => Ok(Some(map(&[(key, s(n))]))),
        _ => Err(format!(
            "`{v}`: tuned compares `{n}` with the current value as a whole number and, when it is not one, writes `{v}` as it stands (base.py _process_assignment_modifiers), which the kernel refuses"
        )),
    }
}

/// `[disk]` (tuned/plugins/plugin_disk.py) on every disk it tunes: not
/// removable, of a SCSI, virtio, Xen or NVMe parent or none (`_device_is_supported`),
/// which is the block kind's `all: true`; a unit's `devices=` glob is `name:`.
pub(super) fn disk(o: &Opt, v: &str, target: &Value, out: &mut Out) -> Result<(), String> {
    let set = match o.key.as_str() {
        "elevator" => map(&[("scheduler", s(v.trim()))]),
        "readahead" => {
            let (op, rest) = match v.trim().strip_prefix(['>', '<']) {
                Some(r) => (&v.trim()[..1], r.trim()),
                None => ("", v.trim()),
            };
            // `_parse_ra`: KiB, or 512-byte sectors with an `s` suffix after a space.
            let mut words = rest.split_whitespace();
            let n = words.next().and_then(|w| w.parse::<u64>().ok());
            let sectors = words.next().is_some_and(|w| w.starts_with('s'));
            let kb = match (n, sectors, op) {
                (Some(_), true, ">" | "<") => {
                    return Err(format!(
                        "`{v}`: tuned compares `{rest}` with the current value as a whole number, fails on the suffix and then cannot parse `{v}` (plugin_disk.py _parse_ra): it writes nothing"
                    ));
                }
                (Some(n), true, _) => n / 2,
                (Some(n), false, _) => n,
                (None, _, _) => {
                    return Err(format!(
                        "`{v}` is not a readahead (KiB, or `N s` in sectors; plugin_disk.py _parse_ra)"
                    ));
                }
            };
            let value = match op {
                ">" => map(&[("at-least", s(&kb.to_string()))]),
                "<" => map(&[("at-most", s(&kb.to_string()))]),
                _ => s(&kb.to_string()),
            };
            map(&[("read_ahead_kb", value)])
        }
        "apm" | "spindown" => {
            return Err(format!(
                "[disk] {}: ATA power management set through hdparm ({}) on the disks hdparm supports; hostknob writes kernel files and runs no tools, and the value cannot be read back (tuned itself assumes 253 for spindown)",
                o.key,
                if o.key == "apm" {
                    "hdparm -B"
                } else {
                    "hdparm -S"
                }
            ));
        }
        "readahead_multiply" => {
            return Err("[disk] readahead_multiply: a multiple of the readahead found when tuned starts; a knob sets a value or a bound: give read_ahead_kb".into());
        }
        "scheduler_quantum" => {
            return Err("[disk] scheduler_quantum: a setting of CFQ, removed with the legacy block layer in Linux 5.0".into());
        }
        "dynamic" => {
            return Err(
                "[disk] dynamic: tuned's spindown by disk load (a monitor), not a setting".into(),
            );
        }
        k => {
            return Err(format!(
                "[disk] {k} is not an option of tuned's disk plugin"
            ));
        }
    };
    let note = match target.get("name").and_then(Value::as_str) {
        Some(g) => format!("tuned's [{}] writes /sys/block/DEV/queue/ on the disks whose kernel name matches {g} (fnmatch, plugins/hardware/device_matcher.py) and that are not removable (plugin_disk.py); the block kind's name selector takes a removable disk of that name too; a boot unit chooses the disks again at every boot", o.section),
        None => "tuned's [disk] writes /sys/block/DEV/queue/ on every disk that is not removable (plugin_disk.py); a boot unit chooses the disks again at every boot".into(),
    };
    out.knob(o, "block", Some(target.clone()), set, "boot", note);
    Ok(())
}
