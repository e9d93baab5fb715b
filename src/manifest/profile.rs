//! Profiles: `profiles/NAME.yaml` in the manifest directory, a named set of
//! knobs (and other profiles, `include:`) with per-knob overrides of `set`
//! and `target`. A profile with `hosts:` applies by itself to the hosts it
//! names; any profile applies when chosen with `--profile NAME`.
//!
//! Precedence, lowest first: the knob's own file; an included profile's
//! overrides (in `include:` order, each after its own includes); the
//! including profile's; local override files. Two profiles that both apply
//! to a host, neither including the other, may not set one knob's field to
//! different values: that is a load error naming both files.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::{Mapping, Value};

use super::overrides::{self, Entry};
use super::when::When;
use super::{HostSel, Knob, Manifest, ManifestError, ManifestErrors, Source, did_you_mean};
use crate::inventory::facts::Facts;

/// The directory of profiles inside a manifest directory.
pub const PROFILES_DIR: &str = "profiles";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileDoc {
    why: String,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    knobs: Vec<String>,
    #[serde(default)]
    hosts: Option<Value>,
    #[serde(default)]
    when: Option<Value>,
    #[serde(default)]
    overrides: Option<Mapping>,
}

/// One profile, read and checked.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: String,
    pub file: PathBuf,
    pub why: String,
    pub include: Vec<String>,
    pub knobs: Vec<String>,
    /// Where it applies by itself; `None`: only when chosen (`--profile`) or included.
    pub hosts: Option<HostSel>,
    /// Host facts that must hold for it to apply (`when:`, as a knob's).
    pub when: Option<When>,
    pub overrides: Vec<Entry>,
    pub source: Source,
}

impl Profile {
    /// `FILE:LINE` of a field of the profile.
    fn at(&self, field: &str) -> String {
        let e = self.source.error(field, "");
        format!("{}:{}", e.file.display(), e.line.unwrap_or(1))
    }
}

