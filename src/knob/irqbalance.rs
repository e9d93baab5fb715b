//! `irqbalance`: the CPUs irqbalance must never place an IRQ on,
//! `IRQBALANCE_BANNED_CPULIST` in its environment file as the distribution
//! ships it (`/etc/default/irqbalance` on Debian and Ubuntu,
//! `/etc/sysconfig/irqbalance` on Fedora, RHEL and SUSE). The file is
//! replaced whole: the one assignment changes (or is appended), every
//! other line stays byte-identical; revert puts the file back as found.
//! irqbalance reads it only when it starts (irqbalance(1), ENVIRONMENT).

use serde::Deserialize;

use super::boot::BootValue;
use super::{FieldError, HostCtx, KindName, KnobKind, ReadValue, Service, Spec, Survey, Target};
use crate::cpulist::CpuList;
use crate::peers::irqbalance::{FILES, VAR, assignment, assignment_of, banned, continued_line};
use crate::schema::{Persistence, Scalar};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {}

#[derive(Debug)]
pub struct Irqbalance {
    cpus: CpuList,
}

impl Spec for Irqbalance {
    type Target = TargetDoc;
    type Set = Scalar;

    fn new(_target: Option<TargetDoc>, set: Scalar) -> Result<Self, FieldError> {
        let text = set.0.trim();
        match CpuList::parse(text) {
            Ok(l) if !l.is_empty() => Ok(Irqbalance { cpus: l }),
            Ok(_) => Err(FieldError::new(
                "set",
                "empty CPU list: give the CPUs irqbalance must leave alone, such as 4-11",
            )),
            Err(e) => Err(FieldError::new(
                "set",
                format!("{text:?} is not a CPU list ({e}); give CPUs such as 4-11"),
            )),
        }
    }
}

/// `text` with the assignment set to `value`: its line replaced, or a line
/// appended; every other byte as it was.
pub fn with_value(text: &str, value: &str) -> String {
    let line = format!("{VAR}=\"{value}\"");
    match assignment(text) {
        Some((index, _)) => {
            let mut out = String::with_capacity(text.len() + line.len());
            for (i, l) in text.split_inclusive('\n').enumerate() {
                if i == index {
                    out.push_str(&line);
                    out.push_str(if l.ends_with("\r\n") {
                        "\r\n"
                    } else if l.ends_with('\n') {
                        "\n"
                    } else {
                        ""
                    });
                } else {
                    out.push_str(l);
                }
            }
            out
        }
        None => {
            let sep = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            format!("{text}{sep}{line}\n")
        }
    }
}

impl Irqbalance {
    fn file(host: &HostCtx) -> Option<&'static str> {
        FILES.into_iter().find(|f| host.root.exists(f))
    }
}

impl KnobKind for Irqbalance {
    fn kind(&self) -> KindName {
        KindName::Irqbalance
    }

    fn desired(&self) -> String {
        self.cpus.to_string()
    }

    fn target_summary(&self) -> String {
        format!("{VAR} (irqbalance's banned CPUs)")
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        // The file is the configuration irqbalance reads at every start.
        &[Persistence::Runtime]
    }

