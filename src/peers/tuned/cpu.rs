//! tuned's `[cpu]` plugin (tuned/plugins/plugin_cpu.py, tuned 2.20) on the
//! kinds of this project.

use serde_yaml::Value;

use super::facts::Facts;
use super::ini::Opt;
use super::out::{Out, map, s};

/// `a|b|c`: the first the host offers, else the first (said so).
fn pick(value: &str, offered: &[String], what: &str) -> (String, String) {
    let alts: Vec<&str> = value
        .split('|')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if let Some(a) = alts.iter().find(|a| offered.iter().any(|o| o == *a)) {
        let note = if alts.len() > 1 {
            format!(
                "tuned tries {} in order; this host offers {} ({what}: {}), so `{a}`",
                alts.join(", "),
                a,
                offered.join(" ")
            )
        } else {
            format!("this host offers it ({what}: {})", offered.join(" "))
        };
        return (a.to_string(), note);
    }
    let first = alts.first().copied().unwrap_or_default().to_string();
    let note = if offered.is_empty() {
        format!(
            "this host lists no {what}, so the first alternative, `{first}`, is kept (not-applicable here)"
        )
    } else {
        format!(
            "this host offers none of {} ({what}: {}); the first alternative, `{first}`, is kept and will be unsupported here",
            alts.join(", "),
            offered.join(" ")
        )
    };
    (first, note)
}

/// intel_epb.rst names; `powersave` is x86_energy_perf_policy's name for 15.
fn epb_name(v: &str) -> Option<&str> {
    match v {
        "performance" | "balance-performance" | "normal" | "balance-power" | "power" => Some(v),
        "powersave" => Some("power"),
        n if n.parse::<u8>().is_ok_and(|n| n <= 15) => Some(n),
        _ => None,
    }
}

