use anyhow::Result;

use crate::cli::{Global, ReportArgs};
use crate::render::{self, Format};
use crate::report;

pub fn run(g: &Global, args: &ReportArgs) -> Result<i32> {
    let files = report::input_files(&args.inputs)?;
    let r = report::build(&files)?;
    match render::Format::from(g.format) {
        Format::Table => print!("{}", report::table(&r)),
        Format::Markdown => print!("{}", report::markdown(&r)),
        _ => print!(
            "{}",
            render::machine(g.format.into(), &r)?.expect("machine formats render")
        ),
    }
    Ok(r.exit_code())
}
