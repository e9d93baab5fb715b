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
///
/// Errs towards counting more: a line's indentation opens a level even
/// inside a flow collection. It skips only what YAML reads as text: quoted
/// scalars (a quote only where a scalar can begin, so `it's` or `a "b` in
/// plain text open nothing), comments, and the lines of a `|`/`>` scalar or of
/// a plain scalar's continuation (indented past the key that owns them).
pub fn too_deep(text: &str) -> Option<usize> {
    // Indentation columns of the open block levels.
    let mut block: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    // Inside a quoted scalar that goes on over lines: its quote character.
    let mut quote: Option<u8> = None;
    // Lines indented past this column are the text of a scalar above.
    let mut text_past: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        if quote.is_none() {
            let content = &bytes[indent..];
            if content.is_empty() || content[0] == b'#' {
                continue;
            }
            match text_past {
                Some(col) if indent > col && flow == 0 => continue,
                _ => text_past = None,
            }
            if line == "---" || line.starts_with("--- ") || line == "..." {
                block.clear();
                flow = 0;
                continue;
            }
            while block.last().is_some_and(|&c| c >= indent) {
                block.pop();
            }
            block.push(indent);
            // `- - - x`, `? ? x`: each indicator opens a level at its own column.
            let mut col = indent;
            while matches!(bytes.get(col), Some(b'-' | b'?' | b':'))
                && matches!(bytes.get(col + 1), Some(b' ') | None)
            {
                col += 1;
                while bytes.get(col) == Some(&b' ') {
                    col += 1;
                }
                if col >= bytes.len() {
                    break;
                }
                block.push(col);
                if block.len() + flow > MAX_DEPTH {
                    return Some(n + 1);
                }
            }
            if block.len() + flow > MAX_DEPTH {
                return Some(n + 1);
            }
        }
        let owner = block.last().copied().unwrap_or(0);
        let at = |i: usize| bytes.get(i).copied();
        let ends_token = |i: usize| matches!(at(i), None | Some(b' ' | b'\t'));
        let mut i = if quote.is_none() { indent } else { 0 };
        // Whether a scalar or collection may begin here, and whether a plain
        // scalar value (not a key) is being read.
        let (mut token_start, mut plain_value) = (quote.is_none(), false);
        while i < bytes.len() {
            let b = bytes[i];
            if let Some(q) = quote {
                if b == b'\\' && q == b'"' {
                    i += 1;
                } else if b == q && q == b'\'' && at(i + 1) == Some(b'\'') {
                    i += 1; // `''` inside single quotes is one quote
                } else if b == q {
                    quote = None;
                    token_start = false;
                }
                i += 1;
                continue;
            }
            match b {
                b' ' | b'\t' => {}
                b'#' if i == 0 || matches!(bytes[i - 1], b' ' | b'\t') => break,
                b'"' | b'\'' if token_start => {
                    quote = Some(b);
                    plain_value = false;
                }
                b'[' | b'{' if token_start || flow > 0 => {
                    flow += 1;
                    if block.len() + flow > MAX_DEPTH {
                        return Some(n + 1);
                    }
                    (token_start, plain_value) = (true, false);
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    token_start = false;
                }
                b',' if flow > 0 => token_start = true,
                b':' if flow > 0 || ends_token(i + 1) => (token_start, plain_value) = (true, false),
                b'-' | b'?' if token_start && ends_token(i + 1) => {}
                // An anchor or a tag: the node it names comes after it.
                b'&' | b'!' if token_start => {
                    while i + 1 < bytes.len() && !ends_token(i + 1) {
                        i += 1;
                    }
                }
                b'|' | b'>' if token_start && flow == 0 && header_ends(&bytes[i + 1..]) => {
                    text_past = Some(owner);
                    break;
                }
                _ => {
                    plain_value |= token_start && flow == 0;
                    token_start = false;
                }
            }
            i += 1;
        }
        if quote.is_none() && flow == 0 && plain_value {
            text_past = Some(owner);
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
        // Text that only looks like syntax opens nothing, and does not
        // hide the nesting after it.
        let deep_flow = format!("caveats: {}\n", "[".repeat(100));
        let dashes = format!("{}x\n", "- ".repeat(100));
        for head in [
            "why: a [\n",
            "why: a \"b\n",
            "why: it's\n",
            "why: text\n  \"more\n",
        ] {
            for tail in [&deep_flow, &dashes] {
                let doc = format!("{head}{tail}");
                assert_eq!(too_deep(&doc), Some(head.lines().count() + 1), "{doc:.80}");
            }
        }
        for head in ["why: &a ", "why: !t ", "why: !!seq &a "] {
            let doc = format!("{head}{}\n", "[".repeat(100));
            assert_eq!(too_deep(&doc), Some(1), "{doc:.30}");
        }
        for indicator in ["? ", "- ? ", ": "] {
            let doc = format!("{}x\n", indicator.repeat(100));
            assert_eq!(too_deep(&doc), Some(1), "{doc:.30}");
        }
        let prose = "why: a plain value\n  going on [ over\n  \"lines\" it's # fine\nset: 1\n";
        assert_eq!(too_deep(prose), None);
        // Text of a `|` scalar in a list item ends where the item's keys go on.
        let item = format!("- note: |\n    [[[\n  more: {}\n", "[".repeat(70));
        assert_eq!(too_deep(&item), Some(3));
        // Each document starts again.
        let docs = (0..100)
            .map(|_| "a:\n b:\n  c: 1\n")
            .collect::<Vec<_>>()
            .join("---\n");
        assert_eq!(too_deep(&docs), None);
    }
}