/// plugin_cpu.py `_parse_latency`: each alternative in turn; `cstate.id:N`
/// is stateN's latency on cpu0, `_no_zero` skips a latency of 0, `none`
/// stops.
pub fn force_latency(value: &str, facts: &Facts) -> Result<(u64, String), String> {
    let states = || {
        facts
            .idle
            .iter()
            .map(|s| {
                format!(
                    "state{} {} {} µs",
                    s.index,
                    s.name,
                    s.latency_us.map_or("?".into(), |l| l.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut tried = Vec::new();
    for alt in value.split('|').map(str::trim) {
        if alt == "none" || alt == "None" {
            return Err(format!(
                "`{alt}` reached after {}: tuned sets no latency",
                tried.join(", ")
            ));
        }
        if let Ok(n) = alt.parse::<u64>() {
            return Ok((n, format!("`{alt}` is a latency in µs")));
        }
        let (by_id, no_zero, arg) = if let Some(a) = alt.strip_prefix("cstate.id_no_zero:") {
            (true, true, a)
        } else if let Some(a) = alt.strip_prefix("cstate.id:") {
            (true, false, a)
        } else if let Some(a) = alt.strip_prefix("cstate.name_no_zero:") {
            (false, true, a)
        } else if let Some(a) = alt.strip_prefix("cstate.name:") {
            (false, false, a)
        } else {
            tried.push(format!("`{alt}` (not a form tuned reads)"));
            continue;
        };
        let state = facts.idle.iter().find(|s| {
            if by_id {
                arg.parse::<u32>().is_ok_and(|i| i == s.index)
            } else {
                s.name == arg
            }
        });
        match state.and_then(|s| s.latency_us.map(|l| (s, l))) {
            None => tried.push(format!("`{alt}`: no such state on cpu0")),
            Some((s, 0)) if no_zero => tried.push(format!(
                "`{alt}`: state{} {} has exit latency 0, skipped",
                s.index, s.name
            )),
            Some((s, l)) => {
                let allowed: Vec<&str> = facts
                    .idle
                    .iter()
                    .filter(|t| t.latency_us.is_some_and(|x| x <= l))
                    .map(|t| t.name.as_str())
                    .collect();
                let mut why = tried.join("; ");
                if !why.is_empty() {
                    why += "; ";
                }
                why += &format!(
                    "`{alt}` is state{} on this host's cpu0: {} ({}), exit latency {l} µs; \
                     tuned requests {l} µs through /dev/cpu_dma_latency, so the idle governor \
                     keeps to states that exit within it: {}",
                    s.index,
                    s.name,
                    facts
                        .idle_driver
                        .as_deref()
                        .unwrap_or("idle driver unknown"),
                    allowed.join(", ")
                );
                return Ok((l, why));
            }
        }
    }
    Err(format!(
        "no alternative resolves on this host ({}); cpu0's states: {}",
        tried.join("; "),
        if facts.idle.is_empty() {
            "none".into()
        } else {
            states()
        }
    ))
}

/// One `[cpu]` option: a knob, or the reason it is not imported.
pub fn option(o: &Opt, v: &str, cpus: &Value, facts: &Facts, out: &mut Out) -> Result<(), String> {
    let all = || map(&[("cpus", cpus.clone())]);
    let sysfs = |out: &mut Out, file: &str| {
        out.knob(
            o,
            "sysfs",
            Some(map(&[("path", s(&format!("/sys/devices/system/cpu/intel_pstate/{file}")))])),
            s(v),
            "tmpfiles",
            format!(
                "tuned writes intel_pstate/{file} only where intel_pstate runs; elsewhere this knob is not-applicable"
            ),
        )
    };
    match o.key.as_str() {
        "governor" => {
            let (g, note) = pick(v, &facts.governors, "scaling_available_governors");
            out.knob(o, "cpufreq-governor", Some(all()), s(&g), "tmpfiles", note);
        }
        "energy_performance_preference" => {
            let (e, note) = pick(v, &facts.epps, "energy_performance_available_preferences");
            out.knob(o, "cpufreq-epp", Some(all()), s(&e), "tmpfiles", note);
        }
        "energy_perf_bias" => {
            let alts: Vec<&str> = v.split('|').map(str::trim).collect();
            let Some(e) = alts.iter().find_map(|a| epb_name(a)) else {
                return Err(format!(
                    "none of {} is an energy_perf_bias value (intel_epb.rst)",
                    alts.join(", ")
                ));
            };
            out.knob(
                o,
                "epb",
                Some(all()),
                s(e),
                "tmpfiles",
                format!("tuned writes the first alternative the kernel takes; `{e}` is the first valid one"),
            );
        }
        "min_perf_pct" | "max_perf_pct" | "no_turbo" => sysfs(out, &o.key),
        "boost" => {
            // tuned's get_bool (tuned/utils/commands.py).
            let on = match super::sections::truthy(v) {
                Some(true) => "on",
                Some(false) => "off",
                None => {
                    return Err(format!(
                        "`{v}` is not a boolean tuned reads (1/0, true/false, yes/no, on/off)"
                    ));
                }
            };
            let target = (cpus.as_str() != Some("all")).then(|| map(&[("cpus", cpus.clone())]));
            out.knob(
                o,
                "turbo",
                target,
                s(on),
                "tmpfiles",
                "tuned (>= 2.24, plugin_cpu.py `_set_boost`) writes each CPU's policyN/boost where the kernel has it (6.11+) and, on intel_pstate, no_turbo (the inverse); the turbo kind writes the driver's switch the same way".into(),
            );
        }
        "pm_qos_resume_latency_us" => out.knob(
            o,
            "pm-qos-resume-latency",
            Some(all()),
            s(v),
            "tmpfiles",
            "tuned writes each CPU's power/pm_qos_resume_latency_us".into(),
        ),
        "force_latency" => {
            let (l, why) = force_latency(v, facts)?;
            out.knob(o, "pm-qos", None, Value::from(l), "hold", why);
        }
        "latency_low" | "latency_high" | "load_threshold" | "dynamic" => {
            return Err("dynamic tuning (tuned's monitor switches latency with the load) has no hostknob kind".into());
        }
        k => return Err(format!("[cpu] {k} has no hostknob kind")),
    }
    Ok(())
}
