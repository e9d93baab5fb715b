use anyhow::{Result, bail};
use clap::Args;

use crate::contract;

#[derive(Args, Debug)]
#[command(
    long_about = "Print the JSON Schema (draft 2020-12) of one machine-readable output, generated from \
the Rust type that writes it. Every JSON and YAML output carries `schema: N`, its version; N changes \
only when a field changes meaning or goes away (new fields do not change it). Without NAME, list the names."
)]
pub struct SchemaArgs {
    /// The output, e.g. audit, inventory, probe-wakeup.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

pub fn run(args: &SchemaArgs) -> Result<i32> {
    let Some(name) = &args.name else {
        for n in contract::NAMES {
            println!("{n}\tschema {}", contract::VERSION);
        }
        return Ok(0);
    };
    match contract::schema(name) {
        Some(s) => println!("{}", serde_json::to_string_pretty(&s)?),
        None => bail!(
            "schema {name:?}: no such output; one of {}",
            contract::NAMES.join(", ")
        ),
    }
    Ok(0)
}
