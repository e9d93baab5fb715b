//! `[variables]`, `${var}` and `${f:func:args}` as tuned expands them
//! (tuned/profiles/variables.py, functions/functions.py and the
//! functions/function_*.py it loads), evaluated on this host's facts. A
//! function that runs a program (`exec`, `virt_check`) is refused: the value
//! that needs it is not imported, with the reason.

use std::collections::{BTreeSet, HashMap};

use super::facts::Facts;
use crate::root::Root;

/// Why a value could not be expanded.
#[derive(Clone, Debug, PartialEq)]
pub enum Fail {
    /// The value is not imported (a function an import does not run).
    Refused(String),
    /// tuned itself would refuse the profile (a failed assertion).
    Error(String),
}

type Val = Result<String, Fail>;

/// The longest value an expansion may reach: tuned's own values are a CPU
/// list or a command line (the kernel's is 2048 bytes on x86); ten levels of
/// ten copies of a variable would otherwise reach gigabytes.
pub const MAX_VALUE: usize = 64 << 10;

/// The highest CPU number a CPU list may name (the kernel's NR_CPUS cap);
/// a shared profile may name CPUs this host lacks, so the cap is not the host's.
pub use crate::cpulist::MAX_CPU;

fn too_long(what: &str, len: usize) -> Fail {
    Fail::Refused(format!(
        "{what} expands to more than {} KiB ({len} bytes so far): not imported",
        MAX_VALUE >> 10
    ))
}

pub struct Vars<'f> {
    facts: &'f Facts,
    /// name -> value; a refused value keeps its reason.
    vars: HashMap<String, Val>,
}

impl<'f> Vars<'f> {
    pub fn new(facts: &'f Facts) -> Vars<'f> {
        Vars::with_capacity(facts, 0)
    }

    pub fn with_capacity(facts: &'f Facts, n: usize) -> Vars<'f> {
        Vars {
            facts,
            vars: HashMap::with_capacity(n),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        self.vars.get(name)
    }

    /// variables.py `add_variable`: the value is expanded when defined.
    pub fn add(&mut self, name: &str, raw: &str) -> Result<(), Fail> {
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(Fail::Error(format!(
                "variable name {name:?} has characters tuned does not allow (letters, digits, `_`)"
            )));
        }
        let v = self.expand(raw);
        if let Err(Fail::Error(e)) = &v {
            return Err(Fail::Error(e.clone()));
        }
        self.vars.insert(name.to_string(), v);
        Ok(())
    }

    /// A variables file (`include=` in `[variables]`): `key = value` lines
    /// without a section header, read under the root. Missing: tuned logs an
    /// error and goes on, so the variables stay undefined.
    pub fn add_file(&mut self, root: &Root, path: &str) -> Result<Option<String>, Fail> {
        let Ok(text) = root.read_string(path) else {
            return Ok(Some(format!("variables file {path} not found")));
        };
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            let Some((k, v)) = t.split_once('=') else {
                return Err(Fail::Error(format!(
                    "{path}:{}: malformed line {t:?}: expected `name = value`",
                    i + 1
                )));
            };
            let v = strip_comment(v);
            self.add(k.trim(), v.trim()).map_err(|e| match e {
                Fail::Error(m) => Fail::Error(format!("{path}:{}: {m}", i + 1)),
                r => r,
            })?;
        }
        Ok(None)
    }

    /// variables.py `expand`: variables first (one pass; `\${x}` kept), then
    /// functions.
    pub fn expand(&self, value: &str) -> Val {
        let s = self.expand_static(value)?;
        expand_functions(&s, self.facts)
    }

    fn expand_static(&self, s: &str) -> Val {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            let escaped = rest[..i].ends_with('\\');
            let after = &rest[i + 2..];
            let name_len = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let closes = after[name_len..].starts_with('}') && name_len > 0;
            if closes && !escaped {
                let name = &after[..name_len];
                if let Some(v) = self.get(name) {
                    let v = v.as_ref().map_err(|e| match e {
                        Fail::Refused(r) => Fail::Refused(format!("uses ${{{name}}}: {r}")),
                        e => e.clone(),
                    })?;
                    if out.len() + i + v.len() > MAX_VALUE {
                        return Err(too_long("the value", out.len() + i + v.len()));
                    }
                    out.push_str(&rest[..i]);
                    out.push_str(v);
                    rest = &after[name_len + 1..];
                    continue;
                }
            }
            if closes && escaped {
                // `\${x}` -> `${x}` (the unescape step).
                out.push_str(&rest[..i - 1]);
            } else {
                out.push_str(&rest[..i]);
            }
            out.push_str("${");
            rest = after;
        }
        out.push_str(rest);
        Ok(out)
    }
}

