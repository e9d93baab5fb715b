//! Issue 50, items 2 and 3, where the first round left them: an interface
//! name the kernel could not give (a crafted tree's) never reaches a plan,
//! the inventory or a persisted file, and every command hostknob prints for
//! pasting quotes what it took from the user or the tree.

use crate::hostile::hk;
use crate::support::nic::{ICE, Nic, host_with};
use crate::support::*;

/// A directory name Linux allows and the kernel never gives an interface
/// (net/core/dev.c `dev_valid_name` refuses white space): pasted raw into a
/// udev rule or a plan, its second line would be a rule of its own.
const CRAFTED: &str = "ens9\nACTION==\"add\", RUN+=\"reboot\"";

/// A copy of the 2-CPU VM with an ice NIC `ens2f0` and a second ice NIC
/// under the crafted name.
fn tree_with_crafted_name() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = host_with(
        "fc-haltpoll-2cpu",
        &Nic {
            cpus: 2,
            queues: 2,
            ..ICE
        },
    );
    crate::support::nic::add(
        &root,
        &Nic {
            ifname: Box::leak(CRAFTED.to_string().into_boxed_str()),
            pci: "0000:18:00.0",
            mac: "b4:96:91:18:00:00",
            cpus: 2,
            queues: 2,
            ..ICE
        },
    );
    (t, root)
}

fn injected_line(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("ACTION==\"add\""))
}

#[test]
fn an_interface_name_the_kernel_cannot_give_reaches_no_plan_and_no_inventory() {
    let (_t, root) = tree_with_crafted_name();
    let m = knobs(&[(
        "steer",
        "persistence: runtime\nkind: rps\ntarget: {driver: ice}\nset: {cpus: 1}\n",
    )]);
    let plan = hk(&root, m.path(), &["apply", "--all", "--dry-run"]);
    let text = format!("{}{}", out(&plan), err(&plan));
    assert!(text.contains("ens2f0"), "the real NIC is planned: {text}");
    assert!(
        !injected_line(&text),
        "the crafted name reached the plan:\n{text}"
    );
    assert!(
        !text.contains("ens9"),
        "the crafted name was selected:\n{text}"
    );

    let inv = hk(&root, m.path(), &["inventory", "network"]);
    assert_eq!(inv.status.code(), Some(0), "{}", err(&inv));
    let (o, e) = (out(&inv), err(&inv));
    assert!(o.contains("ens2f0"), "{o}");
    assert!(!injected_line(&o) && !injected_line(&e), "{o}\n{e}");
    assert!(
        e.contains("not an interface name the kernel gives") && e.contains("left out"),
        "the inventory says why it left the name out: {e}"
    );
    let json = hk(
        &root,
        m.path(),
        &["inventory", "network", "--format", "json"],
    );
    assert!(!out(&json).contains("RUN+="), "{}", out(&json));
}

#[test]
fn capture_prints_a_read_command_that_runs_as_printed_whatever_the_directory() {
    let (_t, root) = vm();
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("web 7'; touch pwned; '");
    let m = knobs(&[]);
    let o = hk(
        &root,
        m.path(),
        &["capture", "--out", dir.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let line = out(&o)
        .lines()
        .find_map(|l| l.strip_prefix("read it with: ").map(str::to_string))
        .unwrap_or_else(|| panic!("no read line: {}", out(&o)));
    // The printed command, run by a shell, names the directory as one word.
    let shown = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("set -- {line}; printf '%s\\n' \"$3\""))
        .current_dir(parent.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&shown.stdout).trim_end_matches('\n'),
        dir.to_str().unwrap(),
        "{line}"
    );
    assert!(!parent.path().join("pwned").exists(), "{line}");
}
