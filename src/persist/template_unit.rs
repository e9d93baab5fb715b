//! What the two unit mechanisms share (`persistence: boot` and `hold`): one
//! unit file per knob, `hostknob-NAME@KNOB.service` (systemd reads an
//! instance's own file before the `hostknob-NAME@.service` template), whose
//! command names the manifest the knob came from; and audit's check that the
//! unit is installed, runs the knob from that manifest, and is enabled.
//!
//! Older versions installed one template for every knob, whose command passed
//! no `--manifest` (so at boot it read `/etc/hostknob/manifest` whatever
//! manifest `persist` was given) and, for `boot`, no `--wait`; audit still
//! finds it and says how to replace it.

use std::path::{Path, PathBuf};

use super::Artifact;
use crate::knob::HostCtx;
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

pub const UNIT_DIR: &str = "/etc/systemd/system";

/// `hostknob-NAME@KNOB.service`: the unit of one knob.
pub fn unit_name(name: &str, id: &str) -> String {
    format!("hostknob-{name}@{id}.service")
}

/// The knob's own unit file.
pub fn unit_path(name: &str, id: &str) -> String {
    format!("{UNIT_DIR}/{}", unit_name(name, id))
}

/// The template older versions installed for every knob of the mechanism.
pub fn template_path(name: &str) -> String {
    format!("{UNIT_DIR}/hostknob-{name}@.service")
}

/// The manifest directory as the booted host names it: under `--root`, the
/// path inside the tree when the manifest is there; else the absolute path.
/// `true` beside it when the tree is not `/` and the manifest is outside it.
/// Refused when a unit's command line cannot name it as it is.
pub(super) fn manifest_for_unit(
    manifest: &Manifest,
    host: &HostCtx,
) -> Result<(String, bool), String> {
    let dir = std::path::absolute(&manifest.dir).unwrap_or_else(|_| manifest.dir.clone());
    let (mut named, mut outside) = (dir.clone(), !host.root.is_live());
    if outside
        && let (Ok(base), Ok(real)) = (host.root.base().canonicalize(), dir.canonicalize())
        && let Ok(inside) = real.strip_prefix(&base)
    {
        (named, outside) = (Path::new("/").join(inside), false);
    }
    let text = named.to_string_lossy().into_owned();
    // systemd.service(5), Command lines: white space splits words, quotes and
    // backslashes are parsed, `%` is a specifier and `$` a variable.
    if let Some(c) = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "\"'\\%$;".contains(*c))
    {
        return Err(format!(
            "the manifest directory {text} cannot be named in a unit's command line (it holds \
             {c:?}), and a unit without it would read /etc/hostknob/manifest at boot: move or \
             link the manifest to a plain path and run persist with --manifest naming that"
        ));
    }
    Ok((text, outside))
}

/// Said when the booted host's file names a manifest outside `--root`.
pub(super) fn outside_note(what: &str, dir: &str, host: &HostCtx) -> String {
    format!(
        "the {what} reads the manifest at {dir}, outside --root {}: it must be there when \
         that host boots",
        host.root.base().display()
    )
}

/// What a unit mechanism puts in its file.
pub(super) struct Unit<'a> {
    pub name: &'a str,
    pub mechanism: Persistence,
    /// The `[Unit]` lines after the description.
    pub unit: String,
    /// The `[Service]` lines before `ExecStart=`.
    pub service: &'a str,
    /// The hostknob subcommand and its options before `--manifest`.
    pub command: &'a str,
    pub enable: &'a str,
    pub does: &'a str,
    pub description: String,
}

