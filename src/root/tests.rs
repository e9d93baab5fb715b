use super::*;
use std::os::unix::fs::symlink;

fn open(base: &Path, walk: bool) -> Root {
    let root = Root::open(base).unwrap();
    if walk { root.walking() } else { root }
}

#[test]
fn symlinks_cannot_leave_the_root() {
    for walk in [false, true] {
        symlinks_cannot_leave_the_root_when(walk);
    }
}

fn symlinks_cannot_leave_the_root_when(walk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::create_dir_all(base.join("sys/a")).unwrap();
    std::fs::write(base.join("sys/a/value"), "inside\n").unwrap();
    symlink("/etc", base.join("sys/abs")).unwrap();
    symlink("../../../../../../etc", base.join("sys/rel")).unwrap();
    symlink("../sys/a", base.join("sys/ok")).unwrap();
    // Chains: an absolute link to a relative one, `..` at the root, a loop.
    symlink("/sys/ok", base.join("sys/chain")).unwrap();
    symlink("../../../sys/a/../a/value", base.join("sys/dots")).unwrap();
    symlink("loop2", base.join("sys/loop1")).unwrap();
    symlink("loop1", base.join("sys/loop2")).unwrap();
    let root = open(base, walk);
    assert_eq!(
        root.read_trimmed("/sys/chain/value").unwrap().as_deref(),
        Some("inside")
    );
    assert_eq!(
        root.read_trimmed("/sys/dots").unwrap().as_deref(),
        Some("inside")
    );
    assert_eq!(
        root.read("/sys/loop1").unwrap_err().raw_os_error(),
        Some(libc::ELOOP)
    );
    assert_eq!(root.read_dir("/sys/ok").unwrap(), vec!["value"]);
    let handle = root.dir_handle("/sys/ok").unwrap();
    assert_eq!(handle.read_string("value").unwrap(), "inside\n");
    assert!(handle.read("../abs/hostname").is_err());
    assert_eq!(
        root.read_trimmed("/sys/ok/value").unwrap().as_deref(),
        Some("inside")
    );
    // Both would reach the real /etc/hostname outside; inside the root there is none.
    assert!(root.read("/sys/abs/hostname").is_err());
    assert!(root.read("/sys/rel/hostname").is_err());
    assert!(root.read("/../../../etc/hostname").is_err());
    assert_eq!(root.resolve("/sys/ok").unwrap(), "/sys/a");
}

#[test]
fn kernel_files_are_told_from_plain_ones() {
    let live = Root::open(Path::new("/")).unwrap();
    assert!(live.is_kernel_file("/proc/self/stat").unwrap());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
    std::fs::write(dir.path().join("proc/self/stat"), "1 (x)\n").unwrap();
    let copy = Root::open(dir.path()).unwrap();
    assert!(!copy.is_kernel_file("/proc/self/stat").unwrap());
}

#[test]
fn replace_and_remove_files_inside_the_root() {
    for walk in [false, true] {
        replace_and_remove_files_inside_the_root_when(walk);
    }
}

