//! `report`'s renderings for people (table, Markdown) and CI gates (CSV,
//! JUnit XML); JSON and YAML are the `FleetReport` itself.

use std::collections::BTreeMap;

use super::{FleetReport, HostEvidence};
use crate::audit::Status;

fn counts(summary: &BTreeMap<Status, usize>) -> String {
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|s| summary.get(s).map(|n| format!("{n} {}", s.as_str())))
        .collect();
    if parts.is_empty() {
        "no knobs".into()
    } else {
        parts.join(", ")
    }
}

fn evidence_text(e: &HostEvidence) -> String {
    let mut t = e
        .verdict
        .clone()
        .unwrap_or_else(|| "recorded".into())
        .replace('-', " ");
    if let Some(r) = e.ratio {
        t.push_str(&format!(", ratio {r:.3}"));
    }
    format!(
        "{t} on {} ({})",
        e.host,
        e.timestamp.split('T').next().unwrap_or(&e.timestamp)
    )
}

/// The report's sections as (title, header, rows), shared by table and Markdown.
#[allow(clippy::type_complexity)]
fn sections(r: &FleetReport) -> Vec<(String, Vec<&'static str>, Vec<Vec<String>>)> {
    let mut knob_rows = Vec::new();
    for k in &r.knobs {
        for (i, g) in k.groups.iter().enumerate() {
            knob_rows.push(vec![
                if i == 0 { k.id.clone() } else { String::new() },
                g.status.as_str().to_string(),
                g.current.clone(),
                g.count.to_string(),
                cut(&g.compressed),
            ]);
        }
    }
    let group_rows = r
        .host_groups
        .iter()
        .map(|g| vec![g.count.to_string(), cut(&g.compressed), counts(&g.summary)])
        .collect();
    let reboot_rows = r
        .knobs
        .iter()
        .filter(|k| !k.lost_on_reboot.is_empty() || !k.unpersisted.is_empty())
        .map(|k| {
            vec![
                k.id.clone(),
                or_none(&k.lost_on_reboot),
                or_none(&k.unpersisted),
            ]
        })
        .collect();
    let evidence_rows = r
        .knobs
        .iter()
        .filter_map(|k| {
            let latest = k.evidence.first()?;
            Some(vec![
                k.id.clone(),
                evidence_text(latest),
                format!("{} of {}", k.evidence.len(), hosts_with(r, &k.id)),
            ])
        })
        .collect();
    let aged_rows = r
        .knobs
        .iter()
        .filter(|k| !k.evidence_stale.is_empty() || !k.unverified_here.is_empty())
        .map(|k| {
            vec![
                k.id.clone(),
                stale_text(&k.evidence_stale),
                or_none(&k.unverified_here),
            ]
        })
        .collect();
    let set_rows = |sets: &[super::HostSet]| -> Vec<Vec<String>> {
        sets.iter()
            .map(|s| vec![s.value.clone(), s.count.to_string(), cut(&s.compressed)])
            .collect()
    };
    let unreadable_rows = r
        .unreadable
        .iter()
        .map(|u| vec![u.file.clone(), u.reason.clone()])
        .collect();
    let stale_rows = if r.stale.hosts.is_empty() {
        Vec::new()
    } else {
        set_rows(std::slice::from_ref(&r.stale))
    };
    vec![
        (
            "Unreadable inputs (not in this report)".into(),
            vec!["file", "why"],
            unreadable_rows,
        ),
        (
            format!("Stale audits (older than {})", r.stale.value),
            vec!["older than", "count", "hosts"],
            stale_rows,
        ),
        (
            "Knobs, hosts grouped where they agree".into(),
            vec!["knob", "status", "current", "count", "hosts"],
            knob_rows,
        ),
        (
            "Hosts that agree on every knob".into(),
            vec!["count", "hosts", "knobs"],
            group_rows,
        ),
        (
            "Lost on reboot or unpersisted".into(),
            vec!["knob", "lost on reboot", "unpersisted"],
            reboot_rows,
        ),
        (
            "Latest verify evidence".into(),
            vec!["knob", "latest", "hosts verified"],
            evidence_rows,
        ),
        (
            "Evidence stale or missing (does not fail the audit)".into(),
            vec!["knob", "evidence stale", "unverified here"],
            aged_rows,
        ),
        (
            "Manifest revisions audited against".into(),
            vec!["revision", "count", "hosts"],
            set_rows(&r.manifest_revisions),
        ),
        (
            "hostknob versions that wrote the audits".into(),
            vec!["version", "count", "hosts"],
            if r.hostknob_versions.len() > 1 {
                set_rows(&r.hostknob_versions)
            } else {
                Vec::new()
            },
        ),
        (
            "Competing tuning managers".into(),
            vec!["manager", "count", "hosts"],
            set_rows(&r.competing_managers),
        ),
    ]
}

