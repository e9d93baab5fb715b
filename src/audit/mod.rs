//! `audit` and `knobs`: each knob that targets this host, its current value
//! per CPU group or file, and one status per group and per knob.
//!
//! `lost-on-reboot` is the sleep-tax lesson: when the ledger or the knob's
//! history says the knob was applied here runtime-only at T, the host booted
//! after T, and the value is no longer the desired one, the report says so
//! instead of a bare `drift`.

pub(crate) mod coexist;
mod competing;
mod evidence;
mod history;
mod knob_list;
mod managers;
mod saptune;
mod status;
mod unseen;
pub use knob_list::{KnobList, knob_list};

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::inventory::facts::Facts;
use crate::knob::{Current, HostCtx, KindName, Service};
use crate::manifest::overrides::Overridden;
use crate::manifest::when::ConditionResult;
use crate::manifest::{Knob, Manifest, ManifestError, ManifestErrors};
use crate::manifest::{ledger, ledger_home};
use crate::persist;
use crate::schema::Persistence;

pub use coexist::{TunedSetting, TunedState};
pub use competing::Competing;
pub use evidence::EvidenceStatus;
pub use history::Evidence;
use history::{last_applied, latest_evidence, latest_verified, tell_the_story};
pub use managers::{HostConfig, Manager};
pub use saptune::SaptuneSetting;
use status::{Judged, groups, judge};
pub use status::{Status, StatusGroup};

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub host: String,
    pub host_source: String,
    /// RFC 3339, UTC, from `btime` in `/proc/stat`; `None` when the tree lacks it.
    pub boot_time: Option<String>,
    pub manifest: String,
    /// `git:COMMIT` when the manifest directory is a git checkout, else
    /// `sha256:HASH` of its knob files; `None` when one cannot be read.
    pub manifest_revision: Option<String>,
    /// When the audit ran: RFC 3339, UTC.
    pub audited_at: String,
    /// The hostknob that ran it.
    pub hostknob_version: String,
    /// Tuning managers on this host whatever the knobs (per knob: `managers`).
    pub competing_managers: Vec<Competing>,
    /// tuned, when it runs or is enabled here: its active profile (per knob: `tuned`).
    pub tuned: Option<TunedState>,
    /// saptune's active notes, when saptune is installed (per knob: `saptune`).
    pub saptune_notes: Vec<String>,
    /// The profile chosen with `--profile` (only its knobs are listed).
    pub profile: Option<String>,
    /// The profiles in effect on this host: those whose `hosts` name it, and the chosen one.
    pub profiles: Vec<String>,
    pub knobs: Vec<KnobReport>,
    /// Knobs per status.
    pub summary: BTreeMap<Status, usize>,
    /// Knobs in the manifest that target other hosts.
    pub other_hosts: usize,
    /// Knobs for other hosts, named: those asked for by id (each says why it
    /// is not audited here), or all of them with `knobs --all-hosts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub for_other_hosts: Vec<OtherHostKnob>,
    /// Ledger entries under this host name from another machine or a capture:
    /// left out of every status and of the evidence.
    pub other_machine_entries: usize,
    /// Paths this audit needed and did not read (`audit --pod`: the chart
    /// does not mount them), each "not mounted in the pod: PATH".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
    /// Knobs this host cannot evaluate (`no sysctl X on this host`), each
    /// naming file, line and field: each is its knob's `not-applicable`
    /// verdict, the others are audited, and audit exits 1 (stderr names them).
    #[serde(skip)]
    pub problems: Vec<ManifestError>,
}

/// A knob of the manifest that does not target this host, with its `hosts:`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct OtherHostKnob {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    /// Its `hosts:` as written.
    pub hosts: String,
    /// `file:line` of the knob.
    pub source: String,
}

