//! `[scheduler]` options other than `isolated_cores` and its patterns
//! (tuned/plugins/plugin_scheduler.py, tuned 2.20): the `group.NAME=` rules
//! (a policy and priority, an affinity, for the processes a regular
//! expression chooses) and the scheduler tunables (`sched_*`,
//! `numa_balancing_*`), which tuned writes to `/proc/sys/kernel` where the
//! kernel has them there and to debugfs otherwise (`_get_sched_knob_path`).

use serde_yaml::Value;

use super::facts::Facts;
use super::ini::Opt;
use super::load::Unit;
use super::out::{Fate, Out, map, s, value};
use super::vars::{Vars, pack};
use crate::sched_tunables::{self as sched_tunable, Where};

/// The options this module takes from the per-option loop.
pub fn is_own(key: &str) -> bool {
    key.starts_with("group.") || tunable_name(key).is_some()
}

/// tuned's option -> the tunable's name in kernel/sched/debug.c
/// (`_get_sched_min_granularity_ns` and its siblings).
fn tunable_name(key: &str) -> Option<&str> {
    let name = key
        .strip_prefix("sched_")
        .or_else(|| key.strip_prefix("numa_balancing_").map(|_| key))?;
    sched_tunable::TUNED_OPTIONS.contains(&key).then_some(name)
}

/// One `sched_*`/`numa_balancing_*` line: what tuned writes on the target
/// host's kernel, as a `sched-tunable` knob, or why nothing.
pub fn tunable(o: &Opt, v: &str, facts: &Facts, out: &mut Out) -> Result<(), String> {
    let name = tunable_name(&o.key)
        .ok_or_else(|| format!("[scheduler] {}: not a tunable tuned knows", o.key))?;
    let name = sched_tunable::from_tuned(name);
    let release = crate::inventory::facts::release_numbers(&facts.release);
    let v = v.trim();
    match sched_tunable::locate(name, &release) {
        Where::Gone(why) => Err(format!(
            "tuned writes {name} where this host's kernel ({}) has no such file: {why}; tuned logs an error and nothing changes",
            show(&facts.release)
        )),
        Where::Unknown => Err(format!(
            "the target host's kernel release is not known (no /proc/sys/kernel/osrelease or /proc/version in the tree), \
             and where tuned writes {} depends on it (kernel/sched/debug.c moved it to debugfs in 5.13)",
            o.key
        )),
        Where::At(path) => {
            sched_tunable::check_value(name, v).map_err(|e| format!("`{v}`: {e}"))?;
            out.knob(
                o,
                "sched-tunable",
                Some(map(&[("name", s(name))])),
                s(v),
                "boot",
                format!(
                    "tuned writes {path} on this kernel ({}) at every start; debugfs is mounted for the run where it is not, as tuned expects it mounted",
                    show(&facts.release)
                ),
            );
            Ok(())
        }
    }
}

/// `runtime=` (plugin_scheduler.py): with 1, tuned's default, tuned watches
/// new processes (perf task events) and applies its rules to each as it
/// starts; 0 turns that off, which is what hostknob does anyway: it applies
/// thread rules when asked, and audit names the threads started since.
pub fn runtime(o: &Opt, v: &str, out: &mut Out) -> Result<(), String> {
    match super::sections::truthy(v) {
        Some(false) => {
            out.fate(o, super::out::Fate::Used("runtime=0: tuned applies its thread rules once and does not watch new processes, which is hostknob's own way (it applies thread rules when asked; audit names threads started since)".into()));
            Ok(())
        }
        Some(true) => Err("runtime=1: tuned watches new processes (perf task events) and applies its rules to each as it starts; hostknob has no hostknob form for a watcher: it applies thread rules when asked, and audit names threads started since".into()),
        None => Err(format!("`{v}` is not a boolean tuned reads")),
    }
}

fn show(release: &str) -> &str {
    if release.is_empty() {
        "release unknown"
    } else {
        release
    }
}

/// One `group.NAME=RULE_PRIO:POLICY:PRIO:AFFINITY:REGEX` rule, parsed.
struct Group {
    opt: Opt,
    rule_prio: String,
    policy: String,
    prio: String,
    affinity: String,
    regex: String,
}

