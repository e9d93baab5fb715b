//! The kernel command line: arguments `persist` prints (hostknob never writes
//! a boot loader's configuration), and the check against /proc/cmdline.

use super::Artifact;
use crate::knob::HostCtx;
use crate::manifest::Knob;
use crate::schema::Persistence;

pub(super) fn artifact(
    knob: &Knob,
    refuse_by_design: impl Fn(&str) -> String,
) -> Result<Artifact, String> {
    let id = &knob.id;
    let mechanism = Persistence::Cmdline;
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

/// `Ok` when /proc/cmdline holds every argument.
pub(super) fn check(knob: &Knob, host: &HostCtx) -> Result<String, String> {
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
