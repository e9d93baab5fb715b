//! Finding a profile and its `include=` chain, merged in tuned's order
//! (tuned/profiles/locator.py, loader.py, merger.py, unit.py; tuned 2.20).

use anyhow::{Result, bail};

use super::ini::{self, Opt, Section};
use crate::root::Root;

/// Where profiles are looked up, in tuned's `LOAD_DIRECTORIES` order (later
/// wins: /etc overrides /usr/lib); both layouts, `NAME/tuned.conf` (tuned
/// 2.x) and `profiles/NAME/tuned.conf` (tuned >= 2.23).
pub const LOAD_DIRECTORIES: &[&str] = &[
    "/usr/lib/tuned",
    "/usr/lib/tuned/profiles",
    "/etc/tuned",
    "/etc/tuned/profiles",
];

/// Where profile files are read from: under `--root`, or `--from DIR` alone.
pub struct Source<'r> {
    pub root: &'r Root,
    /// `--from DIR`, opened as a root of its own; its files are named
    /// `DIR/NAME/tuned.conf` in messages.
    pub from: Option<(Root, String)>,
}

impl Source<'_> {
    /// Directories searched, highest priority first, as (seam, logical
    /// directory, display prefix).
    fn dirs(&self) -> Vec<(&Root, String, String)> {
        match &self.from {
            Some((r, shown)) => vec![(r, "/".to_string(), shown.clone())],
            None => LOAD_DIRECTORIES
                .iter()
                .rev()
                .map(|d| (self.root, d.to_string(), d.to_string()))
                .collect(),
        }
    }

    /// The profile's file: (seam, logical path, shown path), skipping files
    /// already loaded (tuned's `skip_files`: a profile in /etc may include
    /// the one of the same name in /usr/lib).
    pub fn locate(&self, name: &str, skip: &[String]) -> Option<(&Root, String, String)> {
        for (seam, dir, shown) in self.dirs() {
            let logical = format!("{}/{name}/tuned.conf", dir.trim_end_matches('/'));
            let shown = format!("{}/{name}/tuned.conf", shown.trim_end_matches('/'));
            if skip.contains(&shown) {
                continue;
            }
            if seam.read_trimmed(&logical).ok().flatten().is_some() || seam.exists(&logical) {
                return Some((seam, logical, shown));
            }
        }
        None
    }

    /// Every profile found: (name, shown directory), each name once, the one
    /// tuned would load.
    pub fn list(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (seam, dir, shown) in self.dirs() {
            let Ok(mut names) = seam.read_dir(&dir) else {
                continue;
            };
            names.sort();
            for n in names {
                let f = format!("{}/{n}/tuned.conf", dir.trim_end_matches('/'));
                if seam.exists(&f) && !out.iter().any(|(m, _)| *m == n) {
                    out.push((n.clone(), format!("{}/{n}", shown.trim_end_matches('/'))));
                }
            }
        }
        out.sort();
        out
    }
}

/// A section of the merged profile (tuned's `Unit`): its keywords taken out
/// of the options as unit.py does.
#[derive(Clone, Debug)]
pub struct Unit {
    pub name: String,
    pub ty: String,
    pub enabled: bool,
    pub devices: Option<Opt>,
    pub cpuinfo_regex: Option<Opt>,
    pub uname_regex: Option<Opt>,
    /// Keyword lines honoured while merging (`replace`, `drop`, `type`, ...).
    pub keywords: Vec<Opt>,
    pub options: Vec<Opt>,
}

const KEYWORDS: &[&str] = &[
    "type",
    "enabled",
    "replace",
    "drop",
    "devices",
    "devices_udev_regex",
    "cpuinfo_regex",
    "uname_regex",
    "script_pre",
    "script_post",
    // units/manager.py: the instance order, popped before any plugin sees it.
    "priority",
];

fn truthy(v: &str) -> bool {
    matches!(v, "True" | "true" | "1")
}

