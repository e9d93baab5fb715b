use anyhow::Result;

use crate::audit;
use crate::cli::AuditArgs;
use crate::knob::HostCtx;
use crate::manifest;
use crate::render;
use crate::root::Root;

pub fn run(args: &AuditArgs) -> Result<i32> {
    let g = &args.target;
    let root = Root::open(&g.root.root)?;
    let host = manifest::host::resolve(&root, g.host.host.as_deref());
    let dir = super::manifest_dir(g, &root);
    let ctx = HostCtx::new(&root, host.name.clone());
    let report = audit::run(&dir, &ctx, &host.source, &args.knobs)?;
    if render::Format::from(args.format) == render::Format::Prometheus || args.textfile.is_some() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs_f64();
        let metrics = render::prometheus::metrics(&report, now);
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
