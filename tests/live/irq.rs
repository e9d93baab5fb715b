//! Live IRQ placement (issue 21): an `irq-affinity` knob moves the virtio
//! IRQs to CPU 0 and revert puts every list back; irqbalance, run once
//! (`--oneshot`, it exits) with the banned list the `irqbalance` kind
//! writes, leaves CPU 1 out of every IRQ it places. A guard writes back
//! every `/proc/irq/*/smp_affinity_list` (and `default_smp_affinity`) read
//! before the test on every path, a panic included.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::support::*;

/// Every IRQ affinity file and its text, as read before the test.
fn irq_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity_list");
        if let Ok(t) = std::fs::read_to_string(&p) {
            out.push((p.display().to_string(), t));
        }
    }
    let d = "/proc/irq/default_smp_affinity";
    out.push((d.into(), std::fs::read_to_string(d).unwrap()));
    out.sort();
    out
}

/// Writes back every file that reads differently from the snapshot.
struct IrqGuard(Vec<(String, String)>);

impl Drop for IrqGuard {
    fn drop(&mut self) {
        for (p, was) in &self.0 {
            if std::fs::read_to_string(p).ok().as_deref() != Some(was.as_str()) {
                let _ = std::fs::write(p, was.trim());
                eprintln!("live test guard: restored {p} to {}", was.trim());
            }
        }
    }
}

/// IRQs whose action starts with `virtio` and whose list the kernel lets
/// userspace write (a managed queue's has no write bit).
fn movable_virtio() -> Vec<u32> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    text.lines()
        .filter(|l| {
            l.split_whitespace()
                .last()
                .is_some_and(|a| a.starts_with("virtio"))
        })
        .filter_map(|l| l.split(':').next()?.trim().parse().ok())
        .filter(|n: &u32| {
            std::fs::metadata(format!("/proc/irq/{n}/smp_affinity_list"))
                .is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
        })
        .collect()
}

fn online_has_cpu1() -> bool {
    std::fs::read_to_string("/sys/devices/system/cpu/online").is_ok_and(|t| t.trim() != "0")
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_irq_affinity_moves_virtio_irqs_to_cpu0_and_revert_restores_every_list() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let irqs = movable_virtio();
    if irqs.is_empty() || !online_has_cpu1() {
        eprintln!("live test skipped: no movable virtio IRQ, or one CPU only");
        return;
    }
    let before = irq_files();
    let _guard = IrqGuard(before.clone());
    let id = "live-virtio-cpu0";
    let m = knobs(&[(
        id,
        "persistence: runtime\nkind: irq-affinity\ntarget: {actions: [\"virtio*\"]}\nset: \"0\"\n",
    )]);
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let live = |args: &[&str]| {
        let mut all = vec!["--state-dir", state_dir, "--host", "live"];
        all.extend_from_slice(args);
        run(Path::new("/"), m.path(), &all)
    };
    let applied = ok(&live(&["apply", id]));
    assert!(applied.contains("wrote and read back"), "{applied}");
    for n in &irqs {
        let now = std::fs::read_to_string(format!("/proc/irq/{n}/smp_affinity_list")).unwrap();
        assert_eq!(now.trim(), "0", "IRQ {n} as the kernel reads it back");
    }
    let (report, _) = audit_json(Path::new("/"), m.path(), Some("live"));
    let k = knob(&report, id);
    // In effect; `runtime` persistence makes it `unpersisted` rather than `ok`.
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    ok(&live(&["revert", "--all"]));
    assert_eq!(irq_files(), before, "every affinity file as before");
    assert!(super::journal_of(state.path()).is_empty());
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_irqbalance_oneshot_with_the_kinds_banned_list_leaves_cpu1_out() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let Ok(found) = std::process::Command::new("sh")
        .args(["-c", "command -v irqbalance"])
        .output()
    else {
        panic!("sh");
    };
    let bin = String::from_utf8_lossy(&found.stdout).trim().to_string();
    if bin.is_empty() || !online_has_cpu1() || movable_virtio().is_empty() {
        eprintln!(
            "live test skipped: no irqbalance (.ci/run installs it), one CPU, or no movable IRQ"
        );
        return;
    }
    // The banned list as the kind writes it, into a copy of this host's file.
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("etc/default")).unwrap();
    std::fs::create_dir_all(tree.path().join("sys")).unwrap();
    let original = std::fs::read_to_string("/etc/default/irqbalance")
        .unwrap_or_else(|_| "#IRQBALANCE_BANNED_CPULIST=\n".into());
    std::fs::write(tree.path().join("etc/default/irqbalance"), &original).unwrap();
    let m = knobs(&[(
        "ban-1",
        "persistence: runtime\nkind: irqbalance\nset: \"1\"\n",
    )]);
    ok(&run(
        tree.path(),
        m.path(),
        &["--host", "live", "apply", "ban-1"],
    ));
    let written = std::fs::read_to_string(tree.path().join("etc/default/irqbalance")).unwrap();
    let value = written
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("IRQBALANCE_BANNED_CPULIST="))
        .unwrap()
        .trim_matches('"')
        .to_string();
    assert_eq!(value, "1");
    let before = irq_files();
    let _guard = IrqGuard(before.clone());
    let mut child = std::process::Command::new(&bin)
        .args(["--oneshot", "--debug"])
        .env("IRQBALANCE_BANNED_CPULIST", &value)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = {
        let status = child.wait().unwrap();
        let mut s = String::new();
        use std::io::Read;
        child.stdout.take().unwrap().read_to_string(&mut s).unwrap();
        assert!(status.success(), "irqbalance --oneshot: {status}: {s}");
        s
    };
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "irqbalance (PID {pid}) is gone"
    );
    assert!(out.contains("Banned CPUs: 00000002"), "{out}");
    let after = irq_files();
    let placed: Vec<&(String, String)> = after
        .iter()
        .filter(|(p, t)| {
            p.ends_with("smp_affinity_list") && !before.contains(&(p.clone(), t.clone()))
        })
        .collect();
    assert!(!placed.is_empty(), "irqbalance placed no IRQ: {out}");
    for (p, t) in &placed {
        let has_cpu1 = t.trim().split(',').any(|r| {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            lo.parse::<u32>().unwrap() <= 1 && 1 <= hi.parse::<u32>().unwrap()
        });
        assert!(!has_cpu1, "{p} reads {t:?}: CPU 1 is banned");
    }
    eprintln!("irqbalance placed {} IRQs, none on CPU 1", placed.len());
}
