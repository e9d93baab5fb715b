//! The probe verify runs for a knob whose manifest names none: here, below
//! both verify (which runs it) and audit (whose advice names it).

use super::Knob;
use crate::knob::KindName;

/// Kernel parameters that isolate CPUs (Documentation/admin-guide/kernel-parameters.txt).
const ISOLATION_PARAMS: [&str; 6] = [
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "kthread_cpus",
    "housekeeping",
];

/// The probe verify runs when the manifest names none: `noise` for the
/// kinds that move work off CPUs, and for a command line that isolates.
pub fn default_probe(knob: &Knob) -> Option<&'static str> {
    let isolating = match knob.kind {
        KindName::IrqAffinity
        | KindName::WorkqueueCpumask
        | KindName::ThreadAffinity
        | KindName::SystemdCpuAffinity => true,
        KindName::KernelCmdline => knob.spec.cmdline_args().is_some_and(|args| {
            args.iter().any(|a| {
                let name = a.split('=').next().unwrap_or(a);
                ISOLATION_PARAMS.contains(&name)
            })
        }),
        _ => false,
    };
    isolating.then_some("noise")
}