/// tuned's policy letters (`SchedulerParams`'s `_dict_schedcfg2num`).
fn policy_word(letter: &str) -> Option<&'static str> {
    Some(match letter {
        "f" => "fifo",
        "r" => "rr",
        "o" => "other",
        "b" => "batch",
        "i" => "idle",
        _ => return None,
    })
}

/// tuned matches `[NAME]` for a kernel thread (`_get_cmdline`), the command
/// line otherwise: `^\[NAME` (optionally closed by `\]` or `\]$`) is the
/// kernel thread's name pattern `^NAME`; other regexes match command lines,
/// which hostknob does not choose threads by.
fn kthread_pattern(regex: &str) -> Option<String> {
    let rest = regex.strip_prefix(r"^\[")?;
    let rest = match rest
        .strip_suffix(r"\]$")
        .or_else(|| rest.strip_suffix(r"\]"))
    {
        Some(r) => format!("{r}$"),
        None => rest.to_string(),
    };
    let plain = rest
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-/.*+?$".contains(c));
    (plain && !rest.is_empty() && !rest.contains('[')).then(|| format!("^{rest}"))
}

/// The `group.` rules of a merged `[scheduler]` unit: a `thread-policy` knob
/// per rule (and a `thread-affinity` knob for a rule's CPU mask), each
/// excluding the threads of the rules tuned applies after it (the last
/// matching rule wins, `sched_all.update`).
pub fn groups(u: &Unit, vars: &Vars, out: &mut Out) -> anyhow::Result<()> {
    let mut rules: Vec<Group> = Vec::new();
    for o in u.options.iter().filter(|o| o.key.starts_with("group.")) {
        let v = match value(o, vars)? {
            Ok(v) => v,
            Err(r) => {
                out.fate(o, Fate::Not(r));
                continue;
            }
        };
        if v.trim().is_empty() {
            out.fate(
                o,
                Fate::Used(format!("empty: disables an inherited rule {}", o.key)),
            );
            continue;
        }
        let parts: Vec<&str> = v.splitn(5, ':').collect();
        let [rule_prio, policy, prio, affinity, regex] = parts[..] else {
            out.fate(
                o,
                Fate::Not(format!(
                    "`{v}` is not RULE_PRIO:POLICY:PRIO:AFFINITY:REGEX; tuned ignores the rule"
                )),
            );
            continue;
        };
        rules.push(Group {
            opt: o.clone(),
            rule_prio: rule_prio.to_string(),
            policy: policy.to_string(),
            prio: prio.to_string(),
            affinity: affinity.to_string(),
            regex: regex.to_string(),
        });
    }
    // tuned sorts the rules by RULE_PRIO as text, stably (`sorted(..., key=...)`).
    rules.sort_by(|a, b| a.rule_prio.cmp(&b.rule_prio));
    let patterns: Vec<Option<String>> = rules.iter().map(|g| kthread_pattern(&g.regex)).collect();
    for (i, g) in rules.iter().enumerate() {
        let Some(include) = &patterns[i] else {
            out.fate(
                &g.opt,
                Fate::Not(format!(
                    "`{}`: tuned searches the regular expression in each process's command line (`ps -eo cmd`, \
                     `[NAME]` for a kernel thread); hostknob chooses threads by name: only `^\\[NAME` rules \
                     (kernel threads by name) import; write a thread-policy knob with target.include by hand",
                    g.regex
                )),
            );
            continue;
        };
        let later: Vec<Value> = patterns[i + 1..].iter().flatten().map(|p| s(p)).collect();
        let mut target = vec![("include", Value::Sequence(vec![s(include)]))];
        if !later.is_empty() {
            target.push(("exclude", Value::Sequence(later)));
        }
        let target = map(&target);
        let (mut made, mut refused) = (Vec::new(), Vec::new());
        match policy_knob(g) {
            Ok(Some(set)) => {
                out.knob(
                    &g.opt,
                    "thread-policy",
                    Some(target.clone()),
                    set,
                    "boot",
                    format!(
                        "tuned's scheduler plugin sets the policy {}:{} of every process whose command line matches {:?} \
                         (kernel threads as [NAME]); here the threads named {include:?} (a user process of that \
                         name would be chosen too), those running at apply; tuned also sets matching processes \
                         started later (perf events), which audit names",
                        g.policy, g.prio, g.regex
                    ),
                );
                made.push(format!(
                    "knob `{}` (policy)",
                    out.knobs.last().expect("just pushed").id
                ));
            }
            Ok(None) => {}
            Err(why) => refused.push(format!("policy not imported: {why}")),
        }
        match affinity_knob(&g.affinity) {
            Ok(Some(cpus)) => {
                out.knob(
                    &g.opt,
                    "thread-affinity",
                    Some(target),
                    s(&cpus),
                    "runtime",
                    format!(
                        "tuned's scheduler plugin sets the CPUs of the same threads to {cpus} (mask {}); \
                         hostknob's thread-affinity keeps the CPUs a thread already has among them and \
                         leaves per-CPU kernel threads where the kernel pins them",
                        g.affinity
                    ),
                );
                made.push(format!(
                    "knob `{}` (affinity)",
                    out.knobs.last().expect("just pushed").id
                ));
            }
            Ok(None) => {}
            Err(why) => refused.push(format!("affinity not imported: {why}")),
        }
        // One knob alone keeps the fate `out.knob` gave the line.
        if made.len() + refused.len() > 1 || made.is_empty() {
            let all = made
                .iter()
                .chain(&refused)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            let fate = match made.is_empty() {
                true if all.is_empty() => {
                    Fate::Used("`*` policy and `*` affinity: tuned changes nothing".into())
                }
                true => Fate::Not(all),
                false => Fate::Used(all),
            };
            out.fate(&g.opt, fate);
        }
    }
    Ok(())
}

