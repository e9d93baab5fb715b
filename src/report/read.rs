//! Reading audit outputs for `report`: regular files only, capped, checked
//! to be `audit --format json` of this schema before they are parsed whole.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;

use crate::audit::Status;

/// The fields of an audit output the report reads; others are ignored.
#[derive(Deserialize)]
pub(super) struct AuditIn {
    pub schema: Option<u32>,
    pub host: String,
    pub boot_time: Option<String>,
    pub audited_at: Option<String>,
    pub hostknob_version: Option<String>,
    pub manifest_revision: Option<String>,
    #[serde(default)]
    pub competing_managers: Vec<CompetingIn>,
    pub knobs: Vec<KnobIn>,
}

#[derive(Deserialize)]
pub(super) struct CompetingIn {
    pub name: String,
    pub profile: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct KnobIn {
    pub id: String,
    pub status: String,
    pub desired: String,
    pub current: Vec<CurrentIn>,
    pub persisted_by: Option<String>,
    pub evidence: Option<EvidenceIn>,
    /// Audits before evidence expired have neither.
    #[serde(default)]
    pub evidence_status: Option<String>,
    #[serde(default)]
    pub evidence_detail: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct CurrentIn {
    pub cpus: Option<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    pub value: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct EvidenceIn {
    pub timestamp: String,
    pub verdict: Option<String>,
    pub summary: Option<String>,
    /// `median_ratio` in audits before the paired-round verdict.
    #[serde(alias = "median_ratio")]
    pub ratio: Option<f64>,
}

/// The JSON files named, a directory standing for its `*.json` files.
pub fn input_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(a)
                .map_err(|e| anyhow!("{}: {e}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                .collect();
            if found.is_empty() {
                bail!("{}: no *.json audit outputs in this directory", a.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(a.clone());
        }
    }
    if files.is_empty() {
        bail!("name audit JSON files or a directory of them");
    }
    Ok(files)
}

/// The largest audit output `report` reads: a 4,096-CPU host's audit of a
/// large manifest is a few MB; the cap keeps a stray file from taking memory.
pub const INPUT_CAP: u64 = 64 << 20;

/// An input read the way host files are: a regular file (a FIFO or a
/// device is refused at once, never waited on), at most [`INPUT_CAP`] bytes.
fn read_input(path: &Path) -> Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let meta = f
        .metadata()
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a plain file"
        };
        bail!(
            "{}: is {what}, not a regular file: report reads audit JSON from regular files only",
            path.display()
        );
    }
    let too_big = || {
        anyhow!(
            "{}: larger than {} MiB, the most report reads from one audit output",
            path.display(),
            INPUT_CAP >> 20
        )
    };
    if meta.len() > INPUT_CAP {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(INPUT_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > INPUT_CAP {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: byte {}: not UTF-8 text, so not JSON",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// What tells an audit output from other JSON, read without building the
/// document in memory (a `serde_json::Value` is ten times the text).
#[derive(Deserialize)]
struct Head {
    schema: Option<serde_json::Value>,
    host_source: Option<serde::de::IgnoredAny>,
    summary: Option<serde::de::IgnoredAny>,
    knobs: Option<serde::de::IgnoredAny>,
}

pub(super) fn read_one(path: &Path) -> Result<AuditIn> {
    let text = read_input(path)?;
    let head: Head = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: line {} column {}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    let want = u64::from(crate::inventory::SCHEMA_VERSION);
    let is_audit = head.host_source.is_some() && head.summary.is_some() && head.knobs.is_some();
    match &head.schema {
        _ if !is_audit => bail!(
            "{}: not a `hostknob audit --format json` output (no host_source, summary and knobs)",
            path.display()
        ),
        Some(v) if v.as_u64() == Some(want) => {}
        Some(v) => bail!(
            "{}: field `schema`: {v} is not audit schema {want}; this hostknob reads schema {want}",
            path.display()
        ),
        None => bail!(
            "{}: field `schema` missing: written by a hostknob older than schema {want}",
            path.display()
        ),
    }
    let audit: AuditIn =
        serde_json::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    debug_assert!(audit.schema.is_some());
    Ok(audit)
}

pub(super) fn parse_status(path: &Path, knob: &str, s: &str) -> Result<Status> {
    Status::ALL
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| {
            anyhow!(
                "{}: knob {knob}: field `status`: unknown {s:?}",
                path.display()
            )
        })
}

/// `0-15: performance; 16-31: powersave`, as `audit` shows a current value.
pub(super) fn describe(current: &[CurrentIn]) -> String {
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
