use std::ffi::OsString;

use clap::Parser;
use hostknob::cli::{Cli, Command};

// The system allocator: linking jemalloc runs its start-up in every command
// (a tenth of a live `inventory`). `probe rss --self-burst`, whose subject is
// jemalloc, runs in `hostknob-jemalloc` (src/bin), which has it.

/// The shared options: (spelling, long name, takes a value, is context).
/// Standing before the subcommand's name, they are moved after it, so
/// `hostknob --root R inventory` is `hostknob inventory --root R`. A context
/// option (where and what: root, host, manifest, state directory, quiet) that
/// the subcommand does not use is dropped there, as its HOSTKNOB_* variable
/// would be ignored: `hostknob -q --manifest M inventory` works the same for
/// every command. `--format` is a request about the output, so a subcommand
/// without it refuses it (clap's usage error), as it does after the name.
const HOISTED: &[(&str, &str, bool, bool)] = &[
    ("--root", "root", true, true),
    ("--format", "format", true, false),
    ("--host", "host", true, true),
    ("--manifest", "manifest", true, true),
    ("--overrides", "overrides", true, true),
    ("--state-dir", "state-dir", true, true),
    ("--quiet", "quiet", false, true),
    ("-q", "quiet", false, true),
];

/// Whether subcommand `sub` takes `--long`. The read commands answer from
/// their own options (building the whole tree costs a live `inventory` a
/// sixth); an unknown name answers yes, so clap reports it.
fn takes(sub: &str, long: &str) -> bool {
    use clap::{Args, CommandFactory};
    use hostknob::cli::{AuditArgs, DocArgs, InventoryArgs, KnobsArgs};
    let own = |cmd: clap::Command| cmd.get_arguments().any(|a| a.get_long() == Some(long));
    match sub {
        "inventory" => own(InventoryArgs::augment_args(clap::Command::new(""))),
        "audit" => own(AuditArgs::augment_args(clap::Command::new(""))),
        "doc" => own(DocArgs::augment_args(clap::Command::new(""))),
        "knobs" => own(KnobsArgs::augment_args(clap::Command::new(""))),
        _ => Cli::command()
            .find_subcommand(sub)
            .is_none_or(|c| own(c.clone())),
    }
}

fn hoist(args: Vec<OsString>) -> Vec<OsString> {
    let mut i = 1;
    // (start, end, long name, is context) of each shared option before the subcommand.
    let mut found = Vec::new();
    while let Some(a) = args.get(i).and_then(|a| a.to_str()) {
        let Some(&(name, long, value, context)) = HOISTED
            .iter()
            .find(|(n, ..)| a == *n || (a.starts_with(n) && a[n.len()..].starts_with('=')))
        else {
            break;
        };
        let end = (i + if value && a == name { 2 } else { 1 }).min(args.len());
        found.push((i, end, long, context));
        i = end;
    }
    // Nothing to move, or no subcommand after them: clap says what is wrong.
    let sub = match args.get(i).and_then(|a| a.to_str()) {
        Some(s) if i > 1 && !s.starts_with('-') => i,
        _ => return args,
    };
    let name = args[sub].to_str().unwrap_or_default();
    let mut out = vec![args[0].clone(), args[sub].clone()];
    for (start, end, long, context) in found {
        if !context || takes(name, long) {
            out.extend_from_slice(&args[start..end]);
        }
    }
    out.extend_from_slice(&args[sub + 1..]);
    out
}

/// Parses the command line. Building clap's whole tree (every subcommand's
/// options and help) is a sixth of a live `inventory`, so the read commands
/// are first parsed by their own subcommand alone; whatever that does not take
/// cleanly (help, a usage error) is parsed again by the whole tree, whose
/// answer is the one given.
fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    match parse_read_command(&args) {
        Some(cli) => Ok(cli),
        None => Cli::try_parse_from(args),
    }
}

fn parse_read_command(args: &[OsString]) -> Option<Cli> {
    fn alone<A: clap::Args + clap::FromArgMatches>(
        name: &'static str,
        args: &[OsString],
    ) -> Option<A> {
        let matches = A::augment_args(clap::Command::new(name))
            .try_get_matches_from(&args[1..])
            .ok()?;
        A::from_arg_matches(&matches).ok()
    }
    let command = match args.get(1)?.to_str()? {
        "inventory" => Command::Inventory(alone("inventory", args)?),
        "audit" => Command::Audit(alone("audit", args)?),
        "doc" => Command::Doc(alone("doc", args)?),
        "knobs" => Command::Knobs(alone("knobs", args)?),
        _ => return None,
    };
    Some(Cli { command })
}

