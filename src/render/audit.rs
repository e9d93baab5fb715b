//! `knobs` and `audit` for people (tables) and the `knobs` list for machines.

use crate::audit::{KnobReport, Report, Status};
use crate::cpulist::CpuList;
use crate::knob::Current;

const DETAIL_WIDTH: usize = 70;
const VALUE_WIDTH: usize = 36;

/// `0-15: performance; 16-31: powersave`, `file: value` for files.
pub fn describe_current(current: &[Current]) -> String {
    let word = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    match current {
        [] => "-".into(),
        [one] => word(&one.value),
        many => many
            .iter()
            .map(|c| match (&c.cpus, c.paths.as_slice()) {
                (Some(cpus), _) => format!("{cpus}: {}", word(&c.value)),
                (None, [p]) => format!("{p}: {}", word(&c.value)),
                (None, ps) => format!("{} files: {}", ps.len(), word(&c.value)),
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn header(r: &Report) -> String {
    let profiles = match (&r.profile, r.profiles.as_slice()) {
        (Some(p), _) => format!(", profile {p}"),
        (None, []) => String::new(),
        (None, ps) => format!(", profiles {}", ps.join(", ")),
    };
    format!(
        "host {} (from {}), booted {}, manifest {}{profiles}\n\n",
        r.host,
        r.host_source,
        r.boot_time.as_deref().unwrap_or("at an unknown time"),
        r.manifest
    )
}

/// `  override: set from FILE:LINE (profile P)`, one line per overriding file.
fn override_lines(k: &KnobReport) -> Vec<String> {
    k.overrides
        .iter()
        .map(|o| format!("  override: {}", o.describe()))
        .collect()
}

fn summary(r: &Report) -> String {
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|s| {
            let n = *r.summary.get(s).unwrap_or(&0);
            (n > 0).then(|| format!("{n} {}", s.as_str()))
        })
        .collect();
    let mut line = if parts.is_empty() {
        "no knob targets this host".to_string()
    } else {
        parts.join(", ")
    };
    if r.other_hosts > 0 {
        line.push_str(&match r.other_hosts {
            1 => " (1 knob is for other hosts)".to_string(),
            n => format!(" ({n} knobs are for other hosts)"),
        });
    }
    line.push('\n');
    if !r.for_other_hosts.is_empty() {
        line.push_str(&format!("Not for this host ({}):\n", r.host));
        for k in &r.for_other_hosts {
            line.push_str(&format!(
                "  {} ({}): hosts: {} ({}); `--host NAME` audits it as one of them\n",
                k.id, k.kind, k.hosts, k.source
            ));
        }
    }
    line.push_str(&beside(r));
    if r.other_machine_entries > 0 {
        line.push_str(&format!(
            "{} ledger entries under the name {} are from another machine or a capture: not this host's history, left out\n",
            r.other_machine_entries, r.host
        ));
    }
    line
}

fn scope(cpus: &Option<CpuList>, paths: &[String]) -> String {
    match (cpus, paths) {
        (Some(c), _) => format!("CPUs {c}"),
        (None, [p]) => p.clone(),
        (None, ps) => super::plural(ps.len(), "file"),
    }
}

pub fn audit_table(r: &Report) -> String {
    let mut out = header(r);
    if r.knobs.is_empty() {
        return out + &summary(r);
    }
    let mut b: Vec<Vec<String>> = Vec::new();
    b.push(
        ["knob", "status", "desired", "current", "detail"]
            .map(String::from)
            .to_vec(),
    );
    for k in &r.knobs {
        let grouped = k.groups.len() > 1;
        b.push(vec![
            k.id.clone(),
            k.status.as_str().to_string(),
            k.desired.clone(),
            if grouped {
                String::new()
            } else {
                describe_current(&k.current)
            },
            if grouped {
                String::new()
            } else {
                k.detail.clone()
            },
        ]);
        if grouped {
            for g in &k.groups {
                b.push(vec![
                    format!("  {}", scope(&g.cpus, &g.paths)),
                    g.status.as_str().to_string(),
                    String::new(),
                    g.current.clone().unwrap_or_else(|| "-".into()),
                    g.detail.clone(),
                ]);
            }
        }
    }
    let table = super::layout(&b, true, &[(3, VALUE_WIDTH), (4, DETAIL_WIDTH)]);
    // Coloured by the caller after wrap_prose escaped control characters.
    out.push_str(&format!("{table}\n\n"));
    for k in &r.knobs {
        out.push_str(&notes(k));
    }
    out + &conditions_lines(r) + &evidence_lines(r) + &summary(r)
}

/// Each knob's `when:` conditions as evaluated here, one line per knob.
fn conditions_lines(r: &Report) -> String {
    let lines: Vec<String> = r
        .knobs
        .iter()
        .filter(|k| !k.conditions.is_empty())
        .map(|k| {
            let each: Vec<String> = k
                .conditions
                .iter()
                .map(|c| {
                    let word = if c.holds { "matched" } else { "fails" };
                    format!("{}: {word} (this host: {})", c.condition, c.host)
                })
                .collect();
            format!("  {}: {}", k.id, each.join("; "))
        })
        .collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!("Conditions (when:):\n{}\n\n", lines.join("\n"))
    }
}

/// `tuned is active (profile X)` and saptune's active notes, for the summary.
fn beside(r: &Report) -> String {
    let mut out = String::new();
    if let Some(t) = &r.tuned {
        let profile = match &t.profile {
            Some(p) => format!("profile {p}"),
            None => "no /etc/tuned/active_profile".into(),
        };
        out.push_str(&format!("tuned is active ({profile}; {})\n", t.evidence));
        if let Some(why) = &t.unreadable {
            out.push_str(&format!(
                "  its profile could not be read, so no knob is compared with it: {why}\n"
            ));
        }
    }
    if !r.saptune_notes.is_empty() {
        out.push_str(&format!(
            "saptune notes active: {} (read only)\n",
            r.saptune_notes.join(", ")
        ));
    }
    out
}

/// tuned's and saptune's settings of a knob's files, one line each.
fn beside_lines(k: &KnobReport) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = &k.tuned {
        lines.push(match t.agrees {
            true => format!("  tuned agrees: {} ({} there)", t.cite(), t.sets),
            false => format!(
                "  tuned fights this knob: {} ({} on {}, this knob {}); apply refuses without --force={}",
                t.cite(),
                t.sets,
                t.path,
                k.desired,
                k.id
            ),
        });
    }
    for s in &k.saptune {
        let word = if s.agrees { "agrees" } else { "differs" };
        lines.push(format!(
            "  saptune note {} {word}: [{}] {} = {} at {}:{} (sets {})",
            s.note, s.section, s.key, s.value, s.file, s.line, s.path
        ));
    }
    lines
}

/// Managers, notes and (for knobs not simply ok) caveats, under the table.
fn notes(k: &KnobReport) -> String {
    let mut lines = override_lines(k);
    lines.extend(beside_lines(k));
    for m in &k.managers {
        lines.push(format!("  may be overridden by {}: {}", m.name, m.evidence));
    }
    for n in &k.notes {
        lines.push(format!("  note: {n}"));
    }
    if !matches!(k.status, Status::Ok | Status::NotApplicable) {
        for c in &k.caveats {
            lines.push(format!("  caveat: {c}"));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("{} ({}):\n{}\n\n", k.id, k.source, lines.join("\n"))
}

/// `regressed (2026-11-30)`, `... stale`, `unverified here`, or `-` when
/// never verified here.
fn evidence_cell(k: &crate::audit::KnobReport) -> String {
    use crate::audit::EvidenceStatus as E;
    let cell = match &k.evidence {
        // The kernel ignoring the knob outranks any verdict on its effect.
        Some(e) => format!(
            "{} ({})",
            match e.honoured.as_deref() {
                Some("not-honoured") => "not-honoured".to_string(),
                _ => e.verdict.as_deref().unwrap_or("recorded").replace('-', " "),
            },
            e.timestamp.split('T').next().unwrap_or(&e.timestamp)
        ),
        None if k.evidence_status == Some(E::UnverifiedHere) => return "unverified here".into(),
        None => "-".into(),
    };
    match k.evidence_status {
        Some(E::EvidenceStale) => format!("{cell}, stale"),
        _ => cell,
    }
}

/// The latest evidence under a table, one line per verified knob.
fn evidence_lines(r: &Report) -> String {
    let lines: Vec<String> = r
        .knobs
        .iter()
        .filter_map(|k| {
            let e = k.evidence.as_ref()?;
            let missing = e
                .samples
                .as_ref()
                .and_then(|s| s.words.as_deref())
                .map_or(String::new(), |w| format!("\n    ({w})"));
            Some(format!(
                "  {} ({}): {}{missing}",
                k.id,
                e.timestamp,
                e.summary.as_deref()?
            ))
        })
        .collect();
    let mut out = if lines.is_empty() {
        String::new()
    } else {
        format!("Latest verify evidence:\n{}\n\n", lines.join("\n"))
    };
    // Evidence that no longer describes this host, or none for its hardware.
    let aged: Vec<String> = r
        .knobs
        .iter()
        .filter(|k| k.evidence_status != Some(crate::audit::EvidenceStatus::Current))
        .filter_map(|k| Some(format!("  {}: {}", k.id, k.evidence_detail.as_deref()?)))
        .collect();
    if !aged.is_empty() {
        out += &format!(
            "Evidence to renew (does not change the exit code):\n{}\n\n",
            aged.join("\n")
        );
    }
    out
}

pub fn knobs_table(r: &Report) -> String {
    let mut out = header(r);
    if r.knobs.is_empty() {
        return out + &summary(r);
    }
    let mut b: Vec<Vec<String>> = vec![
        [
            "knob", "kind", "target", "desired", "current", "status", "verified",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for k in &r.knobs {
        b.push(vec![
            k.id.clone(),
            k.kind.to_string(),
            k.target.clone(),
            k.desired.clone(),
            describe_current(&k.current),
            k.status.as_str().to_string(),
            evidence_cell(k),
        ]);
    }
    let table = super::layout(&b, true, &[(2, VALUE_WIDTH), (4, VALUE_WIDTH)]);
    out.push_str(&format!("{table}\n\n"));
    for k in r.knobs.iter().filter(|k| !k.overrides.is_empty()) {
        out.push_str(&format!(
            "{} ({}):\n{}\n\n",
            k.id,
            k.source,
            override_lines(k).join("\n")
        ));
    }
    out + &not_applicable_lines(r) + &conditions_lines(r) + &evidence_lines(r) + &summary(r)
}

/// Why each not-applicable or unsupported knob cannot be set here, for `knobs`.
fn not_applicable_lines(r: &Report) -> String {
    let mut out = String::new();
    for (status, heading) in [
        (Status::NotApplicable, "Not applicable here"),
        (
            Status::Unsupported,
            "Unsupported here (the host cannot comply)",
        ),
    ] {
        let lines: Vec<String> = r
            .knobs
            .iter()
            .filter(|k| k.status == status && !k.detail.is_empty())
            .map(|k| format!("  {}: {}", k.id, k.detail))
            .collect();
        if !lines.is_empty() {
            out += &format!("{heading}:\n{}\n\n", lines.join("\n"));
        }
    }
    out
}

/// `knobs --profiles` for people.
pub fn profiles_table(l: &crate::manifest::profile_list::ProfileList) -> String {
    let mut out = format!("host {}, manifest {}\n\n", l.host, l.manifest);
    if l.profiles.is_empty() {
        return out + "no profiles (profiles/NAME.yaml in the manifest)\n";
    }
    let mut b: Vec<Vec<String>> = vec![
        ["profile", "hosts", "here", "include", "knobs", "why"]
            .map(String::from)
            .to_vec(),
    ];
    for p in &l.profiles {
        b.push(vec![
            p.name.clone(),
            p.hosts.clone().unwrap_or_else(|| "-".into()),
            if p.applies_here { "applies" } else { "-" }.into(),
            if p.include.is_empty() {
                "-".into()
            } else {
                p.include.join(", ")
            },
            p.knobs.join(", "),
            p.why.clone(),
        ]);
    }
    let table = super::layout(&b, true, &[(4, VALUE_WIDTH), (5, DETAIL_WIDTH)]);
    out.push_str(&format!("{table}\n\n"));
    for p in l.profiles.iter().filter(|p| !p.overrides.is_empty()) {
        out.push_str(&format!("{} ({}):\n", p.name, p.file));
        for (k, o) in p.overridden_knobs.iter().zip(&p.overrides) {
            out.push_str(&format!("  overrides {k}: {}\n", o.describe()));
        }
        out.push('\n');
    }
    out + "(--profile NAME chooses one: its knobs, its overrides applied)\n"
}
