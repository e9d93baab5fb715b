//! The knob manifest: a directory of YAML files, one or more knobs per file
//! (`---` between them), read strictly. Every error names the file, the line
//! and the field: `manifest/cpuidle.yaml:7: target.cpus: "0-x" is not a CPU list`.
//!
//! `ledger/` inside the directory is the tool's own record (see `ledger`), not knobs;
//! `profiles/` holds profiles (see `profile`), not knobs.

pub use crate::spelling::did_you_mean;
pub mod default_probe;
mod depth;
pub mod facts;
pub mod host;
pub mod ledger;
pub mod ledger_home;
pub mod ledger_samples;
pub mod locate;
pub mod overrides;
pub mod profile;
pub mod profile_list;
mod read;
pub use crate::name::slug;
pub mod revision;
pub mod variant;
pub mod when;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::knob::{FieldError, KindName, KnobKind};
use crate::schema::{HistoryAction, Persistence, Verify};

/// One problem in the manifest, as `file:line: field: message`.
#[derive(Clone, Debug, PartialEq)]
pub struct ManifestError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ManifestError {}

/// All problems found, one per line.
#[derive(Debug)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        if n > 1 {
            write!(f, "\n{n} problems in the manifest")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}

/// Where a knob was written: for errors found later (on a host).
#[derive(Clone, Debug)]
pub struct Source {
    pub file: PathBuf,
    /// Line of the document's first line in the file (1-based).
    pub first_line: usize,
    pub text: String,
}

impl Source {
    pub fn error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let line = locate::line_of(&self.text, field).unwrap_or(1) + self.first_line - 1;
        ManifestError {
            file: self.file.clone(),
            line: Some(line),
            field: (!field.is_empty()).then(|| field.to_string()),
            message: message.into(),
        }
    }

    pub fn field_error(&self, e: FieldError) -> ManifestError {
        self.error(&e.field, e.message)
    }

    pub fn yaml_error(&self, e: &serde_yaml::Error) -> ManifestError {
        let raw = e.to_string();
        let (field, mut message) = split_yaml_message(&raw);
        let mut rel_line = e.location().map(|l| l.line());
        // An unclosed `[` or `{` is found lines later; the line that opened it is the one to fix.
        if let Some((what, opened)) = flow_context(&raw) {
            message = format!(
                "{}: the {what} opened on this line is not closed (noticed at line {})",
                message.split(", while parsing").next().unwrap_or(&message),
                rel_line.unwrap_or(opened) + self.first_line - 1
            );
            rel_line = Some(opened);
        }
        let field = field.or_else(|| rel_line.and_then(|l| locate::path_at(&self.text, l)));
        // A field serde named without a line (e.g. a missing one): find it.
        let rel_line = rel_line.or_else(|| {
            field
                .as_deref()
                .and_then(|f| locate::line_of(&self.text, f))
        });
        ManifestError {
            file: self.file.clone(),
            line: Some(rel_line.unwrap_or(1) + self.first_line - 1),
            field,
            message,
        }
    }
}

/// `..., while parsing a flow sequence at line 7 column 8` -> ("flow sequence", 7).
fn flow_context(raw: &str) -> Option<(&'static str, usize)> {
    for what in ["flow sequence", "flow mapping"] {
        let marker = format!("while parsing a {what} at line ");
        if let Some(i) = raw.find(&marker) {
            let digits: String = raw[i + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            return Some((what, digits.parse().ok()?));
        }
    }
    None
}

/// `target.states: unknown field `x`, expected ... at line 4 column 25`
/// -> (Some("target.states.x"), "unknown field `x`, expected ...").
fn split_yaml_message(text: &str) -> (Option<String>, String) {
    let mut msg = text.to_string();
    while let Some(i) = msg.find(" at line ") {
        let rest = &msg[i + 9..];
        let end = rest
            .find(" column ")
            .map(|j| {
                let after = &rest[j + 8..];
                j + 8 + after.chars().take_while(|c| c.is_ascii_digit()).count()
            })
            .unwrap_or(0);
        msg = format!("{}{}", &msg[..i], &rest[end..]);
    }
    let mut path: Option<String> = None;
    if let Some((p, m)) = msg.split_once(": ")
        && !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-'))
    {
        path = Some(p.to_string());
        msg = m.to_string();
    }
    // A misspelt field: the nearest of the names serde expected.
    if let Some(rest) = msg.strip_prefix("unknown field `")
        && let Some((name, expected)) = rest.split_once("`, expected ")
    {
        let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let hint = did_you_mean(name, known.into_iter());
        if !hint.is_empty() {
            msg = format!("unknown field `{name}`{hint}, expected {expected}");
        }
    }
    // The field serde names in the message itself.
    for pre in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(i) = msg.find(pre) {
            let name = &msg[i + pre.len()..];
            if let Some(end) = name.find('`') {
                let name = &name[..end];
                path = Some(match path {
                    Some(p) => format!("{p}.{name}"),
                    None => name.to_string(),
                });
            }
        }
    }
    (path, msg.trim().to_string())
}