fn strip_comment(v: &str) -> &str {
    let b = v.as_bytes();
    (1..b.len())
        .find(|&i| b[i] == b'#' && b[i - 1].is_ascii_whitespace())
        .map_or(v, |i| &v[..i])
}

/// functions.py `_process`: innermost `${f:...}` first, a `\` before `${`
/// leaves it alone.
fn expand_functions(s: &str, facts: &Facts) -> Val {
    let mut str: Vec<char> = s.chars().collect();
    let mut cnt = 0usize;
    let mut stack: Vec<(bool, usize)> = Vec::new();
    let mut esc = false;
    while cnt < str.len() {
        if str[cnt] == '}' {
            let Some((e, from)) = stack.pop() else {
                return Err(Fail::Refused(format!("unpaired `}}` in {s:?}")));
            };
            if !e {
                let inner: String = str[from..cnt].iter().collect();
                if let Some(r) = call(&inner, facts)? {
                    let r: Vec<char> = r.chars().collect();
                    if str.len() + r.len() > MAX_VALUE {
                        return Err(too_long("a ${f:...} call", str.len() + r.len()));
                    }
                    let old = cnt - from + 1;
                    str.splice(from..=cnt, r.iter().copied());
                    cnt = (cnt + r.len()).saturating_sub(old);
                }
            }
        } else if str[cnt] == '$' && str.get(cnt + 1) == Some(&'{') {
            stack.push((esc, cnt));
        }
        esc = str.get(cnt) == Some(&'\\');
        cnt += 1;
    }
    if !stack.is_empty() {
        return Err(Fail::Refused(format!("unpaired `${{` in {s:?}")));
    }
    Ok(str.iter().collect::<String>().replace("\\${f:", "${f:"))
}

