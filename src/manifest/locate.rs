//! Finds the line of a field (`target.cpus`, `history[1].date`) in one YAML
//! document, and the field at a line: serde_yaml gives lines for syntax and
//! type errors, but checks made after parsing need them too.
//!
//! This reads block-style YAML as people write manifests (keys, `- ` items,
//! flow mappings on one line); anything else falls back to the deepest
//! enclosing field that was found.

#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn parse_path(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                out.push(Seg::Key(rest[..i].to_string()));
            }
            rest = &rest[i..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let Some(end) = stripped.find(']') else { break };
                if let Ok(n) = stripped[..end].parse() {
                    out.push(Seg::Index(n));
                }
                rest = &stripped[end + 1..];
            }
        } else {
            out.push(Seg::Key(rest.to_string()));
        }
    }
    out
}

/// Past this many levels a rendered path keeps its two ends only, so an error
/// about a deeply nested document stays one short line.
const RENDER_DEPTH: usize = 16;

fn render_path(segs: &[&Seg]) -> String {
    if segs.len() > RENDER_DEPTH {
        let (head, tail) = (&segs[..8], &segs[segs.len() - 4..]);
        return format!(
            "{}...({} levels)...{}",
            render_path(head),
            segs.len() - 12,
            render_path(tail)
        );
    }
    let mut s = String::new();
    for seg in segs.iter().copied() {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A mapping key at the start of `text` (`key:` followed by space or end).
fn key_of(text: &str) -> Option<(String, &str)> {
    let (key, after) = if let Some(q) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = text[1..].find(q)? + 1;
        (text[1..end].to_string(), &text[end + 1..])
    } else {
        if text.starts_with(['{', '[', '#', '|', '>', '&', '*', '!']) {
            return None;
        }
        let colon = text
            .char_indices()
            .find(|&(i, c)| c == ':' && text[i + 1..].chars().next().is_none_or(|n| n == ' '))?
            .0;
        (text[..colon].trim_end().to_string(), &text[colon..])
    };
    let after = after.trim_start().strip_prefix(':')?;
    if !after.is_empty() && !after.starts_with(' ') {
        return None;
    }
    Some((key, after))
}

struct Frame {
    indent: usize,
    seg: Seg,
    items: usize,
}

/// Walks the document, calling `visit(line_no, path)` at each key or item;
/// stops when it returns true. The path is the open frames, passed as they
/// are (not copied), so a walk is linear in the document however deep it nests.
fn walk(doc: &str, mut visit: impl FnMut(usize, &[Frame], &str) -> bool) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut root_items = 0usize;
    // Lines of a `|` or `>` scalar are text, not keys.
    let mut scalar_above: Option<usize> = None;
    for (n, line) in doc.lines().enumerate() {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') || content.starts_with("---") {
            continue;
        }
        let mut col = line.len() - content.len();
        match scalar_above {
            Some(indent) if col > indent => continue,
            _ => scalar_above = None,
        }
        let mut rest = content;
        loop {
            while frames.last().is_some_and(|f| f.indent >= col) {
                frames.pop();
            }
            if rest == "-" || rest.starts_with("- ") {
                let counter = match frames.last_mut() {
                    Some(f) => &mut f.items,
                    None => &mut root_items,
                };
                let index = *counter;
                *counter += 1;
                frames.push(Frame {
                    indent: col,
                    seg: Seg::Index(index),
                    items: 0,
                });
                let after = rest.get(1..).unwrap_or("");
                let trimmed = after.trim_start();
                col += 1 + (after.len() - trimmed.len());
                rest = trimmed;
                if visit(n + 1, &frames, rest) {
                    return;
                }
                if rest.is_empty() {
                    break;
                }
                continue;
            }
            if let Some((key, after)) = key_of(rest) {
                frames.push(Frame {
                    indent: col,
                    seg: Seg::Key(key),
                    items: 0,
                });
                if visit(n + 1, &frames, after) {
                    return;
                }
                if after.trim_start().starts_with(['|', '>']) {
                    scalar_above = Some(col);
                }
            }
            break;
        }
    }
}