fn replace_and_remove_files_inside_the_root_when(walk: bool) {
    let dir = tempfile::tempdir().unwrap();
    for d in ["sys", "etc", "tmp"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let root = open(dir.path(), walk);
    let f = "/etc/a/b/c.conf";
    assert_eq!(root.missing_dirs(f), vec!["/etc/a", "/etc/a/b"]);
    root.probe_create(f).unwrap();
    root.replace_file(f, b"one\n").unwrap();
    assert_eq!(root.read(f).unwrap(), b"one\n");
    root.replace_file(f, b"two\n").unwrap();
    root.probe_write(f).unwrap();
    assert_eq!(root.read(f).unwrap(), b"two\n", "a probe writes nothing");
    root.remove_file(f).unwrap();
    assert!(!root.exists(f));
    assert!(root.remove_empty_dir("/etc/a/b").unwrap());
    assert!(!root.remove_empty_dir("/etc").unwrap(), "not empty: kept");
    // A link leading out of the root is followed inside it, never outside.
    std::os::unix::fs::symlink("/tmp", dir.path().join("etc/out")).unwrap();
    root.replace_file("/etc/out/hk-root-test", b"x").unwrap();
    assert!(dir.path().join("tmp/hk-root-test").exists());
    assert!(!Path::new("/tmp/hk-root-test").exists());
}

#[test]
fn whole_files_are_read_across_the_first_buffer_and_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys")).unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    for len in [0, 1, 4095, 4096, 4097, 8192, 70_000] {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for d in ["sys", "proc"] {
            std::fs::write(dir.path().join(d).join("f"), &bytes).unwrap();
            let logical = format!("/{d}/f");
            assert_eq!(
                root.read(&logical).unwrap(),
                bytes,
                "{logical}, {len} bytes"
            );
            // Exactly at the cap is whole; one byte over is an error.
            if len > 0 {
                assert_eq!(root.read_capped(&logical, len).unwrap(), bytes);
                let err = root.read_capped(&logical, len - 1).unwrap_err();
                assert!(
                    err.to_string().contains("larger than"),
                    "{logical} {len}: {err}"
                );
            }
        }
    }
}

/// The live sysfs is read without an `fstat` first, and only on its own
/// mount; what only the check after an empty read sees (a directory) is
/// still refused by name.
#[test]
fn live_sysfs_files_are_read_and_directories_refused() {
    let live = Root::open(Path::new("/")).unwrap();
    if live.live_sys.is_none() {
        return; // no sysfs at /sys here: nothing of the rule to see
    }
    let flags = libc::O_RDONLY | libc::O_NONBLOCK;
    assert!(
        live.kernel_file("/sys/devices/system/cpu/online", flags)
            .is_some()
    );
    assert!(
        live.kernel_file("/sys/../dev/sda", flags).is_none(),
        "`..` leaves sysfs"
    );
    assert!(live.kernel_file("/sys//etc/passwd", flags).is_none());
    assert!(live.kernel_file("/etc/hostname", flags).is_none());
    assert!(live.kernel_file("/sysfoo/x", flags).is_none());
    // Another mount under /sys (cgroup, debugfs...) is read the checked way.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    if let Some(other) = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .find(|m| m.starts_with("/sys/") && Path::new(m).is_dir())
    {
        assert!(
            live.kernel_file(other, libc::O_PATH).is_none(),
            "{other} is another mount"
        );
        assert!(!live.dir_handle(other).unwrap().kernel, "{other}");
    }
    let online = live.read_string("/sys/devices/system/cpu/online").unwrap();
    assert!(online.trim().starts_with('0'), "{online:?}");
    let err = live.read("/sys/devices/system/cpu").unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    let handle = live.dir_handle("/sys/devices/system").unwrap();
    assert!(handle.kernel);
    let err = handle.read("cpu").unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    assert!(handle.kernel_file("/etc/passwd", flags).is_none());
    if live.live_proc.is_some() {
        let proc = live.dir_handle("/proc").unwrap();
        assert!(proc.kernel);
        assert!(proc.kernel_file("1/stat", flags).is_some());
        assert!(proc.kernel_file("self/stat", flags).is_some());
        assert!(proc.kernel_file("1/../1/stat", flags).is_none());
        // A magic link is followed only the checked way.
        assert!(proc.kernel_file("self/fd/0", flags).is_none());
        assert!(live.kernel_file("/proc/self/fd/0", flags).is_none());
        assert!(live.kernel_file("/proc/cpuinfo", flags).is_some());
        let me = std::process::id();
        let stat = proc.read_record(&format!("{me}/stat")).unwrap();
        assert!(stat.starts_with(format!("{me} (").as_bytes()));
    }
}

#[test]
fn a_root_without_sys_or_proc_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = Root::open(dir.path()).err().unwrap().to_string();
    assert!(err.contains("neither sys/ nor proc/"), "{err}");
    let err = Root::open(&dir.path().join("nope")).err().unwrap();
    assert!(format!("{err:#}").contains("cannot open"));
}

