//! Issue 49 item 2: a command hostknob prints as advice (in backticks:
//! `` `hostknob revert K --force` ``) runs as printed on the host it was
//! printed for. It carries the options this invocation needed to reach that
//! host's tree, name, manifest and state (`--root`, `--host`, `--manifest`,
//! `--overrides`, `--state-dir`), each shell-quoted; every command takes
//! them before its name (main.rs hoists them, dropping the ones a command
//! does not use). A chain with `verify` or `hold` gets no `--root`, and
//! `probe` none of them: they measure or hold the machine they run on, and
//! refuse a tree.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The options of this invocation that choose its host, as given.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub root: Option<PathBuf>,
    pub host: Option<String>,
    pub manifest: Option<PathBuf>,
    pub overrides: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

static CONTEXT: OnceLock<Context> = OnceLock::new();

/// Records this process's context (the first call wins: one command a process).
pub fn set(c: Context) {
    let _ = CONTEXT.set(c);
}

fn word(p: &Path) -> String {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    crate::name::shell_word(&p.to_string_lossy())
}

/// The options to insert after `hostknob` in `command` (one command, no
/// `&&`), each not already there; `measuring`: no `--root`.
fn options(c: &Context, command: &str, measuring: bool) -> String {
    let has = |o: &str| {
        command
            .split_whitespace()
            .any(|w| w == o || w.starts_with(&format!("{o}=")))
    };
    let mut out = String::new();
    let root = c.root.as_deref().filter(|r| *r != Path::new("/"));
    let state = c
        .state_dir
        .as_deref()
        .filter(|s| *s != Path::new("/var/lib/hostknob"));
    if let Some(r) = root.filter(|_| !measuring)
        && !has("--root")
    {
        out += &format!(" --root {}", word(r));
    }
    if let Some(h) = &c.host
        && !has("--host")
    {
        out += &format!(" --host {}", crate::name::shell_word(h));
    }
    let paths = [
        ("--manifest", c.manifest.as_deref()),
        ("--overrides", c.overrides.as_deref()),
        ("--state-dir", state),
    ];
    for (opt, p) in paths {
        if let Some(p) = p
            && !has(opt)
        {
            // A state directory is resolved under --root: kept as given.
            let w = match opt {
                "--state-dir" => crate::name::shell_word(&p.to_string_lossy()),
                _ => word(p),
            };
            out += &format!(" {opt} {w}");
        }
    }
    out
}

/// `text` with each backticked `hostknob ...` command (and each part of a
/// `... && ...` chain) given this invocation's options, so that it runs as
/// printed. Text outside backticks is left as it is.
pub fn runnable(text: impl Into<String>) -> String {
    let text = text.into();
    match CONTEXT.get() {
        Some(c) => with_context(c, &text),
        None => text,
    }
}

fn with_context(c: &Context, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, piece) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        // A probe reads no manifest, host name or state: as it is.
        if i % 2 == 0 || !piece.starts_with("hostknob ") || piece.starts_with("hostknob probe ") {
            out.push_str(piece);
            continue;
        }
        // verify and hold measure or hold this machine: they refuse a root.
        let measuring = [" verify", " hold"]
            .iter()
            .any(|w| piece.contains(&format!("{w} ")) || piece.ends_with(w));
        let parts: Vec<String> = piece
            .split("&&")
            .map(|part| {
                let lead = &part[..part.len() - part.trim_start().len()];
                match part.trim_start().strip_prefix("hostknob") {
                    Some(rest) if rest.starts_with(' ') || rest.is_empty() => {
                        format!("{lead}hostknob{}{rest}", options(c, part, measuring))
                    }
                    _ => part.to_string(),
                }
            })
            .collect();
        out.push_str(&parts.join("&&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_command_gets_the_options_that_reach_its_host() {
        let c = Context {
            root: Some("/tmp/a b".into()),
            host: Some("web-7".into()),
            manifest: Some("/m".into()),
            overrides: None,
            state_dir: Some("/var/lib/hostknob".into()),
        };
        assert_eq!(
            with_context(&c, "x: `hostknob revert k --force` restores it; `hostknob`"),
            "x: `hostknob --root '/tmp/a b' --host web-7 --manifest /m revert k --force` \
             restores it; `hostknob`"
        );
        // A chain with a measurement: no --root in any part; options given are kept.
        assert_eq!(
            with_context(
                &c,
                "`hostknob --manifest /n revert k && hostknob verify k` measures"
            ),
            "`hostknob --host web-7 --manifest /n revert k && hostknob --host web-7 \
             --manifest /m verify k` measures"
        );
        // Outside backticks, and without a context, nothing changes.
        assert_eq!(with_context(&c, "hostknob revert k"), "hostknob revert k");
        assert_eq!(
            with_context(&Context::default(), "`hostknob revert k`"),
            "`hostknob revert k`"
        );
    }
}
