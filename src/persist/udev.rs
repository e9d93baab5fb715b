//! udev rules: not a persistence mechanism of hostknob's, but another
//! manager audit names when a rule assigns a knob's attribute.

use super::{ConfLine, config_files};
use crate::knob::HostCtx;

const DIRS: [&str; 4] = [
    "/etc/udev/rules.d",
    "/run/udev/rules.d",
    "/usr/lib/udev/rules.d",
    "/lib/udev/rules.d",
];

/// Every `ATTR{...}=` assignment of the udev rules directories.
pub fn read(host: &HostCtx) -> Vec<ConfLine> {
    let mut out = Vec::new();
    for (file, text) in config_files(host, &DIRS, ".rules") {
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            for (attr, value) in udev_assignments(line) {
                out.push(ConfLine {
                    file: file.clone(),
                    line: i + 1,
                    key: attr,
                    value,
                });
            }
        }
    }
    out
}

/// `ATTR{power/control}="on"` assignments in a udev rule line (not `==` matches).
fn udev_assignments(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("ATTR{") {
        let after = &rest[i + 5..];
        let Some(end) = after.find('}') else { break };
        let attr = &after[..end];
        let tail = after[end + 1..].trim_start();
        rest = &after[end + 1..];
        let tail = tail.strip_prefix(':').unwrap_or(tail);
        if let Some(v) = tail.strip_prefix('=')
            && !v.starts_with('=')
        {
            let v = v.trim_start();
            let value = v
                .strip_prefix('"')
                .and_then(|q| q.split('"').next())
                .unwrap_or(v.split([',', ' ']).next().unwrap_or(""));
            out.push((attr.to_string(), value.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udev_assignments_only() {
        let l = r#"SUBSYSTEM=="cpu", ATTR{online}=="1", ATTR{power/pm_qos_resume_latency_us}="20", ATTR{cpufreq/scaling_governor}:="performance""#;
        assert_eq!(
            udev_assignments(l),
            vec![
                (
                    "power/pm_qos_resume_latency_us".to_string(),
                    "20".to_string()
                ),
                (
                    "cpufreq/scaling_governor".to_string(),
                    "performance".to_string()
                )
            ]
        );
    }
}
