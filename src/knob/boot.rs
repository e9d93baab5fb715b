//! What the kernel boots with: its build configuration (`/proc/config.gz`,
//! else `/boot/config-$(uname -r)`) and the command line, read through the
//! root seam. A knob whose desired value is the boot value needs nothing to
//! persist it (audit says `ok`, not `unpersisted`).

use super::HostCtx;

/// A knob's value at the next boot, and what says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootValue {
    pub value: String,
    pub why: String,
}

/// The kernel's build configuration, as text, and the file it came from.
pub struct KernelConfig {
    text: String,
    pub source: String,
}

/// gzip bodies larger than this are not a kernel configuration.
const CONFIG_LIMIT: usize = 16 << 20;

impl KernelConfig {
    /// `/proc/config.gz` (CONFIG_IKCONFIG_PROC), else `/boot/config-RELEASE`
    /// for the release in `/proc/sys/kernel/osrelease`; `None` when neither is
    /// there or readable.
    pub fn read(host: &HostCtx) -> Option<KernelConfig> {
        // Where /proc/config.gz is not seen (the pod), /boot's copy first:
        // the unseen one is asked for (and named unknown) only without it.
        let proc_first = host.root.shows("/proc/config.gz");
        if proc_first && let Some(c) = Self::from_proc(host) {
            return Some(c);
        }
        if let Some(c) = Self::from_boot(host) {
            return Some(c);
        }
        if proc_first {
            return None;
        }
        Self::from_proc(host)
    }

    fn from_proc(host: &HostCtx) -> Option<KernelConfig> {
        let bytes = host.root.read("/proc/config.gz").ok()?;
        let text = gunzip(&bytes).ok()?;
        Some(KernelConfig {
            text,
            source: "/proc/config.gz".into(),
        })
    }

    fn from_boot(host: &HostCtx) -> Option<KernelConfig> {
        let release = host.text("/proc/sys/kernel/osrelease")?;
        if release.is_empty() || release.contains('/') {
            return None;
        }
        let path = format!("/boot/config-{release}");
        let text = host.root.read_string(&path).ok()?;
        Some(KernelConfig { text, source: path })
    }

    /// Whether `NAME=y` is a line of the configuration.
    pub fn is_y(&self, name: &str) -> bool {
        self.text
            .lines()
            .any(|l| l.strip_prefix(name).is_some_and(|rest| rest.trim() == "=y"))
    }
}

/// A gzip member's content (RFC 1952: header, raw deflate, trailer), as UTF-8.
pub fn gunzip(bytes: &[u8]) -> Result<String, String> {
    let bad = || "not a gzip file".to_string();
    if bytes.len() < 18 || bytes[0] != 0x1f || bytes[1] != 0x8b || bytes[2] != 8 {
        return Err(bad());
    }
    let flags = bytes[3];
    let mut at = 10;
    if flags & 4 != 0 {
        let n = u16::from_le_bytes([
            *bytes.get(at).ok_or_else(bad)?,
            *bytes.get(at + 1).ok_or_else(bad)?,
        ]);
        at += 2 + n as usize;
    }
    for flag in [8, 16] {
        if flags & flag != 0 {
            let end = bytes
                .get(at..)
                .ok_or_else(bad)?
                .iter()
                .position(|b| *b == 0)
                .ok_or_else(bad)?;
            at += end + 1;
        }
    }
    if flags & 2 != 0 {
        at += 2;
    }
    let body = bytes.get(at..).ok_or_else(bad)?;
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(body, CONFIG_LIMIT)
        .map_err(|e| format!("cannot inflate: {e:?}"))?;
    String::from_utf8(out).map_err(|_| "not UTF-8 text".to_string())
}

/// The value of the last `name=` parameter on the kernel command line
/// (the kernel takes the last one).
pub fn cmdline_param<'a>(cmdline: &'a str, name: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gunzip_reads_what_gzip_wrote() {
        let dir = std::env::temp_dir().join(format!("hostknob-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("config");
        std::fs::write(&f, "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y\n").unwrap();
        let st = std::process::Command::new("gzip")
            .arg("-kf")
            .arg(&f)
            .status()
            .unwrap();
        assert!(st.success());
        let bytes = std::fs::read(dir.join("config.gz")).unwrap();
        let text = gunzip(&bytes).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text, "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y\n");
        assert!(gunzip(b"CONFIG_X=y\n").is_err());
    }

    #[test]
    fn the_last_parameter_counts() {
        let c = "ro transparent_hugepage=always quiet transparent_hugepage=never";
        assert_eq!(cmdline_param(c, "transparent_hugepage"), Some("never"));
        assert_eq!(cmdline_param("ro", "transparent_hugepage"), None);
    }
}