/// The manifest's knobs that do not target `host` (only `ids` when some are named).
pub fn other_host_knobs(manifest: &Manifest, host: &str, ids: &[String]) -> Vec<OtherHostKnob> {
    manifest
        .knobs
        .iter()
        .filter(|k| !k.hosts.matches(host))
        .filter(|k| ids.is_empty() || ids.contains(&k.id))
        .map(|k| OtherHostKnob {
            id: k.id.clone(),
            title: k.title.clone(),
            kind: k.kind,
            hosts: k.hosts.to_string(),
            source: format!("{}:{}", k.source.file.display(), k.source.first_line),
        })
        .collect()
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct KnobReport {
    pub id: String,
    pub title: String,
    pub kind: KindName,
    pub target: String,
    pub status: Status,
    pub desired: String,
    pub current: Vec<Current>,
    /// One status per CPU group or file group, where they differ.
    pub groups: Vec<StatusGroup>,
    pub persistence: Persistence,
    /// What keeps it across a reboot, when something does.
    pub persisted_by: Option<String>,
    pub caveats: Vec<String>,
    /// Other things on this host that may set the same files.
    pub managers: Vec<Manager>,
    /// tuned's active profile's setting of this knob's files, when it sets
    /// any: agreeing, or fighting (apply refuses it without `--force`).
    pub tuned: Option<TunedSetting>,
    /// Lines of saptune's active notes that set this knob's files (read only).
    pub saptune: Vec<SaptuneSetting>,
    pub detail: String,
    pub notes: Vec<String>,
    pub source: String,
    /// The latest `verify` of this knob on this host, from the ledger.
    pub evidence: Option<Evidence>,
    /// The knob's `when:` conditions on this host, in order (empty without `when:`).
    pub conditions: Vec<ConditionResult>,
    /// Whether that evidence still describes this host (a field beside the
    /// status: it never changes audit's exit code); `None` when the knob has
    /// no verified entry here and is not in effect.
    pub evidence_status: Option<EvidenceStatus>,
    /// What changed (`evidence-stale: kernel 6.1.0 -> 6.18.44`), or why
    /// there is no evidence for this hardware class.
    pub evidence_detail: Option<String>,
    /// Where `set`/`target` came from when a profile or a local override file
    /// changed them (lowest precedence first); empty: from `source`.
    pub overrides: Vec<Overridden>,
    /// Unseen paths this knob's verdict depends on (`audit --pod`), each
    /// "not mounted in the pod: PATH"; a verdict they could change is `unknown`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
}

/// Knobs per status, every status named (0 where none).
fn summarize(knobs: &[KnobReport]) -> BTreeMap<Status, usize> {
    let mut summary: BTreeMap<Status, usize> = Status::ALL.iter().map(|s| (*s, 0)).collect();
    for k in knobs {
        *summary.entry(k.status).or_default() += 1;
    }
    summary
}

/// Evaluates every knob that targets this host (or only `only`, when given).
pub fn evaluate(
    manifest: &Manifest,
    host: &HostCtx,
    host_source: &str,
    only: &[String],
    state_dir: &str,
) -> Result<Report, ManifestErrors> {
    let mut errors: Vec<ManifestError> = Vec::new();
    for id in only {
        if manifest.get(id).is_none() {
            errors.push(ManifestError {
                file: manifest.dir.clone(),
                line: None,
                field: None,
                message: format!(
                    "no knob with id {id:?} in this manifest{}",
                    manifest.did_you_mean(id)
                ),
            });
        }
    }
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    let chosen: Vec<&Knob> = manifest
        .for_host(&host.name)
        .filter(|k| only.is_empty() || only.contains(&k.id))
        .collect();
    let other_hosts = manifest.knobs.len() - manifest.for_host(&host.name).count();
    let home = ledger_home::Home::new(host.root, &host.name, &manifest.dir, state_dir);
    let (ledger, other_machines) = home
        .read_for(&ledger::Identity::of(host.root))
        .map_err(|e| ManifestErrors(vec![e]))?;
    let facts_now = crate::manifest::facts::Facts::of(host.root);
    let mut seen: Option<Vec<ledger::Entry>> = None;
    let mut everywhere = || seen.get_or_insert_with(|| home.read_everywhere()).clone();
    let kinds: BTreeSet<KindName> = chosen.iter().map(|k| k.kind).collect();
    let services: BTreeSet<Service> = chosen
        .iter()
        .flat_map(|k| k.spec.services().iter().copied())
        .collect();
    let config = HostConfig::read(host, &kinds, &services);
    let boot = host.boot_time();
    let facts = Facts::new(host.root);
    let tuned = coexist::ActiveTuned::read(host);
    let notes = crate::peers::saptune::Notes::read(host.root);
    let mut knobs = Vec::new();
    let mut concerns = Vec::new();
    let mut problems = Vec::new();
    for knob in chosen {
        let conditions = match knob.conditions(&facts) {
            Ok(c) => c,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if let Some(detail) = conditions.detail() {
            knobs.push(not_here(knob, detail, conditions.results, &ledger));
            concerns.push(Vec::new());
            continue;
        }
        // What this host lacks (`no sysctl X on this host`) is this knob's
        // verdict, not the audit's: the other knobs are still audited.
        let survey = match knob.spec.survey(host) {
            Ok(s) => s,
            Err(e) => {
                let e = knob.source.field_error(e);
                let field = e
                    .field
                    .as_deref()
                    .map_or(String::new(), |f| format!("{f}: "));
                knobs.push(not_here(
                    knob,
                    format!("{field}{}", e.message),
                    Vec::new(),
                    &ledger,
                ));
                concerns.push(Vec::new());
                problems.push(e);
                continue;
            }
        };
        let by_tuned = tuned
            .as_ref()
            .and_then(|t| t.setting(knob, &survey.targets));
        let by_notes = saptune::settings(&notes, knob, &survey.targets);
        concerns.push(unseen::concerns(knob, &survey.targets));
        let mut k = report_knob(knob, survey, host, &config, &ledger, boot);
        k.conditions = conditions.results;
        k.tuned = by_tuned;
        k.saptune = by_notes;
        let ours =
            last_applied(knob, &host.name, &ledger).is_some_and(|a| a.label.starts_with("ledger "));
        let advice = evidence::verify_advice(knob, &manifest.dir, ours);
        if let Some(j) = evidence::judge(
            &k.id,
            k.status,
            &advice,
            &ledger,
            &facts_now,
            &mut everywhere,
        ) {
            k.evidence_status = Some(j.status);
            k.evidence_detail = Some(j.detail);
        }
        knobs.push(k);
    }
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    samples_beside(&mut knobs, &ledger, &home);
    let competing_managers = competing::detect(host);
    let asked = host.root.unseen_asked();
    for (k, c) in knobs.iter_mut().zip(&concerns) {
        unseen::mark(k, c, &asked);
    }
    let summary = summarize(&knobs);
    Ok(Report {
        host: host.name.clone(),
        host_source: host_source.to_string(),
        boot_time: boot.map(crate::schema::rfc3339),
        manifest: manifest.dir.display().to_string(),
        manifest_revision: crate::manifest::revision::of(&manifest.dir),
        audited_at: crate::schema::rfc3339(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        ),
        hostknob_version: env!("CARGO_PKG_VERSION").to_string(),
        competing_managers,
        tuned: tuned.map(|t| t.state),
        saptune_notes: notes.active,
        profile: manifest.profile.clone(),
        profiles: manifest.applied.clone(),
        knobs,
        summary,
        other_hosts,
        // Asked for by id and not audited here: say why.
        for_other_hosts: if only.is_empty() {
            Vec::new()
        } else {
            other_host_knobs(manifest, &host.name, only)
        },
        other_machine_entries: other_machines,
        unseen: asked.iter().map(|u| unseen::reason(u)).collect(),
        problems,
    })
}

fn report_knob(
    knob: &Knob,
    survey: crate::knob::Survey,
    host: &HostCtx,
    config: &HostConfig,
    ledger: &[ledger::Entry],
    boot: Option<u64>,
) -> KnobReport {
    let targets = survey.targets;
    let persist = status::with_boot_value(
        persist::check(knob, &targets, host, config.boot()),
        knob,
        host,
    );
    let applied = last_applied(knob, &host.name, ledger);
    let mut judged: Vec<Judged> = targets.iter().map(|t| judge(t, &persist)).collect();
    for j in &mut judged {
        tell_the_story(j, applied.as_ref(), boot);
    }
    let mut groups = groups(&judged);
    let mut status = groups
        .iter()
        .map(|g| g.status)
        .max_by_key(|s| s.rank())
        .unwrap_or(Status::NotApplicable);
    if status == Status::Drift
        && let Some(why) = knob.spec.pending_reboot(host)
    {
        status::pending(&mut groups, &why);
        status = Status::PendingReboot;
    }
    // Whatever it reads, a knob the kernel cannot act on here is not-applicable.
    let inert = matches!(
        status,
        Status::Ok | Status::Unpersisted | Status::Drift | Status::PendingReboot
    )
    .then(|| crate::knob::ignored::not_applicable(host.root, knob.kind))
    .flatten()
    .map(|why| format!("the kernel ignores it here: {why}"));
    if let Some(why) = &inert {
        for g in groups
            .iter_mut()
            .filter(|g| g.status.rank() <= status.rank())
        {
            (g.status, g.detail) = (Status::NotApplicable, why.clone());
        }
        status = Status::NotApplicable;
    }
    let ignored = matches!(status, Status::Ok | Status::Unpersisted)
        .then(|| ignored_by_the_kernel(knob, &targets, host))
        .flatten();
    let status = if ignored.is_some() {
        Status::NotHonoured
    } else {
        status
    };
    let worst: Vec<&StatusGroup> = groups.iter().filter(|g| g.status == status).collect();
    let detail = if let Some(why) = ignored.or(inert) {
        why
    } else if groups.len() == 1 {
        worst[0].detail.clone()
    } else {
        worst
            .iter()
            .filter(|g| !g.detail.is_empty())
            .map(|g| match (&g.cpus, g.paths.as_slice()) {
                (Some(c), _) => format!("CPUs {c}: {}", g.detail),
                (None, [one]) => format!("{one}: {}", g.detail),
                (None, many) => format!("{} files: {}", many.len(), g.detail),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    KnobReport {
        id: knob.id.clone(),
        title: knob.title.clone(),
        kind: knob.kind,
        target: knob.spec.target_summary(),
        status,
        desired: knob.spec.desired(),
        current: crate::knob::group_current(&targets),
        groups,
        persistence: knob.persistence,
        // Their commands (`hostknob persist K --install`) run as printed.
        persisted_by: persist
            .ok()
            .filter(|s| !s.is_empty())
            .map(crate::advice::runnable),
        caveats: knob.all_caveats(),
        managers: managers::managers(knob, &targets, config),
        tuned: None,
        saptune: Vec::new(),
        detail: crate::advice::runnable(detail),
        notes: survey.notes,
        source: format!("{}:{}", knob.source.file.display(), knob.source.first_line),
        evidence: latest_evidence(&knob.id, ledger),
        conditions: Vec::new(),
        overrides: knob.overrides.clone(),
        evidence_status: None,
        evidence_detail: None,
        unseen: Vec::new(),
    }
}

/// Says for each latest verify whether its per-round samples file is there.
fn samples_beside(knobs: &mut [KnobReport], ledger: &[ledger::Entry], home: &ledger_home::Home) {
    for k in knobs {
        if let (Some(ev), Some(e)) = (k.evidence.as_mut(), latest_verified(&k.id, ledger)) {
            ev.samples = home.samples(e).state();
        }
    }
}

/// A knob whose `when:` does not hold here: not-applicable, nothing read.
fn not_here(
    knob: &Knob,
    detail: String,
    conditions: Vec<ConditionResult>,
    ledger: &[ledger::Entry],
) -> KnobReport {
    KnobReport {
        id: knob.id.clone(),
        title: knob.title.clone(),
        kind: knob.kind,
        target: knob.spec.target_summary(),
        status: Status::NotApplicable,
        desired: knob.spec.desired(),
        current: Vec::new(),
        groups: Vec::new(),
        persistence: knob.persistence,
        persisted_by: None,
        caveats: knob.all_caveats(),
        managers: Vec::new(),
        tuned: None,
        saptune: Vec::new(),
        detail,
        notes: Vec::new(),
        source: format!("{}:{}", knob.source.file.display(), knob.source.first_line),
        evidence: latest_evidence(&knob.id, ledger),
        conditions,
        evidence_status: None,
        evidence_detail: None,
        overrides: knob.overrides.clone(),
        unseen: Vec::new(),
    }
}

/// Why the kernel ignores a knob that reads as set, when that is known
/// ([`crate::knob::ignored`]), with the idle states' entry counters as they
/// read now for a disabled state.
fn ignored_by_the_kernel(
    knob: &Knob,
    targets: &[crate::knob::Target],
    host: &HostCtx,
) -> Option<String> {
    let cpu = targets
        .iter()
        .find_map(|t| t.cpus.as_ref()?.first())
        .unwrap_or(0);
    let why = crate::knob::ignored::why(host.root, knob.kind, &knob.spec.desired(), cpu)?;
    let usage: Vec<String> = targets
        .iter()
        .filter(|t| t.in_effect)
        .filter_map(|t| {
            let p = t.path.strip_suffix("/disable")?;
            let n = host.root.read_string(&format!("{p}/usage")).ok()?;
            Some(format!(
                "{}: usage {}",
                t.label.as_deref().unwrap_or(p),
                n.trim()
            ))
        })
        .take(4)
        .collect();
    Some(crate::advice::runnable(format!(
        "reads {}, but {why}{}; `hostknob verify {}` shows the idle entries per leg",
        knob.spec.desired(),
        if usage.is_empty() {
            String::new()
        } else {
            format!(" ({})", usage.join(", "))
        },
        knob.id
    )))
}

impl Report {
    /// 0 when every knob is ok, unpersisted or not-applicable; 1 when a
    /// knob's file cannot be read or a knob cannot be evaluated here (an
    /// error, not a finding); 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        if !self.problems.is_empty() || self.knobs.iter().any(|k| k.status == Status::Unreadable) {
            1
        } else if self.knobs.iter().any(|k| k.status.fails()) {
            2
        } else {
            0
        }
    }
}
