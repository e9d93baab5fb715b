use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::cli::Global;
use crate::render::{self, Format};
use crate::report;

#[derive(Args, Debug)]
#[command(
    long_about = "Read many hosts' `hostknob audit --format json` outputs (files, or directories of \
*.json files, e.g. what ansible/playbooks/audit.yml fetched) and show one fleet view: per knob, the hosts \
grouped where they agree on status and current value; hosts that agree on every knob; what is lost on \
reboot or unpersisted where; the latest verify evidence per knob.\n\n\
--format table (default), markdown, json or yaml. Exit codes: 0 when no host fails its audit; 2 when any \
host drifts (drift, unsupported, lost-on-reboot); 1 when an input cannot be read.",
    after_help = "Examples:\n  hostknob report /srv/hostknob-audits/\n  \
hostknob report --format markdown audits/*.json > fleet.md"
)]
pub struct ReportArgs {
    /// Audit JSON files, or directories holding them.
    #[arg(value_name = "FILE|DIR", required = true)]
    pub inputs: Vec<PathBuf>,
}

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
