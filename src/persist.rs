//! `persist`: what makes a knob survive a reboot, by the mechanism its
//! manifest entry names.
//!
//! - `tmpfiles`: `/etc/tmpfiles.d/hostknob-<id>.conf`, one `w` line per file
//!   the knob controls here (systemd-tmpfiles writes them at every boot);
//! - `sysctl.d`: `/etc/sysctl.d/90-hostknob-<id>.conf`, `name = value`;
//! - `systemd-dropin`: the service's drop-in with `Environment=` (the same
//!   file apply writes);
//! - `cmdline`: kernel command-line arguments, printed with the commands that
//!   add them; hostknob never writes a boot loader's configuration.
//!
//! The artifact is computed from this host (its CPUs, states, policies), so
//! it is exact here; it carries no time, so regenerating it is stable.

use serde::Serialize;

use crate::apply::group::{Change, group};
use crate::apply::write::{self, Put};
use crate::apply::{ApplyError, Session, ledger_entry, validate, who};
use crate::knob::{Blocked, HostCtx, WriteMode};
use crate::manifest::schema::Persistence;
use crate::manifest::{Knob, ledger};

pub const TMPFILES_DIR: &str = "/etc/tmpfiles.d";
pub const SYSCTL_DIR: &str = "/etc/sysctl.d";

/// What makes one knob survive a reboot on this host.
#[derive(Clone, Debug, Serialize)]
pub struct Artifact {
    pub knob: String,
    pub mechanism: Persistence,
    /// Where `--install` writes it (under `--root`); `None` for kernel
    /// command-line arguments, which are only printed.
    pub path: Option<String>,
    /// The file's content, or the arguments on one line.
    pub content: String,
    /// Commands for the operator (never run by hostknob).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A value as a tmpfiles.d argument: specifiers (`%`) and C escapes (`\`) are literal.
fn tmpfiles_arg(value: &str) -> String {
    value.replace('\\', "\\\\").replace('%', "%%")
}

/// `/proc/sys/vm/swappiness` -> `vm.swappiness`; the slash form when a
/// component holds a dot (`net/ipv4/conf/eth0.100/rp_filter`).
pub fn sysctl_name(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/proc/sys/")?;
    Some(if rest.split('/').any(|c| c.contains('.')) {
        rest.to_string()
    } else {
        rest.replace('/', ".")
    })
}

fn header(knob: &Knob, host: &str) -> String {
    let file = knob
        .source
        .file
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "# hostknob persist: {id} ({kind}) for host {host}\n# {title}\n\
         # From the manifest's {file}; `hostknob persist {id}` regenerates this file, \
         `hostknob persist {id} --remove` deletes it.\n",
        id = knob.id,
        kind = knob.kind,
        title = knob.title.trim(),
    )
}

/// Where the knob's `persistence:` is written (`file:line`), and the
/// mechanisms its kind allows other than `runtime`: what to tell someone
/// who wants a runtime knob permanent.
pub fn how_to_persist(knob: &Knob) -> (String, Vec<&'static str>) {
    let at = knob.source.error("persistence", "");
    let durable = knob
        .spec
        .persistence_allowed()
        .iter()
        .filter(|p| **p != Persistence::Runtime)
        .map(|p| p.as_str())
        .collect();
    (
        format!("{}:{}", at.file.display(), at.line.unwrap_or(1)),
        durable,
    )
}

