use clap::Parser;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = hostknob::cli::Cli::parse();
    match hostknob::commands::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("hostknob: {e:#}");
            std::process::exit(1);
        }
    }
}
