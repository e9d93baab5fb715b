//! Every table fits the width it is given: at COLUMNS=80 and 100, on gnr0,
//! spr1, adl0 and the live host, no output line is longer than the width and
//! none ends in a space. Without COLUMNS (a pipe), lines are whole.

use crate::support::*;

fn run(columns: Option<usize>, args: &[&str]) -> String {
    let mut cmd = hostknob_command(&[]);
    cmd.args(args)
        .env_remove("HOSTKNOB_ROOT")
        .env("NO_COLOR", "1");
    match columns {
        Some(c) => cmd.env("COLUMNS", c.to_string()),
        None => cmd.env_remove("COLUMNS"),
    };
    let out = cmd.output().unwrap();
    // audit exits 2 on drift; that is a result, not a failure here.
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "hostknob {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn check(what: &str, text: &str, width: usize) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = line.chars().count();
        if n > width {
            bad.push(format!(
                "{what}: line {} has {n} > {width} characters: {line}",
                i + 1
            ));
        }
        if line.ends_with(' ') {
            bad.push(format!("{what}: line {} ends in a space: {line:?}", i + 1));
        }
    }
    bad
}

fn manifest_dir() -> String {
    format!("{}/manifest", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_table_fits_80_and_100_columns_on_captures() {
    let m = manifest_dir();
    let mut bad = Vec::new();
    for host in ["gnr0", "spr1", "adl0"] {
        let root = corpus_host(host);
        let root = root.to_str().unwrap();
        for width in [80, 100] {
            for cmd in [
                vec!["inventory"],
                vec!["--manifest", &m, "audit"],
                vec!["--manifest", &m, "knobs"],
            ] {
                let mut args = vec!["--root", root];
                args.extend(cmd.iter().copied());
                let text = run(Some(width), &args);
                assert!(!text.trim().is_empty());
                bad.extend(check(&format!("{host} {cmd:?}"), &text, width));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_table_fits_on_the_live_host() {
    let mut bad = Vec::new();
    for width in [80, 100] {
        for args in [
            vec!["inventory"],
            vec!["probe", "timer", "--loops", "200", "--interval", "200"],
            vec![
                "probe",
                "wakeup",
                "--samples",
                "200",
                "--gap-us",
                "100..200",
            ],
        ] {
            let text = run(Some(width), &args);
            bad.extend(check(&format!("live {args:?}"), &text, width));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn without_a_width_lines_stay_whole_and_a_narrow_width_wraps_them() {
    let root = corpus_host("gnr0");
    let root = root.to_str().unwrap();
    let whole = run(None, &["--root", root, "inventory"]);
    let longest = whole.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(
        longest > 100,
        "gnr0's command line should make a long line ({longest})"
    );
    assert!(whole.lines().all(|l| !l.ends_with(' ')));
    // The wrapped table keeps every word of the command line.
    let narrow = run(Some(80), &["--root", root, "inventory"]);
    for word in ["msr.allow_writes=on", "console=ttyS0,115200"] {
        assert!(narrow.contains(word), "{word} lost in:\n{narrow}");
    }
}

/// Columns of CJK text (two display columns a character) fit too: widths
/// are counted in display columns, not characters.
#[test]
fn wide_characters_fit_the_width() {
    let (_tmp, root) = copy_host("adl0");
    // As many characters as fit 100 columns, twice as many display columns.
    let name = "深いアイドル状態の名前がとても長い場合";
    for cpu in 0..24 {
        let state = root.join(format!(
            "sys/devices/system/cpu/cpu{cpu}/cpuidle/state1/name"
        ));
        if state.exists() {
            std::fs::write(&state, format!("{name}\n")).unwrap();
        }
    }
    let display = |line: &str| -> usize {
        line.chars()
            .map(|c| {
                let box_drawing = ('\u{2500}'..='\u{257f}').contains(&c);
                if ('\u{1100}'..='\u{ffdc}').contains(&c) && !box_drawing {
                    2
                } else {
                    1
                }
            })
            .sum()
    };
    // At 110 columns the characters fit and the display columns would not.
    for width in [None, Some(110)] {
        let text = run(
            width,
            &["--root", root.to_str().unwrap(), "inventory", "idle"],
        );
        assert!(text.contains(&name[..9]), "{text}");
        let rows: Vec<usize> = text
            .lines()
            .filter(|l| l.starts_with('│') || l.starts_with('├'))
            .map(display)
            .collect();
        // Every row of the table is as wide as its border: nothing wrapped
        // by characters only to overflow in columns.
        let border = text
            .lines()
            .find(|l| l.starts_with('┌'))
            .map(display)
            .unwrap();
        assert!(rows.iter().all(|&w| w == border), "ragged table:\n{text}");
        if let Some(w) = width {
            assert!(border <= w, "{border} > {w} columns:\n{text}");
        }
    }
}

/// Issue 49 item 7: `knobs` and `audit` stay a grid at 120 columns (long
/// names and paths break after `-`, `.`, `/` rather than turn every row into
/// a block), on the shipped catalog and on an isolate plan's drop-in paths;
/// at 80 they fit as blocks; `--wide` keeps natural widths whatever COLUMNS.
#[test]
fn knobs_and_audit_stay_a_grid_at_120_columns_and_wide_keeps_whole_lines() {
    let m = manifest_dir();
    let root = corpus_host("spr1");
    let root = root.to_str().unwrap();
    let plan = tempfile::tempdir().unwrap();
    let out = plan.path().join("iso");
    run(
        None,
        &[
            "--root",
            root,
            "--host",
            "spr1",
            "isolate",
            "--count",
            "8",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let iso = out.to_str().unwrap();
    let mut bad = Vec::new();
    for cmd in [
        vec!["--manifest", &m, "knobs"],
        vec!["--manifest", &m, "audit"],
        vec!["--manifest", iso, "audit"],
        vec!["--manifest", iso, "knobs"],
    ] {
        let mut args = vec!["--root", root, "--host", "spr1"];
        args.extend(cmd.iter().copied());
        let at120 = run(Some(120), &args);
        bad.extend(check(&format!("{cmd:?} at 120"), &at120, 120));
        assert!(
            at120.contains('┌') && at120.lines().any(|l| l.starts_with("│ knob")),
            "{cmd:?}: not a grid at 120 columns:\n{at120}"
        );
        let at80 = run(Some(80), &args);
        bad.extend(check(&format!("{cmd:?} at 80"), &at80, 80));
        let mut wide = args.clone();
        wide.push("--wide");
        let natural = run(None, &args);
        assert_eq!(run(Some(80), &wide), natural, "{cmd:?} --wide at 80");
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