/// The profile files of the manifest directory, sorted (for its revision).
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir.join(PROFILES_DIR))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && p.file_name()
                            .is_some_and(|n| super::is_yaml_name(&n.to_string_lossy()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Reads `profiles/*.yaml` of the manifest directory (none when it is absent).
pub(super) fn read_all(dir: &Path, errors: &mut Vec<ManifestError>) -> Vec<Profile> {
    let pdir = dir.join(PROFILES_DIR);
    if !pdir.is_dir() {
        return Vec::new();
    }
    let fail = |file: &Path, message: String| ManifestError {
        file: file.to_path_buf(),
        line: None,
        field: None,
        message,
    };
    let mut files = Vec::new();
    match std::fs::read_dir(&pdir) {
        Ok(entries) => {
            for e in entries.flatten() {
                let path = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                if path.is_dir() {
                    errors.push(fail(
                        &path,
                        "a directory among the profiles: a profile is one file, profiles/NAME.yaml"
                            .into(),
                    ));
                } else if super::is_yaml_name(&name) {
                    files.push(path);
                }
            }
        }
        Err(e) => errors.push(fail(&pdir, format!("cannot read: {e}"))),
    }
    files.sort();
    let mut out: Vec<Profile> = Vec::new();
    for file in files {
        if let Some(p) = read_one(&file, errors) {
            if let Some(prev) = out.iter().find(|q| q.name == p.name) {
                errors.push(fail(
                    &file,
                    format!(
                        "profile {:?} is also defined in {}",
                        p.name,
                        prev.file.display()
                    ),
                ));
                continue;
            }
            out.push(p);
        }
    }
    out
}

fn read_one(file: &Path, errors: &mut Vec<ManifestError>) -> Option<Profile> {
    let text = match super::read_manifest_file(file) {
        Ok(t) => t,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let stem = file.file_stem()?.to_string_lossy().into_owned();
    let docs = super::documents(&text);
    let (first_line, doc) = match docs.as_slice() {
        [one] => one.clone(),
        _ => {
            errors.push(ManifestError {
                file: file.to_path_buf(),
                line: Some(1),
                field: None,
                message: format!(
                    "{} YAML documents: a profile file holds exactly one profile",
                    docs.len()
                ),
            });
            return None;
        }
    };
    let source = Source {
        file: file.to_path_buf(),
        first_line,
        text: doc,
    };
    if let Err(m) = super::read::check_id(&stem) {
        errors.push(source.error("", format!("profile name (the file's name): {m}")));
        return None;
    }
    if let Some(line) = super::depth::too_deep(&source.text) {
        errors.push(ManifestError {
            file: file.to_path_buf(),
            line: Some(line),
            field: None,
            message: "nested too deep: a profile is a few levels deep".into(),
        });
        return None;
    }
    let doc: ProfileDoc = match serde_yaml::from_str(&source.text) {
        Ok(d) => d,
        Err(e) => {
            errors.push(source.yaml_error(&e));
            return None;
        }
    };
    let before = errors.len();
    if doc.why.trim().is_empty() {
        errors.push(source.error("why", "empty: say what the profile is for"));
    }
    let hosts = doc.hosts.as_ref().and_then(|h| {
        HostSel::parse("hosts", h)
            .map_err(|e| errors.push(source.field_error(e)))
            .ok()
    });
    let when = doc.when.as_ref().and_then(|w| {
        When::parse("when", w)
            .map_err(|e| errors.push(source.field_error(e)))
            .ok()
    });
    let overrides = doc
        .overrides
        .as_ref()
        .map(|m| overrides::entries(&source, m, "overrides", Some(&stem), errors))
        .unwrap_or_default();
    (errors.len() == before).then(|| Profile {
        name: stem,
        file: file.to_path_buf(),
        why: doc.why,
        include: doc.include,
        knobs: doc.knobs,
        hosts,
        when,
        overrides,
        source,
    })
}

/// Checks the profiles against the knobs and each other: unknown knobs and
/// profiles, include cycles, overrides of knobs outside the profile, and
/// each override's values as its knob's kind reads them.
pub(super) fn check_all(profiles: &[Profile], knobs: &[Knob], errors: &mut Vec<ManifestError>) {
    let ids: HashSet<&str> = knobs.iter().map(|k| k.id.as_str()).collect();
    let names: HashSet<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    for p in profiles {
        for (i, k) in p.knobs.iter().enumerate() {
            if !ids.contains(k.as_str()) {
                errors.push(p.source.error(
                    &format!("knobs[{i}]"),
                    format!(
                        "no knob with id {k:?} in the manifest{}",
                        did_you_mean(k, knobs.iter().map(|k| k.id.as_str()))
                    ),
                ));
            }
        }
        for (i, inc) in p.include.iter().enumerate() {
            if !names.contains(inc.as_str()) {
                errors.push(p.source.error(
                    &format!("include[{i}]"),
                    format!(
                        "no profile {inc:?} in {}{}; profiles: {}",
                        p.file.parent().unwrap_or(Path::new(".")).display(),
                        did_you_mean(inc, names.iter().copied()),
                        known(profiles)
                    ),
                ));
            }
        }
        for e in &p.overrides {
            if !ids.contains(e.knob.as_str()) {
                errors.push(e.error(
                    "",
                    format!(
                        "override of an unknown knob {:?}{}",
                        e.knob,
                        did_you_mean(&e.knob, knobs.iter().map(|k| k.id.as_str()))
                    ),
                ));
            }
        }
    }
    if !errors.is_empty() {
        return;
    }
    cycles(profiles, errors);
    if !errors.is_empty() {
        return;
    }
    for p in profiles {
        let members = closure(profiles, &p.name).knobs;
        for e in &p.overrides {
            let Some(knob) = knobs.iter().find(|k| k.id == e.knob) else {
                continue;
            };
            if !members.contains(&e.knob) {
                errors.push(e.error(
                    "",
                    format!(
                        "knob {} is overridden but not in this profile: add it to `knobs:` \
                         (or to a profile this one includes)",
                        e.knob
                    ),
                ));
            } else if let Err(err) = overrides::check(knob, &[e]) {
                errors.push(err);
            }
        }
    }
}

pub(super) fn known(profiles: &[Profile]) -> String {
    if profiles.is_empty() {
        return "none (write profiles/NAME.yaml in the manifest)".into();
    }
    profiles
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every include cycle, once, as the whole path with each link's file and line.
fn cycles(profiles: &[Profile], errors: &mut Vec<ManifestError>) {
    let by: HashMap<&str, &Profile> = profiles.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut reported: HashSet<Vec<String>> = HashSet::new();
    fn walk<'p>(
        p: &'p Profile,
        by: &HashMap<&str, &'p Profile>,
        path: &mut Vec<&'p Profile>,
        done: &mut HashSet<&'p str>,
        found: &mut Vec<Vec<&'p Profile>>,
    ) {
        if let Some(i) = path.iter().position(|q| q.name == p.name) {
            found.push(path[i..].to_vec());
            return;
        }
        if done.contains(p.name.as_str()) {
            return;
        }
        path.push(p);
        for inc in &p.include {
            if let Some(q) = by.get(inc.as_str()) {
                walk(q, by, path, done, found);
            }
        }
        path.pop();
        done.insert(&p.name);
    }
    let mut done = HashSet::new();
    let mut found = Vec::new();
    for p in profiles {
        walk(p, &by, &mut Vec::new(), &mut done, &mut found);
    }
    for cycle in found {
        let mut key: Vec<String> = cycle.iter().map(|p| p.name.clone()).collect();
        key.sort();
        if !reported.insert(key) {
            continue;
        }
        let links: Vec<String> = cycle
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let next = &cycle[(i + 1) % cycle.len()].name;
                let idx = p.include.iter().position(|n| n == next).unwrap_or(0);
                format!(
                    "{} includes {next} at {}",
                    p.name,
                    p.at(&format!("include[{idx}]"))
                )
            })
            .collect();
        let names: Vec<&str> = cycle
            .iter()
            .map(|p| p.name.as_str())
            .chain(std::iter::once(cycle[0].name.as_str()))
            .collect();
        let first = cycle[0];
        let idx = first
            .include
            .iter()
            .position(|n| *n == cycle[1 % cycle.len()].name)
            .unwrap_or(0);
        errors.push(first.source.error(
            &format!("include[{idx}]"),
            format!("include cycle {}: {}", names.join(" -> "), links.join("; ")),
        ));
    }
}

/// A profile with its includes: knob ids (includes' first, each once) and
/// override entries, lowest precedence first; the profiles it reaches.
pub struct Closure<'p> {
    pub knobs: Vec<String>,
    pub overrides: Vec<&'p Entry>,
    pub reached: HashSet<&'p str>,
}

