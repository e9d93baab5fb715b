//! What tuned's functions and plugins read from the host, read once through
//! the root seam.

use crate::cpulist::CpuList;
use crate::inventory::idle_states::{self, StateFacts};
use crate::root::Root;

#[derive(Debug, Default)]
pub struct Facts {
    pub online: Vec<u32>,
    /// The kernel's `isolcpus=` CPUs (`cpu/isolated`), out of every task's
    /// default affinity.
    pub isolated: Vec<u32>,
    pub present: Vec<u32>,
    pub cpuinfo: String,
    /// CPU -> `topology/physical_package_id`.
    pub packages: Vec<(u32, String)>,
    /// tuned matches `uname_regex` against `" ".join(os.uname())`; a tree
    /// gives the release and the machine.
    pub uname: String,
    /// The kernel release (`osrelease`, else `/proc/version`); empty when
    /// the tree says neither.
    pub release: String,
    /// CPU 0's idle states (tuned's plugin_cpu reads cpu0's only).
    pub idle: Vec<StateFacts>,
    pub idle_driver: Option<String>,
    /// The first policy's lists.
    pub governors: Vec<String>,
    pub epps: Vec<String>,
    /// What the device plugins would tune (`devices`).
    pub devices: super::hardware::Devices,
}

fn list(root: &Root, path: &str) -> Vec<u32> {
    root.read_trimmed(path)
        .ok()
        .flatten()
        .and_then(|t| CpuList::parse(&t).ok())
        .map(|l| l.as_slice().to_vec())
        .unwrap_or_default()
}

fn words(root: &Root, path: &str) -> Vec<String> {
    root.read_trimmed(path)
        .ok()
        .flatten()
        .map(|t| t.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

pub fn read(root: &Root) -> Facts {
    let cpu = "/sys/devices/system/cpu";
    let online = list(root, &format!("{cpu}/online"));
    let cpuinfo = root.read_string("/proc/cpuinfo").unwrap_or_default();
    let packages = online
        .iter()
        .filter_map(|c| {
            root.read_trimmed(&format!("{cpu}/cpu{c}/topology/physical_package_id"))
                .ok()
                .flatten()
                .map(|p| (*c, p))
        })
        .collect();
    let machine = if cpuinfo.contains("vendor_id") {
        "x86_64"
    } else if cpuinfo.contains("CPU implementer") {
        "aarch64"
    } else {
        ""
    };
    let release = root
        .read_trimmed("/proc/sys/kernel/osrelease")
        .ok()
        .flatten()
        .or_else(|| {
            let v = root.read_trimmed("/proc/version").ok().flatten()?;
            v.strip_prefix("Linux version ")?
                .split_whitespace()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let mut policies = root.read_dir(&format!("{cpu}/cpufreq")).unwrap_or_default();
    policies.retain(|p| p.starts_with("policy"));
    policies.sort_by_key(|p| p[6..].parse::<u32>().unwrap_or(u32::MAX));
    let policy = policies.first().map(|p| format!("{cpu}/cpufreq/{p}"));
    let from_policy = |f: &str| {
        policy
            .as_ref()
            .map(|p| words(root, &format!("{p}/{f}")))
            .unwrap_or_default()
    };
    Facts {
        present: list(root, &format!("{cpu}/present")),
        isolated: list(root, &format!("{cpu}/isolated")),
        packages,
        uname: format!("Linux {release} {machine}"),
        release,
        idle: idle_states::cpu_states(root, 0).unwrap_or_default(),
        idle_driver: root
            .read_trimmed(&format!("{cpu}/cpuidle/current_driver"))
            .ok()
            .flatten(),
        governors: from_policy("scaling_available_governors"),
        epps: from_policy("energy_performance_available_preferences"),
        devices: super::hardware::read(root),
        online,
        cpuinfo,
    }
}
