//! `hostknob hold KNOB`: owns a pm-qos knob's PM QoS request until a signal.

use std::io::Write as _;

use anyhow::{Result, anyhow, bail};
use nix::sys::signal::{SigSet, Signal};

use crate::apply;
use crate::cli::HoldArgs;
use crate::knob::KindName;
use crate::probe::pmqos;

pub fn run(args: &HoldArgs) -> Result<i32> {
    // A tree's /dev/cpu_dma_latency is a copy or a planted device node, never
    // a request the kernel holds for this machine: refused before anything is read.
    // The suite's hook (as for probes and verify) tests the orchestration on a
    // tree whose device is a plain file; a device node there is still refused.
    let root = crate::root::Root::open(&args.target.root.root)?;
    let hooked =
        crate::test_hooks::var_os(crate::probe::PROBE_ON_ROOT_VAR).is_some_and(|v| v == "1");
    if !root.is_live() && !hooked {
        bail!(
            "hold keeps a PM QoS request of this machine, not of the tree at --root {}: run it on \
             the host itself (without --root)",
            root.base().display()
        );
    }
    drop(root);
    let t = super::OpenHost::open(&args.target)?;
    let manifest = t.manifest(&args.target)?;
    super::in_profile(&manifest, std::slice::from_ref(&args.knob))?;
    let knob = apply::select(&manifest, &t.host, std::slice::from_ref(&args.knob), false)?[0];
    if knob.kind != KindName::PmQos {
        bail!(
            "{}:{}: kind: {} is a {} knob; hold takes pm-qos knobs only",
            knob.source.file.display(),
            knob.source.first_line,
            knob.id,
            knob.kind
        );
    }
    let us: u32 = knob
        .spec
        .desired()
        .parse()
        .map_err(|_| anyhow!("{}: set: not a number of µs", knob.id))?;
    // Block the signals first: they are taken by sigwait below, never by a
    // default handler that would exit without a word.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block()?;
    let held = pmqos::hold(&t.root, us).map_err(|e| anyhow!("{}: {e:#}", knob.id))?;
    println!(
        "hold: {}: {} held at {us} µs; the kernel's aggregate reads {} µs (pid {}); \
         SIGTERM or Ctrl-C releases it",
        knob.id,
        crate::inventory::PM_QOS_DEVICE,
        held.effective_us,
        std::process::id()
    );
    std::io::stdout().flush()?;
    let signal = signals.wait()?;
    drop(held);
    let after = pmqos::read_aggregate(&t.root)
        .map(|v| format!("{v} µs"))
        .unwrap_or_else(|| "unreadable".into());
    println!(
        "hold: {}: released on {signal:?}; the aggregate now reads {after}",
        knob.id
    );
    Ok(0)
}
