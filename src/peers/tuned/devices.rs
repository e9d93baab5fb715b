//! tuned's device power plugins and the last small ones, as tuned 2.20 runs
//! them (tuned/plugins/plugin_scsi_host.py, plugin_audio.py, plugin_video.py,
//! plugin_selinux.py, plugin_modules.py, plugin_net.py's
//! `nf_conntrack_hashsize`), on the `sysfs` and `module-param` kinds. Each
//! plugin acts only on devices the host has; where it has none the line is
//! not imported and says so.

use serde_yaml::Value;

use super::hardware::{Devices, SELINUX_THRESHOLD};
use super::ini::Opt;
use super::load::Unit;
use super::out::{Fate, Out, map, s, short_id, slug, value};
use super::vars::Vars;

/// Python's `int()` of an option, and tuned's refusal of a negative one.
fn count(v: &str, plugin: &str) -> Result<u64, String> {
    let t = v.trim().replace('_', "");
    match t.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(_) => Err(format!(
            "`{v}` is negative: tuned writes nothing ({plugin})"
        )),
        Err(_) => Err(format!(
            "`{v}` is not an integer: tuned refuses it ({plugin})"
        )),
    }
}

pub fn option(ty: &str, o: &Opt, v: &str, dev: &Devices, out: &mut Out) -> Result<(), String> {
    match ty {
        "scsi_host" if o.key == "alpm" => {
            if dev.alpm_hosts.is_empty() {
                return Err("no SCSI host with ALPM (/sys/class/scsi_host/host*/link_power_management_policy, AHCI SATA only) on this host; tuned skips hosts without the file (plugin_scsi_host.py _set_alpm)".into());
            }
            if v.trim().is_empty() {
                return Err("an empty policy: give min_power, medium_power, med_power_with_dipm or max_performance".into());
            }
            out.knob(
                o,
                "sysfs",
                Some(map(&[("path", s("/sys/class/scsi_host/host*/link_power_management_policy"))])),
                s(v.trim()),
                "tmpfiles",
                format!(
                    "tuned writes link_power_management_policy of every SCSI host that has it (plugin_scsi_host.py _set_alpm): here {}",
                    dev.alpm_hosts.join(", ")
                ),
            );
        }
        "selinux" if o.key == "avc_cache_threshold" => {
            if !dev.selinux {
                return Err(format!(
                    "SELinux is not enabled on this host (no {SELINUX_THRESHOLD}): tuned does not load its selinux plugin (plugin_selinux.py)"
                ));
            }
            let n = count(v, "plugin_selinux.py")?;
            out.knob(
                o,
                "sysfs",
                Some(map(&[("path", s(SELINUX_THRESHOLD))])),
                s(&n.to_string()),
                "tmpfiles",
                "tuned writes the AVC cache threshold to selinuxfs".into(),
            );
        }
        "video" if o.key == "radeon_powersave" => radeon(o, v, dev, out)?,
        "video" if o.key == "panel_power_savings" => {
            return Err("[video] panel_power_savings (newer tuned: eDP panels' amdgpu/panel_power_savings, chosen by the power source) has no hostknob kind".into());
        }
        "modules" => super::modules::option(o, v, dev, out)?,
        t => {
            return Err(format!(
                "[{t}] {} is not an option of tuned's {t} plugin",
                o.key
            ));
        }
    }
    Ok(())
}

/// `[net] nf_conntrack_hashsize` (plugin_net.py
/// `_set_nf_conntrack_hashsize`): `int()`, written when not negative.
pub fn conntrack(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    let n = count(v, "plugin_net.py")?;
    out.knob(
        o,
        "module-param",
        Some(map(&[("module", s("nf_conntrack")), ("param", s("hashsize"))])),
        s(&n.to_string()),
        "tmpfiles",
        "tuned writes /sys/module/nf_conntrack/parameters/hashsize, which exists only while nf_conntrack is loaded (the knob is not-applicable until then); where it loads after boot, `persistence: cmdline` (nf_conntrack.hashsize=N, which modprobe passes at load) holds it".into(),
    );
    Ok(())
}

