//! Host identity: name, kernel, command line, boot time, distribution, mitigations.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{CPU_DIR, Reader};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Host {
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub distribution: Option<String>,
    /// RFC 3339, UTC, from `btime` in `/proc/stat`.
    pub boot_time: Option<String>,
    pub boot_time_unix: Option<u64>,
    pub uptime_s: Option<f64>,
    pub cmdline: Option<String>,
}

pub fn read(ctx: &Reader) -> Host {
    let hostname = ctx
        .text("/proc/sys/kernel/hostname")
        .or_else(|| ctx.text("/etc/hostname"));
    if hostname.is_none() {
        ctx.not_exposed("hostname", "/proc/sys/kernel/hostname");
    }
    let kernel_version = ctx.text("/proc/version");
    let kernel_release = release(ctx, kernel_version.as_deref());
    if kernel_release.is_none() {
        ctx.not_exposed("kernel release", "/proc/version");
    }
    let distribution = os_release(ctx);
    let boot_time_unix = boot_time(ctx);
    let boot_time = boot_time_unix.map(rfc3339);
    let uptime_s = ctx
        .text("/proc/uptime")
        .and_then(|t| t.split_whitespace().next()?.parse().ok());
    let cmdline = ctx.text("/proc/cmdline");
    if cmdline.is_none() {
        ctx.not_exposed("kernel command line", "/proc/cmdline");
    }
    Host {
        hostname,
        kernel_release,
        kernel_version,
        distribution,
        boot_time,
        boot_time_unix,
        uptime_s,
        cmdline,
    }
}

/// `osrelease`, else the release in `/proc/version` (`version`, when read already).
pub(super) fn release(ctx: &Reader, version: Option<&str>) -> Option<String> {
    ctx.text("/proc/sys/kernel/osrelease").or_else(|| {
        // "Linux version 6.18.8-200.fc43.x86_64 (mockbuild@...) ..."
        let read;
        let version = match version {
            Some(v) => v,
            None => {
                read = ctx.text("/proc/version")?;
                read.as_str()
            }
        };
        version
            .strip_prefix("Linux version ")?
            .split_whitespace()
            .next()
            .map(str::to_string)
    })
}

pub fn rfc3339(unix: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(unix)).to_string()
}

fn boot_time(ctx: &Reader) -> Option<u64> {
    let Some(stat) = ctx.text("/proc/stat") else {
        ctx.not_exposed("boot time", "/proc/stat");
        return None;
    };
    let found = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok());
    if found.is_none() {
        ctx.warn("/proc/stat: no btime line".into());
    }
    found
}

fn os_release(ctx: &Reader) -> Option<String> {
    let text = ctx
        .text("/etc/os-release")
        .or_else(|| ctx.text("/usr/lib/os-release"));
    let Some(text) = text else {
        ctx.not_exposed("distribution", "/etc/os-release");
        return None;
    };
    let field = |key: &str| {
        text.lines().find_map(|l| {
            Some(
                l.strip_prefix(key)?
                    .strip_prefix('=')?
                    .trim_matches('"')
                    .to_string(),
            )
        })
    };
    field("PRETTY_NAME").or_else(|| field("NAME"))
}

pub fn vulnerabilities(ctx: &Reader) -> BTreeMap<String, String> {
    let dir = format!("{CPU_DIR}/vulnerabilities");
    let Some(names) = ctx.dir(&dir) else {
        ctx.not_exposed("vulnerabilities", &dir);
        return BTreeMap::new();
    };
    names
        .into_iter()
        .filter_map(|n| Some((n.clone(), ctx.text(&format!("{dir}/{n}"))?)))
        .collect()
}
