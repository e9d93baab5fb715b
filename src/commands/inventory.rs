use anyhow::Result;

use crate::cli::InventoryArgs;
use crate::inventory;
use crate::render;
use crate::root::Root;

pub fn run(args: &InventoryArgs) -> Result<i32> {
    let g = &args.read;
    let root = Root::open(&g.root.root)?;
    let mut only: Vec<inventory::Section> = args
        .sections
        .iter()
        .chain(&args.section)
        .map(|&s| s.into())
        .collect();
    only.sort();
    only.dedup();
    let mut inv = inventory::collect_only(&root, &only)?;
    if let Some(h) = &g.host.host {
        inv.host.hostname = Some(h.clone());
    }
    for w in &inv.warnings {
        eprintln!("hostknob: warning: {w}");
    }
    let text = if only.is_empty() {
        render::machine(g.format.format.into(), &inv)?
    } else {
        let mut v = serde_json::to_value(&inv)?;
        if let Some(map) = v.as_object_mut() {
            map.retain(|k, _| k == "schema" || only.iter().any(|s| s.key() == k));
        }
        render::machine(g.format.format.into(), &Sections(v))?
    };
    match text {
        Some(text) => print!("{text}"),
        None => print!(
            "{}",
            render::wrap_prose(&render::inventory::render_only(&inv, &only))
        ),
    }
    Ok(0)
}

/// The inventory with only the sections asked for: the same contract, fewer keys.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct Sections(serde_json::Value);

impl crate::contract::Contract for Sections {
    const NAME: &'static str = "inventory";
    const EMBEDDED: bool = true;
}
