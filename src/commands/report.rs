use anyhow::Result;

use crate::cli::ReportArgs;
use crate::render::{self, Format};
use crate::report;

pub fn run(args: &ReportArgs) -> Result<i32> {
    let files = report::input_files(&args.inputs)?;
    let r = report::build(&files)?;
    match render::Format::from(args.format) {
        // Hosts, ids and values come from audit JSON files: escaped for the terminal.
        Format::Table => print!("{}", render::escape_controls(&report::table(&r))),
        Format::Markdown => print!("{}", render::escape_controls(&report::markdown(&r))),
        _ => print!(
            "{}",
            render::machine(args.format.into(), &r)?.expect("machine formats render")
        ),
    }
    Ok(r.exit_code())
}
