//! tuned's `[disk]` plugin and its `>N`/`<N` values, as block knobs and bounds.

use serde_yaml::Value;

use super::ini::Opt;
use super::out::{Out, map, s};

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
/// which is the block kind's `all: true`.
pub(super) fn disk(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
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
    out.knob(
        o,
        "block",
        Some(map(&[("all", Value::Bool(true))])),
        set,
        "boot",
        "tuned's [disk] writes /sys/block/DEV/queue/ on every disk that is not removable (plugin_disk.py); a boot unit chooses the disks again at every boot".into(),
    );
    Ok(())
}