/// The 1-based line of `path` in `doc`, or of its deepest ancestor found.
pub fn line_of(doc: &str, path: &str) -> Option<usize> {
    let want = parse_path(path);
    let mut best: Option<(usize, usize)> = None; // (depth, line)
    walk(doc, |line, segs, rest| {
        // Bounded by the wanted path's length, not the document's depth.
        let common = segs
            .iter()
            .zip(&want)
            .take_while(|(a, b)| a.seg == **b)
            .count();
        if common == segs.len() && common > best.map_or(0, |b| b.0) {
            best = Some((common, line));
        }
        if common == want.len() && segs.len() == want.len() {
            return true;
        }
        // `states: {min_exit_latency_us: 300}`: the rest of the path on this line.
        if common == segs.len() && common < want.len() && rest.contains('{') {
            let found = want[common..].iter().all(|s| match s {
                Seg::Key(k) => rest.contains(&format!("{k}:")),
                Seg::Index(_) => false,
            });
            if found {
                best = Some((want.len(), line));
                return true;
            }
        }
        false
    });
    best.map(|(_, line)| line)
}

/// The field being written at `line` (1-based): the last key at or before it.
pub fn path_at(doc: &str, line: usize) -> Option<String> {
    // The last visit at or before `line`, as (line, its number among that line's visits).
    let mut last: Option<(usize, usize)> = None;
    walk(doc, |l, _, _| {
        if l > line {
            return true;
        }
        last = Some(match last {
            Some((pl, k)) if pl == l => (l, k + 1),
            _ => (l, 0),
        });
        false
    });
    // Rendered once, at that visit: a second walk that stops there.
    let (at, nth) = last?;
    let (mut k, mut found) = (0usize, None);
    walk(doc, |l, segs, _| {
        if l < at {
            return false;
        }
        if k == nth {
            found = Some(render_path(
                &segs.iter().map(|f| &f.seg).collect::<Vec<_>>(),
            ));
            return true;
        }
        k += 1;
        false
    });
    found.filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
id: a
kind: cpuidle-state   # comment
target:
  cpus: all
  states: {min_exit_latency_us: 300}
set: disabled
history:
  - {date: 2026-07-10, action: applied}
  - date: 2026-07-11
    action: reverted
    hosts:
      - a
      - b
why: >
  text: with colon
verify:
  probe: rpc
";

    #[test]
    fn finds_nested_and_flow_fields() {
        assert_eq!(line_of(DOC, "id"), Some(1));
        assert_eq!(line_of(DOC, "target.cpus"), Some(4));
        assert_eq!(line_of(DOC, "target.states.min_exit_latency_us"), Some(5));
        assert_eq!(line_of(DOC, "history[0].date"), Some(8));
        assert_eq!(line_of(DOC, "history[1].date"), Some(9));
        assert_eq!(line_of(DOC, "history[1].action"), Some(10));
        assert_eq!(line_of(DOC, "history[1].hosts[1]"), Some(13));
        assert_eq!(line_of(DOC, "verify.probe"), Some(17));
        // Missing leaf: the deepest ancestor.
        assert_eq!(line_of(DOC, "target.nothing"), Some(3));
        assert_eq!(line_of(DOC, "nothing"), None);
    }

    #[test]
    fn deep_nesting_is_located_in_linear_time_and_named_briefly() {
        let deep = format!("{}x\n", "- ".repeat(50_000));
        let p = path_at(&deep, 1).unwrap();
        assert!(p.len() < 100, "{p}");
        assert!(p.contains("(49988 levels)"), "{p}");
        assert_eq!(line_of(&deep, "[0][0][0]"), Some(1));
        let lines: String = (0..20_000)
            .map(|i| format!("{}- \n", " ".repeat(i % 200)))
            .collect();
        assert!(path_at(&lines, 20_000).is_some());
    }

    #[test]
    fn names_the_field_at_a_line() {
        assert_eq!(path_at(DOC, 4).as_deref(), Some("target.cpus"));
        assert_eq!(path_at(DOC, 10).as_deref(), Some("history[1].action"));
        assert_eq!(path_at(DOC, 15).as_deref(), Some("why"));
    }
}