impl Unit {
    fn new(s: Section) -> (Unit, bool, Vec<String>) {
        let mut u = Unit {
            ty: s.name.clone(),
            name: s.name,
            enabled: true,
            devices: None,
            cpuinfo_regex: None,
            uname_regex: None,
            keywords: Vec::new(),
            // Sized up front: the section's list is still held while this fills.
            options: Vec::with_capacity(s.options.len()),
        };
        let (mut replace, mut drop) = (false, Vec::new());
        for o in s.options {
            match o.key.as_str() {
                "type" => u.ty = o.value.clone(),
                "enabled" => u.enabled = truthy(&o.value),
                "replace" => replace = truthy(&o.value),
                "drop" => {
                    drop = o
                        .value
                        .split([',', ';'])
                        .map(|d| d.trim().to_string())
                        .filter(|d| !d.is_empty())
                        .collect()
                }
                "devices" => u.devices = Some(o.clone()),
                "cpuinfo_regex" => u.cpuinfo_regex = Some(o.clone()),
                "uname_regex" => u.uname_regex = Some(o.clone()),
                _ => {}
            }
            if KEYWORDS.contains(&o.key.as_str()) {
                u.keywords.push(o);
            } else {
                u.options.push(o);
            }
        }
        (u, replace, drop)
    }
}

/// The merged profile.
#[derive(Debug, Default)]
pub struct Profile {
    pub name: String,
    /// The files read, in tuned's merge order (includes first), as shown.
    pub files: Vec<String>,
    /// `[main]` options (summary, description; `include` is taken out).
    pub main: Vec<Opt>,
    /// The `include=` lines followed.
    pub includes: Vec<Opt>,
    pub units: Vec<Unit>,
    /// Every file's text, for the accounting of its lines.
    pub texts: Vec<(String, String)>,
}

/// Loads `name` and its includes; an include that would reload a file still
/// being loaded is a cycle (tuned skips it silently; an import says so).
pub fn load(src: &Source, name: &str) -> Result<Profile> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        bail!("{name:?} is not a tuned profile name (letters, digits, `_`, `.`, `-`)");
    }
    let mut parts: Vec<(String, Vec<Section>)> = Vec::new();
    let mut p = Profile {
        name: name.to_string(),
        ..Profile::default()
    };
    let mut stack = Vec::new();
    read_chain(src, name, None, &mut p, &mut parts, &mut stack)?;
    for (_, sections) in parts {
        merge(&mut p, sections);
    }
    Ok(p)
}

fn read_chain(
    src: &Source,
    name: &str,
    from: Option<&Opt>,
    p: &mut Profile,
    parts: &mut Vec<(String, Vec<Section>)>,
    stack: &mut Vec<String>,
) -> Result<()> {
    let (conditional, name) = match name.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, name),
    };
    let Some((seam, logical, shown)) = src.locate(name, &p.files) else {
        let tail = format!("/{name}/tuned.conf");
        if let Some(o) = from {
            if let Some(prev) = stack.iter().find(|f| f.ends_with(&tail)) {
                bail!(
                    "{}: include cycle: {} includes {name}, which is being loaded ({prev}); \
                     tuned skips such an include silently",
                    o.at(),
                    o.file
                );
            }
            // Loaded already through another include: tuned loads a file once.
            if conditional || p.files.iter().any(|f| f.ends_with(&tail)) {
                return Ok(());
            }
            bail!(
                "{}: included profile {name:?} not found{}",
                o.at(),
                src.searched()
            );
        }
        bail!("tuned profile {name:?} not found{}", src.searched());
    };
    let text = seam
        .read_string(&logical)
        .map_err(|e| anyhow::anyhow!("{shown}: cannot read: {e}"))?;
    check_size(p, &shown, &text)?;
    let mut sections = ini::parse(&shown, &text)?;
    p.files.push(shown.clone());
    p.texts.push((shown.clone(), text));
    stack.push(shown.clone());
    if let Some(main) = sections.iter_mut().find(|s| s.name == "main")
        && let Some(i) = main.options.iter().position(|o| o.key == "include")
    {
        let inc = main.options.remove(i);
        // Includes are expanded with the variables known so far; tuned's
        // profiles name includes literally, but for virt_check (openshift).
        let names = virt_check(src, &inc.value);
        for n in names
            .split([',', ';'])
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            read_chain(src, n, Some(&inc), p, parts, stack)?;
        }
        p.includes.push(inc);
    }
    stack.pop();
    parts.push((shown, sections));
    Ok(())
}

