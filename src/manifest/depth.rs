//! How deep a YAML file nests, found in one linear pass before serde_yaml
//! sees it: the parser's time and memory grow faster than the text with
//! nesting (100k `[` took 40 s; 4 MiB of indentation 643 MB), and no knob
//! needs more than a few levels.
//!
//! Counted: flow collections (`[`, `{`) outside quotes and comments, plus
//! block levels, one per indentation step and per `- ` that opens an item on
//! the same line. An approximation on the safe side for manifests as people
//! write them: it never counts fewer levels than a line opens.

/// The most levels a manifest file may nest.
pub const MAX_DEPTH: usize = 64;

/// The first line (1-based) where `text` nests deeper than [`MAX_DEPTH`].
pub fn too_deep(text: &str) -> Option<usize> {
    // Indentation columns of the open block levels.
    let mut block: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    // Inside a quoted scalar that may go on over lines: its quote character.
    let mut quote: Option<u8> = None;
    // The column of the key whose `|` or `>` text follows: lines indented more are text.
    let mut scalar_of: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        let content = &bytes[indent..];
        if quote.is_none() && flow == 0 {
            if content.is_empty() || content[0] == b'#' {
                continue;
            }
            match scalar_of {
                Some(col) if indent > col => continue,
                _ => scalar_of = None,
            }
            if line == "---" || line.starts_with("--- ") || line == "..." {
                block.clear();
                continue;
            }
            while block.last().is_some_and(|&c| c >= indent) {
                block.pop();
            }
            block.push(indent);
            // `- - - x`: each dash opens a level at its own column.
            let mut col = indent;
            while bytes.get(col) == Some(&b'-') && matches!(bytes.get(col + 1), Some(b' ') | None) {
                col += 1;
                while bytes.get(col) == Some(&b' ') {
                    col += 1;
                }
                if col >= bytes.len() {
                    break;
                }
                block.push(col);
                if block.len() > MAX_DEPTH {
                    return Some(n + 1);
                }
            }
            if block.len() > MAX_DEPTH {
                return Some(n + 1);
            }
        }
        let start = if quote.is_none() && flow == 0 {
            indent
        } else {
            0
        };
        let mut i = start;
        let mut prev = b' ';
        while i < bytes.len() {
            let b = bytes[i];
            match quote {
                Some(q) => {
                    if b == b'\\' && q == b'"' {
                        i += 1;
                    } else if b == q {
                        // `''` inside single quotes is one quote.
                        if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            quote = None;
                        }
                    }
                }
                None => match b {
                    b'#' if prev == b' ' || prev == b'\t' => break,
                    b'"' | b'\'' if starts_scalar(prev) => quote = Some(b),
                    b'[' | b'{' if starts_scalar(prev) || flow > 0 => {
                        flow += 1;
                        if block.len() + flow > MAX_DEPTH {
                            return Some(n + 1);
                        }
                    }
                    b']' | b'}' if flow > 0 => flow -= 1,
                    b'|' | b'>'
                        if flow == 0 && starts_scalar(prev) && header_ends(&bytes[i + 1..]) =>
                    {
                        scalar_of = Some(indent);
                    }
                    _ => {}
                },
            }
            prev = b;
            i += 1;
        }
    }
    None
}

/// Whether the rest of a `|` or `>` line is a block scalar header's end
/// (`-`, `+`, an indentation digit, then nothing or a comment).
fn header_ends(rest: &[u8]) -> bool {
    let mut i = 0;
    while rest
        .get(i)
        .is_some_and(|b| matches!(b, b'-' | b'+' | b'1'..=b'9'))
    {
        i += 1;
    }
    while rest.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
        i += 1;
    }
    i == rest.len() || (i > 0 && rest[i] == b'#')
}

/// Whether a scalar or collection may begin after `prev` (so a quote or a
/// bracket there is syntax, not text such as `don't`).
fn starts_scalar(prev: u8) -> bool {
    matches!(prev, b' ' | b'\t' | b':' | b'-' | b'[' | b'{' | b',' | b'?')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_is_shallow_and_deep_flow_or_blocks_are_found_at_their_line() {
        let knob = "id: a\nwhy: it's [x] and {y}\ntarget:\n  states: {names: [C6, 'C1''E']}\n\
                    history:\n  - date: 2026-01-01\n    hosts: [\"*\"]\nnote: |\n  [[[[[[[\n";
        assert_eq!(too_deep(knob), None);
        let flow = format!("id: a\nwhy: {}\n", "[".repeat(100_000));
        assert_eq!(too_deep(&flow), Some(2));
        let braces = format!("a:\n  b: {}1{}\n", "{x: ".repeat(70), "}".repeat(70));
        assert_eq!(too_deep(&braces), Some(2));
        // 64 levels pass, 65 do not.
        let ok = format!("why: {}{}\n", "[".repeat(63), "]".repeat(63));
        assert_eq!(too_deep(&ok), None);
        let over = format!("why: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(too_deep(&over), Some(1));
        let dashes = format!("{}x\n", "- ".repeat(20_000));
        assert_eq!(too_deep(&dashes), Some(1));
        let stairs: String = (0..1000)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert_eq!(too_deep(&stairs), Some(MAX_DEPTH + 1));
        // Brackets inside quotes, comments and `|` text are not nesting.
        let text = format!(
            "a: \"{0}\"\nb: '{0}'\nc: 1 # {0}\nd: |\n  {0}\ne: 2\n",
            "[".repeat(100)
        );
        assert_eq!(too_deep(&text), None);
        // Each document starts again.
        let docs = (0..100)
            .map(|_| "a:\n b:\n  c: 1\n")
            .collect::<Vec<_>>()
            .join("---\n");
        assert_eq!(too_deep(&docs), None);
    }
}