/// A history entry, checked.
#[derive(Clone, Debug)]
pub struct History {
    pub date: String,
    /// Unix seconds; a bare date counts as the end of that day.
    pub when: u64,
    pub action: HistoryAction,
    pub hosts: HostSel,
    pub note: Option<String>,
    pub persistence: Persistence,
}

/// `hosts:`: every host, or names (glob patterns allowed).
#[derive(Clone, Debug)]
pub enum HostSel {
    All,
    Names(Vec<String>),
}

impl HostSel {
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostSel::All => true,
            HostSel::Names(names) => names
                .iter()
                .any(|n| n == host || glob::Pattern::new(n).is_ok_and(|p| p.matches(host))),
        }
    }

    fn parse(field: &str, v: &serde_yaml::Value) -> Result<HostSel, FieldError> {
        use serde_yaml::Value;
        match v {
            Value::String(s) if s == "*" => Ok(HostSel::All),
            Value::String(s) => Err(FieldError::new(
                field,
                format!("{s:?}: give a list of host names ([{s}]) or \"*\" for every host"),
            )),
            Value::Sequence(items) if items.is_empty() => Err(FieldError::new(
                field,
                "empty list: name at least one host, or \"*\" for every host",
            )),
            Value::Sequence(items) => {
                let mut names = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let f = format!("{field}[{i}]");
                    let name = match item {
                        Value::String(s) => s.trim().to_string(),
                        other => {
                            return Err(FieldError::new(
                                &f,
                                format!("{} is not a host name", yaml_word(other)),
                            ));
                        }
                    };
                    if name.is_empty() || name.contains(char::is_whitespace) {
                        return Err(FieldError::new(&f, format!("{name:?} is not a host name")));
                    }
                    if let Err(e) = glob::Pattern::new(&name) {
                        return Err(FieldError::new(&f, format!("{name:?}: bad pattern: {e}")));
                    }
                    names.push(name);
                }
                Ok(HostSel::Names(names))
            }
            Value::Null => Err(FieldError::new(
                field,
                "empty: name at least one host, or \"*\" for every host",
            )),
            other => Err(FieldError::new(
                field,
                format!(
                    "{} is not a host list: give [name, ...] or \"*\"",
                    yaml_word(other)
                ),
            )),
        }
    }
}

impl fmt::Display for HostSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostSel::All => f.write_str("*"),
            HostSel::Names(n) => f.write_str(&n.join(", ")),
        }
    }
}

fn yaml_word(v: &serde_yaml::Value) -> String {
    use serde_yaml::Value;
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

/// One knob, read and checked.
#[derive(Debug)]
pub struct Knob {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    pub hosts: HostSel,
    pub persistence: Persistence,
    pub caveats: Vec<String>,
    pub why: String,
    pub history: Vec<History>,
    pub verify: Option<Verify>,
    pub source: Source,
    pub spec: Box<dyn KnobKind>,
    /// Host facts that must hold for the knob to apply here (`when:`).
    pub when: Option<crate::manifest::when::When>,
    /// Where `set`/`target` came from when a profile or a local file overrode them.
    pub overrides: Vec<overrides::Overridden>,
}

impl Knob {
    /// The manifest's caveats, then the kernel's of its kind (`knob::rules::kind_caveats`).
    pub fn all_caveats(&self) -> Vec<String> {
        let mut out = self.caveats.clone();
        let kind = crate::knob::rules::kind_caveats(self.kind);
        out.extend(kind.iter().map(|c| c.to_string()));
        out
    }
}

#[derive(Debug)]
pub struct Manifest {
    pub dir: PathBuf,
    pub knobs: Vec<Knob>,
    pub profiles: Vec<profile::Profile>,
    /// The profile chosen with `--profile`: `knobs` holds only its knobs.
    pub profile: Option<String>,
    /// The profiles in effect on the host `resolve` was given (by `hosts`
    /// and `when`, or chosen), in file order.
    pub applied: Vec<String>,
}

impl Manifest {
    pub fn for_host<'m>(&'m self, host: &'m str) -> impl Iterator<Item = &'m Knob> + 'm {
        self.knobs.iter().filter(move |k| k.hosts.matches(host))
    }

    /// Applies the profiles that apply to `host` (and `chosen`, keeping only
    /// its knobs) and the local overrides `local`.
    pub fn resolve(
        &mut self,
        host: &str,
        chosen: Option<&str>,
        local: &[overrides::Entry],
        facts: &crate::inventory::facts::Facts,
    ) -> Result<(), ManifestErrors> {
        profile::resolve(self, host, chosen, local, facts)
    }

    pub fn get(&self, id: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.id == id)
    }

    /// `; did you mean "cpuidle-no-deep-state"?` for a mistyped id (the
    /// closest ids by edit distance, as clap does for subcommands), or "".
    pub fn did_you_mean(&self, id: &str) -> String {
        did_you_mean(id, self.knobs.iter().map(|k| k.id.as_str()))
    }
}