/// One `${f:name:arg:...}` (without its closing brace); `None` leaves the
/// text as it is (not a function).
fn call(inner: &str, facts: &Facts) -> Result<Option<String>, Fail> {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev = '\0';
    for c in inner.chars() {
        if c == ':' && prev != '\\' {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
        prev = c;
    }
    parts.push(cur);
    if parts[0] != "${f" || parts.len() < 2 {
        return Ok(None);
    }
    let parts: Vec<String> = parts.iter().map(|p| p.replace("\\:", ":")).collect();
    let (name, args) = (parts[1].as_str(), &parts[2..]);
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let joined = args.join(",,");
    let refuse = |why: &str| Err(Fail::Refused(format!("${{f:{name}}} {why}")));
    let out = match name {
        "exec" => {
            return refuse(
                "runs a program when tuned loads the profile; an import never runs programs",
            );
        }
        "virt_check" => {
            return refuse(
                "runs virt-what; state the virtualization with a `when:` condition instead",
            );
        }
        "check_net_queue_count" => {
            if arg(0).chars().all(|c| c.is_ascii_digit()) && !arg(0).is_empty() {
                arg(0).to_string()
            } else {
                // tuned runs `nproc`: the CPUs it may run on, which isolcpus=
                // takes out of every task's default affinity (HK_TYPE_DOMAIN,
                // kernel/sched/isolation.c).
                let hk = facts.online.iter().filter(|c| !facts.isolated.contains(c));
                hk.count().to_string()
            }
        }
        "strip" => args.concat().trim().to_string(),
        "assertion" | "assertion_non_equal" => {
            let equal = arg(1) == arg(2);
            if (name == "assertion") != equal {
                let op = if equal { "==" } else { "!=" };
                return Err(Fail::Error(format!(
                    "assertion '{}' failed: '{}' {op} '{}' (tuned refuses to load the profile too)",
                    arg(0),
                    arg(1),
                    arg(2)
                )));
            }
            String::new()
        }
        // Lists come out packed (`1-4,161-164`) as calc_isolated_cores does
        // from tuned 2.25 (commit f64fac7): the same CPUs, and command lines
        // that fit the kernel's 2048 characters. Every list function packs,
        // so tuned's assertions comparing two of them still compare sets.
        "cpulist_unpack" | "cpulist_pack" => pack(&as_tuned(&joined)?),
        "cpulist2hex" => hex(&as_tuned(&joined)?),
        "cpulist2hex_invert" => hex(&invert(&as_tuned(&joined)?, facts)),
        "cpulist_invert" => pack(&invert(&as_tuned(&joined)?, facts)),
        "cpulist_online" => pack(&only(&as_tuned(&args.join(","))?, &facts.online)),
        "cpulist_present" => pack(&only(&as_tuned(&args.join(","))?, &facts.present)),
        "hex2cpulist" => pack(&unmask(arg(0))?),
        "cpulist2devs" => as_tuned(&joined)?
            .iter()
            .map(|c| format!("cpu{c}"))
            .collect::<Vec<_>>()
            .join(","),
        "calc_isolated_cores" => calc_isolated(arg(0), facts)?,
        "regex_search_ternary" => {
            if regex(arg(1))?.is_match(arg(0)) {
                arg(2).to_string()
            } else {
                arg(3).to_string()
            }
        }
        "cpuinfo_check" => cpuinfo_check(args, facts)?,
        "kb2s" => match arg(0).parse::<i64>() {
            Ok(n) => (n * 2).to_string(),
            Err(_) => return Ok(None),
        },
        "s2kb" => match arg(0).parse::<f64>() {
            Ok(n) => format!("{}", (n / 2.0).round_ties_even() as i64),
            Err(_) => return Ok(None),
        },
        _ => return refuse("is not a function tuned 2.20 has"),
    };
    Ok(Some(out))
}

fn regex(pattern: &str) -> Result<regex::Regex, Fail> {
    regex::Regex::new(&format!("(?m){pattern}")).map_err(|e| {
        Fail::Refused(format!(
            "regular expression {pattern:?} is not one hostknob reads: {e}"
        ))
    })
}

fn cpuinfo_check(args: &[String], facts: &Facts) -> Result<String, Fail> {
    let mut i = 0;
    while i + 1 < args.len() {
        if regex(&args[i])?.is_match(&facts.cpuinfo) {
            return Ok(args[i + 1].clone());
        }
        i += 2;
    }
    Ok(if args.len() % 2 == 1 {
        args[args.len() - 1].clone()
    } else {
        String::new()
    })
}

/// function_calc_isolated_cores.py: all CPUs but the first `reserve` of
/// each package, packed into ranges (tuned >= 2.25, commit f64fac7).
fn calc_isolated(reserve: &str, facts: &Facts) -> Result<String, Fail> {
    let reserve: usize = if reserve.is_empty() {
        1
    } else {
        reserve.parse().map_err(|_| {
            Fail::Refused(format!("calc_isolated_cores: {reserve:?} is not a count"))
        })?
    };
    let mut pkgs: Vec<&String> = facts.packages.iter().map(|(_, p)| p).collect();
    pkgs.sort();
    pkgs.dedup();
    let mut iso = Vec::new();
    for p in pkgs {
        let cpus: Vec<u32> = facts
            .packages
            .iter()
            .filter(|(_, q)| q == p)
            .map(|(c, _)| *c)
            .collect();
        iso.extend(cpus.into_iter().skip(reserve));
    }
    iso.sort_unstable();
    Ok(pack(&iso))
}

pub fn pack(cpus: &[u32]) -> String {
    crate::cpulist::CpuList::new(cpus.to_vec()).to_string()
}

/// commands.py `cpulist2hex`: 32-bit words, comma separated, zero padded.
pub fn hex(cpus: &[u32]) -> String {
    crate::cpulist::CpuList::new(cpus.to_vec()).to_mask()
}

fn invert(cpus: &[u32], facts: &Facts) -> Vec<u32> {
    facts
        .online
        .iter()
        .copied()
        .filter(|c| !cpus.contains(c))
        .collect()
}

fn only(cpus: &[u32], set: &[u32]) -> Vec<u32> {
    cpus.iter().copied().filter(|c| set.contains(c)).collect()
}

fn unmask(mask: &str) -> Result<Vec<u32>, Fail> {
    let m = mask.trim().trim_start_matches("0x").replace(',', "");
    let digits = m.trim_start_matches('0').len();
    if digits > (MAX_CPU as usize + 1) / 4 {
        return Err(Fail::Refused(format!(
            "CPU mask of {digits} hex digits names CPUs beyond {MAX_CPU}, the most a kernel has (NR_CPUS 8192)"
        )));
    }
    let m = m.trim_start_matches('0');
    let mut cpus = Vec::new();
    for (i, ch) in m.chars().rev().enumerate() {
        let d = ch
            .to_digit(16)
            .ok_or_else(|| Fail::Refused(format!("{mask:?} is not a hexadecimal CPU mask")))?;
        for b in 0..4 {
            if d & (1 << b) != 0 {
                cpus.push(i as u32 * 4 + b);
            }
        }
    }
    Ok(cpus)
}

/// tuned's `cpulist_unpack` (tuned/utils/commands.py, 2.20), behind every
/// CPU-list function: an item that is not a number (`${no_balance_cores}`
/// left unexpanded) gives the empty list, not an error.
fn as_tuned(list: &str) -> Result<Vec<u32>, Fail> {
    match unpack(list) {
        Err(Fail::Refused(r)) if r.contains("is not a CPU number") => Ok(Vec::new()),
        r => r,
    }
}

/// commands.py `cpulist_unpack`: `0-3,5`, `^2`/`!2` to leave out, `0x`
/// masks (their commas ended by `,,`), quotes stripped; strict, for the
/// values knobs take (an import refuses what is not a CPU list).
pub fn unpack(list: &str) -> Result<Vec<u32>, Fail> {
    let list = list.trim_matches(['\'', '"']);
    let bad = |v: &str| Fail::Refused(format!("{v:?} in CPU list {list:?} is not a CPU number"));
    let mut items: Vec<String> = Vec::new();
    let mut mask: Option<String> = None;
    for v in list.split(',') {
        if let Some(m) = mask.as_mut() {
            if v.is_empty() {
                items.push(mask.take().unwrap_or_default());
            } else {
                m.push_str(v);
            }
            continue;
        }
        if v.trim().starts_with("0x") {
            mask = Some(v.trim().to_string());
        } else {
            items.push(v.to_string());
        }
    }
    items.extend(mask);
    let (mut keep, mut drop) = (BTreeSet::new(), BTreeSet::new());
    let capped = |n: u32| {
        if n > MAX_CPU {
            Err(Fail::Refused(format!(
                "CPU {n} in CPU list {list:?} is beyond {MAX_CPU}, the most a kernel has (NR_CPUS 8192)"
            )))
        } else {
            Ok(n)
        }
    };
    for v in items.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
        if v.starts_with("0x") {
            keep.extend(unmask(v)?);
        } else if let Some(n) = v.strip_prefix(['^', '!']) {
            drop.insert(capped(n.trim().parse::<u32>().map_err(|_| bad(v))?)?);
        } else if let Some((a, b)) = v.split_once('-') {
            let (a, b): (u32, u32) = (
                a.trim().parse().map_err(|_| bad(v))?,
                b.trim().parse().map_err(|_| bad(v))?,
            );
            keep.extend(capped(a)?..=capped(b)?);
        } else {
            keep.insert(capped(v.parse::<u32>().map_err(|_| bad(v))?)?);
        }
    }
    Ok(keep.difference(&drop).copied().collect())
}
