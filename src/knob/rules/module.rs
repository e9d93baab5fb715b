//! Kernel modules as the kernel and kmod show them: a loaded module's
//! `/sys/module/M/initstate` and `refcnt` (kernel/module/sysfs.c: only a
//! module loaded from a file has them), a built-in module's bare
//! `/sys/module/M` (kernel/params.c `param_sysfs_builtin`, for one with
//! parameters), and the release's `modules.dep` / `modules.builtin`
//! (depmod(8)) under `/lib/modules/RELEASE`. And the `options` line kmod's
//! modprobe.d(5) takes: words split at blanks, a value with blanks in double
//! quotes (libkmod `kmod_module_get_options`, the kernel's `next_arg`).

use super::module_dir_name;
pub use crate::kmod::{file_module, option_word, split_options};
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
