//! tuned's plugins other than `[cpu]` (tuned/plugins/plugin_*.py, tuned 2.20;
//! `dirty_bytes` with `%` as plugin_vm.py of tuned >= 2.21 reads it).

use serde_yaml::Value;

use super::disk::bound;
use super::facts::Facts;
use super::ini::Opt;
use super::load::Unit;
use super::out::{Fate, Out, map, s, value};
use super::vars::{Vars, pack, unpack};
use crate::cpulist::CpuList;

/// Plugins with no hostknob kind, and why.
fn unsupported(ty: &str) -> String {
    match ty {
        "script" => "runs a shell script; hostknob never runs scripts from a manifest".into(),
        "audio" | "video" | "usb" | "eeepc_she" | "acpi" => format!("the [{ty}] plugin (power saving of that device class) has no hostknob kind"),
        "selinux" => "SELinux tuning has no hostknob kind".into(),
        "modules" => "module loading and options from tuned has no hostknob kind (module-param covers loaded modules' parameters only)".into(),
        "mounts" => "mount options (barriers) have no hostknob kind".into(),
        "rtentsk" => "holds a timestamping socket open to keep static keys switched; no hostknob kind".into(),
        "service" => "starting and stopping services is not a knob".into(),
        "irq" => "per-IRQ affinity by number; hostknob's irq-affinity chooses IRQs by name".into(),
        t => format!("tuned plugin [{t}] has no hostknob kind"),
    }
}

pub fn option(ty: &str, o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    match ty {
        "sysctl" => {
            let key = o.key.clone();
            let target = Some(map(&[("name", s(&key))]));
            match bound(v)? {
                Some(b) => out.knob(o, "sysctl", target, b, "boot", format!("tuned writes `{v}` only when that moves the current value past it (plugin_sysctl.py, _process_assignment_modifiers): a bound, kept at every boot by a boot unit (a sysctl.d line would write it even where the host boots beyond it)")),
                None => out.knob(o, "sysctl", target, s(v), "sysctl.d", "tuned writes /proc/sys at start".into()),
            }
        }
        "vm" => vm(o, v, out)?,
        "sysfs" => sysfs(o, v, out)?,
        "irqbalance" if o.key == "banned_cpus" => {
            let l = cpus(v)?;
            out.knob(o, "irqbalance", None, s(&l), "runtime", "tuned >= 2.24 (commit 7825b11) writes IRQBALANCE_BANNED_CPULIST into irqbalance's environment file and restarts it; tuned 2.20-2.23 (Debian 12 ships 2.20) writes the hex mask IRQBALANCE_BANNED_CPUS instead, which irqbalance reads first (cputree.c): remove a line tuned left there, or this knob's list is ignored".into());
        }
        "systemd" if o.key == "cpu_affinity" => {
            let l = cpus(v)?;
            out.knob(o, "systemd-cpu-affinity", None, s(&l), "systemd-dropin", "tuned 2.20-2.27 writes CPUAffinity= into /etc/systemd/system.conf, tuned >= 2.28 into /etc/systemd/system.conf.d/00-tuned.conf (commit a8a9d38); this knob's drop-in sorts after both, so it wins; takes effect at the next boot".into());
        }
        "scheduler" => {
            return Err(format!(
                "[scheduler] {}: cgroups and the plugin's own runtime settings are not imported (no hostknob kind); thread moves come from isolated_cores, policies from group.*, tunables from sched_*",
                o.key
            ));
        }
        "net" => net(o, v, out)?,
        "irqbalance" | "systemd" => return Err(format!("[{ty}] {} has no hostknob kind", o.key)),
        t => return Err(unsupported(t)),
    }
    Ok(())
}

