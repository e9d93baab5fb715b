//! `hostknob-jemalloc`: runs `hostknob probe rss --self-burst` in a process
//! whose global allocator is jemalloc, and prints the result as JSON for
//! hostknob to report. hostknob itself does not link jemalloc: its start-up
//! (a constructor that runs before `main`) cost a tenth of a live inventory.
//!
//! Usage: hostknob-jemalloc --burst-mib N --threads N --duration-ms N

use std::time::Duration;

use anyhow::{Context, Result, bail};
use hostknob::probe::rss::{self, BurstOptions, Jemalloc};
use hostknob::root::Root;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Ctl;

impl Jemalloc for Ctl {
    fn background_thread(&self) -> Result<bool> {
        tikv_jemalloc_ctl::background_thread::read()
            .map_err(|e| anyhow::anyhow!("jemalloc: cannot read background_thread: {e}"))
    }

    fn set_background_thread(&self, on: bool) -> Result<bool> {
        tikv_jemalloc_ctl::background_thread::write(on)
            .map_err(|e| anyhow::anyhow!("jemalloc: cannot write background_thread={on}: {e}"))?;
        tikv_jemalloc_ctl::background_thread::read()
            .map_err(|e| anyhow::anyhow!("jemalloc: cannot read back background_thread: {e}"))
    }

    fn purge_all_arenas(&self) -> Result<()> {
        // MALLCTL_ARENAS_ALL is 4096 in jemalloc 5.
        let name = b"arena.4096.purge\0";
        // SAFETY: a NUL-terminated name; the command takes and returns nothing.
        let r = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if r != 0 {
            bail!("jemalloc: arena.4096.purge failed (error {r})");
        }
        Ok(())
    }

    fn allocated(&self) -> Result<u64> {
        tikv_jemalloc_ctl::epoch::advance().map_err(|e| anyhow::anyhow!("jemalloc epoch: {e}"))?;
        tikv_jemalloc_ctl::stats::allocated::read()
            .map(|v| v as u64)
            .map_err(|e| anyhow::anyhow!("jemalloc stats.allocated: {e}"))
    }

    fn opt_isize(&self, name: &[u8]) -> Option<isize> {
        // SAFETY: `name` is a NUL-terminated opt.* name of type ssize_t.
        unsafe { tikv_jemalloc_ctl::raw::read::<isize>(name).ok() }
    }
}

fn options() -> Result<BurstOptions> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| -> Result<u64> {
        let at = args
            .iter()
            .position(|a| a == name)
            .with_context(|| format!("{name} N is required (this program is run by hostknob)"))?;
        let v = args
            .get(at + 1)
            .with_context(|| format!("{name} needs a value"))?;
        v.parse()
            .with_context(|| format!("{name}: not a number: {v:?}"))
    };
    Ok(BurstOptions {
        mib: value("--burst-mib")?,
        threads: value("--threads")? as usize,
        duration: Duration::from_millis(value("--duration-ms")?),
    })
}

fn run() -> Result<()> {
    let opts = options()?;
    hostknob::probe::interrupt::install()?;
    let root = Root::open(std::path::Path::new("/"))?;
    let result = rss::run_self_burst(&root, &opts, &Ctl)?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        // hostknob reports an interruption itself.
        if !hostknob::probe::cancelled() {
            eprintln!("{}: {e:#}", rss::HELPER);
        }
        std::process::exit(1);
    }
}
