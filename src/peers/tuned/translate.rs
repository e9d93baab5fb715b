//! The merged profile's settings on the kinds of this project
//! (docs/knob-kinds.md); every option line ends as a knob, as used (a
//! variable, an include, a unit keyword) or as not imported with the reason.

use super::facts::Facts;
use super::load::{Profile, Unit};
use super::out::{Fate, Out, map, s, value};
use super::vars::{Fail, Vars};
use super::{cpu, devices, disk, scheduler, sections};
use crate::root::Root;

pub fn translate(root: &Root, p: &Profile, facts: &Facts) -> anyhow::Result<Out> {
    // Sized up front: a long profile's tables are not grown (and copied) by doubling.
    let lines = p.main.len()
        + p.includes.len()
        + p.units
            .iter()
            .map(|u| u.options.len() + u.keywords.len() + 1)
            .sum::<usize>();
    let mut out = Out::with_capacity(p.name.clone(), lines);
    for o in &p.main {
        let what = match o.key.as_str() {
            "summary" | "description" => "the profile's description (the knobs' why)".to_string(),
            k => format!("[main] {k}: read by tuned itself, no setting"),
        };
        out.fate(o, Fate::Used(what));
    }
    for o in &p.includes {
        out.fate(o, Fate::Used(format!("include of {} followed", o.value)));
    }
    let variables_unit = p.units.iter().find(|u| u.name == "variables");
    let mut vars = Vars::with_capacity(facts, variables_unit.map_or(0, |u| u.options.len()));
    if let Some(u) = variables_unit {
        variables(root, p, u, &mut vars, &mut out)?;
    }
    let mut disks = disk::Claims::default();
    for u in p.units.iter().filter(|u| u.name != "variables") {
        unit(u, &vars, facts, &mut disks, &mut out)?;
    }
    Ok(out)
}

fn variables(
    root: &Root,
    _p: &Profile,
    u: &Unit,
    vars: &mut Vars,
    out: &mut Out,
) -> anyhow::Result<()> {
    for o in u.keywords.iter().chain(&u.options) {
        if o.key == "include" {
            match vars.add_file(root, &o.value) {
                Ok(None) => out.fate(o, Fate::Used(format!("variables read from {}", o.value))),
                Ok(Some(missing)) => out.fate(
                    o,
                    Fate::Not(format!("{missing} (tuned goes on without it)")),
                ),
                Err(Fail::Error(e) | Fail::Refused(e)) => anyhow::bail!("{}: {e}", o.at()),
            }
            continue;
        }
        match vars.add(&o.key, &o.value) {
            Err(Fail::Error(e) | Fail::Refused(e)) => {
                let hint = if e.contains("assertion") {
                    "; give the profile's variables (tuned's own *-variables.conf under /etc/tuned) and import again"
                } else {
                    ""
                };
                anyhow::bail!("{}: [variables] {}: {e}{hint}", o.at(), o.key)
            }
            Ok(()) => match vars.get(&o.key) {
                Some(Err(Fail::Refused(r))) => {
                    out.fate(o, Fate::Not(format!("variable not evaluated: {r}")))
                }
                Some(Ok(v)) if v.is_empty() && o.value.contains("${f:cpulist") => out.fate(
                    o,
                    Fate::Used(
                        "variable, here empty: tuned's CPU-list functions give the empty list for text that is not a CPU list"
                            .into(),
                    ),
                ),
                Some(Ok(v)) => out.fate(o, Fate::Used(format!("variable, here `{v}`"))),
                _ => out.fate(o, Fate::Used("variable".into())),
            },
        }
    }
    Ok(())
}

/// tuned's units manager: a unit whose `cpuinfo_regex`/`uname_regex` does
/// not match the host is not used.
fn unit_applies(u: &Unit, vars: &Vars, facts: &Facts) -> anyhow::Result<Result<(), String>> {
    for (re, text, what) in [
        (&u.cpuinfo_regex, &facts.cpuinfo, "/proc/cpuinfo"),
        (&u.uname_regex, &facts.uname, "uname"),
    ] {
        let Some(o) = re else { continue };
        let pattern = match value(o, vars)? {
            Ok(p) => p,
            Err(r) => return Ok(Err(r)),
        };
        match regex::Regex::new(&format!("(?m){pattern}")) {
            Ok(r) if r.is_match(text) => {}
            Ok(_) => {
                return Ok(Err(format!(
                    "unit [{}] applies where {} matches {pattern:?} ({}); this host's does not",
                    u.name,
                    what,
                    o.at()
                )));
            }
            Err(e) => {
                return Ok(Err(format!(
                    "{}: {pattern:?} is not a regular expression hostknob reads: {e}",
                    o.at()
                )));
            }
        }
    }
    Ok(Ok(()))
}