/// `kernel 6.1.0 -> 6.18.44: web-[1-3]`, hosts grouped by what changed.
fn stale_text(stale: &BTreeMap<String, String>) -> String {
    if stale.is_empty() {
        return "-".into();
    }
    let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (host, what) in stale {
        by.entry(what.as_str()).or_default().push(host.clone());
    }
    by.iter()
        .map(|(what, hosts)| format!("{what}: {}", cut(&super::compress(hosts))))
        .collect::<Vec<_>>()
        .join("; ")
}

fn or_none(hosts: &[String]) -> String {
    if hosts.is_empty() {
        "-".into()
    } else {
        cut(&super::compress(hosts))
    }
}

/// The most of a host list a table cell shows: thousands of unrelated names
/// compress badly, and a 30,000-character line helps no one.
const LIST_CAP: usize = 160;

/// `list` cut after its last whole entry within [`LIST_CAP`] characters,
/// saying so; machine formats keep every name.
fn cut(list: &str) -> String {
    if list.chars().count() <= LIST_CAP {
        return list.to_string();
    }
    // Entries are joined by ", "; commas inside `[...]` have no space.
    let mut limit = LIST_CAP;
    while !list.is_char_boundary(limit) {
        limit -= 1;
    }
    if let Some(end) = list[..limit].rfind(", ") {
        return format!("{}, ... (cut; --format json lists all)", &list[..end]);
    }
    // Not even the first entry fits (5,000 hosts compress to a few long
    // `web-[...]` groups): its first runs, the rest elided in its brackets.
    let first = list.split(", ").next().unwrap_or(list);
    let more = if first.len() < list.len() {
        ", ..."
    } else {
        ""
    };
    let head = match (first.find('['), first.rfind(']')) {
        (Some(open), Some(close)) => match first[..limit.min(close)].rfind(',') {
            Some(c) if c > open => format!("{},...{}", &first[..c], &first[close..]),
            _ => format!("{}...", &first[..limit.min(first.len())]),
        },
        _ => format!("{}...", &first[..limit.min(first.len())]),
    };
    format!("{head}{more} (cut; --format json lists all)")
}

fn hosts_with(r: &FleetReport, id: &str) -> usize {
    r.knobs
        .iter()
        .find(|k| k.id == id)
        .map(|k| k.groups.iter().map(|g| g.hosts.len()).sum())
        .unwrap_or(0)
}

fn headline(r: &FleetReport) -> String {
    let failing: Vec<String> = r
        .hosts
        .iter()
        .filter(|h| h.fails)
        .map(|h| h.host.clone())
        .collect();
    let mut line = format!(
        "{} hosts, {} knobs: {}; {}",
        r.hosts.len(),
        r.knobs.len(),
        counts(&r.summary),
        if failing.is_empty() {
            "no host drifts".to_string()
        } else {
            format!("drifting: {}", cut(&super::compress(&failing)))
        }
    );
    if !r.unreadable.is_empty() {
        line.push_str(&format!(
            "\n{} input {} could not be read and {} not in this report (listed below)",
            r.unreadable.len(),
            if r.unreadable.len() == 1 {
                "file"
            } else {
                "files"
            },
            if r.unreadable.len() == 1 { "is" } else { "are" },
        ));
    }
    if r.stale.count > 0 {
        line.push_str(&format!(
            "\nstale: {} audited more than {} ago",
            crate::render::plural(r.stale.count, "host"),
            r.stale.value
        ));
    }
    for (what, sets) in [
        ("hostknob versions", &r.hostknob_versions),
        ("manifest revisions", &r.manifest_revisions),
    ] {
        if sets.len() > 1 {
            let each: Vec<String> = sets
                .iter()
                .map(|s| format!("{} on {}", s.value, crate::render::plural(s.count, "host")))
                .collect();
            line.push_str(&format!("\n{} {what}: {}", sets.len(), each.join(", ")));
        }
    }
    for c in &r.clashes {
        line.push_str(&format!(
            "\nhost {} is named by {} files ({}): each kept as its own entry, `{} (FILE)`",
            c.host,
            c.files.len(),
            c.files.join(", "),
            c.host
        ));
    }
    line
}

pub fn table(r: &FleetReport) -> String {
    let mut out = headline(r) + "\n\n";
    for (title, header, rows) in sections(r) {
        if rows.is_empty() && (title.starts_with("Competing") || title.starts_with("Evidence")) {
            continue;
        }
        out.push_str(&crate::render::grid(&title, &header, rows));
    }
    out
}

pub fn markdown(r: &FleetReport) -> String {
    let mut out = format!(
        "# Fleet report\n\n{}\n\n",
        headline(r).replace('\n', "\n\n")
    );
    for (title, header, rows) in sections(r) {
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!("## {title}\n\n"));
        out.push_str(&crate::render::markdown::table(&header, &rows));
        out.push('\n');
    }
    out
}