/// `[net]` (tuned/plugins/plugin_net.py): `channels`, `coalesce`, `features`
/// and `ring` as ethtool -L/-C/-K/-G take them, on every physical NIC (the
/// plugin's devices: those not under /virtual/).
fn net(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    use crate::ethtool::{CHANNEL_FIELDS, COALESCE_FIELDS, RING_FIELDS};
    let (kind, names): (&'static str, &[&str]) = match o.key.as_str() {
        "channels" => ("nic-channels", &CHANNEL_FIELDS),
        "coalesce" => ("nic-coalesce", &COALESCE_FIELDS),
        "ring" => ("nic-ring", &RING_FIELDS),
        "features" => ("nic-feature", &[]),
        "nf_conntrack_hashsize" => return super::devices::conntrack(o, v, out),
        k => return Err(format!("[net] {k} has no hostknob kind")),
    };
    // _parse_config_parameters: `:`, `;`, `,` and blanks all separate.
    let words: Vec<&str> = v
        .split([':', ';', ',', ' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return Err(format!(
            "`{v}` is not NAME VALUE pairs (tuned refuses it too)"
        ));
    }
    let mut set = Vec::new();
    for pair in words.chunks(2) {
        // tuned's coalescing names `rx-frames-low` are ethtool's `rx-frame-low`.
        let name = pair[0]
            .replace("-frames-low", "-frame-low")
            .replace("-frames-high", "-frame-high");
        if !names.is_empty() && !names.contains(&name.as_str()) {
            return Err(format!(
                "[net] {}: {} is not one of {}",
                o.key,
                pair[0],
                names.join(", ")
            ));
        }
        set.push((name, s(pair[1])));
    }
    let set: Vec<(&str, Value)> = set.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let target = map(&[("physical", Value::Bool(true))]);
    let note = match kind {
        "nic-channels" => {
            "tuned's [net] sets it with ethtool -L on every non-virtual NIC; where the driver has no combined channels it writes rx and tx instead (plugin_net.py `_replace_channels_parameters`): this knob is refused there at plan time"
        }
        _ => "tuned's [net] sets it with ethtool on every non-virtual NIC",
    };
    out.knob(o, kind, Some(target), map(&set), "runtime", note.into());
    Ok(())
}

fn cpus(v: &str) -> Result<String, String> {
    let l = unpack(v).map_err(|e| match e {
        super::vars::Fail::Refused(r) | super::vars::Fail::Error(r) => r,
    })?;
    if l.is_empty() {
        return Err(format!("`{v}` is an empty CPU list"));
    }
    Ok(pack(&l))
}

fn vm(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    let sysctl = |out: &mut Out, name: &str, val: &str, note: String| {
        out.knob(
            o,
            "sysctl",
            Some(map(&[("name", s(name))])),
            s(val),
            "sysctl.d",
            note,
        )
    };
    match o.key.as_str() {
        "transparent_hugepages" | "transparent_hugepage" => out.knob(
            o,
            "thp",
            Some(map(&[("setting", s("enabled"))])),
            s(v),
            "tmpfiles",
            "tuned writes /sys/kernel/mm/transparent_hugepage/enabled (and leaves it when transparent_hugepage= is on the kernel command line)".into(),
        ),
        "transparent_hugepage.defrag" => out.knob(
            o,
            "thp",
            Some(map(&[("setting", s("defrag"))])),
            s(v),
            "tmpfiles",
            "tuned writes /sys/kernel/mm/transparent_hugepage/defrag".into(),
        ),
        k @ ("dirty_bytes" | "dirty_background_bytes") => {
            let ratio = if k == "dirty_bytes" { "vm.dirty_ratio" } else { "vm.dirty_background_ratio" };
            match v.strip_suffix('%') {
                Some(p) if p.trim().parse::<u8>().is_ok_and(|p| p <= 100) => sysctl(
                    out,
                    ratio,
                    p.trim(),
                    format!("a percentage: tuned writes it to {ratio} (plugin_vm.py), not vm.{k}"),
                ),
                Some(_) => return Err(format!("`{v}` is not a percentage 0-100")),
                None => sysctl(out, &format!("vm.{k}"), v, format!("tuned writes vm.{k}")),
            }
        }
        k @ ("dirty_ratio" | "dirty_background_ratio") => sysctl(out, &format!("vm.{k}"), v, format!("tuned writes vm.{k}")),
        k => return Err(format!("[vm] {k} has no hostknob kind")),
    }
    Ok(())
}

