//! `audit --format prometheus` and `--textfile DIR`: the Prometheus text
//! exposition format, as node_exporter's textfile collector reads it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

use crate::audit::{Report, Status};

/// The file `--textfile DIR` writes.
pub const TEXTFILE: &str = "hostknob.prom";

/// Verdicts `verify` gives; the verdict metric's label takes one of them.
const VERDICTS: [&str; 4] = [
    "improved",
    "regressed",
    "no-detectable-effect",
    "inconclusive",
];

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

fn seconds(rfc3339: &str) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(rfc3339)
        .or_else(|_| humantime::parse_rfc3339(rfc3339))
        .ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// The audit as metrics; `now` is the audit's time in seconds since the epoch.
///
/// No series but `hostknob_build_info` carries the host name: node_exporter's
/// `instance` already tells hosts apart, and a second host label only doubles
/// what a 5,000-host Prometheus stores. Join with
/// `* on(instance) group_left(host) hostknob_build_info` where a name is needed.
pub fn metrics(r: &Report, now: f64) -> String {
    let mut out = String::new();

    // One series per knob, its status a label: a status change replaces the
    // series instead of keeping nine per knob (0 for every other status).
    family(
        &mut out,
        "hostknob_knob_status",
        "1, one series per knob targeting this host, labelled with its audit status.",
    );
    for k in &r.knobs {
        let _ = writeln!(
            out,
            "hostknob_knob_status{{knob=\"{}\",kind=\"{}\",status=\"{}\"}} 1",
            escape(&k.id),
            k.kind,
            k.status.as_str(),
        );
    }

    // One series per knob whatever its status: a knob that flaps between
    // drift and ok (a daemon fighting the apply) shows as `changes()`, which
    // the status label's series, replaced at each change, cannot show.
    family(
        &mut out,
        "hostknob_knob_failing",
        "1 when the knob's status fails the audit (drift, unsupported, lost-on-reboot, not-honoured), else 0; one series per knob.",
    );
    for k in &r.knobs {
        let _ = writeln!(
            out,
            "hostknob_knob_failing{{knob=\"{}\",kind=\"{}\"}} {}",
            escape(&k.id),
            k.kind,
            u8::from(k.status.fails())
        );
    }

    family(
        &mut out,
        "hostknob_knobs",
        "Knobs targeting this host, per audit status.",
    );
    for s in Status::ALL {
        let _ = writeln!(
            out,
            "hostknob_knobs{{status=\"{}\"}} {}",
            s.as_str(),
            r.summary.get(&s).copied().unwrap_or(0)
        );
    }

    family(
        &mut out,
        "hostknob_audit_knobs_targeting",
        "Knobs of the manifest that target this host (0: the audit checked nothing here).",
    );
    let _ = writeln!(out, "hostknob_audit_knobs_targeting {}", r.knobs.len());
    audit_outcome(&mut out, &r.host, true, r.exit_code());
    // Only where knobs were checked: a failed load claims nothing about them.
    family(
        &mut out,
        "hostknob_audit_failing",
        "1 when the audit exits 2 (a knob drifts, is unsupported or was lost on reboot).",
    );
    let _ = writeln!(
        &mut out,
        "hostknob_audit_failing {}",
        u8::from(r.exit_code() == 2)
    );
    manifest_info(
        &mut out,
        r.manifest_revision.as_deref().unwrap_or("unreadable"),
    );
    if !r.competing_managers.is_empty() {
        family(
            &mut out,
            "hostknob_competing_manager",
            "1 for each tuning manager found on this host (tuned, saptune, power-profiles-daemon, tlp, cpupower), with its profile.",
        );
        for m in &r.competing_managers {
            let _ = writeln!(
                out,
                "hostknob_competing_manager{{manager=\"{}\",profile=\"{}\"}} 1",
                escape(&m.name),
                escape(m.profile.as_deref().unwrap_or(""))
            );
        }
    }
    verify_evidence(&mut out, r);

    if let Some(boot) = r.boot_time.as_deref().and_then(seconds) {
        family(
            &mut out,
            "hostknob_boot_timestamp_seconds",
            "When the audited host booted, in seconds since the epoch.",
        );
        let _ = writeln!(out, "hostknob_boot_timestamp_seconds {boot}");
    }

    audit_timestamp(&mut out, now);
    out
}