/// The closure of a profile; the includes were checked (no cycle).
pub fn closure<'p>(profiles: &'p [Profile], name: &str) -> Closure<'p> {
    fn visit<'p>(profiles: &'p [Profile], name: &str, c: &mut Closure<'p>) {
        let Some(p) = profiles.iter().find(|p| p.name == name) else {
            return;
        };
        if !c.reached.insert(&p.name) {
            return;
        }
        for inc in &p.include {
            visit(profiles, inc, c);
        }
        for k in &p.knobs {
            if !c.knobs.contains(k) {
                c.knobs.push(k.clone());
            }
        }
        c.overrides.extend(p.overrides.iter());
    }
    let mut c = Closure {
        knobs: Vec::new(),
        overrides: Vec::new(),
        reached: HashSet::new(),
    };
    visit(profiles, name, &mut c);
    c
}

/// What one field of a knob is set to by a profile's closure, and by which entry.
type Fields<'p> = BTreeMap<(String, &'static str), (&'p Value, &'p Entry)>;

fn fields<'p>(c: &Closure<'p>) -> Fields<'p> {
    let mut out = Fields::new();
    for e in &c.overrides {
        if let Some(v) = &e.set {
            out.insert((e.knob.clone(), "set"), (v, *e));
        }
        if let Some(v) = &e.target {
            out.insert((e.knob.clone(), "target"), (v, *e));
        }
    }
    out
}

/// The profiles and local overrides in effect on `host`, applied to the
/// knobs; with `chosen`, only that profile's knobs are kept.
pub(super) fn resolve(
    m: &mut Manifest,
    host: &str,
    chosen: Option<&str>,
    local: &[Entry],
    facts: &Facts,
) -> Result<(), ManifestErrors> {
    let profiles = std::mem::take(&mut m.profiles);
    let result = resolve_with(m, &profiles, host, chosen, local, facts);
    m.profiles = profiles;
    result.map_err(ManifestErrors)
}

