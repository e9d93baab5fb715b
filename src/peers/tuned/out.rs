//! What the translation of a profile produces (a knob per setting, a fate
//! per option line) and the small builders the sections share: below
//! `translate`, `cpu` and `sections`, which all use it.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_yaml::{Mapping, Value};

use super::ini::Opt;
use super::vars::{Fail, Vars};

/// What became of one option line.
#[derive(Clone, Debug, PartialEq)]
pub enum Fate {
    Knob(String),
    Used(String),
    Not(String),
}

#[derive(Clone, Debug)]
pub struct KnobOut {
    pub id: String,
    pub kind: &'static str,
    pub target: Option<Value>,
    pub set: Value,
    pub persistence: &'static str,
    /// What tuned does and how it was resolved here.
    pub note: String,
    pub lines: Vec<Opt>,
}

#[derive(Default)]
pub struct Out {
    pub profile: String,
    pub knobs: Vec<KnobOut>,
    /// (file, line, fate) per option line met.
    pub fates: Vec<(Rc<str>, usize, Fate)>,
    /// (file, line) -> index in `fates`; knob ids taken: linear in the lines.
    fate_at: HashMap<(Rc<str>, usize), usize>,
    ids: HashSet<String>,
}

pub fn map(pairs: &[(&str, Value)]) -> Value {
    let mut m = Mapping::new();
    for (k, v) in pairs {
        m.insert(Value::String((*k).into()), v.clone());
    }
    Value::Mapping(m)
}

pub fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub use crate::name::slug;

impl Out {
    /// Sized up front: a long profile's tables are not grown (and copied) by doubling.
    pub fn with_capacity(profile: String, lines: usize) -> Out {
        Out {
            profile,
            fates: Vec::with_capacity(lines),
            fate_at: HashMap::with_capacity(lines),
            ..Out::default()
        }
    }

    pub fn fate(&mut self, o: &Opt, f: Fate) {
        match self.fate_at.get(&(o.file.clone(), o.line)) {
            Some(&i) => self.fates[i].2 = f,
            None => {
                self.fate_at
                    .insert((o.file.clone(), o.line), self.fates.len());
                self.fates.push((o.file.clone(), o.line, f));
            }
        }
    }

    /// A knob from one option line; its id `tuned-PROFILE-SECTION-KEY`.
    pub fn knob(
        &mut self,
        o: &Opt,
        kind: &'static str,
        target: Option<Value>,
        set: Value,
        persistence: &'static str,
        note: String,
    ) {
        let key = o.key.trim_start_matches("/sys/");
        let mut id = short_id(format!(
            "tuned-{}-{}-{}",
            slug(&self.profile),
            slug(&o.section),
            slug(key)
        ));
        if self.ids.contains(&id) {
            id = short_id(format!("{id}-{}", self.knobs.len()));
        }
        self.ids.insert(id.clone());
        self.fate(o, Fate::Knob(id.clone()));
        self.knobs.push(KnobOut {
            id,
            kind,
            target,
            set,
            persistence,
            note,
            lines: vec![o.clone()],
        });
    }
}

/// `${...}` of one option; a refusal is the line's reason, an assertion
/// failure an error naming the line.
pub fn value(o: &Opt, vars: &Vars) -> anyhow::Result<Result<String, String>> {
    match vars.expand(&o.value) {
        Ok(v) => Ok(Ok(v)),
        Err(Fail::Refused(r)) => Ok(Err(r)),
        Err(Fail::Error(e)) => anyhow::bail!("{}: [{}] {}: {e}", o.at(), o.section, o.key),
    }
}

/// Knob ids are at most 64 characters: a longer one keeps its start and
/// ends with a hash of the whole (FNV-1a), so it stays unique and stable.
pub fn short_id(id: String) -> String {
    if id.len() <= 64 {
        return id;
    }
    let head = id[..55].trim_end_matches('-');
    format!("{head}-{}", crate::name::tag(&id))
}
