//! The one way tests run the binary: no `HOSTKNOB_*` variable inherited from
//! the environment, and a fresh empty directory as the working directory, so
//! neither the caller's shell nor `./manifest` in the repository can reach a
//! test. Paths given to the binary must therefore be absolute.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The hostknob the tests run: examples/hostknob-test-hooks.rs (hostknob's
/// own main with the test switches on), linked as `test-hooks/hostknob` in the
/// release directory with hostknob-jemalloc beside it, as an installed
/// hostknob has it. `cargo test` builds the example; a run of one test target
/// (`--test suite`) does not, so an example older than the library it was
/// linked from is refused rather than tested.
pub fn bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let shipped = Path::new(env!("CARGO_BIN_EXE_hostknob"));
        let release = shipped.parent().unwrap();
        let example = release.join("examples/hostknob-test-hooks");
        let fix = "build it first: `cargo build --release --locked --examples` (plain `cargo test` builds it)";
        let built = std::fs::metadata(&example)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{}: {e}: {fix}", example.display()));
        let newest_lib = std::fs::read_dir(release.join("deps"))
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with("libhostknob-") && n.ends_with(".rlib")
            })
            .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
            .max();
        let main_rs = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
        let sources = [newest_lib, std::fs::metadata(main_rs).and_then(|m| m.modified()).ok()];
        if sources.into_iter().flatten().any(|t| t > built) {
            panic!(
                "{} is older than the library or src/main.rs it is built from: {fix}",
                example.display()
            );
        }
        let dir = release.join("test-hooks");
        std::fs::create_dir_all(&dir).unwrap();
        let jemalloc = Path::new(env!("CARGO_BIN_EXE_hostknob-jemalloc"));
        for (from, name) in [(example.as_path(), "hostknob"), (jemalloc, "hostknob-jemalloc")] {
            // A fresh link each run (Cargo replaces its outputs, so an old
            // link would keep an old build), renamed into place so that a
            // second test process never sees none.
            let tmp = dir.join(format!(".{name}.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::fs::hard_link(from, &tmp)
                .or_else(|_| std::fs::copy(from, &tmp).map(|_| ()))
                .unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        }
        dir.join("hostknob").to_string_lossy().into_owned()
    })
}

/// This process's directory of working directories, under the test target's
/// tmp; those of earlier, finished runs are removed when it is made.
fn cwd_base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let all = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cwd");
        if let Ok(entries) = std::fs::read_dir(&all) {
            for e in entries.flatten() {
                let pid = e.file_name().to_string_lossy().into_owned();
                if !Path::new("/proc").join(&pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let base = all.join(std::process::id().to_string());
        std::fs::create_dir_all(&base).unwrap();
        base
    })
}

/// A new, empty directory for one run of the binary.
pub fn fresh_cwd() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = cwd_base().join(N.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// Makes `c` (the binary, or a wrapper such as `unshare` that runs it) start
/// with no `HOSTKNOB_*` variable and in a fresh empty directory. Variables a
/// test sets afterwards with `.env()` are kept.
pub fn isolate(c: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HOSTKNOB_") {
            c.env_remove(k);
        }
    }
    c.current_dir(fresh_cwd())
}

/// `hostknob ARGS...`, isolated, not yet started.
pub fn hostknob_command(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args);
    isolate(&mut c);
    c
}

/// Runs `hostknob ARGS...`, isolated, and returns its output.
pub fn hostknob(args: &[&str]) -> Output {
    hostknob_command(args).output().expect("hostknob runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn out(o: &Output) -> String {
    stdout(o)
}

pub fn err(o: &Output) -> String {
    stderr(o)
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        out(o),
        err(o)
    );
    out(o)
}

/// `hostknob --root ROOT inventory --format json`, run.
pub fn inventory_json(root: &Path) -> Output {
    hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "--format",
        "json",
    ])
}

/// Asserts success and parses stdout as JSON.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "hostknob failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

/// Runs a command (a probe, typically) that must succeed and returns its JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    // Global options go first: `--cmd` takes everything after it.
    let mut all = vec!["--format", "json"];
    all.extend(args);
    let out = hostknob(&all);
    assert!(
        out.status.success(),
        "hostknob {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// Runs a command that must fail with exit code 1; returns stderr's one line.
pub fn error(args: &[&str]) -> String {
    let out = hostknob(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hostknob {args:?} should fail with 1; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    err
}

/// Asserts exit 1 with one line on stderr that ends "nothing was changed"
/// and contains every `needle`; returns it.
pub fn refused(o: &Output, needles: &[&str]) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        out(o),
        err(o)
    );
    let e = err(o);
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    assert!(e.trim().ends_with("nothing was changed"), "{e}");
    for n in needles {
        assert!(e.contains(n), "{n:?} not in: {e}");
    }
    e
}

/// The repository's own directory (for committed files: `hosts/`, `manifest/`, `docs/`).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