/// A profile with its includes is read whole into memory, with a few
/// hundred bytes of bookkeeping per option line: its size is capped before
/// it is parsed, so an import stays within the 100 MB every command keeps
/// (docs/safety.md). tuned's shipped profiles hold at most tens of lines and
/// a few KiB.
pub const MAX_PROFILE_BYTES: usize = 1 << 20;
pub const MAX_OPTION_LINES: usize = 20_000;

fn check_size(p: &Profile, shown: &str, text: &str) -> Result<()> {
    let bytes = p.texts.iter().map(|(_, t)| t.len()).sum::<usize>() + text.len();
    if bytes > MAX_PROFILE_BYTES {
        bail!(
            "{shown}: the profile and its includes hold {bytes} bytes, over the {} KiB an import reads (tuned's own profiles hold a few KiB); nothing was imported",
            MAX_PROFILE_BYTES >> 10
        );
    }
    let lines = p
        .texts
        .iter()
        .map(|(_, t)| ini::option_lines(t).count())
        .sum::<usize>()
        + ini::option_lines(text).count();
    if lines > MAX_OPTION_LINES {
        bail!(
            "{shown}: the profile and its includes hold {lines} option lines, over the {MAX_OPTION_LINES} an import reads (tuned's own profiles hold tens); nothing was imported"
        );
    }
    Ok(())
}

/// `${f:virt_check:VIRTUAL:BARE}` in an include (tuned's openshift
/// profile): tuned runs virt-what; an import runs nothing, so the
/// `hypervisor` CPU flag of /proc/cpuinfo (x86 guests carry it) decides.
fn virt_check(src: &Source, value: &str) -> String {
    let Some(i) = value.find("${f:virt_check:") else {
        return value.to_string();
    };
    let Some(end) = value[i..].find('}').map(|e| i + e) else {
        return value.to_string();
    };
    let args: Vec<&str> = value[i + 15..end].split(':').collect();
    let cpuinfo = src.root.read_string("/proc/cpuinfo").unwrap_or_default();
    let guest = cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"));
    let pick = match guest {
        true => args.first(),
        false => args.get(1),
    };
    format!(
        "{}{}{}",
        &value[..i],
        pick.copied().unwrap_or_default(),
        &value[end + 1..]
    )
}

impl Source<'_> {
    fn searched(&self) -> String {
        let dirs: Vec<String> = self.dirs().into_iter().map(|d| d.2).collect();
        // The same directories: with the --from DIR given (issue 49 item 2).
        let from = match &self.from {
            Some((_, shown)) => format!(" --from {}", crate::name::shell_word(shown)),
            None => String::new(),
        };
        format!(
            " (looked for NAME/tuned.conf in {}); `hostknob import tuned --list{from}` lists the profiles found",
            dirs.join(", ")
        )
    }
}

/// merger.py `_merge_two`: a later profile's options update the earlier;
/// a unit with `replace=true` replaces it, `drop=` removes named options.
fn merge(p: &mut Profile, sections: Vec<Section>) {
    for s in sections {
        if s.name == "main" {
            for o in s.options {
                match p.main.iter().position(|m| m.key == o.key) {
                    Some(i) => p.main[i] = o,
                    None => p.main.push(o),
                }
            }
            continue;
        }
        let (unit, replace, drop) = Unit::new(s);
        let Some(i) = p.units.iter().position(|u| u.name == unit.name) else {
            p.units.push(unit);
            continue;
        };
        if replace {
            p.units[i] = unit;
            continue;
        }
        let old = &mut p.units[i];
        old.ty = unit.ty;
        old.enabled = unit.enabled;
        old.devices = unit.devices.or(old.devices.take());
        old.cpuinfo_regex = unit.cpuinfo_regex.or(old.cpuinfo_regex.take());
        old.uname_regex = unit.uname_regex.or(old.uname_regex.take());
        old.options.retain(|o| !drop.contains(&o.key));
        old.keywords.extend(unit.keywords);
        let mut at: std::collections::HashMap<String, usize> = old
            .options
            .iter()
            .enumerate()
            .map(|(j, m)| (m.key.clone(), j))
            .collect();
        for o in unit.options {
            match at.get(&o.key) {
                Some(&j) => old.options[j] = o,
                None => {
                    at.insert(o.key.clone(), old.options.len());
                    old.options.push(o);
                }
            }
        }
    }
}
