use anyhow::{Result, anyhow};

use crate::audit;
use crate::cli::AuditArgs;
use crate::knob::HostCtx;
use crate::manifest;
use crate::render;
use crate::root::Root;

pub fn run(args: &AuditArgs) -> Result<i32> {
    if args.wide {
        crate::render::no_width_limit();
    }
    // Before anything is read: a timer that writes nowhere is a silent alert.
    if let Some(dir) = &args.textfile
        && !dir.exists()
    {
        return Err(anyhow!(
            "--textfile {}: no such directory (node_exporter's --collector.textfile.directory; \
             create it or name the one node_exporter reads)",
            dir.display()
        ));
    }
    let g = &args.target;
    let root = Root::open(&g.root.root)?;
    let root = if args.pod {
        root.with_unseen(crate::root::POD_UNSEEN)
    } else {
        root
    };
    let host = manifest::host::resolve(&root, g.host.host.as_deref());
    let dir = super::manifest_dir(g, &root);
    let ctx = HostCtx::new(&root, host.name.clone()).read_only();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let loaded = super::load_manifest(g, &root, &dir, &host.name)
        .map_err(anyhow::Error::from)
        .and_then(|m| {
            super::in_profile(&m, &args.knobs)?;
            Ok(audit::evaluate(
                &m,
                &ctx,
                &host.source,
                &args.knobs,
                &crate::journal::state_dir(&args.state.state_dir),
            )?)
        });
    let report = match loaded {
        Ok(r) => r,
        Err(e) => {
            // The textfile says the audit failed instead of keeping the last green one.
            if let Some(textfile) = &args.textfile {
                let metrics = render::prometheus::error_metrics(
                    &host.name,
                    manifest::revision::of(&dir).as_deref(),
                    now(),
                );
                if let Err(w) = render::prometheus::write_textfile(textfile, &metrics) {
                    eprintln!("hostknob: {w:#}");
                }
            }
            return Err(e);
        }
    };
    // Each named once, the rest of the report as usual (exit 1).
    for p in &report.problems {
        eprintln!("hostknob: {p}");
    }
    if render::Format::from(args.format) == render::Format::Prometheus || args.textfile.is_some() {
        let metrics = render::prometheus::metrics(&report, now());
        if let Some(dir) = &args.textfile {
            render::prometheus::write_textfile(dir, &metrics)?;
        }
        if render::Format::from(args.format) == render::Format::Prometheus {
            print!("{metrics}");
            return Ok(report.exit_code());
        }
    }
    match render::machine(args.format.into(), &report)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::colour_statuses(render::wrap_prose(&render::audit::audit_table(&report)), 1)
        ),
    }
    Ok(report.exit_code())
}
