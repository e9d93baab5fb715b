//! Kernel modules as the kernel and kmod show them: a loaded module's
//! `/sys/module/M/initstate` and `refcnt` (kernel/module/sysfs.c: only a
//! module loaded from a file has them), a built-in module's bare
//! `/sys/module/M` (kernel/params.c `param_sysfs_builtin`, for one with
//! parameters), and the release's `modules.dep` / `modules.builtin`
//! (depmod(8)) under `/lib/modules/RELEASE`. And the `options` line kmod's
//! modprobe.d(5) takes: words split at blanks, a value with blanks in double
//! quotes (libkmod `kmod_module_get_options`, the kernel's `next_arg`).

use super::module_dir_name;
use crate::knob::HostCtx;

/// What a module knob sets at the module's load: `options` words for
/// modprobe.d, and whether the module is loaded at boot (modules-load.d).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLoad {
    pub module: String,
    pub options: Vec<(String, String)>,
    pub load: bool,
}

/// A module on a host now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// Loaded from a file: `initstate` reads `live`; its `refcnt` (users).
    Live { refcnt: Option<u64> },
    /// Being loaded or unloaded (`initstate` `coming`, `going`, `unformed`).
    Changing(String),
    /// Built into the kernel; the evidence.
    BuiltIn(String),
    /// Not loaded (no `/sys/module/M`), and modules.builtin does not list it.
    Absent,
}

/// A module in the running release's module index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shipped {
    /// modules.dep lists its file (relative to `/lib/modules/RELEASE`).
    Loadable(String),
    /// modules.builtin lists it.
    BuiltIn(String),
    /// The index is there and lists it nowhere: no such module for this kernel.
    Missing(String),
    /// No index to read (a capture without `/lib/modules`, a container).
    Unknown(String),
}

fn release_dir(host: &HostCtx) -> Result<String, String> {
    let release = host
        .text("/proc/sys/kernel/osrelease")
        .ok_or("the kernel release is unknown (no /proc/sys/kernel/osrelease)")?;
    Ok(format!("/lib/modules/{release}"))
}

/// The module name of an index line's file (`kernel/x/foo-bar.ko.zst` -> `foo_bar`).
pub fn file_module(file: &str) -> Option<String> {
    let base = file.rsplit('/').next()?;
    let stem = base.split_once(".ko").map(|(s, _)| s)?;
    Some(module_dir_name(stem))
}

fn listed(host: &HostCtx, path: &str, module: &str) -> Option<Option<String>> {
    let text = host.root.read_string(path).ok()?;
    let want = module_dir_name(module);
    Some(
        text.lines()
            .map(|l| l.split(':').next().unwrap_or("").trim())
            .find(|f| file_module(f).as_deref() == Some(want.as_str()))
            .map(str::to_string),
    )
}

/// Where the running release's index puts `module`.
pub fn shipped(host: &HostCtx, module: &str) -> Shipped {
    let dir = match release_dir(host) {
        Ok(d) => d,
        Err(why) => return Shipped::Unknown(why),
    };
    let builtin = format!("{dir}/modules.builtin");
    if let Some(Some(f)) = listed(host, &builtin, module) {
        return Shipped::BuiltIn(format!("{builtin} lists {f}"));
    }
    let dep = format!("{dir}/modules.dep");
    match listed(host, &dep, module) {
        Some(Some(f)) => Shipped::Loadable(f),
        Some(None) => Shipped::Missing(format!("{dep} lists no module {module}")),
        None => Shipped::Unknown(format!("{dep} cannot be read here")),
    }
}

/// The module's state on this host.
pub fn loaded(host: &HostCtx, module: &str) -> Loaded {
    let dir = format!("/sys/module/{}", module_dir_name(module));
    if host.root.is_dir(&dir) {
        return match host.text(&format!("{dir}/initstate")) {
            Some(s) if s == "live" => Loaded::Live {
                refcnt: host
                    .text(&format!("{dir}/refcnt"))
                    .and_then(|r| r.parse().ok()),
            },
            Some(s) => Loaded::Changing(s),
            None => Loaded::BuiltIn(format!("{dir} has no initstate")),
        };
    }
    match shipped(host, module) {
        Shipped::BuiltIn(why) => Loaded::BuiltIn(why),
        _ => Loaded::Absent,
    }
}

/// A value as one `options` word: in double quotes when it holds blanks;
/// a double quote or newline cannot be written (the parser has no escape).
pub fn option_word(param: &str, value: &str) -> Result<String, String> {
    if value.contains(['"', '\n', '\r']) {
        return Err(format!(
            "{param}={value:?}: a modprobe.d option value cannot hold a double quote or a newline \
             (kmod's parser has no escape for them)"
        ));
    }
    Ok(if value.contains(char::is_whitespace) || value.is_empty() {
        format!("{param}=\"{value}\"")
    } else {
        format!("{param}={value}")
    })
}

/// Splits an `options` line's words as the kernel's `next_arg` does:
/// blanks separate, double quotes keep blanks in a value and are dropped.
pub fn split_options(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut push = |w: &mut String| {
        if !w.is_empty() {
            let (k, v) = w.split_once('=').unwrap_or((w.as_str(), ""));
            out.push((k.to_string(), v.to_string()));
            w.clear();
        }
    };
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => push(&mut word),
            c => word.push(c),
        }
    }
    push(&mut word);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_and_option_words() {
        assert_eq!(
            file_module("kernel/drivers/cpufreq/cpufreq-conservative.ko.zst").as_deref(),
            Some("cpufreq_conservative")
        );
        assert_eq!(file_module("kernel/foo.o"), None);
        assert_eq!(option_word("a", "1").unwrap(), "a=1");
        assert_eq!(option_word("a", "x y").unwrap(), "a=\"x y\"");
        assert!(option_word("a", "x\"y").is_err());
        assert_eq!(
            split_options("a=1  b=\"x y\" c"),
            [
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), String::new())
            ]
        );
    }
}
