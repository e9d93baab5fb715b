//! Live module kinds (issue 46 item 5), reading only: on this machine's
//! kernel, a module in /sys/module without `initstate` (built in) reads
//! `built-in` through the `module` kind, and modprobe.d persistence of one
//! of its parameters is refused naming the command line; a module loaded
//! from a file (with `initstate`), where the kernel has one, reads `loaded`.
//! hostknob loads and unloads no module, so nothing here loads or unloads
//! one, and no file is written (`persist` without `--install` only prints).

use std::path::Path;

use super::support::*;

/// A module of the running kernel with `parameters/` and, by `loaded`, with
/// or without `initstate`: (module, one parameter).
fn module_with_param(loaded: bool) -> Option<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/module")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names.into_iter().find_map(|m| {
        let dir = Path::new("/sys/module").join(&m);
        if dir.join("initstate").exists() != loaded {
            return None;
        }
        let mut params: Vec<String> = std::fs::read_dir(dir.join("parameters"))
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        params.sort();
        params.into_iter().next().map(|p| (m, p))
    })
}

#[test]
#[ignore = "live: root and HOSTKNOB_LIVE=1"]
fn live_module_kind_reads_this_kernels_built_in_and_loaded_modules() {
    let _one = super::LIVE.lock().unwrap_or_else(|e| e.into_inner());
    super::live_allowed().unwrap();
    let root = Path::new("/");
    let before = tree(Path::new("/etc/modprobe.d"));
    let (builtin, param) = module_with_param(false)
        .expect("a kernel has built-in modules with parameters (printk, kernel, ...)");
    let body = format!(
        "persistence: runtime\nkind: module\ntarget: {{module: {builtin}}}\nset: {{loaded: true}}\n"
    );
    let opt = format!(
        "persistence: modprobe.d\nkind: module-param\ntarget: {{module: {builtin}, param: {param}}}\nset: \"1\"\n"
    );
    let m = knobs(&[("live-builtin", &body), ("live-builtin-opt", &opt)]);
    let (r, _) = audit_json(root, m.path(), None);
    let k = knob(&r, "live-builtin");
    assert_eq!(k["status"], "unpersisted", "{k:#}");
    assert!(k.to_string().contains("built-in"), "{k:#}");
    let o = run(root, m.path(), &["persist", "live-builtin-opt"]);
    assert!(!o.status.success(), "{}", out(&o));
    assert!(
        err(&o).contains(&format!("/sys/module/{builtin} has no initstate")),
        "{}",
        err(&o)
    );
    match module_with_param(true) {
        Some((loaded, _)) => {
            let body = format!(
                "persistence: runtime\nkind: module\ntarget: {{module: {loaded}}}\nset: {{loaded: true}}\n"
            );
            let m = knobs(&[("live-loaded", &body)]);
            let (r, _) = audit_json(root, m.path(), None);
            let k = knob(&r, "live-loaded");
            assert_eq!(k["status"], "unpersisted", "{k:#}");
        }
        None => eprintln!(
            "live-loaded skipped: no module here was loaded from a file (none has initstate; \
             /lib/modules/{} is {})",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim(),
            if Path::new("/lib/modules").exists() {
                "there"
            } else {
                "missing"
            }
        ),
    }
    assert_tree(&before, Path::new("/etc/modprobe.d"), "nothing written");
}
