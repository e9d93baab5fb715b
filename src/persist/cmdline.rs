//! The kernel command line. For a knob of another kind with a command-line
//! form (`cmdline_args`): the arguments `persist` prints, with the commands
//! that add them, and the check against /proc/cmdline. A `kernel-cmdline`
//! knob is its own persistence: `apply` writes the boot loader's files, so
//! `persist` only names them (and GRUB's regeneration) and the check is
//! whether those files hold it.

use super::Artifact;
use crate::knob::{HostCtx, KindName, WriteMode};
use crate::manifest::Knob;
use crate::root::Root;
use crate::schema::Persistence;

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    refuse_by_design: impl Fn(&str) -> String,
) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = Persistence::Cmdline;
    if knob.kind == KindName::KernelCmdline {
        return boot_files(knob, host);
    }
    let args = knob
        .spec
        .cmdline_args()
        .ok_or_else(|| refuse_by_design("this knob has no kernel command-line form"))?
        .join(" ");
    Ok(Artifact {
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
        replaces: Vec::new(),
    })
}

/// A `kernel-cmdline` knob: the boot loader's files `apply` writes, and
/// GRUB's regeneration, named; nothing for `--install` to write.
fn boot_files(knob: &Knob, host: &HostCtx) -> Result<Artifact, String> {
    let id = &knob.id;
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    let blocked: Vec<crate::knob::Blocked> = survey
        .targets
        .iter()
        .filter_map(|t| {
            Some(crate::knob::Blocked {
                path: t.path.clone(),
                cpus: None,
                blocker: t.blocker.clone()?,
            })
        })
        .collect();
    crate::knob::refusal(id, &blocked)?;
    let files: Vec<&str> = survey
        .targets
        .iter()
        .filter(|t| t.mode == WriteMode::File && t.write.is_some())
        .map(|t| t.path.as_str())
        .collect();
    let grub = survey
        .targets
        .iter()
        .any(|t| t.path == "/boot/grub/grub.cfg");
    let mut commands = Vec::new();
    if grub {
        commands
            .push("update-grub    # regenerates /boot/grub/grub.cfg, which GRUB boots from".into());
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism: Persistence::Cmdline,
        path: None,
        content: knob.spec.desired(),
        commands,
        notes: vec![format!(
            "a kernel-cmdline knob is persistent by itself: `hostknob apply {id}` writes {} and `hostknob revert {id}` restores them; it takes effect at the next boot, and audit says pending-reboot until then",
            files.join(", ")
        )],
        replaces: Vec::new(),
    })
}

const GRUB_CFG: &str = "/boot/grub/grub.cfg";

/// Runs the host's `update-grub` (or `grub-mkconfig -o /boot/grub/grub.cfg`),
/// only on the live host: a tree's GRUB is regenerated inside it (chroot).
pub fn regenerate_grub(root: &Root) -> Result<String, String> {
    if !root.is_live() {
        return Err(
            "update-grub runs only on the live host (--root /): for a tree, run it \
                    chrooted into the tree; nothing was changed"
                .to_string(),
        );
    }
    let (cmd, args): (&str, &[&str]) = if root.exists("/usr/sbin/update-grub") {
        ("/usr/sbin/update-grub", &[])
    } else if root.exists("/usr/sbin/grub-mkconfig") {
        ("/usr/sbin/grub-mkconfig", &["-o", GRUB_CFG])
    } else {
        return Err(
            "neither /usr/sbin/update-grub nor /usr/sbin/grub-mkconfig is here; nothing was changed"
                .into(),
        );
    };
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{cmd} failed ({}): {}",
            out.status,
            err.trim().lines().last().unwrap_or("")
        ));
    }
    Ok(GRUB_CFG.to_string())
}

/// `Ok` when the knob survives a reboot: a `kernel-cmdline` knob's boot
/// files hold it; another kind's arguments are in /proc/cmdline.
pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
    if let Some(r) = knob.spec.boot_config(host) {
        return r;
    }
    let args = knob.spec.cmdline_args().unwrap_or_default();
    let cmdline = host.cmdline().unwrap_or("");
    let words: Vec<&str> = cmdline.split_whitespace().collect();
    let missing: Vec<&String> = args
        .iter()
        .filter(|a| !words.contains(&a.as_str()))
        .collect();
    if missing.is_empty() {
        Ok(format!("/proc/cmdline has {}", args.join(" ")))
    } else {
        Err(format!(
            "persistence: cmdline, but /proc/cmdline lacks {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ))
    }
}

/// Warnings after a revert restored `restored` (paths or group patterns) of a
/// `kernel-cmdline` knob: what still boots with its change. GRUB: grub.cfg,
/// until `update-grub` runs. BLS: entries apply did not write (a kernel
/// installed since, its entry made from the edited /etc/kernel/cmdline).
pub fn after_revert(knob: &Knob, host: &HostCtx, restored: &[&str]) -> Vec<String> {
    let Ok(survey) = knob.spec.survey(host) else {
        return Vec::new();
    };
    let mut out: Vec<String> = survey
        .notes
        .iter()
        .filter(|n| n.contains(" still boots with "))
        .cloned()
        .collect();
    let added = knob.spec.cmdline_args().unwrap_or_default();
    for t in &survey.targets {
        if t.label.as_deref() != Some("BLS entry") || restored.iter().any(|p| glob(p, &t.path)) {
            continue;
        }
        let words: Vec<&str> = t.current.as_deref().unwrap_or("").split(' ').collect();
        let kept: Vec<&str> = added
            .iter()
            .map(String::as_str)
            .filter(|a| words.contains(a))
            .collect();
        if !kept.is_empty() {
            out.push(format!(
                "{} still boots with {}: apply did not write it (a kernel installed since, its \
                 entry made from the edited /etc/kernel/cmdline), so revert left it; remove them \
                 from its options line (grubby --update-kernel={} --remove-args=\"{}\", or an editor)",
                t.path,
                kept.join(" "),
                t.path,
                kept.join(" ")
            ));
        }
    }
    out
}

/// Whether `path` is `pat` (a path, or a group's pattern with `*`).
fn glob(pat: &str, path: &str) -> bool {
    let mut parts = pat.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = path.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(p);
        }
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}