/// The knob's unit file, the command that enables it, and what it does.
pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
    u: Unit,
) -> Result<Artifact, String> {
    let id = &knob.id;
    let (dir, outside) = manifest_for_unit(manifest, host).map_err(|e| format!("{id}: {e}"))?;
    let unit = unit_name(u.name, id);
    let content = format!(
        "{header}[Unit]\nDescription={description}\n{unit_lines}\n[Service]\n{service}\
         # Not absolute: systemd looks hostknob up in /usr/local/bin, /usr/bin, ...\n\
         ExecStart=hostknob {command} --manifest {dir} {id}\n\
         \n[Install]\nWantedBy=multi-user.target\n",
        header = super::header(knob, &host.name),
        description = u.description,
        unit_lines = u.unit,
        service = u.service,
        command = u.command,
    );
    let mut notes = vec![format!("{unit} {}", u.does)];
    if host.text(&template_path(u.name)).is_some() {
        notes.push(format!(
            "{} (an older hostknob's template) stays for knobs not yet installed again; \
             systemd runs {unit} from its own file",
            template_path(u.name)
        ));
    }
    if outside {
        notes.push(outside_note("unit", &dir, host));
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism: u.mechanism,
        path: Some(unit_path(u.name, id)),
        content,
        commands: vec![
            "systemctl daemon-reload".into(),
            format!("{} {unit}", u.enable),
        ],
        notes,
        replaces: Vec::new(),
    })
}

/// The value of the last `ExecStart=` of a unit file.
fn exec_start(text: &str) -> Option<&str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("ExecStart="))
        .next_back()
}

/// Whether the knob was loaded from the manifest directory `dir` (a path on
/// the booted host: inside the tree under `--root`, or as it is).
fn knob_from(knob: &Knob, host: &HostCtx, dir: &str) -> bool {
    let canon = |p: PathBuf| p.canonicalize().ok();
    let Some(file) = canon(std::path::absolute(&knob.source.file).unwrap_or_default()) else {
        return false;
    };
    [host.root.host_path(dir), PathBuf::from(dir)]
        .into_iter()
        .filter_map(canon)
        .any(|d| file.starts_with(d))
}

/// `Ok(where)` when the knob's unit is installed, runs this knob from the
/// manifest it was loaded from, and is enabled.
pub(super) fn check(host: &HostCtx, knob: &Knob, name: &str) -> Result<String, String> {
    let id = &knob.id;
    let (path, unit) = (unit_path(name, id), unit_name(name, id));
    let again = format!("`hostknob persist {id} --install` writes {path}");
    let Some(text) = host.text(&path) else {
        let template = template_path(name);
        return Err(if host.text(&template).is_some() {
            format!(
                "persistence: {name}, but only {template} is installed, an older hostknob's \
                 template whose command names no --manifest (at boot it reads \
                 /etc/hostknob/manifest){}: {again}, which does",
                if name == "boot" {
                    " and no --wait (instances started together fail on the lock)"
                } else {
                    ""
                }
            )
        } else {
            format!("persistence: {name}, but {path} is not installed ({again})")
        });
    };
    let exec = exec_start(&text).unwrap_or("");
    let words: Vec<&str> = exec.split_whitespace().collect();
    let manifest = words
        .iter()
        .position(|w| *w == "--manifest")
        .and_then(|i| words.get(i + 1));
    match manifest {
        None => {
            return Err(format!(
                "persistence: {name}, but {path} runs `{exec}`, which names no --manifest \
                 (at boot it reads /etc/hostknob/manifest): {again}"
            ));
        }
        Some(dir) if !knob_from(knob, host, dir) => {
            return Err(format!(
                "persistence: {name}, but {path} runs {id} from the manifest {dir}, not from \
                 the one {id} was loaded from ({}): {again}",
                knob.source.file.display()
            ));
        }
        Some(_) => {}
    }
    let link = format!("{UNIT_DIR}/multi-user.target.wants/{unit}");
    if host.root.read_link(&link).is_err() && !host.root.exists(&link) {
        return Err(format!(
            "persistence: {name}, but {unit} is not enabled (`systemctl enable {unit}`)"
        ));
    }
    Ok(format!("{path} ({link})"))
}