/// (host entry, knob, status, current, desired) for every host-knob pair,
/// by host then knob.
fn pairs(r: &FleetReport) -> Vec<(&str, &str, Status, &str, String)> {
    let mut out = Vec::new();
    for k in &r.knobs {
        for g in &k.groups {
            for h in &g.hosts {
                out.push((
                    h.as_str(),
                    k.id.as_str(),
                    g.status,
                    g.current.as_str(),
                    k.desired.join(" | "),
                ));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(b.1)));
    out
}

fn csv_field(v: &str) -> String {
    // RFC 4180; a leading = + - @ TAB CR is quoted with a ' so a spreadsheet
    // does not run it (OWASP "CSV Injection" lists all six).
    let v = if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if v.contains([',', '"', '\n', '\r']) || v != v.trim() {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

/// One row per host and knob: `host,file,knob,status,fails,current,desired`.
pub fn csv(r: &FleetReport) -> String {
    let files: BTreeMap<&str, &str> = r
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.file.as_str()))
        .collect();
    let mut out = String::from("host,file,knob,status,fails,current,desired\r\n");
    for (host, knob, status, current, desired) in pairs(r) {
        let row = [
            host,
            files.get(host).copied().unwrap_or(""),
            knob,
            status.as_str(),
            if status.fails() { "true" } else { "false" },
            current,
            &desired,
        ];
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    // An input that could not be read: no host, status unreadable, why in `current`.
    for u in &r.unreadable {
        let row = ["", &u.file, "", "unreadable", "true", &u.reason, ""];
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

fn xml(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Not allowed in XML 1.0 at all: shown as U+FFFD.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML for CI: a test suite per host, a test case per knob; a failing
/// status (drift, unsupported, lost-on-reboot, not-honoured) is a failure,
/// `not-applicable` is skipped.
pub fn junit(r: &FleetReport) -> String {
    let mut per_host: BTreeMap<&str, Vec<(&str, Status, &str, String)>> = r
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), Vec::new()))
        .collect();
    for (host, knob, status, current, desired) in pairs(r) {
        per_host
            .entry(host)
            .or_default()
            .push((knob, status, current, desired));
    }
    let total: usize = per_host.values().map(Vec::len).sum();
    let failed =
        |cases: &[(&str, Status, &str, String)]| cases.iter().filter(|c| c.1.fails()).count();
    let skipped = |cases: &[(&str, Status, &str, String)]| {
        cases
            .iter()
            .filter(|c| c.1 == Status::NotApplicable)
            .count()
    };
    let all: Vec<_> = per_host.values().flatten().cloned().collect();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"hostknob report\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"{}\">\n",
        total + r.unreadable.len(),
        failed(&all),
        skipped(&all),
        r.unreadable.len()
    );
    // An input that could not be read is an error of its own suite.
    for u in &r.unreadable {
        out.push_str(&format!(
            "  <testsuite name=\"{0}\" tests=\"1\" failures=\"0\" skipped=\"0\" errors=\"1\" file=\"{0}\">\n    <testcase classname=\"{0}\" name=\"read\">\n      <error type=\"unreadable\" message=\"{1}\"/>\n    </testcase>\n  </testsuite>\n",
            xml(&u.file),
            xml(&u.reason)
        ));
    }
    for h in &r.hosts {
        let cases = &per_host[h.host.as_str()];
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" file=\"{}\"{}>\n",
            xml(&h.host),
            cases.len(),
            failed(cases),
            skipped(cases),
            xml(&h.file),
            h.audited_at
                .as_deref()
                .map(|t| format!(" timestamp=\"{}\"", xml(t.trim_end_matches('Z'))))
                .unwrap_or_default()
        ));
        for (knob, status, current, desired) in cases {
            let open = format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml(&h.host),
                xml(knob)
            );
            if status.fails() {
                out.push_str(&format!(
                    "{open}>\n      <failure type=\"{}\" message=\"{}: {} (desired {})\"/>\n    </testcase>\n",
                    status.as_str(),
                    status.as_str(),
                    xml(current),
                    xml(desired)
                ));
            } else if *status == Status::NotApplicable {
                out.push_str(&format!(
                    "{open}>\n      <skipped message=\"not-applicable\"/>\n    </testcase>\n"
                ));
            } else {
                out.push_str(&format!("{open}/>\n"));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn a_cut_list_shows_its_first_hosts_even_when_one_group_is_longer_than_the_cap() {
        // Every other host of 600: one bracket group far past the cap.
        let runs: Vec<String> = (1..600).step_by(2).map(|n| format!("{n:03}")).collect();
        let list = format!("web-[{}], db-[1-3]", runs.join(","));
        let shown = cut(&list);
        assert!(shown.starts_with("web-[001,003,005,"), "{shown}");
        assert!(
            shown.ends_with(",...], ... (cut; --format json lists all)"),
            "{shown}"
        );
        assert!(shown.chars().count() <= super::LIST_CAP + 60, "{shown}");
        // A whole first entry that fits still ends the list as before.
        let short = format!("db-[1-3], {}", list);
        assert_eq!(cut(&short), "db-[1-3], ... (cut; --format json lists all)");
    }
}
