use anyhow::Result;

use crate::cli::Global;
use crate::inventory;
use crate::render;
use crate::root::Root;

pub fn run(g: &Global) -> Result<i32> {
    let root = Root::open(&g.root)?;
    let mut inv = inventory::collect(&root)?;
    if let Some(h) = &g.host {
        inv.host.hostname = Some(h.clone());
    }
    for w in &inv.warnings {
        eprintln!("hostknob: warning: {w}");
    }
    match render::machine(g.format.into(), &inv)? {
        Some(text) => print!("{text}"),
        None => print!("{}", render::inventory::render(&inv)),
    }
    Ok(0)
}
