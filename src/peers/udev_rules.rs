//! udev rules read as udevd reads them, far enough to tell which rule last
//! writes a block device's queue attribute: a line is `KEY{arg}OP"value"`
//! tokens joined by commas (a `\` at the end continues it); match tokens
//! (`==`, `!=`) must all hold for the line's assignments to run, and a
//! value is a list of globs joined by `|` (udev(7); src/udev/udev-rules.c).
//! Only the keys of the device itself are decided (`ACTION`, `SUBSYSTEM`,
//! `ENV{DEVTYPE}`, `KERNEL`, `ATTR{...}`, `TEST`); any other key (a parent's
//! `ATTRS`, `PROGRAM`, another `ENV`) counts as holding, so a rule that may
//! write the attribute is never thought not to.

use crate::root::Root;

use super::udev::{RULES_DIRS, by_name, glob};

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub key: String,
    pub arg: Option<String>,
    pub op: String,
    pub value: String,
}

/// One rule line of a file, continuations joined.
pub struct Rule {
    pub file: String,
    pub line: usize,
    pub tokens: Vec<Token>,
}

/// The tokens of one rule line; `None` for a line udev would reject.
pub fn tokens(line: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        if rest.is_empty() {
            break;
        }
        let key_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
        let key = rest[..key_end].to_string();
        rest = &rest[key_end..];
        let mut arg = None;
        if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}')?;
            arg = Some(r[..end].to_string());
            rest = &r[end + 1..];
        }
        rest = rest.trim_start();
        let op = ["==", "!=", "+=", "-=", ":=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))?;
        rest = rest[op.len()..].trim_start();
        let body = rest.strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => {
                    let (_, c) = chars.next()?;
                    if c != '"' {
                        value.push('\\');
                    }
                    value.push(c);
                }
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        rest = &body[end + 1..];
        out.push(Token {
            key,
            arg,
            op: op.to_string(),
            value,
        });
    }
    Some(out)
}

/// Every rule of the host's rules files, in udev's order.
pub fn rules(root: &Root) -> Vec<Rule> {
    let mut out = Vec::new();
    for file in by_name(root, &RULES_DIRS, ".rules") {
        let Ok(text) = root.read_string(&file) else {
            continue;
        };
        let mut joined = String::new();
        let mut first = 0;
        for (i, line) in text.lines().enumerate() {
            if joined.is_empty() {
                first = i + 1;
            }
            match line.strip_suffix('\\') {
                Some(head) => joined.push_str(head),
                None => {
                    joined.push_str(line);
                    let l = std::mem::take(&mut joined);
                    if l.trim().is_empty() || l.trim_start().starts_with('#') {
                        continue;
                    }
                    if let Some(tokens) = tokens(&l) {
                        out.push(Rule {
                            file: file.clone(),
                            line: first,
                            tokens,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Whether `value` (globs joined by `|`) matches `have`.
fn matches(value: &str, have: &str) -> bool {
    value.split('|').any(|g| glob(g, have))
}

impl Rule {
    /// Whether its match keys hold for the disk `dev` (`/sys/block/DEV`) at
    /// an `add` or `change` event.
    pub fn holds_for_disk(&self, root: &Root, dev: &str) -> bool {
        let attr = |a: &str| {
            root.read_trimmed(&format!("/sys/block/{dev}/{a}"))
                .ok()
                .flatten()
        };
        self.tokens.iter().all(|t| {
            let want = match t.op.as_str() {
                "==" => true,
                "!=" => false,
                _ => return true,
            };
            let hit = match (t.key.as_str(), t.arg.as_deref()) {
                ("ACTION", _) => matches(&t.value, "add") || matches(&t.value, "change"),
                ("SUBSYSTEM", _) => matches(&t.value, "block"),
                ("ENV", Some("DEVTYPE")) => matches(&t.value, "disk"),
                ("KERNEL", _) => matches(&t.value, dev),
                ("ATTR", Some(a)) => attr(a).is_some_and(|v| matches(&t.value, &v)),
                ("TEST", _) if !t.value.starts_with('/') => {
                    root.exists(&format!("/sys/block/{dev}/{}", t.value))
                }
                _ => return true,
            };
            hit == want
        })
    }

    /// Its `ATTR{attr}=` assignments' values.
    pub fn assigns(&self, attr: &str) -> Option<&str> {
        self.tokens
            .iter()
            .rfind(|t| {
                t.key == "ATTR"
                    && t.arg.as_deref() == Some(attr)
                    && matches!(t.op.as_str(), "=" | ":=")
            })
            .map(|t| t.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_as_udev_reads_them() {
        let t = tokens(
            r#"ACTION=="add|change", KERNEL=="sd*" ,ATTR{queue/scheduler}="bfq", ENV{X}!="a\"b""#,
        )
        .unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].value, "add|change");
        assert_eq!(t[2].arg.as_deref(), Some("queue/scheduler"));
        assert_eq!(t[2].op, "=");
        assert_eq!(t[3].op, "!=");
        assert_eq!(t[3].value, "a\"b");
        assert!(tokens(r#"KERNEL=="sd*"#).is_none(), "an unterminated value");
        assert!(matches("nvme*|sd[a-z]", "sdb"));
        assert!(!matches("nvme*|sd[a-z]", "vda"));
    }
}
