//! `hostknob man --out DIR`: a man page per command, each written through the
//! root seam (a temporary file renamed over the name): a planted link, hard
//! link or FIFO in DIR is refused, never written through or waited on.

use anyhow::{Context, Result, anyhow};
use clap::{ArgAction, Command, CommandFactory};

use crate::cli::ManArgs;
use crate::root::Root;

pub fn run(args: &ManArgs) -> Result<i32> {
    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|e| anyhow!("{}: {e}", out.display()))?;
    let seam = Root::confined(out).with_context(|| format!("{}: cannot open", out.display()))?;
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    collect(cmd, &mut pages)?;
    for (name, bytes) in pages {
        seam.replace_file(&format!("/{name}"), &bytes)
            .with_context(|| format!("writing {}", out.join(&name).display()))?;
    }
    Ok(0)
}

/// Every visible command's page, subcommands first (as clap_mangen orders them).
fn collect(cmd: Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        collect(sub, pages)?;
    }
    let usage = synopsis(&cmd);
    let man = clap_mangen::Man::new(cmd.override_usage(usage));
    let mut bytes = Vec::new();
    man.render(&mut bytes)?;
    pages.push((man.get_filename(), bytes));
    Ok(())
}

/// The synopsis with every option's argument (`[--root <DIR>]`), which
/// clap_mangen's own synopsis leaves out.
pub fn synopsis(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string()];
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = || {
            arg.get_value_names()
                .map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>())
                .unwrap_or_else(|| vec![format!("<{}>", arg.get_id().as_str().to_uppercase())])
                .join(" ")
        };
        let many = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let text = if arg.is_positional() {
            value()
        } else {
            let flag = match (arg.get_short(), arg.get_long()) {
                (Some(s), Some(l)) => format!("-{s}|--{l}"),
                (Some(s), None) => format!("-{s}"),
                (None, Some(l)) => format!("--{l}"),
                (None, None) => continue,
            };
            if arg.get_action().takes_values() {
                format!("{flag} {}", value())
            } else {
                flag
            }
        };
        let dots = if many { "..." } else { "" };
        parts.push(if arg.is_required_set() {
            format!("{text}{dots}")
        } else {
            format!("[{text}]{dots}")
        });
    }
    if cmd.has_subcommands() {
        parts.push("<COMMAND>".into());
    }
    parts.join(" ")
}