/// The unbound workqueues' masks as the workqueue kind (a CPU list); other
/// files as `sysfs`.
fn sysfs(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    let path = o.key.as_str();
    if !path.starts_with("/sys/") {
        return Err(format!("{path} is not under /sys"));
    }
    let wq = match path {
        "/sys/devices/virtual/workqueue/cpumask" => Some(None),
        "/sys/devices/virtual/workqueue/*/cpumask" => Some(Some("*")),
        _ => path
            .strip_prefix("/sys/bus/workqueue/devices/")
            .or_else(|| path.strip_prefix("/sys/devices/virtual/workqueue/"))
            .and_then(|r| r.strip_suffix("/cpumask"))
            .filter(|n| !n.contains('/'))
            .map(Some),
    };
    let Some(wq) = wq else {
        out.knob(
            o,
            "sysfs",
            Some(map(&[("path", s(path))])),
            s(v),
            "tmpfiles",
            "tuned writes the file (globs expanded)".into(),
        );
        return Ok(());
    };
    let list = CpuList::parse_mask(v).map_err(|e| format!("`{v}`: {e}"))?;
    if list.is_empty() {
        return Err(format!("`{v}` is an empty CPU mask"));
    }
    let set = s(&list.to_string());
    // `*` covers a single workqueue named with the same mask: one knob, both lines.
    if let Some(k) = out.knobs.iter_mut().find(|k| {
        k.kind == "workqueue-cpumask" && k.set == set && k.target.is_some() && wq.is_some()
    }) {
        let id = k.id.clone();
        k.lines.push(o.clone());
        let Some(Value::Mapping(m)) = &mut k.target else {
            unreachable!()
        };
        let key = Value::from("workqueues");
        if let Some(Value::Sequence(ws)) = m.get_mut(&key) {
            let w = s(wq.unwrap_or_default());
            if !ws.contains(&w) && !ws.contains(&s("*")) {
                ws.push(w);
            }
            if ws.contains(&s("*")) {
                ws.retain(|x| *x == s("*"));
            }
        }
        out.fate(o, Fate::Knob(id));
        return Ok(());
    }
    let target = wq.map(|w| map(&[("workqueues", Value::Sequence(vec![s(w)]))]));
    out.knob(
        o,
        "workqueue-cpumask",
        target,
        set,
        "boot",
        format!("tuned writes the mask {v}, CPUs {list}"),
    );
    Ok(())
}

/// plugin_bootloader.py `_get_effective_options`: every `cmdline*` option
/// in order, `-` removing words added before; one kernel-cmdline knob.
pub fn bootloader(u: &Unit, vars: &Vars, out: &mut Out) -> anyhow::Result<()> {
    let mut words: Vec<String> = Vec::new();
    let mut lines: Vec<Opt> = Vec::new();
    for o in &u.options {
        if !o.key.starts_with("cmdline") {
            let why = match o.key.as_str() {
                "priority" => "plugin order in tuned; hostknob orders writes by the kernel's rules"
                    .to_string(),
                k if k.starts_with("initrd") => {
                    format!("{k}: tuned builds an extra initrd; hostknob does not")
                }
                k => format!("[bootloader] {k} has no hostknob kind"),
            };
            out.fate(o, Fate::Not(why));
            continue;
        }
        let v = match value(o, vars)? {
            Ok(v) => v,
            Err(r) => {
                out.fate(o, Fate::Not(r));
                continue;
            }
        };
        match v.chars().next() {
            Some('-') => {
                // A set: many words removed from many stay linear.
                let gone: std::collections::HashSet<&str> = v[1..].split_whitespace().collect();
                words.retain(|w| !gone.contains(w.as_str()));
            }
            Some('+') => words.extend(v[1..].split_whitespace().map(String::from)),
            Some('\\') if matches!(v.chars().nth(1), Some('\\' | '+' | '-')) => {
                words.extend(v[1..].split_whitespace().map(String::from))
            }
            _ => words.extend(v.split_whitespace().map(String::from)),
        }
        lines.push(o.clone());
    }
    if lines.is_empty() {
        return Ok(());
    }
    // One word per key, the last (the kernel reads the last of most keys).
    let key = |w: &str| w.split('=').next().unwrap_or(w).replace('_', "-");
    // The last word of each key, in the order of the last words (an index
    // per key, so many words stay linear).
    let mut last: Vec<Option<String>> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for w in words {
        if let Some(i) = at.insert(key(&w), last.len()) {
            last[i] = None;
        }
        last.push(Some(packed(&w)));
    }
    let add: Vec<String> = last.into_iter().flatten().collect();
    let first = lines[0].clone();
    if add.is_empty() {
        // `cmdline_X=-word` removing every word added before: tuned adds
        // nothing, and a knob adding nothing is one the loader refuses.
        for o in &lines {
            out.fate(
                o,
                Fate::Used(
                    "merged as tuned does (`-` removes words added before): no word is left, so no kernel-cmdline knob".into(),
                ),
            );
        }
        return Ok(());
    }
    out.knob(
        &first,
        "kernel-cmdline",
        None,
        map(&[("add", Value::Sequence(add.iter().map(|w| s(w)).collect()))]),
        "cmdline",
        "tuned joins every cmdline* option of [bootloader] into its tuned_params; here the same words".into(),
    );
    let k = out.knobs.last_mut().expect("just pushed");
    k.id = super::out::short_id(format!(
        "tuned-{}-bootloader-cmdline",
        super::out::slug(&out.profile)
    ));
    let id = k.id.clone();
    k.lines = lines.clone();
    for o in &lines {
        out.fate(o, Fate::Knob(id.clone()));
    }
    Ok(())
}