#[test]
fn proc_is_written_only_at_sysctls_and_irq_affinity_lists() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    for f in [
        "proc/irq/24/smp_affinity_list",
        "proc/irq/24/smp_affinity",
        "proc/irq/default_smp_affinity",
        "proc/sys/vm/stat_interval",
        "proc/cmdline",
        "proc/1/comm",
    ] {
        std::fs::create_dir_all(base.join(f).parent().unwrap()).unwrap();
        std::fs::write(base.join(f), "1\n").unwrap();
    }
    std::fs::create_dir_all(base.join("sys")).unwrap();
    symlink("/proc/cmdline", base.join("sys/to-cmdline")).unwrap();
    symlink("../proc/irq/24/smp_affinity_list", base.join("sys/to-list")).unwrap();
    for walk in [false, true] {
        let root = open(base, walk);
        for ok in [
            "/proc/irq/24/smp_affinity_list",
            "/proc/irq/default_smp_affinity",
            "/proc/sys/vm/stat_interval",
            "/sys/to-list",
        ] {
            root.write_existing(ok, b"0")
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for refused in [
            "/proc/irq/24/smp_affinity",
            "/proc/cmdline",
            "/proc/1/comm",
            "/sys/to-cmdline",
            "/proc/irq/../cmdline",
        ] {
            let e = root.write_existing(refused, b"0").unwrap_err();
            assert!(
                e.to_string().contains("writes /proc only"),
                "{refused}: {e}"
            );
        }
        let e = root
            .replace_file("/proc/irq/24/smp_affinity_list", b"0\n")
            .unwrap_err();
        assert!(e.to_string().contains("writes /proc only"), "{e}");
        assert!(
            !base
                .join("proc/irq/24/.smp_affinity_list.hostknob-new")
                .exists()
        );
    }
    for f in ["proc/cmdline", "proc/1/comm", "proc/irq/24/smp_affinity"] {
        assert_eq!(std::fs::read_to_string(base.join(f)).unwrap(), "1\n", "{f}");
    }
    assert!(!proc_write_allowed("/proc/irq/x/smp_affinity_list"));
    assert!(!proc_write_allowed("/proc/irq//smp_affinity_list"));
    assert!(proc_write_allowed("/proc/12/task/13/status"));
    assert!(proc_write_allowed("/proc/12/task/13/stat"));
    for p in [
        "/proc/12/status",
        "/proc/12/stat",
        "/proc/12/task/13/statm",
        "/proc/12/task/13/environ",
        "/proc/x/task/13/status",
        "/proc/12/task//status",
    ] {
        assert!(!proc_write_allowed(p), "{p}");
    }
    // The live /proc: opened for writing (nothing written), refused by where it lands.
    let live = Root::open(Path::new("/")).unwrap();
    let e = live.probe_write("/proc/self/comm").unwrap_err();
    assert!(e.to_string().contains("writes /proc only"), "{e}");
}

/// Directories are listed by `getdents64` itself: every name comes back,
/// sorted, however many calls the listing takes (these names fill the
/// 32 KiB buffer several times), and a file is refused as a directory.
#[test]
fn directories_are_listed_whole_and_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let many = base.join("sys/many");
    std::fs::create_dir_all(&many).unwrap();
    let mut want: Vec<String> = (0..2000)
        .map(|i| format!("entry-with-a-longish-name-{i:05}"))
        .collect();
    for name in &want {
        std::fs::write(many.join(name), "").unwrap();
    }
    std::fs::create_dir(many.join("sub")).unwrap();
    want.push("sub".into());
    want.sort();
    for walk in [false, true] {
        let root = open(base, walk);
        assert_eq!(root.read_dir("/sys/many").unwrap(), want);
        let e = root.read_dir("/sys/many/sub/..").unwrap();
        assert_eq!(e.len(), want.len());
        let not_dir = root
            .read_dir(&format!("/sys/many/{}", want[0]))
            .unwrap_err();
        assert_eq!(not_dir.raw_os_error(), Some(libc::ENOTDIR));
    }
}