    fn services(&self) -> &'static [Service] {
        &[Service::Irqbalance]
    }

    fn boot_value(&self, host: &HostCtx) -> Option<BootValue> {
        let file = Self::file(host)?;
        let text = host.root.read_string(file).ok()?;
        Some(BootValue {
            value: banned(&text),
            why: format!("irqbalance reads {VAR} from {file} when it starts"),
        })
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let mut survey = Survey::default();
        let Some(file) = Self::file(host) else {
            survey.targets.push(Target {
                blocker: Some(super::Blocker::Unsupported(format!(
                    "no irqbalance environment file: looked for {} (install irqbalance, or create the file your distribution's irqbalance.service reads)",
                    FILES.join(" and ")
                ))),
                ..Target::absent(FILES[0].into(), None, &desired, String::new())
            });
            return Ok(survey);
        };
        let text = match host.value(file) {
            ReadValue::Value(_) => match host.root.read_string(file) {
                Ok(t) => t,
                Err(e) => {
                    let e = super::ctx::describe_io(&e);
                    survey.targets.push(Target::unreadable(file.into(), None, &desired, &e));
                    return Ok(survey);
                }
            },
            ReadValue::Absent => String::new(),
            ReadValue::Unreadable(e) => {
                survey.targets.push(Target::unreadable(file.into(), None, &desired, &e));
                return Ok(survey);
            }
        };
        let refused = super::too_large_to_rewrite(file, &text).or_else(|| {
            continued_line(&text).map(|n| {
                super::Blocker::Unsupported(format!(
                    "{file}:{n} ends with a backslash, which continues it on the next line for \
                     systemd's EnvironmentFile= (systemd.exec(5)): hostknob rewrites single-line \
                     assignments only; join the continued lines, then apply"
                ))
            })
        });
        if let Some(blocker) = refused {
            survey.targets.push(Target {
                label: Some(VAR.into()),
                mode: super::WriteMode::File,
                blocker: Some(blocker),
                ..Target::absent(file.into(), None, &desired, String::new())
            });
            return Ok(survey);
        }
        let current = banned(&text);
        // irqbalance's setup_banned_cpus (cputree.c) reads a non-empty
        // IRQBALANCE_BANNED_CPUS first and stops there: the list is then ignored.
        let mask = assignment_of(&text, "IRQBALANCE_BANNED_CPUS").filter(|(_, v)| !v.is_empty());
        let blocker = mask.map(|(line, v)| {
            super::Blocker::Unsupported(format!(
                "{file}:{} sets IRQBALANCE_BANNED_CPUS={v} (a hex mask), which irqbalance reads first and then ignores {VAR}: remove or comment out that line, then apply",
                line + 1
            ))
        });
        survey.notes.push(format!(
            "irqbalance reads {file} only when it starts: restart it (`systemctl restart irqbalance`) for the banned list to count"
        ));
        survey.targets.push(Target {
            in_effect: current == desired && blocker.is_none(),
            path: file.into(),
            cpus: None,
            label: Some(VAR.into()),
            current: Some(current),
            write: Some(with_value(&text, &desired)),
            restore: Some(text),
            desired,
            mode: super::WriteMode::File,
            blocker,
        });
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assignment_is_replaced_or_appended_and_nothing_else_changes() {
        let debian = "# irqbalance is a daemon\n#IRQBALANCE_BANNED_CPULIST=\n#OPTIONS=\"\"\n";
        assert_eq!(banned(debian), "unset");
        let once = with_value(debian, "1");
        assert_eq!(once, format!("{debian}IRQBALANCE_BANNED_CPULIST=\"1\"\n"));
        assert_eq!(banned(&once), "1");
        let twice = with_value(&once, "4-11");
        assert_eq!(twice, format!("{debian}IRQBALANCE_BANNED_CPULIST=\"4-11\"\n"));
        let crlf = "A=1\r\nIRQBALANCE_BANNED_CPULIST=2\r\nB=2";
        assert_eq!(
            with_value(crlf, "3"),
            "A=1\r\nIRQBALANCE_BANNED_CPULIST=\"3\"\r\nB=2"
        );
        assert_eq!(with_value("A=1", "3"), "A=1\nIRQBALANCE_BANNED_CPULIST=\"3\"\n");
        assert_eq!(banned("export IRQBALANCE_BANNED_CPULIST='0,2,3'\n"), "0,2-3");
        assert_eq!(continued_line("A=1\nB=\"x \\\nC=2\"\n"), Some(2));
        assert_eq!(continued_line("A=\\\\\nB=1\r\n"), None);
        assert_eq!(continued_line("# note \\\r\nB=1\n"), Some(1));
        assert!(Irqbalance::new(None, Scalar("".into())).is_err());
        assert!(Irqbalance::new(None, Scalar("x".into())).is_err());
    }
}
