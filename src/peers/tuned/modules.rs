//! tuned's `[modules]` (tuned/plugins/plugin_modules.py): `MODULE=OPTIONS`
//! writes `options MODULE OPTIONS` to /etc/modprobe.d/tuned.conf;
//! `MODULE=+r OPTIONS` (`+r,` too) also removes and loads the module by
//! modprobe at once; verify checks /sys/module/MODULE and each option's
//! parameter file. Here: each `P=V` a `module-param` knob persisted by
//! `modprobe.d` (and set at once where the module is loaded and the file
//! writable), and `+r` a `module` knob persisted by `modules-load.d`.

use super::hardware::Devices;
use super::ini::Opt;
use super::out::{Out, map, s};
use crate::kmod::split_options;

/// plugin_modules.py's `re.sub(r"^\s*\+r\s*,?\s*", "", v)`: (reload, the rest).
fn reload_flag(v: &str) -> (bool, &str) {
    let t = v.trim_start();
    match t.strip_prefix("+r") {
        Some(rest) => {
            let rest = rest.trim_start();
            (true, rest.strip_prefix(',').unwrap_or(rest).trim_start())
        }
        None => (false, v),
    }
}

pub fn option(o: &Opt, v: &str, dev: &Devices, out: &mut Out) -> Result<(), String> {
    let module = o.key.trim();
    let ok_name = !module.is_empty()
        && module
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !ok_name {
        return Err(format!(
            "[modules] {module:?} is not a module name (letters, digits, _ and - only)"
        ));
    }
    // plugin_modules.py runs `modinfo` first and skips a module it cannot find.
    if let Some(ix) = &dev.modules {
        let m = module.replace('-', "_");
        if !ix.loadable.contains(&m) && !ix.builtin.contains(&m) {
            return Err(format!(
                "no module {module} for the kernel {} on this host (its modules.dep and \
                 modules.builtin list none): tuned's modinfo check skips the line",
                ix.release
            ));
        }
    }
    let (reload, rest) = reload_flag(v);
    let words = split_options(rest);
    if let Some((w, _)) = words.iter().find(|(k, v)| k.is_empty() || v.is_empty()) {
        return Err(format!(
            "[modules] {module}: option `{w}` is not PARAM=VALUE; tuned would write it to \
             modprobe.d as is and its verify warns (unrecognized module option)"
        ));
    }
    if let Some((k, _)) = words.iter().find(|(k, _)| {
        !k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    }) {
        return Err(format!("[modules] {module}: `{k}` is not a parameter name"));
    }
    if !reload && words.is_empty() {
        return Err(format!(
            "[modules] {module} with no options and no `+r`: tuned writes nothing for it \
             (plugin_modules.py) and its verify only checks that the module is loaded"
        ));
    }
    if reload {
        out.knob(
            o,
            "module",
            Some(map(&[("module", s(module))])),
            map(&[("loaded", serde_yaml::Value::Bool(true))]),
            "modules-load.d",
            format!(
                "tuned `+r`: removes {module} (if loaded) and loads it by modprobe at start, so \
                 modprobe.d's options take effect (plugin_modules.py _reload_modules); hostknob \
                 loads no module: where {module} is not loaded the knob is not-applicable, naming \
                 `modprobe {module}`, and modules-load.d loads it at every boot; it does not reload a \
                 loaded one (`reload: true` refuses): the option knobs set writable parameters \
                 at once"
            ),
        );
    }
    for (p, val) in &words {
        let mut line = o.clone();
        line.key = format!("{module}.{p}");
        out.knob(
            &line,
            "module-param",
            Some(map(&[("module", s(module)), ("param", s(p))])),
            s(val),
            "modprobe.d",
            format!(
                "tuned writes `options {module} ... {p}={val}` to /etc/modprobe.d/tuned.conf \
                 (plugin_modules.py), read at the module's next load; this knob writes \
                 /sys/module/{m}/parameters/{p} where {module} is loaded (not-applicable where \
                 it is not) and its modprobe.d file holds it for the next load",
                m = module.replace('-', "_")
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::reload_flag;

    #[test]
    fn the_reload_prefix_as_tuned_strips_it() {
        assert_eq!(reload_flag("+r"), (true, ""));
        assert_eq!(reload_flag(" +r, a=1 b=2"), (true, "a=1 b=2"));
        assert_eq!(reload_flag("a=1"), (false, "a=1"));
    }
}