/// The `set:` of the rule's thread-policy knob; `None` for `*` with nothing to set.
fn policy_knob(g: &Group) -> Result<Option<Value>, String> {
    let prio: i64 = g.prio.trim().parse().map_err(|_| {
        format!(
            "priority `{}` is not a number; tuned ignores the policy and priority",
            g.prio
        )
    })?;
    if g.policy == "*" {
        return Err(format!(
            "`*` keeps each thread's policy and sets priority {prio}, which the kernel takes only for a thread \
             already at fifo or rr; hostknob's thread-policy sets one policy: write the knob by hand"
        ));
    }
    let word = policy_word(&g.policy).ok_or_else(|| {
        format!(
            "`{}` is not a policy letter (f, r, o, b, i, *); tuned ignores the policy and priority",
            g.policy
        )
    })?;
    match (word, prio) {
        ("fifo" | "rr", 1..=99) => Ok(Some(map(&[
            ("policy", s(word)),
            ("priority", Value::from(prio)),
        ]))),
        ("fifo" | "rr", p) => Err(format!(
            "priority {p} is outside 1-99: the kernel refuses it (EINVAL) and tuned logs an error"
        )),
        (_, 0) => Ok(Some(map(&[("policy", s(word))]))),
        (_, p) => Err(format!(
            "{word} takes priority 0 only ({p} given): the kernel refuses it (EINVAL) and tuned logs an error"
        )),
    }
}

/// The rule's CPU mask as a CPU list; `None` for `*`.
fn affinity_knob(mask: &str) -> Result<Option<String>, String> {
    let mask = mask.trim();
    if mask == "*" {
        return Ok(None);
    }
    if mask.starts_with("cgroup.") {
        return Err(format!(
            "`{mask}` moves the threads into a cgroup tuned makes; hostknob makes no cgroups"
        ));
    }
    let hex = mask.trim_start_matches("0x").trim_start_matches("0X");
    match crate::cpulist::CpuList::parse_mask(hex) {
        Ok(l) if !l.is_empty() => Ok(Some(pack(l.as_slice()))),
        _ => Err(format!(
            "`{mask}` is not a hexadecimal CPU mask; tuned ignores it"
        )),
    }
}