fn unit(
    u: &Unit,
    vars: &Vars,
    facts: &Facts,
    disks: &mut disk::Claims,
    out: &mut Out,
) -> anyhow::Result<()> {
    let refuse_all = |out: &mut Out, why: &str| {
        for o in &u.options {
            out.fate(o, Fate::Not(why.to_string()));
        }
    };
    for k in &u.keywords {
        out.fate(
            k,
            Fate::Used(format!("unit keyword `{}` honoured while merging", k.key)),
        );
    }
    if !u.enabled {
        refuse_all(
            out,
            &format!("unit [{}] is disabled (enabled=false)", u.name),
        );
        return Ok(());
    }
    if let Err(why) = unit_applies(u, vars, facts)? {
        refuse_all(out, &why);
        return Ok(());
    }
    // devices=: cpu units take a CPU list, disk units a name glob (disk.rs);
    // other plugins match udev devices, which a knob cannot express: their
    // settings are not imported.
    let mut cpus = s("all");
    let mut disk_dv = None;
    if let Some(d) = &u.devices {
        let dv = match value(d, vars)? {
            Ok(v) => v,
            Err(r) => {
                refuse_all(out, &r);
                return Ok(());
            }
        };
        if u.ty == "disk" {
            disk_dv = Some(dv);
        } else if dv.trim() != "*" {
            match (u.ty.as_str(), devices_cpus(&dv)) {
                ("cpu", Some(l)) => {
                    out.fate(d, Fate::Used(format!("devices: CPUs {l}")));
                    cpus = s(&l);
                }
                _ => {
                    out.fate(
                        d,
                        Fate::Not(format!(
                            "devices={dv}: udev device matching has no hostknob form"
                        )),
                    );
                    refuse_all(
                        out,
                        &format!(
                            "unit [{}] is limited to devices {dv} ({}), which hostknob cannot match",
                            u.name,
                            d.at()
                        ),
                    );
                    return Ok(());
                }
            }
        }
    }
    let mut disk_target = map(&[("all", serde_yaml::Value::Bool(true))]);
    if u.ty == "disk" {
        match disks.select(u, disk_dv.as_deref()) {
            Ok(t) => {
                if let Some(d) = &u.devices {
                    let what = t.get("name").and_then(|n| n.as_str());
                    let what = what.map_or("every disk".into(), |g| format!("the disks named {g}"));
                    out.fate(d, Fate::Used(format!("devices: {what}")));
                }
                disk_target = t;
            }
            Err(why) => {
                if let Some(d) = &u.devices {
                    out.fate(d, Fate::Not(why.clone()));
                }
                refuse_all(out, &why);
                return Ok(());
            }
        }
    }
    if u.ty == "bootloader" {
        return sections::bootloader(u, vars, out);
    }
    if u.ty == "audio" {
        return devices::audio(u, vars, &facts.devices, out);
    }
    for o in &u.options {
        if u.ty == "scheduler"
            && matches!(
                o.key.as_str(),
                "isolated_cores"
                    | "ps_blacklist"
                    | "ps_whitelist"
                    | "irq_process"
                    | "default_irq_smp_affinity"
                    | "kthread_process"
                    | "cgroup_ps_blacklist"
            )
        {
            continue;
        }
        if u.ty == "scheduler" && o.key.starts_with("group.") {
            continue;
        }
        let v = match value(o, vars)? {
            Ok(v) => v,
            Err(r) => {
                out.fate(o, Fate::Not(r));
                continue;
            }
        };
        let r = match u.ty.as_str() {
            "cpu" => cpu::option(o, &v, &cpus, facts, out),
            "scheduler" if scheduler::is_own(&o.key) => scheduler::tunable(o, &v, facts, out),
            "disk" => disk::disk(o, &v, &disk_target, out),
            "scheduler" if o.key == "runtime" => scheduler::runtime(o, &v, out),
            ty @ ("scsi_host" | "video" | "selinux" | "modules") => {
                devices::option(ty, o, &v, &facts.devices, out)
            }
            ty => sections::option(ty, o, &v, out),
        };
        if let Err(why) = r {
            out.fate(o, Fate::Not(why));
        }
    }
    if u.ty == "scheduler" {
        sections::isolation(u, vars, facts, out)?;
        scheduler::groups(u, vars, out)?;
    }
    Ok(())
}

/// `cpu0,cpu2` or `cpulist:0-3` as a CPU list.
fn devices_cpus(d: &str) -> Option<String> {
    if let Some(l) = d.strip_prefix("cpulist:") {
        return super::vars::unpack(l).ok().map(|c| super::vars::pack(&c));
    }
    let cpus: Option<Vec<u32>> = d
        .split(',')
        .map(|x| x.trim().strip_prefix("cpu").and_then(|n| n.parse().ok()))
        .collect();
    cpus.map(|c| super::vars::pack(&c))
}
