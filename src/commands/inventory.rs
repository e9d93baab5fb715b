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
    let format = g.format.format.into();
    // A table's sections before the process table are rendered while the
    // other thread still reads it.
    let (inv, head) = inventory::collect_then(&root, &only, &|inv| {
        if let Some(h) = &g.host.host {
            inv.host.hostname = Some(h.clone());
        }
        (format == render::Format::Table).then(|| render::inventory::render_head(inv, &only))
    })?;
    for w in &inv.warnings {
        eprintln!("hostknob: warning: {}", render::escape_controls(w));
    }
    let text = match head {
        Some(head) => {
            let tail = render::inventory::render_tail(&inv, &only);
            Some(render::wrap_prose(&render::inventory::finish(head + &tail)))
        }
        None if only.is_empty() => render::machine(format, &inv)?,
        None => {
            let mut v = serde_json::to_value(&inv)?;
            if let Some(map) = v.as_object_mut() {
                map.retain(|k, _| {
                    k == "schema"
                        || only.iter().any(|s| s.key() == k)
                        || (k == "net_core" && only.contains(&inventory::Section::Network))
                });
            }
            render::machine(format, &Sections(v))?
        }
    };
    print!(
        "{}",
        text.expect("a table has its head, other formats their text")
    );
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
