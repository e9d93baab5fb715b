//! `audit --format prometheus` and `--textfile DIR`: the Prometheus text
//! exposition format, as node_exporter's textfile collector reads it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

use crate::audit::{Report, Status};

/// The file `--textfile DIR` writes.
pub const TEXTFILE: &str = "hostknob.prom";

/// Verdicts `verify` gives; each is one series of the verdict metric.
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
pub fn metrics(r: &Report, now: f64) -> String {
    let host = escape(&r.host);
    let mut out = String::new();

    family(
        &mut out,
        "hostknob_knob_status",
        "1 for the knob's audit status on this host, 0 for every other status.",
    );
    for k in &r.knobs {
        for s in Status::ALL {
            let _ = writeln!(
                out,
                "hostknob_knob_status{{host=\"{host}\",knob=\"{}\",kind=\"{}\",status=\"{}\"}} {}",
                escape(&k.id),
                k.kind,
                s.as_str(),
                u8::from(k.status == s)
            );
        }
    }

    family(
        &mut out,
        "hostknob_knobs",
        "Knobs targeting this host, per audit status.",
    );
    for s in Status::ALL {
        let _ = writeln!(
            out,
            "hostknob_knobs{{host=\"{host}\",status=\"{}\"}} {}",
            s.as_str(),
            r.summary.get(&s).copied().unwrap_or(0)
        );
    }

    family(
        &mut out,
        "hostknob_audit_knobs_targeting",
        "Knobs of the manifest that target this host (0: the audit checked nothing here).",
    );
    let _ = writeln!(
        out,
        "hostknob_audit_knobs_targeting{{host=\"{host}\"}} {}",
        r.knobs.len()
    );
    audit_error(&mut out, &host, false);
    family(
        &mut out,
        "hostknob_manifest_info",
        "1, labelled with the manifest's revision (git:COMMIT of a checkout, else sha256: of its knob files).",
    );
    let _ = writeln!(
        out,
        "hostknob_manifest_info{{host=\"{host}\",revision=\"{}\"}} 1",
        escape(r.manifest_revision.as_deref().unwrap_or("unreadable"))
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
                "hostknob_competing_manager{{host=\"{host}\",manager=\"{}\",profile=\"{}\"}} 1",
                escape(&m.name),
                escape(m.profile.as_deref().unwrap_or(""))
            );
        }
    }

    family(
        &mut out,
        "hostknob_audit_failing",
        "1 when the audit exits 2 (a knob drifts, is unsupported or was lost on reboot).",
    );
    let _ = writeln!(
        out,
        "hostknob_audit_failing{{host=\"{host}\"}} {}",
        u8::from(r.exit_code() == 2)
    );

    let verified: Vec<_> = r
        .knobs
        .iter()
        .filter_map(|k| Some((k, k.evidence.as_ref()?)))
        .collect();
    if !verified.is_empty() {
        family(
            &mut out,
            "hostknob_knob_verify_verdict",
            "1 for the verdict of the knob's latest verify on this host, 0 for the others.",
        );
        for (k, e) in &verified {
            for v in VERDICTS {
                let _ = writeln!(
                    out,
                    "hostknob_knob_verify_verdict{{host=\"{host}\",knob=\"{}\",verdict=\"{v}\"}} {}",
                    escape(&k.id),
                    u8::from(e.verdict.as_deref() == Some(v))
                );
            }
        }
        family(
            &mut out,
            "hostknob_knob_verify_ratio",
            "Ratio applied / as found (geometric mean over rounds) of the knob's latest verify (below 1: lower latency).",
        );
        for (k, e) in &verified {
            if let Some(ratio) = e.ratio {
                let _ = writeln!(
                    out,
                    "hostknob_knob_verify_ratio{{host=\"{host}\",knob=\"{}\"}} {ratio}",
                    escape(&k.id)
                );
            }
        }
        family(
            &mut out,
            "hostknob_knob_verify_timestamp_seconds",
            "When the knob's latest verify ran, in seconds since the epoch.",
        );
        for (k, e) in &verified {
            if let Some(t) = seconds(&e.timestamp) {
                let _ = writeln!(
                    out,
                    "hostknob_knob_verify_timestamp_seconds{{host=\"{host}\",knob=\"{}\"}} {t}",
                    escape(&k.id)
                );
            }
        }
    }

    if let Some(boot) = r.boot_time.as_deref().and_then(seconds) {
        family(
            &mut out,
            "hostknob_boot_timestamp_seconds",
            "When the audited host booted, in seconds since the epoch.",
        );
        let _ = writeln!(
            out,
            "hostknob_boot_timestamp_seconds{{host=\"{host}\"}} {boot}"
        );
    }

    audit_timestamp(&mut out, &host, now);
    out
}

fn audit_timestamp(out: &mut String, escaped_host: &str, now: f64) {
    family(
        out,
        "hostknob_audit_timestamp_seconds",
        "When this audit ran, in seconds since the epoch.",
    );
    let _ = writeln!(
        out,
        "hostknob_audit_timestamp_seconds{{host=\"{escaped_host}\"}} {now}"
    );
}

fn audit_error(out: &mut String, escaped_host: &str, error: bool) {
    family(
        out,
        "hostknob_audit_success",
        "1 when the audit ran (whatever it found), 0 when it could not run (exit 1).",
    );
    let _ = writeln!(
        out,
        "hostknob_audit_success{{host=\"{escaped_host}\"}} {}",
        u8::from(!error)
    );
    family(
        out,
        "hostknob_build_info",
        "1, labelled with the version of the hostknob that wrote these metrics.",
    );
    let _ = writeln!(
        out,
        "hostknob_build_info{{host=\"{escaped_host}\",version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    family(
        out,
        "hostknob_audit_error",
        "1 when the audit could not run (a manifest or host error; exit 1): nothing was checked.",
    );
    let _ = writeln!(
        out,
        "hostknob_audit_error{{host=\"{escaped_host}\"}} {}",
        u8::from(error)
    );
}

/// The metrics of an audit that failed before checking anything, so the
/// textfile does not keep an earlier audit's green figures.
pub fn error_metrics(host: &str, revision: Option<&str>, now: f64) -> String {
    let host = escape(host);
    let mut out = String::new();
    audit_error(&mut out, &host, true);
    // Which review it failed on, when the knob files can still be read.
    if let Some(rev) = revision {
        family(
            &mut out,
            "hostknob_manifest_info",
            "1, labelled with the manifest's revision (git:COMMIT of a checkout, else sha256: of its knob files).",
        );
        let _ = writeln!(
            out,
            "hostknob_manifest_info{{host=\"{host}\",revision=\"{}\"}} 1",
            escape(rev)
        );
    }
    audit_timestamp(&mut out, &host, now);
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
