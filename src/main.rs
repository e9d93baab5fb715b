use std::ffi::OsString;

use clap::Parser;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The shared options and whether each takes a value. Each subcommand
/// declares those it uses; standing before the subcommand's name, they are
/// moved after it, so `hostknob --root R inventory` is `hostknob inventory
/// --root R`, and one the subcommand does not take is a usage error naming it.
const HOISTED: &[(&str, bool)] = &[
    ("--root", true),
    ("--format", true),
    ("--host", true),
    ("--manifest", true),
    ("--state-dir", true),
    ("--quiet", false),
    ("-q", false),
];

fn hoist(args: Vec<OsString>) -> Vec<OsString> {
    let mut i = 1;
    while let Some(a) = args.get(i).and_then(|a| a.to_str()) {
        let Some(&(name, value)) = HOISTED
            .iter()
            .find(|(n, _)| a == *n || (a.starts_with(n) && a[n.len()..].starts_with('=')))
        else {
            break;
        };
        i += if value && a == name { 2 } else { 1 };
    }
    // Nothing to move, or no subcommand after them: clap says what is wrong.
    let sub = match args.get(i).and_then(|a| a.to_str()) {
        Some(s) if i > 1 && !s.starts_with('-') => i,
        _ => return args,
    };
    let mut out = vec![args[0].clone(), args[sub].clone()];
    out.extend_from_slice(&args[1..sub]);
    out.extend_from_slice(&args[sub + 1..]);
    out
}

fn main() {
    let args = hoist(std::env::args_os().collect());
    let cli = match hostknob::cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // Usage errors exit 1, not clap's 2: exit 2 means drift or a stale
        // document to the automation that runs hostknob.
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    match hostknob::commands::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("hostknob: {e:#}");
            std::process::exit(1);
        }
    }
}
