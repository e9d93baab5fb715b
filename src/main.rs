use clap::Parser;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = match hostknob::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // Usage errors exit 1, not clap's 2: exit 2 means drift or a stale
        // document to the automation that runs hostknob.
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    match hostknob::commands::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("hostknob: {e:#}");
            std::process::exit(1);
        }
    }
}