/// A reader that stops early (`hostknob schema | head`) closes the pipe: exit
/// as a shell expects (128 + SIGPIPE), without a panic and its backtrace.
/// SIGPIPE itself stays ignored: a probe's socket must get EPIPE, not a kill.
fn quiet_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

pub(crate) fn main() {
    quiet_when_stdout_closes();
    let args = hoist(std::env::args_os().collect());
    let cli = match parse(args.clone()) {
        Ok(cli) => cli,
        // Usage errors exit 1, not clap's 2: exit 2 means drift or a stale
        // document to the automation that runs hostknob.
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let format = asked_format(&args);
    match hostknob::commands::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // A command the error advises runs as printed (src/advice.rs).
            let e = hostknob::advice::runnable(format!("{e:#}"));
            eprintln!("hostknob: {e}");
            // A machine asked for JSON or YAML: the error is that too, on stdout.
            let report = hostknob::contract::ErrorReport {
                error: e,
                exit_code: 1,
            };
            let own =
                hostknob::contract::DOCUMENT_RENDERED.load(std::sync::atomic::Ordering::Relaxed);
            if let Some(text) = format.filter(|_| !own).and_then(|f| report.render(f)) {
                print!("{text}");
            }
            std::process::exit(1);
        }
    }
}

/// The value of `--format` on the command line (after the subcommand's name;
/// knob ids after `--` are not options).
fn asked_format(args: &[OsString]) -> Option<&str> {
    let args: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().unwrap_or_default())
        .collect();
    let end = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let mut value = None;
    for (i, &a) in args[..end].iter().enumerate() {
        if a == "--format" {
            value = args.get(i + 1).copied();
        } else if let Some(v) = a.strip_prefix("--format=") {
            value = Some(v);
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(l: &str) -> Vec<OsString> {
        std::iter::once("hostknob")
            .chain(l.split(' '))
            .map(OsString::from)
            .collect()
    }

    /// Shared options before the name move after it; context options the
    /// subcommand does not take are dropped there, --format is kept for clap.
    #[test]
    fn shared_options_before_the_subcommand_move_or_drop() {
        for (given, hoisted) in [
            ("-q inventory cpu", "inventory cpu"),
            ("--manifest m --root /r inventory", "inventory --root /r"),
            (
                "--root=/r --format json audit x",
                "audit --root=/r --format json x",
            ),
            ("--state-dir /s -q apply a", "apply --state-dir /s -q a"),
            ("--format json doc", "doc --format json"),
            ("--root /r --quiet schema", "schema"),
            ("--host h probe wakeup", "probe --host h wakeup"),
            ("--root /r nosuch", "nosuch --root /r"),
            ("inventory -q", "inventory -q"),
        ] {
            assert_eq!(hoist(line(given)), line(hoisted), "{given}");
        }
        assert_eq!(hoist(line("--root")), line("--root"));
    }

    /// The read commands' own parse gives what the whole tree gives, or
    /// leaves the command line to it.
    #[test]
    fn a_read_command_alone_parses_as_the_whole_tree_does() {
        let lines = [
            "inventory",
            "inventory cpu idle --format json",
            "inventory --section cpu --section=memory --root /tmp --host h1",
            "inventory --format=yaml processes",
            "audit",
            "audit k1 k2 --format prometheus --textfile /tmp/x --manifest m --root /r --host h",
            "doc --check --out - --host web-7 --manifest manifest",
            "doc --out=/tmp/d.md",
            "knobs --format json --manifest m",
        ];
        for line in lines {
            let args: Vec<OsString> = std::iter::once("hostknob")
                .chain(line.split(' '))
                .map(OsString::from)
                .collect();
            let alone = parse_read_command(&args)
                .unwrap_or_else(|| panic!("`{line}` was left to the whole tree"));
            let whole = Cli::try_parse_from(&args).unwrap();
            assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{line}");
        }
        // Help, usage errors and other commands go to the whole tree.
        for line in [
            "inventory --help",
            "inventory -h",
            "inventory nosuchsection",
            "inventory --manifest m",
            "doc --format json",
            "audit --format",
            "audit --wait",
            "probe wakeup",
            "--version",
            "help inventory",
        ] {
            let args: Vec<OsString> = std::iter::once("hostknob")
                .chain(line.split(' '))
                .map(OsString::from)
                .collect();
            assert!(parse_read_command(&args).is_none(), "{line}");
        }
    }
}
