//! `apply`, `revert` and `persist` for people: unified diffs per file group,
//! what was done, and what to know next.

use similar::TextDiff;

use crate::apply::group::ChangeGroup;
use crate::apply::install::PersistOutcome;
use crate::apply::{ApplyOutcome, RevertOutcome};
use crate::persist::Artifact;

/// `1 file`, `320 files`.
fn files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

/// `3 files`, `40 threads`, `3 files and 40 threads`: a thread's affinity
/// is no file, so moved threads are counted as threads.
fn files_and_threads<'a>(
    groups: impl IntoIterator<Item = &'a ChangeGroup>,
    total: usize,
) -> String {
    let threads: usize = groups
        .into_iter()
        .filter(|g| crate::task::parse_path(&g.path).is_some())
        .map(|g| g.files)
        .sum();
    let count = |t: usize| match t {
        1 => "1 thread".to_string(),
        t => format!("{t} threads"),
    };
    match (total.saturating_sub(threads), threads) {
        (f, 0) => files(f),
        (0, t) => count(t),
        (f, t) => format!("{} and {}", files(f), count(t)),
    }
}

/// Attribute values are one line without a newline: diff them as lines.
fn as_lines(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

/// One group's change as a unified diff; a created file comes from /dev/null,
/// a removed one goes to it.
pub fn diff(g: &ChangeGroup) -> String {
    let mut about = Vec::new();
    if let Some(l) = &g.label {
        about.push(l.clone());
    }
    if g.files > 1 {
        about.push(files(g.files));
    }
    let (before, after) = (g.before.as_deref(), g.after.as_deref());
    // A CPU mask reads as CPUs (`2` is CPU 1); its bytes are named in the label.
    let lists = crate::cpulist::is_mask_file(&g.path)
        .then(|| {
            let list = |v: Option<&str>| {
                v.map(crate::cpulist::mask_as_list)
                    .unwrap_or(Some(String::new()))
            };
            Some((list(before)?, list(after)?))
        })
        .flatten();
    if lists.is_some() {
        let hex = |v: Option<&str>| v.map_or("(none)".to_string(), |t| t.trim().to_string());
        about.push(format!(
            "CPU lists; the file holds hex masks {} -> {}",
            hex(before),
            hex(after)
        ));
    }
    let name = if about.is_empty() {
        g.display.clone()
    } else {
        format!("{}\t({})", g.display, about.join(", "))
    };
    let (old, new) = match &lists {
        Some((b, a)) => (
            before.map(|_| as_lines(b)).unwrap_or_default(),
            after.map(|_| as_lines(a)).unwrap_or_default(),
        ),
        None => (
            before.map(as_lines).unwrap_or_default(),
            after.map(as_lines).unwrap_or_default(),
        ),
    };
    let from = if g.before.is_some() {
        &name
    } else {
        "/dev/null"
    };
    let to = if g.after.is_some() {
        &name
    } else {
        "/dev/null"
    };
    TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(from, to)
        .to_string()
}

/// `/proc/irq/24/smp_affinity_list` -> (`smp_affinity_list`, 24).
fn irq_file(path: &str) -> Option<(&str, u32)> {
    let (n, file) = path.strip_prefix("/proc/irq/")?.split_once('/')?;
    (!file.contains('/')).then_some(())?;
    Some((file, n.parse().ok()?))
}

/// For people only: IRQ files that change alike shown as one group
/// (`/proc/irq/{24-35,37-43}/smp_affinity_list (19 files)`), as CPUs' files
/// are. The JSON and the ledger keep one group per IRQ, with its label.
fn grouped_for_display(groups: &[ChangeGroup]) -> Vec<ChangeGroup> {
    let mut out: Vec<(ChangeGroup, Vec<u32>)> = Vec::new();
    for g in groups {
        let irq = (g.files == 1).then(|| irq_file(&g.path)).flatten();
        let alike = |o: &&mut (ChangeGroup, Vec<u32>)| {
            !o.1.is_empty()
                && irq.is_some_and(|(file, _)| irq_file(&o.0.path).is_some_and(|(f, _)| f == file))
                && o.0.before == g.before
                && o.0.after == g.after
        };
        match (irq, out.iter_mut().find(alike)) {
            (Some((_, n)), Some(o)) => o.1.push(n),
            (Some((_, n)), None) => out.push((g.clone(), vec![n])),
            (None, _) => out.push((g.clone(), Vec::new())),
        }
    }
    out.into_iter()
        .map(|(mut g, irqs)| {
            if irqs.len() > 1 {
                let (file, _) = irq_file(&g.path).expect("an IRQ file");
                let list = crate::cpulist::CpuList::new(irqs.clone()).to_string();
                g.display = format!("/proc/irq/{{{list}}}/{file}");
                g.files = irqs.len();
                g.label = None;
            }
            g
        })
        .collect()
}

pub fn apply_table(o: &ApplyOutcome) -> String {
    let mut out = String::new();
    for k in &o.knobs {
        if k.changes.is_empty() {
            // A pm-qos write is left to `hostknob hold` (the note says so):
            // not in effect, only not this command's to make.
            let held = k.notes.iter().any(|n| n.starts_with("not written:"));
            let why = if let Some(w) = &k.not_applicable {
                format!("not applicable here ({w})")
            } else if !k.refused.is_empty() {
                "the kernel refused every write (below)".into()
            } else if !k.skipped.is_empty() {
                "not applicable here".into()
            } else if held {
                "not in effect, and held only by a running process (see the note)".into()
            } else {
                "already in effect".into()
            };
            out += &format!("{}: {why}; nothing to write\n", k.id);
        } else {
            out += &format!("{} ({}): {}\n", k.id, k.kind, k.title.trim());
            for g in &grouped_for_display(&k.changes) {
                out += &diff(g);
            }
        }
        for s in &k.skipped {
            out += &format!("  left alone, not applicable here: {}\n", s.reason);
        }
        for s in &k.refused {
            out += &format!("  left out, the kernel refused it: {}\n", s.reason);
        }
        for n in &k.notes {
            out += &format!("  note: {n}\n");
        }
        if let Some(w) = &k.not_honoured {
            out += &format!("  NOT HONOURED: the kernel takes this value and ignores it: {w}\n");
        }
    }
    crate::advice::runnable(out + &apply_summary(o) + &caveats(o))
}

/// What `apply --quiet` prints: what failed, what was written and where the
/// values before are, the warnings; not the plan.
pub fn apply_summary(o: &ApplyOutcome) -> String {
    let mut out = String::new();
    let planned: usize = o
        .knobs
        .iter()
        .flat_map(|k| &k.changes)
        .map(|g| g.files)
        .sum();
    for n in &o.not_at_boot {
        out += &format!("{}: not applied at boot: {}\n", n.id, n.why);
    }
    for n in o.pending.iter().chain(&o.out_of_reach) {
        out += &format!("{}: not applied by the pod: {}\n", n.id, n.why);
    }
    for id in &o.reverted {
        out += &format!("{id}: reverted: no longer in the profile\n");
    }
    for f in &o.failed {
        out += &format!("{}: FAILED, the other knobs stand: {}\n", f.id, f.why);
    }
    out.push('\n');
    if o.dry_run {
        out += &format!(
            "dry run: {} would be written; nothing was changed\n",
            files_and_threads(o.knobs.iter().flat_map(|k| &k.changes), planned)
        );
        for w in &o.warnings {
            out += &format!("warning: {w}\n");
        }
    } else if o.written == 0 {
        out += "nothing to write: every chosen knob is in effect or not applicable here\n";
    } else {
        out += &format!(
            "wrote and read back {}\n",
            files_and_threads(o.knobs.iter().flat_map(|k| &k.changes), o.written)
        );
        if let Some(j) = &o.journal {
            // Revert takes knob ids (or --all, which would take others' too).
            let ids: Vec<&str> = o
                .knobs
                .iter()
                .filter(|k| !k.changes.is_empty())
                .map(|k| k.id.as_str())
                .collect();
            out += &format!(
                "values before: {j} (`hostknob revert {}` restores them)\n",
                ids.join(" ")
            );
        }
        if let Some(l) = &o.ledger {
            out += &format!("recorded in: {l}\n");
        }
    }
    for k in o.knobs.iter().filter(|k| k.not_honoured.is_some()) {
        out += &format!(
            "warning: {}: {} but not honoured by this kernel (see NOT HONOURED above); `hostknob audit {}` will say `{}`\n",
            k.id,
            if o.dry_run {
                "would be written"
            } else if k.changes.is_empty() {
                "in effect"
            } else {
                "written"
            },
            k.id,
            k.not_honoured
                .as_deref()
                .map_or("not-honoured", crate::knob::ignored::audit_status)
        );
    }
    for f in &o.forced {
        out += &format!("--force: overriding tuned: {f}; tuned undoes it on its next reapply\n");
    }
    crate::advice::runnable(out)
}

fn caveats(o: &ApplyOutcome) -> String {
    let mut out = String::new();
    let with_caveats: Vec<_> = o.knobs.iter().filter(|k| !k.changes.is_empty()).collect();
    if !with_caveats.is_empty() {
        out += "\ncaveats:\n";
        for k in with_caveats {
            for c in &k.caveats {
                out += &format!(
                    "  {}: {}\n",
                    k.id,
                    c.split_whitespace().collect::<Vec<_>>().join(" ")
                );
            }
        }
    }
    out
}

/// `diffs`: each file's before and after (not with `--quiet`).
pub fn revert_table(o: &RevertOutcome, diffs: bool) -> String {
    if o.restored == 0 && o.left_alone.is_empty() && o.stale.is_empty() {
        return format!(
            "nothing to revert: the journal {} holds no values for these knobs\n",
            o.journal
        );
    }
    let mut out = String::new();
    for k in &o.knobs {
        let n: usize = k.changes.iter().map(|g| g.files).sum();
        out += &format!(
            "{}: restored and read back {}\n",
            k.id,
            files_and_threads(&k.changes, n)
        );
        if diffs {
            for g in &grouped_for_display(&k.changes) {
                out += &diff(g);
            }
        }
        for n in &k.notes {
            out += &format!("  note: {n}\n");
        }
    }
    if !o.left_alone.is_empty() {
        out += &format!(
            "left alone (changed since hostknob wrote them): {}\n",
            files(o.left_alone.len())
        );
    }
    if !o.stale.is_empty() {
        out += &format!(
            "dropped as stale (written in another boot): {}\n",
            files(o.stale.len())
        );
    }
    out += &format!(
        "\nrestored and read back {}",
        files_and_threads(o.knobs.iter().flat_map(|k| &k.changes), o.restored)
    );
    if let Some(l) = &o.ledger {
        out += &format!("; recorded in {l}");
    }
    out.push('\n');
    crate::advice::runnable(out)
}

/// What `persist` without `--install` tells on stderr: where the artifact
/// goes and what else to know. Stdout carries the artifact alone.
pub fn persist_hints(a: &Artifact) -> String {
    let mut out = String::new();
    match &a.path {
        Some(p) => {
            out += &format!(
                "hostknob: {} for {}: `hostknob persist {} --install` writes it to {p}\n",
                a.mechanism, a.knob, a.knob
            )
        }
        // A kernel-cmdline knob's own apply writes the boot loader (its notes say so).
        None if a.commands.is_empty()
            || a.notes.iter().any(|n| n.contains("persistent by itself")) =>
        {
            out += &format!("hostknob: kernel command line for {}\n", a.knob)
        }
        None => {
            out += &format!(
                "hostknob: kernel command-line arguments for {}; hostknob never writes a boot loader: add them with\n",
                a.knob
            )
        }
    }
    out += &prefixed("  ", &a.commands);
    out += &prefixed("hostknob: ", &a.notes);
    crate::advice::runnable(out)
}

/// One line per item, each after `prefix`.
fn prefixed(prefix: &str, items: &[String]) -> String {
    items.iter().map(|i| format!("{prefix}{i}\n")).collect()
}

pub fn persist_table(o: &PersistOutcome, a: &Artifact) -> String {
    let mut out = format!("{}: {} {}\n", o.knob, o.action, o.path);
    if let Some(l) = &o.ledger {
        out += &format!("recorded in: {l}\n");
    }
    if o.action == "installed" {
        out += &prefixed("then run: ", &a.commands);
        out += &prefixed("note: ", &a.notes);
    }
    crate::advice::runnable(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn irq(n: u32, before: &str) -> ChangeGroup {
        ChangeGroup {
            path: format!("/proc/irq/{n}/smp_affinity_list"),
            display: format!("/proc/irq/{n}/smp_affinity_list"),
            files: 1,
            cpus: None,
            label: Some(format!("IRQ {n} virtio0-input.{n}")),
            before: Some(before.into()),
            after: Some("0".into()),
        }
    }

    #[test]
    fn irq_files_that_change_alike_show_as_one_group() {
        let mut changes: Vec<ChangeGroup> =
            (24..=35).chain(37..=43).map(|n| irq(n, "0-1")).collect();
        changes.push(irq(50, "1"));
        let shown = grouped_for_display(&changes);
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert_eq!(
            shown[0].display,
            "/proc/irq/{24-35,37-43}/smp_affinity_list"
        );
        assert_eq!(shown[0].files, 19);
        assert!(
            diff(&shown[0]).contains("(19 files)"),
            "{}",
            diff(&shown[0])
        );
        // One IRQ alone keeps its path and label.
        assert_eq!(shown[1].display, "/proc/irq/50/smp_affinity_list");
        assert!(shown[1].label.is_some());
    }
}
