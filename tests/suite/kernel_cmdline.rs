//! The `kernel-cmdline` kind (issue 21 item 3) on the boot trees of
//! `tests/corpus/boot/` (Fedora BLS with GRUB, Debian GRUB, Debian
//! systemd-boot): apply writes the boot loader's files, audit says
//! `pending-reboot` until `/proc/cmdline` has the parameters and `ok` after,
//! revert restores every file byte-identical; a read-only `/boot` and a host
//! with no boot loader found are refused with nothing changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

const KNOB: &str = "kind: kernel-cmdline\npersistence: cmdline\nset:\n  add: [\"isolcpus=2-3\", \"nohz_full=2-3\"]\n";
const ADDED: &str = "isolcpus=2-3 nohz_full=2-3";

/// A private copy of a boot tree.
fn boot_tree(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = repo().join("tests/corpus/boot").join(name);
    let st = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success());
    let root = tmp.path().join(name);
    (tmp, root)
}

fn status(root: &Path, m: &Path) -> (String, serde_json::Value, i32) {
    let (report, code) = audit_json(root, m, None);
    let k = knob(&report, "iso").clone();
    (k["status"].as_str().unwrap().to_string(), k, code)
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// What `update-grub` does with the variables (Debian's 10_linux): the
/// real `sh` sources /etc/default/grub and every grub.d/*.cfg, and each
/// `linux` line's arguments after `ro` become `GRUB_CMDLINE_LINUX
/// GRUB_CMDLINE_LINUX_DEFAULT` (recovery: `single GRUB_CMDLINE_LINUX`).
fn update_grub(root: &Path) {
    let script = r#"cd "$1" && . ./etc/default/grub && for f in ./etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done; printf '%s\n%s\n' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT""#;
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", err(&out));
    let vars = String::from_utf8(out.stdout).unwrap();
    let mut lines = vars.lines();
    let (linux, default) = (lines.next().unwrap(), lines.next().unwrap_or(""));
    let cfg = read(root, "boot/grub/grub.cfg");
    let mut new = String::new();
    for line in cfg.split_inclusive('\n') {
        match line.split_once(" ro ") {
            Some((head, rest)) if line.trim_start().starts_with("linux\t") => {
                let args = if rest.starts_with("single") {
                    format!("single {linux}")
                } else {
                    format!("{linux} {default}")
                };
                new += &format!("{head} ro {args}\n");
            }
            _ => new += line,
        }
    }
    std::fs::write(root.join("boot/grub/grub.cfg"), new).unwrap();
}

/// The running command line after a reboot into the configured one.
fn reboot_with(root: &Path, extra: &str) -> String {
    let was = read(root, "proc/cmdline");
    std::fs::write(
        root.join("proc/cmdline"),
        format!("{} {extra}\n", was.trim()),
    )
    .unwrap();
    was
}

/// The issue's "done means" on one layout; `written` are the files apply
/// must change, each with the line it must then hold.
fn round_trip(layout: &str, written: &[(&str, &str)]) {
    let (_tmp, root) = boot_tree(layout);
    let m = knobs(&[("iso", KNOB)]);
    let before = tree(&root);
    let (s, _, code) = status(&root, m.path());
    assert_eq!((s.as_str(), code), ("drift", 2), "{layout}: before apply");

    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{layout}: {}", err(&o));
    let changed: Vec<PathBuf> = tree(&root)
        .into_iter()
        .filter(|(p, n)| before.get(p) != Some(n) && !p.starts_with("var"))
        .filter(|(_, n)| matches!(n, Node::File(..)))
        .map(|(p, _)| p)
        .collect();
    let mut want: Vec<PathBuf> = written.iter().map(|(p, _)| PathBuf::from(p)).collect();
    want.sort();
    assert_eq!(changed, want, "{layout}: the files apply wrote");
    for (path, line) in written {
        let text = read(&root, path);
        assert!(
            text.lines().any(|l| l == *line),
            "{layout}: {path} lacks the line {line:?}:\n{text}"
        );
    }
    if layout == "debian-grub" {
        // Until grub.cfg is regenerated the next boot lacks it: drift, saying so.
        let (s, k, _) = status(&root, m.path());
        assert_eq!(s, "drift", "{layout}: {k:#}");
        let cfg_drift = k["groups"].as_array().unwrap().iter().any(|g| {
            g["status"] == "drift" && g["paths"].to_string().contains("/boot/grub/grub.cfg")
        });
        assert!(
            cfg_drift && k["notes"].to_string().contains("update-grub"),
            "{k:#}"
        );
        update_grub(&root);
    }
    let (s, k, code) = status(&root, m.path());
    assert_eq!((s.as_str(), code), ("pending-reboot", 0), "{layout}: {k:#}");
    let detail = k["detail"].as_str().unwrap();
    let (first, line) = written[0];
    let at = format!("/{first}:");
    assert!(
        detail.contains(&at) && detail.contains("running (/proc/cmdline): (none)"),
        "{layout}: the detail names the file and line configured ({line}) and what runs: {detail}"
    );

    let was = reboot_with(&root, ADDED);
    let (s, k, code) = status(&root, m.path());
    assert_eq!(
        (s.as_str(), code),
        ("ok", 0),
        "{layout}: after the reboot: {k:#}"
    );
    assert!(
        k["persisted_by"].as_str().unwrap().contains(&at),
        "{layout}: {k:#}"
    );
    std::fs::write(root.join("proc/cmdline"), was).unwrap();

    let o = run(&root, m.path(), &["revert", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{layout}: {}", err(&o));
    if layout == "debian-grub" {
        update_grub(&root);
    }
    assert_tree(&before, &root, &format!("{layout}: after revert"));
}

#[test]
fn kernel_cmdline_on_bls_entries_of_every_installed_kernel_and_etc_kernel_cmdline() {
    let options = "options root=UUID=3d1f7c52-8a9e-4b1c-9f0e-2a6b5c4d3e21 ro rootflags=subvol=root rhgb quiet isolcpus=2-3 nohz_full=2-3";
    let entries = "boot/loader/entries/8f3c9a1d2e4b4c6f9a0b1c2d3e4f5a6b";
    round_trip(
        "fedora-bls",
        &[
            (&format!("{entries}-6.10.12-200.fc40.x86_64.conf"), options),
            (&format!("{entries}-6.11.4-301.fc41.x86_64.conf"), options),
            (
                "etc/kernel/cmdline",
                "root=UUID=3d1f7c52-8a9e-4b1c-9f0e-2a6b5c4d3e21 ro rootflags=subvol=root rhgb quiet isolcpus=2-3 nohz_full=2-3",
            ),
        ],
    );
}

#[test]
fn kernel_cmdline_on_systemd_boot_entries_in_the_esp_and_etc_kernel_cmdline() {
    let options = "options root=UUID=5a7c2e10-4b3d-4f9e-a1c8-7e6d5c4b3a29 ro quiet isolcpus=2-3 nohz_full=2-3";
    let entries = "efi/loader/entries/2f1e6c0d9b8a47e3a5c4d3b2a1f0e9d8";
    round_trip(
        "systemd-boot",
        &[
            (&format!("{entries}-6.1.0-25-amd64.conf"), options),
            (&format!("{entries}-6.1.0-26-amd64.conf"), options),
            (
                "etc/kernel/cmdline",
                "root=UUID=5a7c2e10-4b3d-4f9e-a1c8-7e6d5c4b3a29 ro quiet isolcpus=2-3 nohz_full=2-3",
            ),
        ],
    );
}

#[test]
fn kernel_cmdline_on_debian_grub_through_a_drop_in_and_update_grub() {
    round_trip(
        "debian-grub",
        &[(
            "etc/default/grub.d/hostknob-iso.cfg",
            "unset _hostknob _hostknob_w _hostknob_f",
        )],
    );
}

/// Removing a parameter through a drop-in: the real shell sources the
/// files as grub-mkconfig does, and `quiet` leaves `GRUB_CMDLINE_LINUX_DEFAULT`
/// while the added ones end `GRUB_CMDLINE_LINUX`, replacing an older value.
#[test]
fn kernel_cmdline_grub_drop_in_removes_and_replaces_words_when_sourced() {
    let (_tmp, root) = boot_tree("debian-grub");
    let grub = root.join("etc/default/grub");
    let text = read(&root, "etc/default/grub").replace(
        "GRUB_CMDLINE_LINUX=\"\"",
        "GRUB_CMDLINE_LINUX=\"isolcpus=1 console=ttyS0\"",
    );
    std::fs::write(&grub, text).unwrap();
    let m = knobs(&[(
        "iso",
        "kind: kernel-cmdline\npersistence: cmdline\nset:\n  add: [\"isolcpus=2-3\"]\n  remove: [\"quiet\"]\n",
    )]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    update_grub(&root);
    let cfg = read(&root, "boot/grub/grub.cfg");
    let linux: Vec<&str> = cfg
        .lines()
        .filter(|l| l.trim_start().starts_with("linux\t"))
        .collect();
    assert!(
        linux[0].ends_with(" ro console=ttyS0 isolcpus=2-3 "),
        "{linux:?}"
    );
    assert!(
        linux[1].ends_with(" ro single console=ttyS0 isolcpus=2-3"),
        "{linux:?}"
    );
    let (s, k, _) = status(&root, m.path());
    assert_eq!(s, "pending-reboot", "{k:#}");
}

/// `/boot` mounted read-only (a bind mount in a private mount namespace):
/// apply is refused naming it, audit says `unsupported`, nothing changes.
#[test]
fn kernel_cmdline_on_a_read_only_boot_is_refused_and_changes_nothing() {
    let (_tmp, root) = boot_tree("fedora-bls");
    let m = knobs(&[("iso", KNOB)]);
    let before = tree(&root);
    let boot = root.join("boot");
    let is_root = unsafe { libc::geteuid() } == 0;
    let mut c = Command::new("unshare");
    c.args(if is_root {
        vec!["-m"]
    } else {
        vec!["-r", "-m"]
    });
    c.arg("sh")
        .arg("-c")
        .arg(r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && "$@" apply iso; "$@" audit --format json"#)
        .arg("sh")
        .arg(&boot)
        .arg(crate::support::bin())
        .arg("--root")
        .arg(&root)
        .arg("--manifest")
        .arg(m.path());
    isolate(&mut c);
    let o = c.output().unwrap();
    if !err(&o).contains("hostknob") {
        eprintln!(
            "skipped: no private mount namespace here (unshare/mount said: {})",
            err(&o).trim()
        );
        return;
    }
    let e = err(&o);
    assert!(
        e.contains("/boot/loader/entries is on a read-only file system")
            && e.contains("nothing was changed")
            || e.contains("read-only file system"),
        "{e}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // `drift` (nothing runs it) outranks `unsupported`; the entries' group says why.
    let k = knob(&report, "iso");
    let ro = k["groups"].as_array().unwrap().iter().any(|g| {
        g["status"] == "unsupported"
            && g["detail"]
                .as_str()
                .unwrap()
                .contains("read-only file system")
            && g["paths"].to_string().contains("/boot/loader/entries/")
    });
    assert!(ro, "{k:#}");
    assert_tree(&before, &root, "read-only /boot");
}

/// No boot loader found: `unsupported` at plan time, naming what was looked for.
#[test]
fn kernel_cmdline_without_a_known_boot_loader_is_unsupported_naming_what_was_looked_for() {
    let (_tmp, root) = boot_tree("fedora-bls");
    std::fs::remove_dir_all(root.join("boot/loader")).unwrap();
    let m = knobs(&[("iso", KNOB)]);
    let before = tree(&root);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    for looked in [
        "/boot/loader/entries/*.conf",
        "/efi/loader/entries",
        "/etc/default/grub",
        "/etc/kernel/cmdline alone",
    ] {
        assert!(e.contains(looked), "{looked}: {e}");
    }
    // `drift` (nothing runs it) outranks `unsupported`; the boot group says why.
    let (_, k, code) = status(&root, m.path());
    assert_eq!(code, 2);
    let boot = k["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["paths"][0] == "/boot")
        .cloned();
    assert_eq!(
        boot.as_ref().map(|g| g["status"].clone()),
        Some("unsupported".into()),
        "{k:#}"
    );
    assert_tree(&before, &root, "no boot loader");
}

/// A parameter configured and running, but the configuration lost it (a
/// regenerated entry): `unpersisted`, naming the file that lacks it.
#[test]
fn kernel_cmdline_running_but_gone_from_the_entries_is_unpersisted() {
    let (_tmp, root) = boot_tree("systemd-boot");
    reboot_with(&root, ADDED);
    let m = knobs(&[("iso", KNOB)]);
    let (s, k, code) = status(&root, m.path());
    assert_eq!((s.as_str(), code), ("unpersisted", 0), "{k:#}");
    assert!(
        k["detail"]
            .as_str()
            .unwrap()
            .contains("/efi/loader/entries/"),
        "{k:#}"
    );
    let o = run(&root, m.path(), &["persist", "iso"]);
    let e = err(&o);
    assert!(!out(&o).contains("grubby") && !e.contains("grubby"), "{e}");
    assert!(e.contains("persistent by itself"), "{e}");
}

/// `persist --install` of a GRUB knob runs the host's update-grub only on
/// the live host: under a tree it is refused, naming why, nothing changed;
/// a BLS knob has nothing to install.
#[test]
fn kernel_cmdline_persist_install_regenerates_grub_only_on_the_live_host() {
    for (layout, says) in [
        ("debian-grub", "update-grub runs only on the live host"),
        ("fedora-bls", "nothing to install"),
    ] {
        let (_tmp, root) = boot_tree(layout);
        let m = knobs(&[("iso", KNOB)]);
        let o = run(&root, m.path(), &["apply", "iso"]);
        assert_eq!(o.status.code(), Some(0), "{layout}: {}", err(&o));
        let before = tree(&root);
        let o = run(&root, m.path(), &["persist", "iso"]);
        assert_eq!(o.status.code(), Some(0), "{layout}: {}", err(&o));
        assert_eq!(
            err(&o).contains("update-grub"),
            layout == "debian-grub",
            "{layout}: {}",
            err(&o)
        );
        let o = run(&root, m.path(), &["persist", "iso", "--install"]);
        assert_eq!(o.status.code(), Some(1), "{layout}: {}", err(&o));
        assert!(err(&o).contains(says), "{layout}: {}", err(&o));
        assert_tree(&before, &root, layout);
    }
}

/// Revert of a GRUB knob removes the drop-in, but grub.cfg (regenerated
/// after apply) still boots with the parameters: revert says so naming
/// `update-grub`, audit says drift with grub.cfg stale (not ok, not
/// "gone at the next boot"), and `persist --remove` is the consent to
/// regenerate it: refused while the drop-in is there, and under --root.
#[test]
fn kernel_cmdline_grub_revert_names_the_stale_grub_cfg_and_persist_remove_regenerates_it() {
    let (_tmp, root) = boot_tree("debian-grub");
    let m = knobs(&[("iso", KNOB)]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    update_grub(&root);
    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "iso", "--remove"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("hostknob-iso.cfg is still there"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "persist --remove before revert");

    let o = run(&root, m.path(), &["revert", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains(
            "warning: iso: /boot/grub/grub.cfg:21 still boots with isolcpus=2-3 nohz_full=2-3"
        ) && e.contains("`update-grub`")
            && e.contains(" persist iso --remove`"),
        "{e}"
    );
    let (s, k, code) = status(&root, m.path());
    assert_eq!((s.as_str(), code), ("drift", 2), "{k:#}");
    let cfg = k["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["paths"][0] == "/boot/grub/grub.cfg")
        .cloned()
        .unwrap();
    assert_eq!(cfg["status"], "drift", "{k:#}");
    assert!(
        cfg["current"].as_str().unwrap().contains("stale")
            && !cfg["detail"].as_str().unwrap().contains("in effect now"),
        "{k:#}"
    );
    assert!(k["notes"].to_string().contains("still boots with"), "{k:#}");

    let before = tree(&root);
    let o = run(&root, m.path(), &["persist", "iso", "--remove"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("update-grub runs only on the live host"),
        "{}",
        err(&o)
    );
    assert_tree(&before, &root, "persist --remove under --root");
    // What update-grub would do: the files as restored boot without the change.
    update_grub(&root);
    let o = run(&root, m.path(), &["revert", "iso"]);
    assert!(!err(&o).contains("still boots with"), "{}", err(&o));
    let (_, k, _) = status(&root, m.path());
    assert!(
        !k["notes"].to_string().contains("still boots with"),
        "{k:#}"
    );
    // The host's own /etc/default/grub has the words: grub.cfg is not stale.
    let text = read(&root, "etc/default/grub").replace(
        "GRUB_CMDLINE_LINUX=\"\"",
        &format!("GRUB_CMDLINE_LINUX=\"{ADDED}\""),
    );
    std::fs::write(root.join("etc/default/grub"), text).unwrap();
    update_grub(&root);
    let (_, k, _) = status(&root, m.path());
    assert!(read(&root, "boot/grub/grub.cfg").contains(ADDED));
    assert!(
        !k["notes"].to_string().contains("still boots with"),
        "{k:#}"
    );
    assert!(!k["groups"].to_string().contains("stale"), "{k:#}");
}

/// A kernel installed between apply and revert gets its BLS entry from the
/// edited /etc/kernel/cmdline; revert restores only the files apply wrote,
/// and names that entry as still booting with the parameters.
#[test]
fn kernel_cmdline_bls_revert_names_entries_made_after_apply() {
    let (_tmp, root) = boot_tree("fedora-bls");
    let m = knobs(&[("iso", KNOB)]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // kernel-install add 6.12.1: a new entry with /etc/kernel/cmdline's options.
    let dir = root.join("boot/loader/entries");
    let old = "8f3c9a1d2e4b4c6f9a0b1c2d3e4f5a6b-6.11.4-301.fc41.x86_64.conf";
    let new = "8f3c9a1d2e4b4c6f9a0b1c2d3e4f5a6b-6.12.1-100.fc41.x86_64.conf";
    let options = read(&root, "etc/kernel/cmdline");
    let entry: String = read(&root, &format!("boot/loader/entries/{old}"))
        .lines()
        .map(|l| {
            if l.starts_with("options") {
                format!("options {}\n", options.trim())
            } else {
                format!("{}\n", l.replace("6.11.4-301", "6.12.1-100"))
            }
        })
        .collect();
    std::fs::write(dir.join(new), entry).unwrap();
    let o = run(&root, m.path(), &["revert", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let e = err(&o);
    let warned: Vec<&str> = e
        .lines()
        .filter(|l| l.contains("still boots with"))
        .collect();
    assert_eq!(warned.len(), 1, "{e}");
    assert!(
        warned[0].contains(&format!(
            "/boot/loader/entries/{new} still boots with isolcpus=2-3 nohz_full=2-3"
        )),
        "{e}"
    );
    assert!(
        !read(&root, &format!("boot/loader/entries/{old}")).contains("isolcpus"),
        "the entries apply wrote are restored"
    );
}

/// `console=` is taken several times: adding one keeps the others (BLS and
/// GRUB sourced by the real `sh`); order-dependent hugepage words, and
/// removing every console at once, are refused at load naming the field.
#[test]
fn kernel_cmdline_repeatable_keys_are_appended_and_hugepages_refused() {
    let add =
        "kind: kernel-cmdline\npersistence: cmdline\nset:\n  add: [\"console=ttyS0,115200\"]\n";
    let (_tmp, root) = boot_tree("debian-grub");
    let text = read(&root, "etc/default/grub").replace(
        "GRUB_CMDLINE_LINUX=\"\"",
        "GRUB_CMDLINE_LINUX=\"console=tty0\"",
    );
    std::fs::write(root.join("etc/default/grub"), text).unwrap();
    let m = knobs(&[("iso", add)]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    update_grub(&root);
    let cfg = read(&root, "boot/grub/grub.cfg");
    let linux = cfg
        .lines()
        .find(|l| l.trim_start().starts_with("linux\t"))
        .unwrap();
    assert!(
        linux.contains(" ro console=tty0 console=ttyS0,115200 quiet"),
        "{linux}"
    );
    let (s, k, _) = status(&root, m.path());
    assert_eq!(s, "pending-reboot", "{k:#}");

    let (_tmp, root) = boot_tree("systemd-boot");
    let entry = "efi/loader/entries/2f1e6c0d9b8a47e3a5c4d3b2a1f0e9d8-6.1.0-26-amd64.conf";
    let text = read(&root, entry).replace(" ro ", " ro console=tty0 ");
    std::fs::write(root.join(entry), text).unwrap();
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let options = read(&root, entry);
    assert!(
        options.contains(" ro console=tty0 quiet console=ttyS0,115200\n"),
        "{options}"
    );

    for (set, field, says) in [
        ("add: [\"hugepages=32\"]", "set.add[0]", "read in order"),
        (
            "add: [\"nohz_full=2\", \"hugepagesz=1G\"]",
            "set.add[1]",
            "read in order",
        ),
        (
            "remove: [\"console\"]",
            "set.remove[0]",
            "remove one word, console=VALUE",
        ),
    ] {
        let (_tmp, root) = boot_tree("systemd-boot");
        let m = knobs(&[(
            "iso",
            &format!("kind: kernel-cmdline\npersistence: cmdline\nset:\n  {set}\n"),
        )]);
        let before = tree(&root);
        let o = run(&root, m.path(), &["apply", "iso"]);
        assert_ne!(o.status.code(), Some(0), "{set}");
        let e = err(&o);
        assert!(e.contains(field) && e.contains(says), "{set}: {e}");
        assert_tree(&before, &root, set);
    }
}

/// The drop-in's patterns take `-` and `_` alike (as the kernel and the BLS
/// edit do), and its loops do not glob: sourced by the real `sh` in a
/// directory where `ftrace_filter=tick*` matches a file, the word stays.
#[test]
fn kernel_cmdline_grub_drop_in_matches_both_spellings_and_does_not_glob() {
    let (_tmp, root) = boot_tree("debian-grub");
    let text = read(&root, "etc/default/grub")
        .replace(
            "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"",
            "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet nohz_full=2-3 rcu_nocbs=2-3\"",
        )
        .replace(
            "GRUB_CMDLINE_LINUX=\"\"",
            "GRUB_CMDLINE_LINUX=\"ftrace_filter=tick*\"",
        );
    std::fs::write(root.join("etc/default/grub"), text).unwrap();
    std::fs::write(root.join("ftrace_filter=tick_nohz"), "").unwrap();
    let m = knobs(&[(
        "iso",
        "kind: kernel-cmdline\npersistence: cmdline\nset:\n  add: [\"nohz-full=4-11\"]\n  remove: [\"rcu-nocbs=2-3\"]\n",
    )]);
    let o = run(&root, m.path(), &["apply", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // The caller's `set -f` is kept: the drop-in turns it back on only if it turned it off.
    let dropin = read(&root, "etc/default/grub.d/hostknob-iso.cfg");
    for (before, after) in [("", "f"), ("set -f; ", "f")] {
        let script = format!(r#"{before}. "$1"; case $- in *f*) echo f ;; *) echo on ;; esac"#);
        let out = Command::new("sh")
            .args(["-c", &script, "sh"])
            .arg(root.join("etc/default/grub.d/hostknob-iso.cfg"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let want = if before.is_empty() { "on" } else { after };
        assert_eq!(said, want, "{before:?}: {dropin}");
    }
    update_grub(&root);
    let cfg = read(&root, "boot/grub/grub.cfg");
    let linux = cfg
        .lines()
        .find(|l| l.trim_start().starts_with("linux\t"))
        .unwrap();
    assert!(
        linux.ends_with(" ro ftrace_filter=tick* nohz-full=4-11 quiet"),
        "{linux}\n{dropin}"
    );
    let (s, k, _) = status(&root, m.path());
    assert_eq!(s, "pending-reboot", "{k:#}");
}