/// Parameters taking a CPU list (kernel-parameters.txt, "cpu lists"),
/// written packed (`1-4,161-164`): the same CPUs in fewer characters, as the
/// kernel's command line holds at most COMMAND_LINE_SIZE (2048 on x86).
const CPU_LIST_PARAMS: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "kthread_cpus",
    "systemd.cpu_affinity",
];

fn packed(word: &str) -> String {
    let Some((k, v)) = word.split_once('=') else {
        return word.to_string();
    };
    if !CPU_LIST_PARAMS.contains(&k) {
        return word.to_string();
    }
    // isolcpus= may lead with flags (`managed_irq,domain,1-4`).
    let (flags, list): (Vec<&str>, Vec<&str>) = v
        .split(',')
        .partition(|p| p.chars().next().is_some_and(|c| c.is_ascii_alphabetic()));
    match unpack(&list.join(",")) {
        Ok(cpus) if !cpus.is_empty() && !list.iter().any(|p| p.starts_with("0x")) => {
            let mut parts: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            parts.push(pack(&cpus));
            format!("{k}={}", parts.join(","))
        }
        _ => word.to_string(),
    }
}

/// `[scheduler]` `isolated_cores` with its `ps_blacklist` and
/// `ps_whitelist` (plugin_scheduler.py): every IRQ and
/// `default_smp_affinity` off the isolated CPUs (irq-affinity), and every
/// movable thread the patterns choose (thread-affinity).
pub fn isolation(u: &Unit, vars: &Vars, facts: &Facts, out: &mut Out) -> anyhow::Result<()> {
    let get = |k: &str| u.options.iter().rev().find(|o| o.key == k).cloned();
    // cgroup_ps_blacklist leaves out the processes (and threads) of matching
    // cgroups from these moves only (`_set_all_obj_affinity`), not from group.* rules.
    let patterns = [
        ("ps_whitelist", "include"),
        ("ps_blacklist", "exclude"),
        ("cgroup_ps_blacklist", "exclude-cgroup"),
    ];
    // Without the isolated CPUs tuned moves no thread: the patterns go too.
    let refuse_patterns = |out: &mut Out, why: &dyn Fn(&str) -> String| {
        let more = ["irq_process", "default_irq_smp_affinity", "kthread_process"];
        for k in patterns.iter().map(|p| p.0).chain(more) {
            if let Some(o) = get(k) {
                out.fate(&o, Fate::Not(why(k)));
            }
        }
    };
    let not_with = |r: &str| {
        let r = r.to_string();
        move |k: &str| format!("isolated_cores is not imported ({r}), so neither is {k}")
    };
    let Some(iso) = get("isolated_cores") else {
        refuse_patterns(out, &|k| {
            let only = match k {
                "cgroup_ps_blacklist" => {
                    " (the cgroups it names are left out of isolated_cores' moves only, not out of group.* rules: here it affects nothing)"
                }
                _ => "",
            };
            format!("{k} without isolated_cores: tuned moves no IRQs and no threads{only}")
        });
        return Ok(());
    };
    let v = match value(&iso, vars)? {
        Ok(v) => v,
        Err(r) => {
            out.fate(&iso, Fate::Not(r.clone()));
            refuse_patterns(out, &not_with(&r));
            return Ok(());
        }
    };
    let rest = match housekeeping(&v, facts) {
        Ok(r) => r,
        Err(why) => {
            out.fate(&iso, Fate::Not(why.clone()));
            refuse_patterns(out, &not_with(&why));
            return Ok(());
        }
    };
    let (iso_list, rest) = (pack(&rest.0), pack(&rest.1));
    let irq = irqs(&get, vars, &iso, &iso_list, &rest, out)?;
    let irq = irq.as_str();
    // The threads: refused whole when tuned would choose threads hostknob
    // cannot tell apart, never imported wider than tuned moves them.
    let mut target: Vec<(&str, Value)> = Vec::new();
    let mut lines = vec![iso.clone()];
    let mut refused: Option<String> = None;
    // tuned >= 2.25.1 (commit e16400e): kthread_process=false leaves every
    // kernel thread alone; thread-affinity cannot tell them apart by name.
    if let Some(o) = get("kthread_process") {
        match value(&o, vars)?.map(|v| truthy(&v)) {
            Ok(Some(false)) => {
                refused.get_or_insert(
                    "kthread_process=false leaves kernel threads where they are, and hostknob's thread-affinity chooses threads by name only".into(),
                );
                lines.push(o);
            }
            Ok(Some(true)) => out.fate(
                &o,
                Fate::Used("kernel threads are moved too (tuned's default)".into()),
            ),
            Ok(None) => out.fate(
                &o,
                Fate::Not(format!("`{}` is not a boolean tuned reads", o.value)),
            ),
            Err(r) => out.fate(&o, Fate::Not(r)),
        }
    }
    let mut moves_none = None;
    for (k, field) in patterns {
        let Some(o) = get(k) else { continue };
        let parts = match value(&o, vars)? {
            Ok(v) => split_patterns(&v),
            Err(r) => Err(r),
        };
        match parts {
            Err(why) => {
                refused.get_or_insert(format!("{k}: {why}"));
                out.fate(&o, Fate::Not(why));
            }
            // tuned joins the parts as `(a)|()|(b)`: an empty one matches every name.
            Ok(l) if l.iter().any(String::is_empty) && field != "include" => {
                moves_none = Some(o);
            }
            Ok(l) if l.iter().any(String::is_empty) => {
                out.fate(
                    &o,
                    Fate::Used(format!(
                        "{k} has an empty pattern, which matches every name: no target.include"
                    )),
                );
            }
            Ok(l) => {
                target.push((field, Value::Sequence(l.iter().map(|p| s(p)).collect())));
                lines.push(o);
            }
        }
    }
    if let Some(o) = moves_none {
        out.fate(&o, Fate::Used("an empty pattern matches every name: tuned moves no thread, so no thread-affinity knob".into()));
        iso_fate(out, &iso, irq, None);
        return Ok(());
    }
    if let Some(why) = refused {
        for o in &lines[1..] {
            out.fate(o, Fate::Not(format!("thread moves not imported: {why}")));
        }
        iso_fate(
            out,
            &iso,
            irq,
            Some(&format!("its thread moves are not imported: {why}")),
        );
        return Ok(());
    }
    out.knob(
        &iso,
        "thread-affinity",
        (!target.is_empty()).then(|| map(&target)),
        s(&rest),
        "runtime",
        format!(
            "tuned's scheduler plugin narrows the allowed CPUs of every movable thread its patterns choose (by process name, then thread name) to the non-isolated CPUs {rest} (isolated: {iso_list}); runtime only, as in tuned"
        ),
    );
    let k = out.knobs.last_mut().expect("just pushed");
    k.id = super::out::short_id(format!(
        "tuned-{}-scheduler-threads",
        super::out::slug(&out.profile)
    ));
    k.lines = lines.clone();
    let threads = k.id.clone();
    iso_fate(out, &iso, irq, Some(&format!("knob `{threads}` (threads)")));
    for o in &lines[1..] {
        out.fate(o, Fate::Knob(threads.clone()));
    }
    Ok(())
}

