//! Asks the linker to place the functions a live `inventory` runs first and
//! together (dist/hot-symbols.txt, made by dist/hot-symbols.sh): spread over
//! the binary, they made every run map and unmap 2 MB more of it.
//!
//! Only where rustc links with lld (x86_64 Linux with glibc, Rust 1.90 and
//! later, no linker chosen in RUSTFLAGS): GNU ld does not take the option.
//! A name the binary does not have is skipped without a word, so a stale list
//! costs speed, never a build.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=dist/hot-symbols.txt");
    let cfg = |k: &str| std::env::var(format!("CARGO_CFG_TARGET_{k}")).unwrap_or_default();
    let target = cfg("ARCH") == "x86_64" && cfg("OS") == "linux" && cfg("ENV") == "gnu";
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if !target || flags.contains("linker") || rustc_minor().is_none_or(|m| m < 90) {
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let list = Path::new(&dir).join("dist/hot-symbols.txt");
    if list.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// The `N` of the compiler's `rustc 1.N.x`.
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace().nth(1)?.split('.').nth(1)?.parse().ok()
}
