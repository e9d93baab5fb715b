//! modprobe.d: `options MODULE P=V` in `/etc/modprobe.d/hostknob-<id>.conf`
//! (one file per knob, as every other mechanism; kmod joins every `options`
//! line of a module, in file-name order, so several knobs of one module
//! add up: libkmod `kmod_module_get_options`). modprobe passes them at the
//! module's next load only (kmod modprobe.d(5)); a built-in module is never
//! loaded by modprobe, so it is refused and pointed at the command line.

use std::collections::BTreeSet;

use super::{Artifact, by_files, config_files, header};
use crate::knob::HostCtx;
use crate::knob::rules::module::{Loaded, Shipped, loaded, option_word, shipped, split_options};
use crate::knob::rules::{module_dir_name, param_bool};
use crate::manifest::Knob;
use crate::schema::Persistence;

pub const MODPROBE_DIR: &str = "/etc/modprobe.d";

/// Where kmod reads modprobe.d (libkmod-config.c; /usr/lib in newer kmod).
pub fn path_for(id: &str) -> String {
    format!("{MODPROBE_DIR}/hostknob-{id}.conf")
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    refuse: impl Fn(&str) -> String,
) -> Result<Artifact, String> {
    let ml = knob
        .spec
        .module_load()
        .filter(|m| !m.options.is_empty())
        .ok_or_else(|| {
            refuse("modprobe.d holds a module's load options: module-param knobs only")
        })?;
    let m = &ml.module;
    if let Loaded::BuiltIn(why) = loaded(host, m) {
        let args: Vec<String> = ml
            .options
            .iter()
            .map(|(p, v)| format!("{m}.{p}={v}"))
            .collect();
        return Err(refuse(&format!(
            "module {m} is built into the kernel here ({why}): modprobe never loads it, so a \
             modprobe.d line would never apply; give `persistence: cmdline` ({}) instead",
            args.join(" ")
        )));
    }
    let words = ml
        .options
        .iter()
        .map(|(p, v)| option_word(p, v))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refuse(&e))?;
    let mut content = header(knob, &host.name);
    content.push_str(&format!(
        "options {} {}\n",
        module_dir_name(m),
        words.join(" ")
    ));
    let mut notes = vec![
        format!(
            "modprobe passes these options when it next loads {m} (kmod modprobe.d(5)); a {m} \
             loaded now keeps its value until it is reloaded or the host reboots"
        ),
        format!(
            "a {m} loaded from the initramfs reads the initramfs's own copy of modprobe.d: \
             rebuild it (`update-initramfs -u`, `dracut -f`) to carry this file; hostknob never does"
        ),
    ];
    match shipped(host, m) {
        Shipped::Missing(why) => notes.push(format!(
            "no module {m} for the running kernel ({why}): the line applies only once it is installed"
        )),
        Shipped::Unknown(why) => notes.push(format!(
            "whether {m} exists for the running kernel is not known ({why})"
        )),
        Shipped::Loadable(_) | Shipped::BuiltIn(_) => {}
    }
    Ok(Artifact {
        knob: knob.id.clone(),
        mechanism: Persistence::ModprobeD,
        path: Some(path_for(&knob.id)),
        content,
        commands: Vec::new(),
        notes,
        replaces: Vec::new(),
    })
}

/// One `options` line: file, line number, module (with `_`), its words.
struct OptionsLine {
    at: String,
    module: String,
    words: Vec<(String, String)>,
}

fn read(host: &HostCtx) -> Vec<OptionsLine> {
    let mut out = Vec::new();
    for (file, text) in config_files(
        host,
        &super::dot_d_dirs("modprobe.d")
            .each_ref()
            .map(String::as_str),
        ".conf",
    ) {
        for (i, line) in text.lines().enumerate() {
            let mut words = line.trim().splitn(3, char::is_whitespace);
            if words.next() != Some("options") {
                continue;
            }
            let Some(module) = words.next() else { continue };
            out.push(OptionsLine {
                at: format!("{file}:{}", i + 1),
                module: module_dir_name(module),
                words: split_options(words.next().unwrap_or("")),
            });
        }
    }
    out
}

fn same(want: &str, got: &str) -> bool {
    want == got || (param_bool(want).is_some() && param_bool(want) == param_bool(got))
}

/// `Ok(where)` when modprobe.d gives the module each of the knob's options
/// (the last word for a parameter counts, as the kernel parses them in order).
pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    let ml = knob
        .spec
        .module_load()
        .ok_or("persistence: modprobe.d, but this kind sets no module option")?;
    let m = module_dir_name(&ml.module);
    let lines = read(host);
    let mut by = BTreeSet::new();
    for (p, v) in &ml.options {
        let hit = lines
            .iter()
            .filter(|l| l.module == m)
            .flat_map(|l| l.words.iter().map(move |w| (l, w)))
            .filter(|(_, (k, _))| k == p)
            .last();
        match hit {
            Some((l, (_, got))) if same(v, got) => {
                by.insert(l.at.clone());
            }
            Some((l, (_, got))) => {
                return Err(format!("{} gives {m} {p}={got}, not {v}", l.at));
            }
            None => {
                return Err(format!(
                    "persistence: modprobe.d, but no modprobe.d file gives {m} {p}"
                ));
            }
        }
    }
    Ok(by_files(by))
}
