//! Completions and man pages come from the clap definition: every
//! subcommand is in them.

use crate::support::*;

use std::process::Command;

const SUBCOMMANDS: [&str; 14] = [
    "inventory",
    "capture",
    "doc",
    "knobs",
    "audit",
    "probe",
    "apply",
    "revert",
    "persist",
    "verify",
    "isolate",
    "report",
    "schema",
    "completions",
];

#[test]
fn completions_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let o = hostknob(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let text = String::from_utf8(o.stdout).unwrap();
        for sub in SUBCOMMANDS {
            assert!(text.contains(sub), "{shell}: {sub} missing");
        }
    }
}

#[test]
fn bash_completes_a_subcommand_prefix() {
    if Command::new("bash").arg("--version").output().is_err() {
        panic!("bash is needed for this test");
    }
    let script = String::from_utf8(hostknob(&["completions", "bash"]).stdout).unwrap();
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{script}\nCOMP_WORDS=(hostknob rep); COMP_CWORD=1; COMP_LINE='hostknob rep'; COMP_POINT=12\n\
             _hostknob hostknob rep hostknob\nprintf '%s\\n' \"${{COMPREPLY[@]}}\""
        ))
        .output()
        .unwrap();
    let words: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        words,
        vec!["report"],
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn man_writes_a_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = hostknob(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for sub in SUBCOMMANDS {
        assert!(out.join(format!("hostknob-{sub}.1")).is_file(), "{sub}");
    }
    for probe in ["wakeup", "timer", "rpc", "idle-cpu", "rss"] {
        assert!(
            out.join(format!("hostknob-probe-{probe}.1")).is_file(),
            "{probe}"
        );
    }
    assert!(out.join("hostknob.1").is_file());
    let audit = std::fs::read_to_string(out.join("hostknob-audit.1")).unwrap();
    assert!(
        audit.starts_with(".ie \\n(.g .ds Aq") || audit.contains(".TH hostknob-audit 1"),
        "{audit}"
    );
    assert!(
        audit.contains("textfile") && audit.contains("lost\\-on\\-reboot"),
        "{audit}"
    );
}

#[test]
fn an_unknown_shell_is_refused_with_exit_1() {
    let o = hostknob(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid value 'tcsh'"));
}
