use anyhow::Result;

use crate::audit;
use crate::cli::Global;
use crate::knob::HostCtx;
use crate::manifest;
use crate::render;
use crate::root::Root;

pub fn run(g: &Global) -> Result<i32> {
    let root = Root::open(&g.root)?;
    let host = manifest::host::resolve(&root, g.host.as_deref());
    let dir = super::manifest_dir(g, &root);
    let ctx = HostCtx::new(&root, host.name.clone());
    let report = audit::run(&dir, &ctx, &host.source, &[])?;
    let list = crate::audit::knob_list(&report);
    match render::machine(g.format.into(), &list)? {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::audit::knobs_table(&report))
        ),
    }
    Ok(0)
}
