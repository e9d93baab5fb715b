//! What `knobs --profiles` lists: each profile of the manifest with its
//! knobs after includes, its overrides and whether it applies to this host.

use serde::Serialize;

use super::Manifest;
use super::profile::closure;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ProfileList {
    pub manifest: String,
    pub host: String,
    pub profiles: Vec<ProfileLine>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ProfileLine {
    pub name: String,
    pub file: String,
    pub why: String,
    /// The profiles it includes, as written.
    pub include: Vec<String>,
    /// Its knobs with those of its includes (includes' first).
    pub knobs: Vec<String>,
    /// Where it applies by itself (`*` or names); `null`: only when chosen
    /// with `--profile` or included.
    pub hosts: Option<String>,
    /// Whether its `hosts` name this host.
    pub applies_here: bool,
    /// The knobs it overrides (its own entries), with the fields and line.
    pub overrides: Vec<super::overrides::Overridden>,
    /// Its override entries' knob ids, in the same order as `overrides`.
    pub overridden_knobs: Vec<String>,
}

pub fn list(m: &Manifest, host: &str) -> ProfileList {
    ProfileList {
        manifest: m.dir.display().to_string(),
        host: host.to_string(),
        profiles: m
            .profiles
            .iter()
            .map(|p| ProfileLine {
                name: p.name.clone(),
                file: p.file.display().to_string(),
                why: p.why.clone(),
                include: p.include.clone(),
                knobs: closure(&m.profiles, &p.name).knobs,
                hosts: p.hosts.as_ref().map(|h| h.to_string()),
                applies_here: p.hosts.as_ref().is_some_and(|h| h.matches(host)),
                overrides: p.overrides.iter().map(|e| e.origin()).collect(),
                overridden_knobs: p.overrides.iter().map(|e| e.knob.clone()).collect(),
            })
            .collect(),
    }
}
