//! modules-load.d: `/etc/modules-load.d/hostknob-<id>.conf` names the
//! module; systemd-modules-load.service loads each listed module at boot,
//! with modprobe.d's options (modules-load.d(5), systemd-modules-load.service(8)).
//! A module the kernel's index lacks is refused: the service would fail at
//! every boot.

use super::{Artifact, config_files, header};
use crate::knob::HostCtx;
use crate::knob::rules::module::{Loaded, Shipped, loaded, shipped};
use crate::knob::rules::module_dir_name;
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const MODULES_LOAD_DIR: &str = "/etc/modules-load.d";

/// modules-load.d(5)'s directories.
pub fn path_for(id: &str) -> String {
    format!("{MODULES_LOAD_DIR}/hostknob-{id}.conf")
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    refuse: impl Fn(&str) -> String,
) -> Result<Artifact, String> {
    let ml = knob
        .spec
        .module_load()
        .filter(|m| m.load)
        .ok_or_else(|| refuse("modules-load.d loads a module: `module` knobs only"))?;
    let m = &ml.module;
    let mut notes = vec![format!(
        "systemd-modules-load.service loads {m} at every boot, with the options modprobe.d \
         gives it (modules-load.d(5))"
    )];
    match shipped(host, m) {
        Shipped::Missing(why) => {
            return Err(refuse(&format!(
                "no module {m} for the running kernel ({why}): systemd-modules-load.service \
                 would fail at every boot"
            )));
        }
        Shipped::Unknown(why) => notes.push(format!(
            "whether {m} exists for the running kernel is not known ({why})"
        )),
        Shipped::Loadable(_) | Shipped::BuiltIn(_) => {}
    }
    if let Loaded::BuiltIn(why) = loaded(host, m) {
        notes.push(format!(
            "{m} is built into the kernel here ({why}): it is there at every boot anyway"
        ));
    }
    let mut content = header(knob, &host.name);
    content.push_str(&format!("{m}\n"));
    Ok(Artifact {
        knob: knob.id.clone(),
        mechanism: Persistence::ModulesLoadD,
        path: Some(path_for(&knob.id)),
        content,
        commands: Vec::new(),
        notes,
        replaces: Vec::new(),
    })
}

/// `Ok(file:line)` of a modules-load.d line naming the module.
pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    let m = knob
        .spec
        .module_load()
        .map(|ml| module_dir_name(&ml.module))
        .ok_or("persistence: modules-load.d, but this kind loads no module")?;
    for (file, text) in config_files(
        host,
        &super::dot_d_dirs("modules-load.d")
            .each_ref()
            .map(String::as_str),
        ".conf",
    ) {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.starts_with(['#', ';']) && module_dir_name(line) == m {
                return Ok(format!("{file}:{}", i + 1));
            }
        }
    }
    Err(format!(
        "persistence: modules-load.d, but no modules-load.d file names {m}"
    ))
}
