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