/// tuned's get_bool; `None` for a word it does not read.
pub(super) fn truthy(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "on" => Some(true),
        "0" | "false" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}

/// What `isolated_cores` became: `irq` is the IRQ knob's id, empty when
/// tuned moves no IRQ (irq_process=false).
fn iso_fate(out: &mut Out, iso: &Opt, irq: &str, threads: Option<&str>) {
    let irqs = match irq.is_empty() {
        true => "no IRQ knob (irq_process=false)".to_string(),
        false => format!("knob `{irq}` (IRQs)"),
    };
    let f = match threads {
        None if !irq.is_empty() => Fate::Knob(irq.to_string()),
        None => Fate::Used(format!("{irqs}; tuned moves no thread")),
        Some(t) => Fate::Used(format!("{irqs}; {t}")),
    };
    out.fate(iso, f);
}

/// The IRQ side of `isolated_cores` (plugin_scheduler.py
/// `_set_all_irq_affinity`): every IRQ and, unless
/// `default_irq_smp_affinity=ignore`, default_smp_affinity (a given list as
/// given); nothing with `irq_process=false` (tuned >= 2.22, commit
/// 11d1f1c). Returns the IRQ knob's id, empty when there is none.
fn irqs(
    get: &dyn Fn(&str) -> Option<Opt>,
    vars: &Vars,
    iso: &Opt,
    iso_list: &str,
    rest: &str,
    out: &mut Out,
) -> anyhow::Result<String> {
    let dia = get("default_irq_smp_affinity");
    if let Some(o) = get("irq_process") {
        match value(&o, vars)?.map(|v| truthy(&v)) {
            Ok(Some(false)) => {
                out.fate(
                    &o,
                    Fate::Used(
                        "tuned moves no IRQ and leaves default_smp_affinity: no irq-affinity knob"
                            .into(),
                    ),
                );
                if let Some(d) = &dia {
                    out.fate(
                        d,
                        Fate::Used(
                            "irq_process=false: tuned leaves default_smp_affinity too".into(),
                        ),
                    );
                }
                return Ok(String::new());
            }
            Ok(Some(true)) => out.fate(&o, Fate::Used("IRQs are moved (tuned's default)".into())),
            Ok(None) => out.fate(
                &o,
                Fate::Not(format!(
                    "`{}` is not a boolean tuned reads; IRQs are moved as by default",
                    o.value
                )),
            ),
            Err(r) => out.fate(&o, Fate::Not(r)),
        }
    }
    // `calc` (the default), `ignore`, or a CPU list written as given.
    let mut default = Ok(true);
    if let Some(d) = &dia {
        default = match value(d, vars)? {
            Ok(v) if v.trim() == "calc" => Ok(true),
            Ok(v) if v.trim() == "ignore" => Ok(false),
            Ok(v) => match unpack(&v) {
                Ok(l) if !l.is_empty() => Err(pack(&l)),
                _ => {
                    out.fate(
                        d,
                        Fate::Not(format!("`{v}` is neither calc, ignore nor a CPU list")),
                    );
                    Ok(true)
                }
            },
            Err(r) => {
                out.fate(d, Fate::Not(r));
                Ok(true)
            }
        };
    }
    let mut target = vec![("all", Value::Bool(true))];
    if default == Ok(true) {
        target.push(("default", Value::Bool(true)));
    }
    out.knob(
        iso,
        "irq-affinity",
        Some(map(&target)),
        s(rest),
        "boot",
        format!(
            "tuned's scheduler plugin moves every IRQ{} off the isolated CPUs {iso_list}; \
             the non-isolated online CPUs here are {rest}",
            if default == Ok(true) {
                " and default_smp_affinity"
            } else {
                ""
            }
        ),
    );
    let irq = out.knobs.last().expect("just pushed").id.clone();
    match (&dia, default) {
        (Some(d), Ok(false)) => out.fate(d, Fate::Used(format!("default_smp_affinity left alone: knob `{irq}` has no `default`"))),
        (Some(d), Ok(true)) => out.fate(d, Fate::Used(format!("default_smp_affinity with the IRQs: knob `{irq}`"))),
        (Some(d), Err(list)) => out.knob(
            d,
            "irq-affinity",
            Some(map(&[("default", Value::Bool(true))])),
            s(&list),
            "boot",
            format!("tuned writes default_smp_affinity as given, CPUs {list}, whatever the isolated CPUs"),
        ),
        (None, _) => {}
    }
    Ok(irq)
}

/// (isolated, the other online CPUs), or why not.
fn housekeeping(v: &str, facts: &Facts) -> Result<(Vec<u32>, Vec<u32>), String> {
    let iso = unpack(v).map_err(|e| match e {
        super::vars::Fail::Refused(r) | super::vars::Fail::Error(r) => r,
    })?;
    let rest: Vec<u32> = facts
        .online
        .iter()
        .copied()
        .filter(|c| !iso.contains(c))
        .collect();
    if rest.is_empty() {
        return Err(format!(
            "isolated_cores={v} leaves no online CPU of this host for IRQs and threads"
        ));
    }
    Ok((iso, rest))
}

/// tuned splits the option at `;` not preceded by `\` and searches each
/// part in the thread's name (Python `re`); each must be a pattern the
/// `regex` crate reads the same way (no look-around, no back-references).
fn split_patterns(v: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&';') => {
                cur.push(';');
                chars.next();
            }
            ';' => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    parts.push(cur);
    for p in parts.iter().filter(|p| !p.is_empty()) {
        crate::task::name_pattern(p).map_err(|why| {
            format!("pattern {p:?} is not one hostknob reads the way Python's re does: {why}")
        })?;
    }
    Ok(parts)
}