/// The profiles that apply to `host`: those whose `hosts` and `when` hold,
/// and `chosen`, which must exist and hold.
fn applying<'p>(
    dir: &Path,
    profiles: &'p [Profile],
    host: &str,
    chosen: Option<&str>,
    facts: &Facts,
) -> Result<Vec<&'p Profile>, Vec<ManifestError>> {
    // A profile's `when:` decides like its `hosts:`; a fact that cannot be
    // read (a malformed labels file) is an error at its `when:`.
    let mut unreadable = Vec::new();
    let mut holds = |p: &Profile| -> Result<(), String> {
        let Some(w) = &p.when else { return Ok(()) };
        let out = w.evaluate(facts);
        if let Some(e) = &out.error {
            unreadable.push(p.source.error("when", format!("cannot be checked: {e}")));
        }
        out.detail().map_or(Ok(()), Err)
    };
    let mut applying: Vec<&Profile> = profiles
        .iter()
        .filter(|p| p.hosts.as_ref().is_some_and(|h| h.matches(host)) && holds(p).is_ok())
        .collect();
    if let Some(name) = chosen {
        let Some(p) = profiles.iter().find(|p| p.name == name) else {
            return Err(vec![ManifestError {
                file: dir.join(PROFILES_DIR),
                line: None,
                field: None,
                message: format!(
                    "no profile {name:?}{}; profiles: {}",
                    did_you_mean(name, profiles.iter().map(|p| p.name.as_str())),
                    known(profiles)
                ),
            }]);
        };
        if let Some(h) = &p.hosts
            && !h.matches(host)
        {
            return Err(vec![p.source.error(
                "hosts",
                format!("profile {name} does not apply to host {host} (hosts: {h})"),
            )]);
        }
        if let Err(detail) = holds(p) {
            return Err(vec![p.source.error(
                "when",
                format!("profile {name} does not apply to host {host} ({detail})"),
            )]);
        }
        if !applying.iter().any(|q| q.name == name) {
            applying.push(p);
        }
    }
    if !unreadable.is_empty() {
        return Err(unreadable);
    }
    Ok(applying)
}

fn resolve_with(
    m: &mut Manifest,
    profiles: &[Profile],
    host: &str,
    chosen: Option<&str>,
    local: &[Entry],
    facts: &Facts,
) -> Result<(), Vec<ManifestError>> {
    let applying = applying(&m.dir, profiles, host, chosen, facts)?;
    let closures: Vec<(&Profile, Closure)> = applying
        .iter()
        .map(|p| (*p, closure(profiles, &p.name)))
        .collect();
    // A profile another applying one includes is part of that one.
    let independent: Vec<&(&Profile, Closure)> = closures
        .iter()
        .filter(|(p, _)| {
            !closures
                .iter()
                .any(|(q, c)| q.name != p.name && c.reached.contains(p.name.as_str()))
        })
        .collect();
    let mut errors = Vec::new();
    let mut set_by: Fields = Fields::new();
    let mut entries: BTreeMap<String, Vec<&Entry>> = BTreeMap::new();
    for (p, c) in &independent {
        for (key, (v, e)) in fields(c) {
            match set_by.get(&key) {
                Some((v0, e0)) if *v0 != v => errors.push(e.error(
                    key.1,
                    format!(
                        "conflict: knob {} {} is set differently by profile {} at {} and by \
                         profile {} here; both apply to host {host} (make one include the \
                         other, or narrow their hosts)",
                        key.0,
                        key.1,
                        e0.profile.as_deref().unwrap_or("?"),
                        e0.at(),
                        p.name
                    ),
                )),
                Some(_) => {}
                None => {
                    set_by.insert(key, (v, e));
                }
            }
        }
        for e in &c.overrides {
            entries.entry(e.knob.clone()).or_default().push(e);
        }
    }
    // Local files: the last word, but two of them may not disagree.
    let mut local_by: BTreeMap<(String, &'static str), (&Value, &Entry)> = BTreeMap::new();
    for e in local {
        if m.get(&e.knob).is_none() {
            errors.push(e.error(
                "",
                format!(
                    "override of an unknown knob {:?}{}",
                    e.knob,
                    m.did_you_mean(&e.knob)
                ),
            ));
            continue;
        }
        for (field, v) in [("set", &e.set), ("target", &e.target)] {
            let Some(v) = v else { continue };
            match local_by.get(&(e.knob.clone(), field)) {
                Some((v0, e0)) if *v0 != v => errors.push(e.error(
                    field,
                    format!(
                        "conflict: knob {} {field} is also overridden, differently, at {}",
                        e.knob,
                        e0.at()
                    ),
                )),
                _ => {
                    local_by.insert((e.knob.clone(), field), (v, e));
                }
            }
        }
        entries.entry(e.knob.clone()).or_default().push(e);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for knob in &mut m.knobs {
        if let Some(list) = entries.get(&knob.id)
            && let Err(e) = overrides::apply(knob, list)
        {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    m.applied = profiles
        .iter()
        .filter(|p| applying.iter().any(|q| q.name == p.name))
        .map(|p| p.name.clone())
        .collect();
    if let Some(name) = chosen {
        let members = closure(profiles, name).knobs;
        m.knobs.retain(|k| members.contains(&k.id));
        m.profile = Some(name.to_string());
    }
    Ok(())
}