/// plugin_video.py `_set_radeon_powersave`: the alternatives in order, the
/// first whose writes succeed. The kernel refuses every `power_method`
/// write on a card in DPM mode, `dpm` included (radeon_pm.c
/// `radeon_set_pm_method`: "we don't support the legacy modes with dpm"),
/// so the `dpm-*` alternatives never succeed and tuned changes nothing on a
/// DPM card; on a profile or dynpm card the first other alternative wins.
fn radeon(o: &Opt, v: &str, dev: &Devices, out: &mut Out) -> Result<(), String> {
    const PROFILES: [&str; 5] = ["default", "auto", "low", "mid", "high"];
    const DPM: [&str; 3] = ["dpm-battery", "dpm-balanced", "dpm-performance"];
    if dev.radeon.is_empty() {
        return Err("no Radeon card (/sys/class/drm/card*/device/power_method) on this host; tuned skips cards without the file (plugin_video.py)".into());
    }
    let words: Vec<&str> = v
        .split([':', ';', ',', ' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    // tuned stops at the first word it does not know.
    let known = words
        .iter()
        .take_while(|w| PROFILES.contains(w) || DPM.contains(w) || **w == "dynpm")
        .copied()
        .collect::<Vec<_>>();
    let legacy: Vec<&(String, String)> = dev.radeon.iter().filter(|(_, m)| m != "dpm").collect();
    let dpm_cards: Vec<&str> = dev
        .radeon
        .iter()
        .filter(|(_, m)| m == "dpm")
        .map(|(c, _)| c.as_str())
        .collect();
    if words.is_empty() {
        return Err("an empty value: tuned writes nothing".into());
    }
    let Some(pick) = known.iter().find(|w| !DPM.contains(w)) else {
        return Err(format!(
            "`{v}`: tuned's dpm-* values write power_method=dpm, which the kernel refuses (radeon_pm.c radeon_set_pm_method), and no later value is one tuned knows: tuned changes nothing"
        ));
    };
    if legacy.is_empty() {
        return Err(format!(
            "the Radeon cards here ({}) run DPM, where the kernel refuses every power_method write (radeon_pm.c radeon_set_pm_method): tuned changes nothing",
            dpm_cards.join(", ")
        ));
    }
    let cards: Vec<&str> = legacy.iter().map(|(c, _)| c.as_str()).collect();
    let skipped = match dpm_cards.is_empty() {
        true => String::new(),
        false => format!(
            "; on {} (DPM) the kernel refuses it and tuned changes nothing",
            dpm_cards.join(", ")
        ),
    };
    let note = |what: &str| {
        format!(
            "tuned tries `{v}` in order and keeps the first whose writes succeed (plugin_video.py _set_radeon_powersave); dpm-* fails on every card (radeon_pm.c radeon_set_pm_method), so `{pick}`: {what} on {}{skipped}",
            cards.join(", ")
        )
    };
    let method = if *pick == "dynpm" { "dynpm" } else { "profile" };
    let mut files = vec![("power-method", "power_method", method)];
    if method == "profile" {
        files.push(("power-profile", "power_profile", pick));
    }
    let what = files
        .iter()
        .map(|(_, f, v)| format!("{f}={v}"))
        .collect::<Vec<_>>()
        .join(" then ");
    let mut ids = Vec::new();
    for (tag, file, val) in &files {
        // One glob over the legacy cards: a DPM card's power_method refuses the write.
        let path = match cards.as_slice() {
            [one] => format!("/sys/class/drm/{one}/device/{file}"),
            _ => format!("/sys/class/drm/card*/device/{file}"),
        };
        out.knob(
            o,
            "sysfs",
            Some(map(&[("path", Value::from(path))])),
            s(val),
            "tmpfiles",
            note(&what),
        );
        let k = out.knobs.last_mut().expect("just pushed");
        k.id = short_id(format!("tuned-{}-video-radeon-{tag}", slug(&out.profile)));
        ids.push(k.id.clone());
    }
    let f = match ids.as_slice() {
        [one] => Fate::Knob(one.clone()),
        _ => Fate::Used(format!(
            "knobs {} (in that order)",
            ids.iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        )),
    };
    out.fate(o, f);
    Ok(())
}

/// tuned's get_bool, then the kernel's kstrtobool for what tuned passes on.
fn audio_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_uppercase().as_str() {
        "Y" | "YES" | "T" | "TRUE" | "1" | "ON" => Some(true),
        "N" | "NO" | "F" | "FALSE" | "0" | "OFF" => Some(false),
        _ => None,
    }
}

/// `[audio]` (plugin_audio.py): `timeout` (default 0) to each tuned
/// module's `power_save`, and `reset_controller` (default false) to its
/// `power_save_controller` where that exists. tuned applies both defaults
/// whenever the unit is there, so a unit with `timeout` alone also writes
/// `power_save_controller=N`.
pub fn audio(u: &Unit, vars: &Vars, dev: &Devices, out: &mut Out) -> anyhow::Result<()> {
    let mut timeout: Option<(Opt, String)> = None;
    let mut reset: Option<(Opt, String)> = None;
    for o in &u.options {
        let slot = match o.key.as_str() {
            "timeout" => &mut timeout,
            "reset_controller" => &mut reset,
            k => {
                out.fate(o, Fate::Not(format!("[audio] {k} is not an option of tuned's audio plugin (timeout, reset_controller)")));
                continue;
            }
        };
        match value(o, vars)? {
            Ok(v) => *slot = Some((o.clone(), v)),
            Err(r) => out.fate(o, Fate::Not(r)),
        }
    }
    let lines: Vec<&Opt> = timeout.iter().chain(&reset).map(|(o, _)| o).collect();
    if dev.audio.is_empty() {
        for o in lines {
            out.fate(o, Fate::Not("no sound card driven by snd_hda_intel or snd_ac97_codec on this host; tuned tunes those modules only (plugin_audio.py _init_devices)".into()));
        }
        return Ok(());
    }
    // The line a default's knob cites: the unit's other line.
    let Some(first) = lines.first().map(|o| (*o).clone()) else {
        return Ok(());
    };
    let profile = slug(&out.profile);
    let push = |out: &mut Out, o: &Opt, m: &str, param: &str, val: String, note: String| {
        out.knob(
            o,
            "module-param",
            Some(map(&[("module", s(m)), ("param", s(param))])),
            s(&val),
            "tmpfiles",
            note,
        );
        let k = out.knobs.last_mut().expect("just pushed");
        k.id = short_id(format!("tuned-{profile}-audio-{}-{}", slug(m), slug(param)));
        k.id.clone()
    };
    let mut made: Vec<(Opt, String)> = Vec::new();
    let t = match &timeout {
        Some((o, v)) => count(v, "plugin_audio.py _set_timeout").map(|n| (o.clone(), n, "")),
        None => Ok((
            first.clone(),
            0,
            "tuned's default timeout=0 (the unit sets none); ",
        )),
    };
    match t {
        Ok((o, n, why)) => {
            for (m, _) in &dev.audio {
                let id = push(
                    out,
                    &o,
                    m,
                    "power_save",
                    n.to_string(),
                    format!(
                        "{why}tuned writes the codec's autosuspend timeout, in seconds (0: never), to /sys/module/{m}/parameters/power_save"
                    ),
                );
                made.push((o.clone(), id));
            }
        }
        Err(why) => out.fate(
            &timeout.as_ref().expect("only a given value fails").0,
            Fate::Not(why),
        ),
    }
    let r = match &reset {
        Some((o, v)) => audio_bool(v)
            .map(|b| (o.clone(), b, ""))
            .ok_or_else(|| format!("`{v}` is not a boolean tuned or the kernel reads")),
        None => Ok((
            first.clone(),
            false,
            "tuned's default reset_controller=false (the unit sets none); ",
        )),
    };
    match r {
        Ok((o, b, why)) => {
            for (m, ctl) in &dev.audio {
                if !ctl {
                    continue;
                }
                let yn = if b { "Y" } else { "N" };
                let id = push(
                    out,
                    &o,
                    m,
                    "power_save_controller",
                    yn.into(),
                    format!(
                        "{why}tuned writes {} to /sys/module/{m}/parameters/power_save_controller where it exists (whether power saving may reset the controller)",
                        if b { 1 } else { 0 }
                    ),
                );
                made.push((o.clone(), id));
            }
        }
        Err(why) => out.fate(
            &reset.as_ref().expect("only a given value fails").0,
            Fate::Not(why),
        ),
    }
    // Each line's fate: the knobs it gave.
    for o in lines {
        let ids: Vec<String> = made
            .iter()
            .filter(|(l, _)| l.line == o.line && l.file == o.file)
            .map(|(_, i)| format!("`{i}`"))
            .collect();
        if out
            .fates
            .iter()
            .any(|(f, l, fate)| *f == o.file && *l == o.line && matches!(fate, Fate::Not(_)))
        {
            continue;
        }
        let f = match ids.as_slice() {
            [] => Fate::Used(format!(
                "no {} file on this host's modules: tuned skips it",
                o.key
            )),
            [one] => Fate::Knob(one.trim_matches('`').to_string()),
            _ => Fate::Used(format!("knobs {}", ids.join(", "))),
        };
        out.fate(o, f);
    }
    Ok(())
}
