use std::path::Path;

use anyhow::{Context as _, Result, bail};

use crate::cli::IsolateArgs;
use crate::inventory::{self, Section};
use crate::isolate::{self, Context, IsolatePlan, Request};
use crate::render;
use crate::root::Root;

/// `--count N` or `--cpus LIST`, and the option as the fragment records it;
/// a bare number after --cpus is the old spelling of --count.
fn request(args: &IsolateArgs) -> Result<(Request, String)> {
    match (&args.count, &args.cpus) {
        (Some(n), _) => Ok((Request::count(n)?, format!("--count {}", n.trim()))),
        (None, Some(l)) => match Request::list(l)? {
            Request::Count(n) => {
                super::deprecated(
                    &format!("--cpus {n} (a count)"),
                    &format!(
                        "--count {n} for {n} CPUs chosen here, or --cpus {n}-{n} for CPU {n} alone"
                    ),
                );
                Ok((Request::Count(n), format!("--count {n}")))
            }
            r => Ok((r, format!("--cpus {}", l.trim()))),
        },
        (None, None) => bail!("isolate needs --count N (how many CPUs) or --cpus LIST (which)"),
    }
}

pub fn run(args: &IsolateArgs) -> Result<i32> {
    let (req, asked) = request(args)?;
    let root = Root::open(&args.read.root.root)?;
    let host = crate::manifest::host::resolve(&root, args.read.host.host.as_deref())
        .checked()?
        .name;
    let inv = inventory::collect_only(
        &root,
        &[
            Section::Cpu,
            Section::Caches,
            Section::Numa,
            Section::Network,
        ],
    )?;
    let nics = isolate::Nics::read(&inv.network, &root);
    for w in &inv.warnings {
        eprintln!("hostknob: warning: {}", render::escape_controls(w));
    }
    let date = crate::manifest::ledger::today();
    let command = format!(
        "hostknob isolate {asked}{}{}{}{}",
        if args.allow_cpu0 { " --allow-cpu0" } else { "" },
        if args.allow_small_housekeeping {
            " --allow-small-housekeeping"
        } else {
            ""
        },
        match args.isolcpus.as_str() {
            "managed_irq" => String::new(),
            m => format!(" --isolcpus {m}"),
        },
        match args.prefer.as_str() {
            "performance" => String::new(),
            p => format!(" --prefer {p}"),
        }
    );
    let cx = Context {
        host: &host,
        date: &date,
        command: &command,
    };
    let opts = isolate::Options {
        allow_cpu0: args.allow_cpu0,
        allow_small_housekeeping: args.allow_small_housekeeping,
        prefer: isolate::Prefer::parse(&args.prefer)
            .ok_or_else(|| anyhow::anyhow!("--prefer {}: performance or efficient", args.prefer))?,
    };
    let isolcpus = isolate::Isolcpus::parse(&args.isolcpus).ok_or_else(|| {
        anyhow::anyhow!("--isolcpus {}: none, managed_irq or domain", args.isolcpus)
    })?;
    let mut plan = isolate::plan(&inv, &req, opts, isolcpus, &nics, &cx)?;
    if let Some(dir) = &args.out {
        write_files(dir, &mut plan, args.force)?;
    }
    runnable_verify_lines(&mut plan, args);
    let format = args.read.format.format.into();
    if let Some(text) = render::machine(format, &plan)? {
        print!("{text}");
        return Ok(0);
    }
    let summary = summary(&plan);
    match &args.out {
        Some(_) => {
            print!("{summary}");
            for k in &plan.knobs {
                println!("wrote {}", k.file.as_deref().unwrap_or_default());
            }
        }
        None => {
            // The fragment alone on stdout (redirect it); the why on stderr.
            eprint!("{summary}");
            let docs: Vec<&str> = plan.knobs.iter().map(|k| k.document.as_str()).collect();
            print!("{}", docs.join("---\n"));
        }
    }
    Ok(0)
}

/// The verify lines as commands that run as printed on the host: with the
/// directory the knobs are in (`DIR` when they went to stdout). Never with
/// `--root`: the noise probe measures the machine it runs on.
fn runnable_verify_lines(plan: &mut IsolatePlan, args: &crate::cli::IsolateArgs) {
    let dir = match &args.out {
        Some(d) => crate::name::shell_word(&d.to_string_lossy()),
        None => "DIR".to_string(),
    };
    for v in &mut plan.verify {
        *v = v.replace(
            "`hostknob verify ",
            &format!("`hostknob --manifest {dir} verify "),
        );
    }
}

fn summary(plan: &IsolatePlan) -> String {
    let mut s = format!(
        "isolate on {}: isolated CPUs {}, housekeeping CPUs {}\n",
        plan.host, plan.isolated, plan.housekeeping
    );
    for r in &plan.reasons {
        s += &format!("  - {r}\n");
    }
    for w in &plan.warnings {
        s += &format!("  warning: {w}\n");
    }
    s += "  verify (lost µs per second on the isolated CPUs, and who took them; DIR holds the \
          fragment's files, which --out DIR writes):\n";
    for v in &plan.verify {
        s += &format!("    {v}\n");
    }
    s
}

/// One file per knob in `dir` (made when missing); an existing file is
/// refused unless `force`, before anything is written.
fn write_files(dir: &Path, plan: &mut IsolatePlan, force: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let seam = Root::confined(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    let names: Vec<String> = plan
        .knobs
        .iter()
        .map(|k| format!("{}.yaml", k.id))
        .collect();
    // Two knobs of one id would be one file, the second replacing the first.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = names.iter().find(|n| !seen.insert(n.as_str())) {
        bail!("two knobs of the fragment would both be {twice}: nothing was written");
    }
    if !force {
        let taken: Vec<String> = names
            .iter()
            .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
            .map(|n| dir.join(n).display().to_string())
            .collect();
        if !taken.is_empty() {
            bail!(
                "{} already exist(s): nothing was written; move them away, or pass --force to replace them",
                taken.join(", ")
            );
        }
    }
    // Files this run created, removed again if a later write fails: a
    // fragment is written whole or not at all (a replaced file stays replaced).
    let mut created: Vec<&String> = Vec::new();
    for (k, name) in plan.knobs.iter_mut().zip(&names) {
        let path = dir.join(name);
        let existed = std::fs::symlink_metadata(&path).is_ok();
        if let Err(e) = seam.replace_file(&format!("/{name}"), k.document.as_bytes()) {
            for n in &created {
                let _ = seam.remove_file(&format!("/{n}"));
            }
            return Err(e).with_context(|| {
                format!(
                    "writing {}: the files written before it were removed",
                    path.display()
                )
            });
        }
        if !existed {
            created.push(name);
        }
        k.file = Some(path.display().to_string());
    }
    Ok(())
}
