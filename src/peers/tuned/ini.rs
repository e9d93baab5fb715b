//! tuned's profile files as its `ConfigParser` reads them (tuned/profiles/loader.py
//! `_load_config_data`: `delimiters=('=')`, `inline_comment_prefixes=('#')`,
//! `strict=False`, keys case-kept), with the line of every option kept so each
//! imported knob can cite it.

use std::collections::HashMap;
use std::rc::Rc;

use anyhow::{Result, bail};

/// One `key = value` line (or a value continued on indented lines).
#[derive(Clone, Debug)]
pub struct Opt {
    /// The file as named under the root (`/usr/lib/tuned/NAME/tuned.conf`);
    /// shared by every option of the file (a profile may have many).
    pub file: Rc<str>,
    pub line: usize,
    pub section: Rc<str>,
    pub key: String,
    pub value: String,
}

impl Opt {
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

#[derive(Clone, Debug)]
pub struct Section {
    pub name: String,
    pub options: Vec<Opt>,
}

/// Python's configparser drops an inline comment only where white space
/// precedes the `#`.
fn strip_inline(value: &str) -> &str {
    let b = value.as_bytes();
    for i in 1..b.len() {
        if b[i] == b'#' && b[i - 1].is_ascii_whitespace() {
            return &value[..i];
        }
    }
    value
}

/// The sections in file order; a section named twice is merged (later keys
/// win, as with `strict=False`). Errors name `file:line`.
pub fn parse(file: &str, text: &str) -> Result<Vec<Section>> {
    let mut sections: Vec<Section> = Vec::new();
    // Indexes by name, so a file of many sections or keys reads in linear time.
    let mut section_at: HashMap<String, usize> = HashMap::new();
    // Each section's name once, shared by its options.
    let mut names: Vec<Rc<str>> = Vec::new();
    let file: Rc<str> = file.into();
    let mut key_at: HashMap<(usize, String), usize> = HashMap::new();
    let mut current: Option<usize> = None;
    // The option a continuation line extends: (section, option index, indent).
    let mut open: Option<(usize, usize, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some((s, o, base)) = open
            && indent > base
        {
            let opt = &mut sections[s].options[o];
            let more = strip_inline(trimmed).trim_end();
            // Appended in place: a long continued value stays linear.
            if !opt.value.is_empty() {
                opt.value.push('\n');
            }
            opt.value.push_str(more);
            continue;
        }
        open = None;
        if trimmed.starts_with('[') {
            let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.split_once(']')) else {
                bail!("{file}:{n}: malformed section header {trimmed:?} (no closing `]`)");
            };
            let name = name.0.to_string();
            current = Some(*section_at.entry(name.clone()).or_insert_with(|| {
                names.push(name.as_str().into());
                sections.push(Section {
                    name,
                    options: Vec::new(),
                });
                sections.len() - 1
            }));
            continue;
        }
        let Some(s) = current else {
            bail!("{file}:{n}: {trimmed:?} before any [section] header");
        };
        let Some((key, value)) = trimmed.split_once('=') else {
            bail!(
                "{file}:{n}: malformed line {trimmed:?}: expected `option = value` in [{}]",
                sections[s].name
            );
        };
        let key = key.trim().to_string();
        if key.is_empty() {
            bail!("{file}:{n}: malformed line {trimmed:?}: no option name before `=`");
        }
        let opt = Opt {
            file: file.clone(),
            line: n,
            section: names[s].clone(),
            key,
            value: strip_inline(value).trim().to_string(),
        };
        let opts = &mut sections[s].options;
        // strict=False: a key given twice keeps its first place, the last value.
        match key_at.get(&(s, opt.key.clone())) {
            Some(&p) => {
                opts[p] = opt;
                open = Some((s, p, indent));
            }
            None => {
                key_at.insert((s, opt.key.clone()), opts.len());
                opts.push(opt);
                open = Some((s, opts.len() - 1, indent));
            }
        }
    }
    Ok(sections)
}

/// Every option line of a file, in order, duplicates included: what the
/// import accounts for (an iterator: a long profile is not copied again).
pub fn option_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_section = false;
    text.lines().enumerate().filter_map(move |(i, raw)| {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            return None;
        }
        if t.starts_with('[') {
            in_section = true;
            return None;
        }
        if in_section && !raw.starts_with(char::is_whitespace) {
            let (k, _) = t.split_once('=')?;
            return Some((i + 1, k.trim()));
        }
        None
    })
}
