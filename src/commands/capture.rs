use anyhow::Result;

use crate::capture;
use crate::cli::CaptureArgs;
use crate::inventory;
use crate::render;
use crate::root::Root;

pub fn run(args: &CaptureArgs) -> Result<i32> {
    let g = &args.read;
    let root = Root::open(&g.root.root)?.recording();
    let inv = inventory::collect(&root)?;
    // Inventory reads policies directly; knobs and people use cpuN/cpufreq.
    for cpu in inv.cpu.online.as_slice() {
        let _ = root.read_link(&format!("{}/cpu{cpu}/cpufreq", inventory::CPU_DIR));
    }
    // What doc reads beyond the inventory.
    let _ = crate::doc::settings::read_sysctls(&root);
    // What verify's evidence is dated by (BIOS version and date, cmdline, CPU).
    let _ = crate::manifest::facts::Facts::of(&root);
    let host = g.host.host.as_deref().or(inv.host.hostname.as_deref());
    let out = match (&args.out, &args.out_positional) {
        (Some(o), _) => o,
        (None, Some(o)) => {
            super::deprecated(
                &format!("`capture {}`", o.display()),
                &format!("`capture --out {}`", o.display()),
            );
            o
        }
        (None, None) => anyhow::bail!("capture needs --out DIR: the directory to create"),
    };
    let report = capture::mirror_recorded(&root, out, host)?;
    match render::machine(g.format.format.into(), &report)? {
        Some(text) => print!("{text}"),
        None => {
            println!(
                "captured {} files, {} directories, {} symlinks into {}",
                report.files,
                report.dirs,
                report.links,
                report.out.display()
            );
            if !report.skipped.is_empty() {
                println!(
                    "skipped {} unreadable files (run as root to include them):",
                    report.skipped.len()
                );
                for s in &report.skipped {
                    println!("  {s}");
                }
            }
            println!(
                "read it with: hostknob --root {} inventory",
                report.out.display()
            );
        }
    }
    Ok(0)
}
