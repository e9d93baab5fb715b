//! Asks the linker to place the functions a live `inventory` runs first and
//! together (dist/hot-symbols.txt, made by dist/hot-symbols.sh on x86_64):
//! spread over the binary, they made every run map and unmap 2 MB more of it.
//!
//! lld and mold take the option, GNU ld does not, and which one links depends
//! on the toolchain and the user's settings: so a tiny program is linked
//! first the same way (target, RUSTFLAGS, linker) with the option, and the
//! option is passed only if that link succeeds. A name the binary does not
//! have is skipped without a word, so a stale list costs speed, never a build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=dist/hot-symbols.txt");
    let cfg = |k: &str| std::env::var(format!("CARGO_CFG_TARGET_{k}")).unwrap_or_default();
    if !(cfg("ARCH") == "x86_64" && cfg("OS") == "linux" && cfg("ENV") == "gnu") {
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let list = Path::new(&dir).join("dist/hot-symbols.txt");
    let args = [
        format!("-Clink-arg=-Wl,--symbol-ordering-file={}", list.display()),
        "-Clink-arg=-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if list.is_file() && links_with(&args) {
        for a in args {
            println!("cargo:rustc-link-arg-bins={}", &a["-Clink-arg=".len()..]);
        }
    }
}

/// Whether an empty program links for this target with these arguments
/// added, as the package's binaries will be linked.
fn links_with(args: &[String]) -> bool {
    let var = |k: &str| std::env::var(k).ok();
    let Some(out) = var("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let src = out.join("link_probe.rs");
    if std::fs::write(&src, "fn main() {}\n").is_err() {
        return false;
    }
    let mut c = Command::new(var("RUSTC").unwrap_or_else(|| "rustc".into()));
    c.arg("--crate-type=bin")
        .arg("--edition=2021")
        .arg("-o")
        .arg(out.join("link_probe"))
        .arg(&src);
    if let Some(t) = var("TARGET") {
        c.arg("--target").arg(t);
    }
    if let Some(l) = var("RUSTC_LINKER") {
        c.arg(format!("-Clinker={l}"));
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    c.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    c.args(args);
    c.output().is_ok_and(|o| o.status.success())
}