fn verify_evidence(out: &mut String, r: &Report) {
    let verified: Vec<_> = r
        .knobs
        .iter()
        .filter_map(|k| Some((k, k.evidence.as_ref()?)))
        .collect();
    if verified.is_empty() {
        return;
    }
    family(
        out,
        "hostknob_knob_verify_verdict",
        "1, one series per verified knob, labelled with the verdict of its latest verify on this host.",
    );
    for (k, e) in &verified {
        if let Some(v) = e.verdict.as_deref().filter(|v| VERDICTS.contains(v)) {
            let _ = writeln!(
                out,
                "hostknob_knob_verify_verdict{{knob=\"{}\",verdict=\"{v}\"}} 1",
                escape(&k.id),
            );
        }
    }
    family(
        out,
        "hostknob_knob_verify_ratio",
        "Ratio applied / as found (geometric mean over rounds) of the knob's latest verify (below 1: lower latency).",
    );
    for (k, e) in &verified {
        if let Some(ratio) = e.ratio {
            let _ = writeln!(
                out,
                "hostknob_knob_verify_ratio{{knob=\"{}\"}} {ratio}",
                escape(&k.id)
            );
        }
    }
    family(
        out,
        "hostknob_knob_verify_timestamp_seconds",
        "When the knob's latest verify ran, in seconds since the epoch.",
    );
    for (k, e) in &verified {
        if let Some(t) = seconds(&e.timestamp) {
            let _ = writeln!(
                out,
                "hostknob_knob_verify_timestamp_seconds{{knob=\"{}\"}} {t}",
                escape(&k.id)
            );
        }
    }
}

fn manifest_info(out: &mut String, revision: &str) {
    family(
        out,
        "hostknob_manifest_info",
        "1, labelled with the manifest's revision (git:COMMIT of a checkout, else sha256: of its knob files).",
    );
    let _ = writeln!(
        out,
        "hostknob_manifest_info{{revision=\"{}\"}} 1",
        escape(revision)
    );
}

fn audit_timestamp(out: &mut String, now: f64) {
    family(
        out,
        "hostknob_audit_timestamp_seconds",
        "When this audit ran, in seconds since the epoch.",
    );
    let _ = writeln!(out, "hostknob_audit_timestamp_seconds {now}");
}

/// Success, error and failing from the audit's exit code: 1 (could not run,
/// or a knob unreadable), 2 (drift), 0. An audit that exits 1 never reports
/// success, whatever it could check.
fn audit_outcome(out: &mut String, host: &str, ran: bool, exit_code: i32) {
    family(
        out,
        "hostknob_audit_success",
        "1 when the audit ran (each knob has its status, an unreadable one included), 0 when it could not (the manifest does not load, the root cannot be read).",
    );
    let _ = writeln!(out, "hostknob_audit_success {}", u8::from(ran));
    family(
        out,
        "hostknob_audit_exit_code",
        "The audit's exit code: 0 all as declared, 2 a knob fails (drift, unsupported, lost on reboot), 1 an error.",
    );
    let _ = writeln!(out, "hostknob_audit_exit_code {exit_code}");
    family(
        out,
        "hostknob_build_info",
        "1, labelled with the version of the hostknob that wrote these metrics and the host name it audited (the one series with a host label).",
    );
    let _ = writeln!(
        out,
        "hostknob_build_info{{host=\"{}\",version=\"{}\"}} 1",
        escape(host),
        env!("CARGO_PKG_VERSION")
    );
    family(
        out,
        "hostknob_audit_error",
        "1 when the audit exits 1 (a manifest or host error, or an unreadable knob).",
    );
    let _ = writeln!(out, "hostknob_audit_error {}", u8::from(exit_code == 1));
}

/// The metrics of an audit that failed before checking anything, so the
/// textfile does not keep an earlier audit's green figures.
pub fn error_metrics(host: &str, revision: Option<&str>, now: f64) -> String {
    let mut out = String::new();
    audit_outcome(&mut out, host, false, 1);
    // Which review it failed on, when the knob files can still be read.
    if let Some(rev) = revision {
        manifest_info(&mut out, rev);
    }
    audit_timestamp(&mut out, now);
    out
}

/// Writes `text` to DIR/hostknob.prom through a temporary file in DIR and a
/// rename, so the collector never reads half a file.
pub fn write_textfile(dir: &Path, text: &str) -> Result<PathBuf> {
    if !dir.is_dir() {
        return Err(anyhow!(
            "--textfile {}: not a directory (node_exporter's --collector.textfile.directory)",
            dir.display()
        ));
    }
    let target = dir.join(TEXTFILE);
    // A name the collector skips (it reads only *.prom) until the rename.
    let mut tmp = tempfile_in(dir)?;
    let result = (|| -> std::io::Result<()> {
        tmp.1.write_all(text.as_bytes())?;
        tmp.1.sync_all()?;
        std::fs::rename(&tmp.0, &target)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp.0);
        return Err(anyhow!("--textfile {}: {e}", target.display()));
    }
    Ok(target)
}

fn tempfile_in(dir: &Path) -> Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(format!(".{TEXTFILE}.{}.tmp", std::process::id()));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
    };
    // A name left by a crashed run with this pid, or planted: unlinking it
    // writes nothing through it, and the rename below leaves no trace of it.
    let file = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&path).and_then(|_| create())
        }
        other => other,
    }
    .map_err(|e| anyhow!("--textfile {}: {e}", path.display()))?;
    Ok((path, file))
}