/// How deep the manifest directory may nest.
const MAX_DEPTH: usize = 16;
/// The most one manifest file may hold (a knob is a few hundred bytes).
pub const FILE_CAP: usize = 4 << 20;

/// The YAML files of a manifest directory, sorted; `ledger/` and hidden
/// entries left out. Each real directory and file is visited once (a link
/// back up is not a loop), at most [`MAX_DEPTH`] levels down; an error
/// names the directory that could not be read.
fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    use std::os::unix::fs::MetadataExt;
    let fail = |file: &Path, message: String| ManifestError {
        file: file.to_path_buf(),
        line: None,
        field: None,
        message,
    };
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let meta = std::fs::metadata(&d).map_err(|e| fail(&d, format!("cannot read: {e}")))?;
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        if depth > MAX_DEPTH {
            return Err(fail(
                &d,
                format!("nested deeper than {MAX_DEPTH} directories: not a manifest layout"),
            ));
        }
        let entries = std::fs::read_dir(&d).map_err(|e| fail(&d, format!("cannot read: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| fail(&d, format!("cannot read: {e}")))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let ty = entry
                .file_type()
                .map_err(|e| fail(&path, format!("cannot read: {e}")))?;
            let is_dir = ty.is_dir() || (ty.is_symlink() && path.is_dir());
            if is_dir {
                if !(d == dir && (name == ledger::LEDGER_DIR || name == profile::PROFILES_DIR)) {
                    stack.push((path, depth + 1));
                }
            } else if is_yaml_name(&name) {
                // The same file reached twice (through a link) is read once.
                match std::fs::metadata(&path) {
                    Ok(m) if !seen.insert((m.dev(), m.ino())) => {}
                    _ => out.push(path),
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_yaml_name(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"))
}

/// Whether `dir` itself holds a YAML file (not counting subdirectories).
fn top_has_yaml(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| is_yaml_name(&e.file_name().to_string_lossy()))
    })
}

/// A manifest file's text: a regular file (a FIFO is refused, not waited
/// on), at most [`FILE_CAP`] bytes, UTF-8 (else the line of the first bad byte).
fn read_manifest_file(file: &Path) -> Result<String, ManifestError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |line: Option<usize>, message: String| ManifestError {
        file: file.to_path_buf(),
        line,
        field: None,
        message,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file)
        .map_err(|e| fail(None, format!("cannot read: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| fail(None, format!("cannot read: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(fail(
            None,
            "not a regular file (a FIFO or a device): a manifest file must be a plain file".into(),
        ));
    }
    if meta.len() > FILE_CAP as u64 {
        return Err(fail(
            None,
            format!("larger than {} MiB: not a manifest file", FILE_CAP >> 20),
        ));
    }
    let mut bytes = Vec::new();
    f.take(FILE_CAP as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(None, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..valid]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        fail(
            Some(line),
            format!(
                "not UTF-8 text (byte 0x{:02x} at offset {valid})",
                e.as_bytes()[valid]
            ),
        )
    })
}

/// Splits a file into YAML documents at `---` lines: (first line, text).
pub fn documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut start = 1;
    let mut cur = String::new();
    for (i, line) in text.lines().enumerate() {
        let is_marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if is_marker || line == "..." {
            docs.push((start, std::mem::take(&mut cur)));
            start = i + 2;
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    docs.push((start, cur));
    docs.retain(|(_, d)| {
        d.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

/// Loads every knob under `dir`; all problems are reported together.
/// Whether the loader would accept `text` as the knob file `name`: the
/// problems it would report, each in the loader's words (for writers of
/// knob files, such as `import`, that must never write one it refuses).
pub fn check_knob_file(name: &Path, text: &str) -> Result<(), Vec<ManifestError>> {
    let mut errors = Vec::new();
    for (first_line, doc) in documents(text) {
        let source = Source {
            file: name.to_path_buf(),
            first_line,
            text: doc,
        };
        if let Err(e) = read::read_knob(source) {
            errors.extend(e);
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors),
    }
}

pub fn load(dir: &Path) -> Result<Manifest, ManifestErrors> {
    let one = |message: String| {
        ManifestErrors(vec![ManifestError {
            file: dir.to_path_buf(),
            line: None,
            field: None,
            message,
        }])
    };
    if !dir.is_dir() {
        return Err(one(if dir.exists() {
            "not a directory".into()
        } else {
            "no such manifest directory (give --manifest DIR)".into()
        }));
    }
    let files = match yaml_files(dir) {
        Ok(files) if files.is_empty() => {
            return Err(one(
                "not a manifest: no knob files (*.yaml, *.yml) in it or below it; \
                 write knobs there (docs/manifest.md) or give --manifest DIR"
                    .into(),
            ));
        }
        Ok(files) => files,
        // A problem deep inside a directory that holds no knob file at its
        // top (`--manifest /tmp`): the directory is the mistake.
        Err(e) if e.file != dir && !top_has_yaml(dir) => {
            return Err(one(format!(
                "not a manifest: no knob files (*.yaml, *.yml) at its top, and {e}"
            )));
        }
        Err(e) => return Err(ManifestErrors(vec![e])),
    };
    let mut errors = Vec::new();
    let mut knobs: Vec<Knob> = Vec::new();
    // id -> index in `knobs`: a duplicate is found in constant time, so
    // loading stays linear in the number of knobs.
    let mut ids: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for file in files {
        let text = match read_manifest_file(&file) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if let Some(line) = depth::too_deep(&text) {
            errors.push(ManifestError {
                file: file.clone(),
                line: Some(line),
                field: None,
                message: format!(
                    "nested deeper than {} levels (brackets, braces or indentation): \
                     a knob is a few levels deep; not read further",
                    depth::MAX_DEPTH
                ),
            });
            continue;
        }
        let docs = documents(&text);
        if docs.is_empty() {
            errors.push(ManifestError {
                file: file.clone(),
                line: Some(1),
                field: None,
                message: "no knob in this file (an empty file or only comments)".into(),
            });
        }
        for (first_line, doc) in docs {
            let source = Source {
                file: file.clone(),
                first_line,
                text: doc,
            };
            match read::read_knob(source) {
                Ok(k) => {
                    if let Some(prev) = ids.get(&k.id).map(|&i| &knobs[i]) {
                        let first = prev.source.error("id", "");
                        errors.push(k.source.error(
                            "id",
                            format!(
                                "duplicate id {:?} (first defined at {}:{})",
                                k.id,
                                first.file.display(),
                                first.line.unwrap_or(1)
                            ),
                        ));
                    } else {
                        ids.insert(k.id.clone(), knobs.len());
                        knobs.push(k);
                    }
                }
                Err(e) => errors.extend(e),
            }
        }
    }
    let profiles = profile::read_all(dir, &mut errors);
    if errors.is_empty() {
        profile::check_all(&profiles, &knobs, &mut errors);
    }
    if errors.is_empty() {
        Ok(Manifest {
            dir: dir.to_path_buf(),
            knobs,
            profiles,
            profile: None,
            applied: Vec::new(),
        })
    } else {
        Err(ManifestErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_messages_lose_their_position_and_name_the_field() {
        let (f, m) = split_yaml_message(
            "target.states: unknown field `bogus`, expected `names` or `min_exit_latency_us` at line 4 column 25",
        );
        assert_eq!(f.as_deref(), Some("target.states.bogus"));
        assert!(m.starts_with("unknown field `bogus`"), "{m}");
        // A misspelling names the field meant.
        let (_, m) = split_yaml_message(
            "target.states: unknown field `name`, expected `names` or `min_exit_latency_us` at line 4 column 25",
        );
        assert!(
            m.starts_with("unknown field `name`; did you mean \"names\"?"),
            "{m}"
        );
        assert!(!m.contains("line 4"));
        let (f, m) = split_yaml_message("missing field `why`");
        assert_eq!(f.as_deref(), Some("why"));
        assert_eq!(m, "missing field `why`");
        let (f, _) = split_yaml_message(
            "did not find expected ',' or ']' at line 5 column 1, while parsing a flow sequence at line 4 column 8",
        );
        assert_eq!(f, None);
    }

    #[test]
    fn splits_documents() {
        let docs = documents("# head\n---\na: 1\n---\n# only a comment\n---\nb: 2\n");
        assert_eq!(
            docs,
            vec![(3, "a: 1\n".to_string()), (7, "b: 2\n".to_string())]
        );
    }
}
