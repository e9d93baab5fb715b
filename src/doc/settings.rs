//! Settings the host document shows beyond the inventory: loopback and
//! network, scheduler and memory sysctls. Read through the root seam, so a
//! capture made after reading them carries them too.

use serde::Serialize;

use crate::root::Root;

/// `(sysctl name, why an operator of a latency-sensitive host cares)`.
pub const SYSCTLS: &[(&str, &str)] = &[
    (
        "net.core.busy_poll",
        "µs a poll/select busy-waits on a socket before sleeping (0: off)",
    ),
    (
        "net.core.busy_read",
        "µs a blocking read busy-waits before sleeping (0: off)",
    ),
    (
        "net.core.netdev_max_backlog",
        "packets queued per CPU before drops",
    ),
    ("net.core.somaxconn", "listen backlog limit"),
    (
        "net.ipv4.tcp_autocorking",
        "coalesce small writes (adds latency to light calls when 1)",
    ),
    (
        "kernel.timer_migration",
        "timers may move off idle CPUs (1) or stay (0)",
    ),
    ("kernel.numa_balancing", "automatic NUMA page migration"),
    (
        "kernel.sched_rt_runtime_us",
        "real-time throttling budget per second (-1: none)",
    ),
    ("vm.swappiness", "preference for swapping anonymous memory"),
    (
        "vm.zone_reclaim_mode",
        "reclaim on the local node before going remote",
    ),
];

#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Sysctl {
    pub name: String,
    pub value: Option<String>,
    pub meaning: String,
}

impl Sysctl {
    pub fn path(&self) -> String {
        format!("/proc/sys/{}", self.name.replace('.', "/"))
    }
}

pub fn read_sysctls(root: &Root) -> Vec<Sysctl> {
    SYSCTLS
        .iter()
        .map(|(name, meaning)| {
            let mut s = Sysctl {
                name: name.to_string(),
                value: None,
                meaning: meaning.to_string(),
            };
            s.value = root
                .read_string(&s.path())
                .ok()
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "));
            s
        })
        .collect()
}

/// Kernel command-line parameters that partition CPUs.
pub const PARTITION_PARAMS: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "nohz",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "cpuidle.off",
];

pub fn cmdline_params<'a>(cmdline: &'a str, names: &[&str]) -> Vec<(String, &'a str)> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter_map(|w| {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            names.contains(&k).then(|| (k.to_string(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_partitioning_parameters_before_the_init_arguments() {
        let p = cmdline_params(
            "ro isolcpus=2-7 nohz_full=2-7 quiet -- irqaffinity=0",
            PARTITION_PARAMS,
        );
        assert_eq!(
            p,
            vec![
                ("isolcpus".to_string(), "2-7"),
                ("nohz_full".to_string(), "2-7")
            ]
        );
    }
}
