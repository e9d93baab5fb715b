use anyhow::{Result, bail};

use crate::cli::{ReportArgs, ReportFormat};
use crate::render::{self, Format};
use crate::report;

pub fn run(args: &ReportArgs) -> Result<i32> {
    if let Some(dirs) = &args.compare {
        return compare(dirs, args.format);
    }
    let files = report::input_files(&args.inputs)?;
    let r = report::build(&files, std::time::SystemTime::now(), args.max_age)?;
    // Hosts, ids and values come from audit JSON files: escaped for the terminal.
    let text = match args.format {
        ReportFormat::Table => render::escape_controls(&report::table(&r)).into_owned(),
        ReportFormat::Markdown => render::escape_controls(&report::markdown(&r)).into_owned(),
        ReportFormat::Csv => report::csv(&r),
        ReportFormat::Junit => report::junit(&r),
        ReportFormat::Json => machine(Format::Json, &r)?,
        ReportFormat::Yaml => machine(Format::Yaml, &r)?,
    };
    print!("{text}");
    if !r.unreadable.is_empty() {
        eprintln!(
            "hostknob: {} of {} input files could not be read (listed in the report){}",
            r.unreadable.len(),
            files.len(),
            if args.strict {
                "; --strict: exit 1"
            } else {
                ""
            }
        );
    }
    Ok(r.exit_code(args.strict))
}

fn machine<T: serde::Serialize + crate::contract::Contract>(f: Format, v: &T) -> Result<String> {
    Ok(render::machine(f, v)?.expect("machine formats render"))
}

fn compare(dirs: &[std::path::PathBuf], format: ReportFormat) -> Result<i32> {
    let [old, new] = dirs else {
        bail!("--compare takes two directories: OLD_DIR NEW_DIR");
    };
    let c = report::compare(std::slice::from_ref(old), std::slice::from_ref(new))?;
    let text = match format {
        ReportFormat::Table => render::escape_controls(&report::compare::table(&c)).into_owned(),
        ReportFormat::Markdown => {
            render::escape_controls(&report::compare::markdown(&c)).into_owned()
        }
        ReportFormat::Json => machine(Format::Json, &c)?,
        ReportFormat::Yaml => machine(Format::Yaml, &c)?,
        ReportFormat::Csv | ReportFormat::Junit => bail!(
            "--compare shows changes as table, markdown, json or yaml; \
             csv and junit are for one round (report DIR --format {})",
            if format == ReportFormat::Csv {
                "csv"
            } else {
                "junit"
            }
        ),
    };
    print!("{text}");
    Ok(c.exit_code())
}
