use anyhow::Result;

use crate::audit;
use crate::cli::KnobsArgs;
use crate::knob::HostCtx;
use crate::manifest;
use crate::render;
use crate::root::Root;

pub fn run(args: &KnobsArgs) -> Result<i32> {
    if args.wide {
        crate::render::no_width_limit();
    }
    let g = &args.target;
    let root = Root::open(&g.root.root)?;
    let host = manifest::host::resolve(&root, g.host.host.as_deref());
    let dir = super::manifest_dir(g, &root);
    let ctx = HostCtx::new(&root, host.name.clone()).read_only();
    let manifest = super::load_manifest(g, &root, &dir, &host.name)?;
    if args.profiles {
        let list = manifest::profile_list::list(&manifest, &host.name);
        match render::machine(args.format.format.into(), &list)? {
            Some(text) => print!("{text}"),
            None => print!(
                "{}",
                render::wrap_prose(&render::audit::profiles_table(&list))
            ),
        }
        return Ok(0);
    }
    super::in_profile(&manifest, &args.knobs)?;
    let mut report = audit::evaluate(
        &manifest,
        &ctx,
        &host.source,
        &args.knobs,
        &crate::journal::state_dir(&args.state.state_dir),
    )?;
    for p in &report.problems {
        eprintln!("hostknob: {p}");
    }
    if args.all_hosts {
        report.for_other_hosts = audit::other_host_knobs(&manifest, &host.name, &args.knobs);
    }
    let list = crate::audit::knob_list(&report);
    match render::machine(args.format.format.into(), &list)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::colour_statuses(render::wrap_prose(&render::audit::knobs_table(&report)), 5)
        ),
    }
    Ok(i32::from(!report.problems.is_empty()))
}
