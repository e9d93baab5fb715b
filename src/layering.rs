//! The shape of `src/`, checked by `cargo test`: no import circle between
//! top-level modules, the argument parser and the command layer only where
//! they belong, and
//! no file or function grown past what one reader holds at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 150;
/// One concern (the root seam), allowed to stay whole.
const LONG_FILE_OK: &[&str] = &[];
/// The argument parser's crate, spelled so that this file does not name it.
const PARSER_CRATE: &str = concat!("cl", "ap");
/// Where the parser crate and `crate::cli` / `crate::commands` may be named.
const COMMAND_LAYER: &[&str] = &["cli", "commands", "main"];

struct Source {
    /// Relative to src/, with `/`.
    rel: String,
    /// The top-level module it belongs to (`apply` for src/apply/plan.rs).
    top: String,
    /// The text with comments, strings and char literals blanked (newlines kept).
    code: String,
    lines: usize,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let top = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            Source {
                rel,
                top,
                lines: text.lines().count(),
                code: blank_literals(&text),
            }
        })
        .collect()
}

/// Blanks comments, string and char literals, so that braces and words in
/// them count for nothing.
fn blank_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |s: &[char], out: &mut String| {
        for ch in s {
            out.push(if *ch == '\n' { '\n' } else { ' ' });
        }
    };
    while i < c.len() {
        let rest = &c[i..];
        if rest.starts_with(&['/', '/']) {
            let end = rest.iter().position(|&x| x == '\n').unwrap_or(rest.len());
            keep_newlines(&rest[..end], &mut out);
            i += end;
        } else if rest.starts_with(&['/', '*']) {
            let end = (2..rest.len())
                .find(|&k| rest[k - 1] == '*' && rest[k] == '/')
                .map_or(rest.len(), |k| k + 1);
            keep_newlines(&rest[..end], &mut out);
            i += end;
        } else if rest[0] == 'r' && rest.get(1).is_some_and(|&x| x == '#' || x == '"') {
            let hashes = rest[1..].iter().take_while(|&&x| x == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                out.push(rest[0]);
                i += 1;
                continue;
            }
            let body = 2 + hashes;
            let end = (body..rest.len())
                .find(|&k| rest[k] == '"' && rest[k + 1..].iter().take(hashes).all(|&x| x == '#'))
                .map_or(rest.len(), |k| k + 1 + hashes);
            keep_newlines(&rest[..end], &mut out);
            i += end;
        } else if rest[0] == '"' {
            let mut k = 1;
            while k < rest.len() && rest[k] != '"' {
                k += if rest[k] == '\\' { 2 } else { 1 };
            }
            let end = (k + 1).min(rest.len());
            keep_newlines(&rest[..end], &mut out);
            i += end;
        } else if rest[0] == '\'' {
            // A char literal ('x', '\n', '\u{7f}'); a lifetime has no closing quote.
            let end = if rest.get(1) == Some(&'\\') {
                rest.iter().skip(2).position(|&x| x == '\'').map(|k| k + 3)
            } else if rest.get(2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    keep_newlines(&rest[..end], &mut out);
                    i += end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

/// The top-level modules a file names as `crate::x`, in `use` lines or paths.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `$crate::`, `my_crate::`
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e}}`: the first word of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        refs.insert(ident(&group[k..]));
                    }
                    _ => {}
                }
            }
        } else {
            refs.insert(ident(rest));
        }
    }
    refs.remove("self");
    refs.remove("");
    refs
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources() {
        for r in crate_refs(&s.code) {
            if r != s.top {
                edges.entry(s.top.clone()).or_default().insert(r);
            }
        }
    }
    // Depth-first search for a back edge; report the circle it closes.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("import circle: {} -> {m}", path[at..].join(" -> "));
        }
        if done.contains(m) {
            return;
        }
        path.push(m.to_string());
        for n in edges.get(m).into_iter().flatten() {
            visit(n, edges, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        visit(m, &edges, &mut Vec::new(), &mut done);
    }
    assert!(
        edges.get("apply").is_some_and(|e| e.contains("knob")),
        "the scan found apply's imports"
    );
}

/// What `peers/` (what other tools on the host do) must not ask: it sits
/// below the commands and the engines that ask it.
const ABOVE_PEERS: &[&str] = &[
    "apply", "audit", "cli", "commands", "doc", "import", "isolate", "knob", "main", "persist",
    "probe", "report", "verify",
];

#[test]
fn peers_ask_no_one_above_them() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for s in sources().iter().filter(|s| s.top == "peers") {
        seen += 1;
        for r in crate_refs(&s.code) {
            if ABOVE_PEERS.contains(&r.as_str()) {
                wrong.push(format!("{}: names crate::{r}", s.rel));
            }
        }
    }
    assert!(seen >= 5, "the scan found {seen} files under peers/");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_library_does_not_know_the_command_line() {
    let mut wrong = Vec::new();
    for s in sources() {
        if COMMAND_LAYER.contains(&s.top.as_str()) {
            if s.top == "cli" && crate_refs(&s.code).contains("commands") {
                wrong.push(format!("{}: cli names crate::commands", s.rel));
            }
            continue;
        }
        let words: BTreeSet<&str> = s
            .code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        if words.contains(PARSER_CRATE) {
            wrong.push(format!("{}: names {PARSER_CRATE}", s.rel));
        }
        for r in crate_refs(&s.code) {
            if r == "cli" || r == "commands" {
                wrong.push(format!("{}: names crate::{r}", s.rel));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_file_or_function_too_long() {
    let mut wrong = Vec::new();
    let mut functions = 0;
    for s in sources() {
        if s.lines > MAX_FILE_LINES && !LONG_FILE_OK.contains(&s.rel.as_str()) {
            wrong.push(format!("{}: {} lines", s.rel, s.lines));
        }
        for (name, first, len) in functions_in(&s.code) {
            functions += 1;
            if len > MAX_FN_LINES {
                wrong.push(format!("{}:{first}: fn {name}: {len} lines", s.rel));
            }
        }
    }
    assert!(functions > 500, "the scan found only {functions} functions");
    assert!(
        wrong.is_empty(),
        "over {MAX_FILE_LINES} lines per file or {MAX_FN_LINES} per fn:\n{}",
        wrong.join("\n")
    );
}

/// Every `fn` with a body: its name, first line (1-based) and length in lines.
fn functions_in(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = find_fn_keyword(line) else {
            continue;
        };
        let name: String = line[at + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 0i32;
        let mut opened = false;
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            let from = if j == i { at } else { 0 };
            for ch in l[from..].chars() {
                match ch {
                    ';' if !opened && depth == 0 => break 'scan, // a declaration
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth -= 1;
                        if opened && depth == 0 {
                            out.push((name.clone(), i + 1, j - i + 1));
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// Where a line's `fn` keyword is (not `fn(` types, not a word containing it).
fn find_fn_keyword(line: &str) -> Option<usize> {
    line.match_indices("fn ").map(|(k, _)| k).find(|&k| {
        let before = line[..k].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && line[k + 3..]
                .trim_start()
                .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    })
}

#[test]
fn the_scanner_sees_through_literals() {
    let code = blank_literals(
        "let a = \"{ crate::cli }\"; // crate::commands {\nlet b = '{';\nfn f<'a>(x: &'a str) {}\n",
    );
    assert!(!code.contains("crate::"), "{code}");
    assert_eq!(code.matches('{').count(), 1, "{code}");
    assert_eq!(functions_in(&code), vec![("f".to_string(), 3, 1)]);
    assert_eq!(
        crate_refs(
            "use crate::{apply::{self, Session}, knob, root::Root};\nlet x = crate::stats::median(v);"
        ),
        ["apply", "knob", "root", "stats"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

/// A file's module path: `apply/plan.rs` is `apply::plan`, `knob/mod.rs` is `knob`.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Every path a file names from the crate root: `crate::a::b`, `super::c`
/// and `self::d` (resolved against the file's module and the inline `mod`
/// blocks around them), with `use` groups expanded.
fn file_refs(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let c: Vec<char> = code.chars().collect();
    let is_ident = |ch: char| ch.is_ascii_alphanumeric() || ch == '_';
    // The inline modules (`mod tests {`) open at each brace depth.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let at_word = i == 0 || !is_ident(c[i - 1]);
        let rest: String = c[i..(i + 7).min(c.len())].iter().collect();
        match c[i] {
            '{' => {
                let before: String = c[i.saturating_sub(80)..i].iter().collect();
                let words: Vec<&str> = before.split_whitespace().rev().take(2).collect();
                let inline = (words.len() == 2 && words[1] == "mod").then(|| words[0].to_string());
                braces.push(inline);
                i += 1;
            }
            '}' => {
                braces.pop();
                i += 1;
            }
            _ if at_word
                && (rest.starts_with("crate::")
                    || rest.starts_with("super::")
                    || rest.starts_with("self::")) =>
            {
                let mut base: Vec<String> = module.to_vec();
                base.extend(braces.iter().flatten().cloned());
                let (head, len) = match &rest {
                    r if r.starts_with("crate::") => (Vec::new(), 7),
                    r if r.starts_with("super::") => {
                        base.pop();
                        (base, 7)
                    }
                    _ => (base, 6),
                };
                let mut head = head;
                let mut len = len;
                while c[i + len..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                    head.pop();
                    len += 7;
                }
                let (paths, used) = use_tree(&c[i + len..]);
                for p in paths {
                    let mut full = head.clone();
                    full.extend(p.into_iter().filter(|s| s != "self"));
                    out.push(full);
                }
                i += len + used.max(1);
            }
            _ => i += 1,
        }
    }
    out
}

/// The names a module's front re-exports (`pub use boot::apply_each;`,
/// `pub use crate::root::X`), each with the full path it comes from.
fn re_exports(code: &str, module: &[String]) -> BTreeMap<String, Vec<String>> {
    let c: Vec<char> = code.chars().collect();
    let mut out = BTreeMap::new();
    for (at, _) in code.match_indices("pub use ") {
        // match_indices gives byte offsets; the code is ASCII outside literals (blanked).
        let start = code[..at].chars().count() + "pub use ".len();
        let (paths, _) = use_tree(&c[start..]);
        for p in paths {
            let Some(name) = p.last().filter(|n| *n != "self" && *n != "*") else {
                continue;
            };
            let full: Vec<String> = match p[0].as_str() {
                "crate" => p[1..].to_vec(),
                "self" => module.iter().chain(&p[1..]).cloned().collect(),
                "super" => module[..module.len().saturating_sub(1)]
                    .iter()
                    .chain(&p[1..])
                    .cloned()
                    .collect(),
                _ => module.iter().chain(&p).cloned().collect(),
            };
            out.insert(name.clone(), full);
        }
    }
    out
}

/// The paths of a `use` tree (`a::{b, c::{d}}` gives a::b and a::c::d; a
/// path in code, `a::b::f(x)`, gives a::b::f), and the characters read.
fn use_tree(c: &[char]) -> (Vec<Vec<String>>, usize) {
    let mut i = 0;
    let mut prefix = Vec::new();
    loop {
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        if i < c.len() && c[i] == '{' {
            i += 1;
            let mut out = Vec::new();
            loop {
                while i < c.len() && (c[i].is_whitespace() || c[i] == ',') {
                    i += 1;
                }
                if i >= c.len() || c[i] == '}' {
                    return (out, i + 1);
                }
                let (paths, used) = use_tree(&c[i..]);
                for p in paths {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += used.max(1);
            }
        }
        let start = i;
        while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
            i += 1;
        }
        if i > start {
            prefix.push(c[start..i].iter().collect());
        }
        if c[i..].starts_with(&[':', ':']) {
            i += 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

#[test]
fn no_import_circle_between_files() {
    let files = sources();
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|s| (module_path(&s.rel), s.rel.clone()))
        .collect();
    let fronts: BTreeMap<&str, BTreeMap<String, Vec<String>>> = files
        .iter()
        .map(|s| (s.rel.as_str(), re_exports(&s.code, &module_path(&s.rel))))
        .collect();
    // The deepest file the path names (`crate::knob::rules::irq::queue_glob`
    // is knob/rules/irq.rs); a name a module's front re-exports
    // (`super::KnobNote` for `pub use outcome::KnobNote`) is the file it comes from.
    let deepest = |path: &[String]| -> Option<&String> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let n = (1..=path.len())
                .rev()
                .find(|&n| by_module.contains_key(&path[..n]))?;
            let to = &by_module[&path[..n]];
            match path.get(n).and_then(|name| fronts[to.as_str()].get(name)) {
                Some(origin) if *origin != path[..=n] => {
                    let mut next = origin.clone();
                    next.extend(path[n + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(to),
            }
        }
        None
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &files {
        let own = module_path(&s.rel);
        for path in file_refs(&s.code, &own) {
            let Some(to) = deepest(&path) else {
                continue;
            };
            let target = module_path(to);
            // A module's front names its own files (`pub use ctx::HostCtx`): not an import back.
            if to != &s.rel && !target.starts_with(&own) {
                edges.entry(s.rel.clone()).or_default().insert(to.clone());
            }
        }
    }
    let mut circles = Vec::new();
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == m) {
            circles.push(format!("{} -> {m}", path[at..].join(" -> ")));
            return;
        }
        if done.contains(m) {
            return;
        }
        path.push(m.to_string());
        for n in edges.get(m).into_iter().flatten() {
            visit(n, edges, path, done, circles);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        visit(m, &edges, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(
        edges
            .get("apply/requeue.rs")
            .is_some_and(|e| e.contains("journal.rs")),
        "the scan found requeue's imports: {:?}",
        edges.get("apply/requeue.rs")
    );
    assert!(
        circles.is_empty(),
        "import circles between files:\n{}",
        circles.join("\n")
    );
}

#[test]
fn use_trees_expand() {
    let c: Vec<char> = "a::{b, c::{d, self}}, x".chars().collect();
    let (paths, _) = use_tree(&c);
    let flat: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(flat, ["a::b", "a::c::d", "a::c::self"]);
    let module = vec!["probe".to_string(), "noise".to_string()];
    let refs = file_refs(
        "use super::noise_attrib::{Attr};\nmod tests { use super::Spin; }",
        &module,
    );
    let flat: Vec<String> = refs.iter().map(|p| p.join("::")).collect();
    assert_eq!(flat, ["probe::noise_attrib::Attr", "probe::noise::Spin"]);
    let front = re_exports(
        "mod boot;\npub use boot::{KnobNote, apply_each};\npub use crate::root::X;",
        &["apply".to_string()],
    );
    assert_eq!(front["KnobNote"].join("::"), "apply::boot::KnobNote");
    assert_eq!(front["X"].join("::"), "root::X");
}