/// The artifact for `knob` on this host, or why there is none.
pub fn artifact(knob: &Knob, host: &HostCtx) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = knob.persistence;
    let (at, durable) = how_to_persist(knob);
    let refuse_by_design = |what: &str| format!("{at}: persistence: {id} is `{mechanism}`: {what}");
    match mechanism {
        Persistence::Runtime => {
            return Err(refuse_by_design(&format!(
                "nothing persists it, by the manifest's decision; to make it permanent, change \
                 it to {} in the manifest (reviewed like code), then run `hostknob persist {id}`",
                durable.join(" or ")
            )));
        }
        Persistence::Hold => {
            return Err(refuse_by_design(
                "a process holds the request open (`hostknob hold`, to come); there is no file to persist",
            ));
        }
        Persistence::Cmdline => {
            let args = knob
                .spec
                .cmdline_args()
                .ok_or_else(|| refuse_by_design("this knob has no kernel command-line form"))?
                .join(" ");
            return Ok(Artifact {
                knob: id.clone(),
                mechanism,
                path: None,
                content: args.clone(),
                commands: vec![
                    format!("grubby --update-kernel=ALL --args=\"{args}\"    # Fedora, RHEL, CentOS"),
                    format!(
                        "# Debian, Ubuntu: add \"{args}\" to GRUB_CMDLINE_LINUX in /etc/default/grub, then run update-grub"
                    ),
                ],
                notes: vec![
                    "takes effect at the next boot; audit reports it persisted once /proc/cmdline has it"
                        .into(),
                ],
            });
        }
        _ => {}
    }
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    let blocked: Vec<Blocked> = survey
        .targets
        .iter()
        .filter_map(|t| {
            Some(Blocked {
                path: t.path.clone(),
                cpus: t.cpus.clone(),
                blocker: t.blocker.clone()?,
            })
        })
        .collect();
    validate::refusal(id, &blocked)?;
    let targets: Vec<_> = survey
        .targets
        .iter()
        .filter(|t| t.blocker.is_none() && t.write.is_some())
        .collect();
    if targets.is_empty() {
        let why: Vec<String> = blocked
            .iter()
            .map(|b| format!("{}: {}", b.path, b.blocker.reason()))
            .collect();
        return Err(format!(
            "{id}: nothing to persist on host {}: no file here takes it ({})",
            host.name,
            why.join("; ")
        ));
    }
    let write = |t: &&crate::knob::Target| t.write.clone().unwrap_or_default();
    match mechanism {
        Persistence::Tmpfiles => {
            let mut content = header(knob, &host.name);
            content.push_str("# Type Path Mode User Group Age Argument\n");
            for t in &targets {
                if t.path
                    .contains(|c: char| c.is_whitespace() || c == '"' || c == '\\')
                {
                    return Err(format!(
                        "{id}: {} cannot be named in a tmpfiles.d line",
                        t.path
                    ));
                }
                content.push_str(&format!(
                    "w {} - - - - {}\n",
                    t.path,
                    tmpfiles_arg(write(t).trim())
                ));
            }
            Ok(Artifact {
                knob: id.clone(),
                mechanism,
                path: Some(format!("{TMPFILES_DIR}/hostknob-{id}.conf")),
                content,
                commands: Vec::new(),
                notes: vec![format!(
                    "systemd-tmpfiles writes {} at every boot (systemd-tmpfiles-setup.service)",
                    match targets.len() {
                        1 => "this file".to_string(),
                        n => format!("these {n} files"),
                    }
                )],
            })
        }
        Persistence::SysctlD => {
            let mut content = header(knob, &host.name);
            for t in &targets {
                let name = sysctl_name(&t.path)
                    .ok_or_else(|| format!("{id}: {} is not a sysctl", t.path))?;
                content.push_str(&format!("{name} = {}\n", write(t).trim()));
            }
            Ok(Artifact {
                knob: id.clone(),
                mechanism,
                path: Some(format!("{SYSCTL_DIR}/90-hostknob-{id}.conf")),
                content,
                commands: Vec::new(),
                notes: vec!["systemd-sysctl applies it at every boot".into()],
            })
        }
        Persistence::SystemdDropin => {
            let t = targets
                .iter()
                .find(|t| t.mode == WriteMode::File)
                .ok_or_else(|| format!("{id}: no drop-in to write here"))?;
            let unit = t
                .path
                .rsplit('/')
                .nth(1)
                .and_then(|d| d.strip_suffix(".d"))
                .unwrap_or("the service")
                .to_string();
            Ok(Artifact {
                knob: id.clone(),
                mechanism,
                path: Some(t.path.clone()),
                content: write(t),
                commands: vec![
                    "systemctl daemon-reload".into(),
                    format!("systemctl restart {unit}"),
                ],
                notes: survey.notes,
            })
        }
        Persistence::Runtime | Persistence::Hold | Persistence::Cmdline => {
            unreachable!("handled above")
        }
    }
}

/// What `persist --install` or `--remove` did.
#[derive(Clone, Debug, Serialize)]
pub struct PersistOutcome {
    pub knob: String,
    pub path: String,
    /// `installed`, `unchanged` (already there, identical), `removed` or `absent`.
    pub action: &'static str,
    pub ledger: Option<String>,
}

/// Writes (`install`) or removes the artifact's file under the root, reads it
/// back, and records the change in the ledger.
pub fn install_or_remove(
    s: &Session,
    knob: &Knob,
    artifact: &Artifact,
    install: bool,
    wait: bool,
) -> Result<PersistOutcome, ApplyError> {
    let root = s.root();
    let Some(path) = artifact.path.as_deref() else {
        return Err(ApplyError::Refused(format!(
            "hostknob never writes the boot loader's configuration: add `{}` with one of the \
             commands `hostknob persist {}` prints",
            artifact.content, knob.id
        )));
    };
    let ledger_path = ledger::path_for(&s.manifest_dir, &s.host.name);
    validate::permissions(root, [(path, true)], false)
        .and_then(|_| validate::ledger_writable(&ledger_path))
        .map_err(ApplyError::Refused)?;
    let _lock = s.lock(wait)?;
    let was = write::content(root, path)
        .map_err(|e| ApplyError::Refused(format!("cannot read {path}: {e}")))?;
    let want = install.then_some(artifact.content.as_str());
    let mut outcome = PersistOutcome {
        knob: knob.id.clone(),
        path: path.to_string(),
        action: if install { "unchanged" } else { "absent" },
        ledger: None,
    };
    if was.as_deref() == want {
        return Ok(outcome);
    }
    let what = match want {
        Some(c) => Put::File(c),
        None => Put::Absent { created_dirs: &[] },
    };
    write::put(root, path, what, || match write::content(root, path) {
        Ok(now) if now.as_deref() == want => Ok(()),
        Ok(_) => Err("read back something else".into()),
        Err(e) => Err(format!("cannot read it back: {e}")),
    })
    .map_err(|f| ApplyError::Refused(f.why))?;
    outcome.action = if install { "installed" } else { "removed" };
    let changes = group([Change {
        path,
        cpus: None,
        label: None,
        before: was.as_deref(),
        after: want,
    }]);
    let action = if install {
        ledger::Action::Persisted
    } else {
        ledger::Action::Unpersisted
    };
    s.record(&ledger_entry(&s.host.name, knob, action, changes, &who()))?;
    outcome.ledger = Some(ledger_path.display().to_string());
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_arguments() {
        assert_eq!(
            sysctl_name("/proc/sys/vm/swappiness").as_deref(),
            Some("vm.swappiness")
        );
        assert_eq!(
            sysctl_name("/proc/sys/net/ipv4/conf/eth0.100/rp_filter").as_deref(),
            Some("net/ipv4/conf/eth0.100/rp_filter")
        );
        assert_eq!(sysctl_name("/sys/kernel/mm/x"), None);
        assert_eq!(tmpfiles_arg("50%\\n"), "50%%\\\\n");
    }
}
