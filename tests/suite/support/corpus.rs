//! The real host captures in `tests/corpus/hosts/` (or `$HOSTKNOB_CORPUS`),
//! unpacked once into `<target dir>/corpus/<host>-<hash>/<host>/` (`target/`
//! unless CARGO_TARGET_DIR says otherwise) and reused; private copies for
//! tests that change a host.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory of host tarballs. Without it no corpus test can mean
/// anything: one line saying so and exit 1, rather than a panic per test.
pub fn corpus_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let (dir, from) = match std::env::var_os("HOSTKNOB_CORPUS") {
            Some(d) => (PathBuf::from(d), "HOSTKNOB_CORPUS"),
            None => (
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hosts"),
                "the repository",
            ),
        };
        let has_tarball = std::fs::read_dir(&dir).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".tar.gz")))
        });
        if !has_tarball {
            // Straight to fd 2: the test harness captures eprintln!, and
            // would lose it when the process exits.
            let _ = writeln!(
                std::io::stderr(),
                "hostknob tests: no host captures (*.tar.gz) in {} (from {from}); \
                 restore tests/corpus/hosts/ or set HOSTKNOB_CORPUS=DIR",
                dir.display()
            );
            std::process::exit(1);
        }
        dir
    })
    .clone()
}

/// Every captured host's name, sorted.
pub fn corpus_hosts() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".tar.gz")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// FNV-1a: enough to notice a changed tarball, no dependency needed.
fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The unpacked, read-only-by-convention tree of one captured host, in a
/// directory named after the host, with a `hostknob-capture.yaml` naming it
/// (as `hostknob capture` writes). Do not modify it: use `copy_host` or
/// `corpus_copy` for that.
pub fn corpus_host(name: &str) -> PathBuf {
    // One unpack at a time in this process: tests run on parallel threads.
    static UNPACK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = UNPACK.lock().unwrap_or_else(|e| e.into_inner());
    let tarball = corpus_dir().join(format!("{name}.tar.gz"));
    let bytes = std::fs::read(&tarball).unwrap_or_else(|e| panic!("{}: {e}", tarball.display()));
    // Keyed by the tarball's hash: a cache shared by several checkouts (one
    // CARGO_TARGET_DIR) never serves a tree the tarball read here does not make.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("corpus");
    // pepc's MSR dump of the host, if any, is part of the tree (support::msr).
    let msr_bytes = std::fs::read(super::msr::msr_dump_path(name)).unwrap_or_default();
    let key = match msr_bytes.is_empty() {
        true => fnv64(&bytes),
        false => fnv64(&bytes) ^ fnv64(&msr_bytes).rotate_left(1),
    };
    // `-m`: the layout with the capture metadata below.
    let dest = cache.join(format!("{name}-{key:016x}-m"));
    let tree = dest.join(name);
    if tree.is_dir() {
        return tree;
    }
    if dest.is_dir() && !dest.join(name).exists() && dest.join("sys").exists() {
        // An unpack in the older layout (the tree directly in `dest`).
        let _ = std::fs::remove_dir_all(&dest);
    }
    std::fs::create_dir_all(&cache).unwrap();
    // Unpack beside, then rename: concurrent test processes never see half a tree.
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(&cache)
        .unwrap();
    std::fs::create_dir(tmp.path().join(name)).unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(tmp.path().join(name))
        .status()
        .unwrap();
    assert!(st.success(), "tar failed on {}", tarball.display());
    // The dumps name no host; `hostknob capture` would have recorded the name
    // here, and hostknob takes it from here (never from the directory).
    let meta = tmp.path().join(name).join("hostknob-capture.yaml");
    if !meta.exists() {
        std::fs::write(&meta, format!("host: {name}\n")).unwrap();
    }
    if let Some(dump) = super::msr::msr_dump(name) {
        super::msr::materialize_msrs(&tmp.path().join(name), &dump);
    }
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &dest).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(tree.is_dir(), "could not place {}", dest.display());
    }
    tree
}

/// A private, writable copy of a captured host, the tree directly in the
/// temporary directory.
pub fn corpus_copy(name: &str) -> tempfile::TempDir {
    let src = corpus_host(name);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(copies_dir())
        .unwrap();
    copy_tree(&src, dir.path());
    dir
}

/// Where copies of corpus trees go: `/dev/shm` when it is a tmpfs with 4 GiB
/// free that allows programs to run, else the temporary directory. Creating and removing tens of
/// thousands of small files costs this VM's ext4 (mounted with `discard`)
/// about 10 s per gnr0 copy, tmpfs about 1.5 s.
fn copies_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let c = std::ffi::CString::new("/dev/shm").unwrap();
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        let tmpfs = unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0
            && st.f_type == libc::TMPFS_MAGIC
            && (st.f_bavail as u64).saturating_mul(st.f_bsize as u64) >= 4 << 30;
        let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
        let exec = unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } == 0
            && vfs.f_flag & libc::ST_NOEXEC == 0;
        let tmpfs = tmpfs && exec;
        let writable = tmpfs && tempfile::tempdir_in(shm).is_ok();
        if writable {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    })
}

/// `cp -a FROM/. TO` through a tar pipe. cp copies each file with
/// copy_file_range(2), which costs this VM's ext4 170-400 µs of kernel
/// time per file: gnr0's 59,569 files took 10-25 s, tar's read and write
/// 1.8 s (most of the suite's time was copies of corpus trees).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut pack = Command::new("tar")
        .arg("-C")
        .arg(from)
        .args(["-cf", "-", "."])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let unpacked = Command::new("tar")
        .arg("-C")
        .arg(to)
        .args(["-xf", "-"])
        .stdin(pack.stdout.take().unwrap())
        .status()
        .unwrap();
    let packed = pack.wait().unwrap();
    assert!(
        packed.success() && unpacked.success(),
        "copying {} to {} failed",
        from.display(),
        to.display()
    );
}

/// A private copy of a captured host at `<tempdir>/<name>`, for tests that
/// change it.
pub fn copy_host(name: &str) -> (tempfile::TempDir, PathBuf) {
    let src = corpus_host(name);
    let tmp = tempfile::tempdir_in(copies_dir()).unwrap();
    let dst = tmp.path().join(name);
    copy_tree(&src, &dst);
    (tmp, dst)
}

/// The independent reading of a captured host (`<name>.expected.yaml`).
pub fn expected(name: &str) -> serde_yaml::Value {
    let p = corpus_dir().join(format!("{name}.expected.yaml"));
    serde_yaml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// A corpus host for the fleet tests. `fc-haltpoll-2cpu` is their clean
/// host: tuned as the shipped catalog's baseline asks (its one finding as
/// captured, vm.swappiness 60, set to 10 in a copy), as dist/ci-fleet.sh and
/// ansible/tests/run.sh tune it.
pub fn fleet_host(name: &str) -> (Option<tempfile::TempDir>, PathBuf) {
    if name != "fc-haltpoll-2cpu" {
        return (None, corpus_host(name));
    }
    let (keep, root) = copy_host(name);
    std::fs::write(root.join("proc/sys/vm/swappiness"), "10\n").unwrap();
    (Some(keep), root)
}
