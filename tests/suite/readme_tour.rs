//! The README's tour, run as written (issue 20 item 12): every command of its
//! `sh` blocks, in order, in one shell at the top of the repository, each
//! exit code checked against the code its comment names (`# exit 2: ...`;
//! `0` otherwise). A block whose first line is `# live: ...` needs the live
//! host and root and is not run here. The clone's tracked files must be
//! unchanged afterwards (the ledger and documents go to the tour's directory).

use std::path::Path;

use crate::support::*;

/// (command line, expected exit code, is live) for each command of the tour.
fn tour_commands(readme: &str) -> Vec<(String, i32, bool)> {
    let start = readme
        .find("## A five-minute tour")
        .expect("README.md has the tour");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let mut out = Vec::new();
    let mut block: Option<bool> = None; // Some(is_live) inside an sh block
    for line in rest[..end].lines() {
        match (block, line.trim_end()) {
            (None, "```sh") => block = Some(false),
            (None, _) => {}
            (Some(_), "```") => block = None,
            (Some(live), l) => {
                let l = l.trim();
                if l.starts_with("# live:") {
                    block = Some(true);
                    continue;
                }
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                let (cmd, comment) = match l.find("  #") {
                    Some(i) => (l[..i].trim_end(), l[i..].trim_start_matches([' ', '#'])),
                    None => (l, ""),
                };
                let code = comment
                    .strip_prefix("exit ")
                    .and_then(|c| c.chars().next()?.to_digit(10))
                    .map_or(0, |d| d as i32);
                out.push((cmd.to_string(), code, live));
            }
        }
    }
    out
}

#[test]
fn the_readme_tour_runs_as_written_on_the_capture_it_names() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let commands = tour_commands(&readme);
    let run: Vec<_> = commands.iter().filter(|c| !c.2).collect();
    assert!(
        run.len() >= 15,
        "the tour has {} commands: {commands:?}",
        run.len()
    );
    // The capture it names is in the corpus (HOSTKNOB_CORPUS moves it).
    let corpus = corpus_dir();
    assert!(
        run.iter()
            .any(|c| c.0.contains("tests/corpus/hosts/genoa0.tar.gz")),
        "{run:?}"
    );
    for (cmd, ..) in commands.iter().filter(|c| c.2) {
        eprintln!("readme tour: not run here (live host and root): {cmd}");
    }
    // One script: the tour's shell variables carry from step to step.
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("exit-codes");
    let mut script = String::from("set -u\n");
    for (i, (cmd, ..)) in run.iter().enumerate() {
        let cmd = cmd.replace("tests/corpus/hosts/", &format!("{}/", corpus.display()));
        script.push_str(&format!(
            "echo '=== {i}: {}' >&2\n{cmd}\necho \"{i} $?\" >> '{}'\n",
            cmd.replace('\'', "'\\''"),
            log.display()
        ));
    }
    script.push_str("rm -rf \"$T\"\n");
    let bin_dir = Path::new(bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let before = tree(&repo().join("manifest"));
    let hosts_before = tree(&repo().join("hosts"));
    let mut c = std::process::Command::new("bash");
    c.arg("-c")
        .arg(&script)
        .current_dir(repo())
        .env("PATH", &path);
    for (k, _) in std::env::vars() {
        if k.starts_with("HOSTKNOB_") {
            c.env_remove(k);
        }
    }
    let o = c.output().unwrap();
    let transcript = format!("{}\n{}", out(&o), err(&o));
    let codes: Vec<i32> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(codes.len(), run.len(), "not every step ran:\n{transcript}");
    for (i, ((cmd, want, _), got)) in run.iter().zip(&codes).enumerate() {
        assert_eq!(
            got, want,
            "step {i} `{cmd}` exited {got}, the README expects {want}:\n{transcript}"
        );
    }
    // What the steps say they show.
    let stdout = out(&o);
    // Step 3's sample line (the diff puts a tab before the group).
    assert!(
        stdout.lines().any(|l| l
            .starts_with("--- /sys/devices/system/cpu/cpu0-127/cpuidle/state2/disable")
            && l.ends_with("(C2, 128 files)")),
        "{stdout}"
    );
    // Nothing written into the clone: the ledger went to the copy's state directory.
    assert_tree(&before, &repo().join("manifest"), "the clone's manifest/");
    assert_tree(&hosts_before, &repo().join("hosts"), "the clone's hosts/");
}

#[test]
fn the_tour_extraction_reads_codes_and_live_blocks() {
    let text = "## A five-minute tour\n```sh\na x   # exit 2: drift\nb  # text\n# only a comment\n```\n\
                ```sh\n# live: root\nsudo c\n```\n## Next\n```sh\nd\n```\n";
    assert_eq!(
        tour_commands(text),
        [
            ("a x".to_string(), 2, false),
            ("b".to_string(), 0, false),
            ("sudo c".to_string(), 0, true)
        ]
    );
}

/// Every status audit can give, from its JSON Schema (enum and const members).
fn audit_statuses() -> Vec<String> {
    let o = hostknob_command(&[])
        .args(["schema", "audit"])
        .output()
        .unwrap();
    let schema: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut out = Vec::new();
    for m in schema["$defs"]["Status"]["oneOf"].as_array().unwrap() {
        if let Some(e) = m["enum"].as_array() {
            out.extend(e.iter().map(|s| s.as_str().unwrap().to_string()));
        }
        if let Some(c) = m["const"].as_str() {
            out.push(c.to_string());
        }
    }
    out
}

#[test]
fn the_readme_is_a_page_that_names_every_audit_status() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: move detail into docs/"
    );
    let statuses = audit_statuses();
    assert!(statuses.len() >= 9, "{statuses:?}");
    let intro = &readme[..readme.find("## Install").expect("README has Install")];
    for s in &statuses {
        assert!(
            intro.contains(&format!("`{s}`")),
            "the README's summary does not name audit's status `{s}`"
        );
    }
}

#[test]
fn the_tour_starts_by_putting_the_built_binary_on_path() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let commands = tour_commands(&readme);
    let first = &commands.first().expect("the tour has commands").0;
    assert!(
        first.contains("dist/release-dir") && first.contains("PATH"),
        "the tour's first command must make `hostknob` runnable: {first}"
    );
    // And it does: the directory it names holds the binary the tests run.
    let o = std::process::Command::new("sh")
        .arg("dist/release-dir")
        .current_dir(repo())
        .output()
        .unwrap();
    let dir = String::from_utf8(o.stdout).unwrap();
    assert!(
        Path::new(dir.trim()).join("hostknob").is_file(),
        "dist/release-dir printed {dir:?}, which holds no hostknob"
    );
}
