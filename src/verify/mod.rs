//! `hostknob verify KNOB`: an A/B of one knob with its declared probe, in
//! rounds whose leg order is shuffled (seeded), with the host left as found
//! on every path.
//!
//! The knob is switched with apply's own machinery (journal first, write,
//! read back), under the state lock held for the whole run, so a SIGKILL at
//! any point leaves a journal that `hostknob revert` restores from. Success,
//! a probe error, a panic (a guard) and SIGINT/SIGTERM/SIGHUP (a flag the
//! probes and the loop check) all end with the knob reverted and read back.

mod beyond;
pub mod blind;
pub mod bundle;
pub mod command;
pub mod energy;
pub mod expect;
pub mod honoured;
mod legs;
mod looks;
mod multi;
pub mod noise;
pub mod order;
pub mod paired;
pub mod placement;
mod record;
mod record_multi;
pub mod residency;
pub mod rule;
pub mod split;
pub mod sweep;

pub(crate) use legs::settle;
pub use multi::{Plan, Shuffle};
pub(crate) use multi::{Snapshot, Switch, check_variant, snapshot_all};
pub use record::{record, summary};
pub use record_multi::{record_bundle, record_sweep, sweep_summary};

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::apply::{self, Session};
use crate::manifest::Knob;
use crate::probe;
use crate::probe::latency::LatencyProbe;
use legs::Legs;
use paired::{Analysis, Decision, Metric, Rule, Verdict};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Leg {
    Baseline,
    Applied,
}

impl Leg {
    pub fn as_str(self) -> &'static str {
        match self {
            Leg::Baseline => "as found",
            Leg::Applied => "applied",
        }
    }
}

pub struct Options {
    /// The first batch of rounds (at least `paired::MIN_ROUNDS`).
    pub rounds: usize,
    /// The most rounds in all (default four times `rounds`).
    pub max_rounds: Option<usize>,
    pub settle: Duration,
    pub seed: u64,
    pub probe_name: String,
    pub probe: LatencyProbe,
    pub wait: bool,
    /// Allow a --sleeper-cpu (--server-cpu, --cpu) outside the knob's target.
    pub force: bool,
    /// The manifest's command probe: run instead of `probe`, which then only
    /// places the CPU whose idle counters are watched.
    pub command: Option<Box<crate::schema::command::CommandProbe>>,
}

/// What the kernel did against what the knob asked, over the applied legs.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Honoured {
    /// `honoured`, `not-honoured`, or `not-checked` (the CPU never idled in
    /// an as-found leg, so nothing could be checked).
    pub status: &'static str,
    /// The evidence, per applied leg.
    pub findings: Vec<String>,
    /// The likely cause, when known.
    pub cause: Option<String>,
    /// The CPUs whose idle counters were read.
    pub cpus: Vec<u32>,
}

/// One declared expectation, checked on an analysis of its own metric.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExpectationCheck {
    pub text: String,
    #[serde(flatten)]
    pub check: expect::Check,
    /// The verdict on this expectation's metric, in words.
    pub verdict_words: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub host: String,
    pub knob: String,
    pub probe: String,
    /// The probe's settings (from the first run).
    pub settings: serde_json::Value,
    /// Rounds run (the rule may add rounds after the first batch).
    pub rounds: usize,
    pub seed: u64,
    pub settle_ms: u64,
    /// Each round's leg order.
    pub order: Vec<[Leg; 2]>,
    pub analysis: Analysis,
    /// The verdict, also inside `analysis`: improved, regressed or no-detectable-effect.
    pub verdict: Verdict,
    /// Why the rounds stopped: effect-cleared, within-minimum-effect or round-cap.
    pub decision: Decision,
    /// The verdict with its ratio, interval and rounds, in words.
    pub verdict_words: String,
    /// Where the probe ran: the sleeper inside the knob's target.
    pub placement: placement::Placement,
    /// Whether the kernel did what the knob asked during the applied legs.
    pub honoured: Honoured,
    /// Idle-state entries and residency on the watched CPUs, summed over the
    /// rounds: as found, applied.
    pub idle: [Vec<honoured::StateCount>; 2],
    /// Hardware C-state residency per leg, or why the host exposes none.
    pub hardware: residency::Hardware,
    /// Whether the knob is about idling: what the idle counters and the
    /// residency speak to (the table shows them only then).
    #[serde(skip)]
    pub idle_knob: bool,
    /// The wakeup probe's samples split per leg: the wake, the wait for the CPU.
    pub wake_split: Option<split::WakeSplit>,
    /// The manifest's `verify.note`.
    pub note: Option<String>,
    pub expectations: Vec<ExpectationCheck>,
    /// The knob's files read the same after the run as before it.
    pub restored: bool,
    /// The signal that stopped the run (`SIGINT`...): the report covers the
    /// complete rounds only, and nothing is recorded.
    pub interrupted: Option<String>,
    /// The rpc probe's lost requests (UDP), per leg: as found, applied.
    pub losses: Option<Losses>,
    /// The command probe: where it ran, its unit, which way is better, its values.
    pub command: Option<command::Placed>,
    /// The noise probe: who took the lost time in each leg, and what changed.
    pub noise: Option<noise::NoiseEvidence>,
    /// Package energy and power per leg, or "energy not exposed".
    pub energy: energy::Energy,
    pub warnings: Vec<String>,
    pub ledger: Option<String>,
    #[serde(skip)]
    pub samples: [Vec<f64>; 2],
}

/// Requests the rpc probe sent and lost, per leg (as found, applied), summed over the rounds.
#[derive(Debug, Default, Clone, Serialize, schemars::JsonSchema)]
pub struct Losses {
    pub sent: [u64; 2],
    pub lost: [u64; 2],
    /// One leg lost far more than the other (see `unequal`): the verdict is
    /// inconclusive, as a lost reply is a latency left out of its leg.
    pub unequal: bool,
}

impl Losses {
    fn rate(&self, k: usize) -> f64 {
        self.lost[k] as f64 / self.sent[k].max(1) as f64
    }

    /// Far more: at least 10 lost, and a loss rate both twice the other
    /// leg's and 0.5 percentage points above it.
    fn is_unequal(&self) -> bool {
        let (b, a) = (self.rate(0), self.rate(1));
        let (hi, lo) = if a > b { (a, b) } else { (b, a) };
        self.lost[0].max(self.lost[1]) >= 10 && hi >= 2.0 * lo && hi - lo >= 0.005
    }
}

/// SIGINT, SIGTERM and SIGHUP only set the cancel flag (and wake a probe's
/// sleeping threads): the loop restores.
fn catch_signals() -> Result<()> {
    probe::interrupt::install()
}

/// Folds warnings that differ only in their numbers into one with a count.
fn fold_warnings(all: Vec<String>) -> Vec<String> {
    // Each run of digits counts as one number, whatever its length.
    let shape = |w: &str| -> String {
        let mut out = String::new();
        for c in w.chars() {
            match c.is_ascii_digit() {
                true if out.ends_with('#') => {}
                true => out.push('#'),
                false => out.push(c),
            }
        }
        out
    };
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for w in all {
        let k = shape(&w);
        match out.iter_mut().find(|o| o.0 == k) {
            Some(o) => o.2 += 1,
            None => out.push((k, w, 1)),
        }
    }
    out.into_iter()
        .map(|(_, w, n)| match n {
            1 => w,
            n => format!("{w} (and {} more like it: {n} in all)", n - 1),
        })
        .collect()
}

/// The knob's files and values, to check that the host is as found.
pub(crate) fn snapshot(session: &Session, knob: &Knob) -> Result<Vec<(String, Option<String>)>> {
    let survey = knob
        .spec
        .survey(&session.ctx)
        .map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.message))?;
    Ok(survey
        .targets
        .into_iter()
        .map(|t| (t.path, t.current))
        .collect())
}

pub fn run(
    session: &Session,
    knob: &Knob,
    opts: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<Report> {
    let rule = rule_for(opts)?;
    probe::require_live(session.root(), "verify")?;
    let lock = session
        .lock(opts.wait)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let report = run_locked(session, knob, opts, progress, rule);
    // Nothing left journaled (the knob restored): no state stays behind.
    if matches!(session.journal().remove_if_empty(), Ok(true)) {
        let _ = lock.remove(session.root(), &session.state_dir);
    }
    report
}

fn run_locked(
    session: &Session,
    knob: &Knob,
    opts: &Options,
    progress: &mut dyn FnMut(&str),
    rule: rule::Rule,
) -> Result<Report> {
    check_verifiable(session, knob)?;
    let (probe, placement) = place_probe(session, knob, opts)?;
    let opts = &Options {
        probe,
        probe_name: opts.probe_name.clone(),
        command: opts.command.clone(),
        ..*opts
    };
    let placed = command::placed(session.root(), opts.command.as_deref(), &placement)?;
    let before = snapshot(session, knob)?;
    catch_signals()?;
    progress(&format!(
        "verifying {} with the {} probe {}: {} rounds first, up to {}, seed {}, settle {} ms",
        knob.id,
        opts.probe_name,
        match (&placed, &placement.measured) {
            (Some(p), _) => format!("on CPUs {} ({})", p.cpus, p.why),
            (None, Some(m)) => format!("on CPUs {} ({})", m.cpus, m.why),
            (None, None) => format!(
                "on CPU {} (from CPU {})",
                placement.sleeper, placement.waker
            ),
        },
        rule.rounds,
        rule.max_rounds,
        opts.seed,
        opts.settle.as_millis()
    ));
    let metric = primary_metric(knob);
    let mut legs = Legs::new(session, knob, opts);
    legs.command = placed;
    legs.watched = honoured::watched(placement.sleeper, placement.target_cpus.as_ref());
    // A knob without CPUs (THP, sysctl) acts on every package: all are summed.
    if let Some(t) = &placement.target_cpus {
        let under_test: Vec<u32> = t
            .as_slice()
            .iter()
            .copied()
            .chain([placement.sleeper])
            .collect();
        legs.energy.keep_packages(session.root(), &under_test);
    }
    let analysis = looks::run(&mut legs, knob, metric, rule, progress)?;
    let interrupted = legs.interrupted.then(|| {
        probe::interrupt::signal()
            .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
            .map_or("a signal", |s| s.as_str())
            .to_string()
    });
    let mut analysis = match analysis {
        Some(a) if interrupted.is_none() => a,
        _ => paired::analyze(&legs.rounds, metric, rule),
    };
    if legs.guard.applied {
        legs.guard
            .restore()
            .context("restoring the knob after the last round")?;
    }
    let restored = snapshot(session, knob)? == before;
    let mut warnings = fold_warnings(std::mem::take(&mut legs.warnings));
    if !restored {
        warnings.push(crate::advice::runnable(format!(
            "{}'s files do not read as they did before the run: check `hostknob audit {}`",
            knob.id, knob.id
        )));
    }
    legs.order.truncate(legs.rounds.len());
    let (overrule, losses) = overrule(session, knob, &legs, placement.sleeper, &mut warnings);
    let overrule = if interrupted.is_some() {
        Some(Decision::Interrupted)
    } else {
        overrule
    };
    if let Some(d) = overrule {
        analysis.overrule(d, interrupted.is_some());
    }
    let mut expectations =
        looks::check_expectations(knob, &legs.rounds, rule, overrule, legs.command.as_ref());
    let blind = opts.command.is_none()
        && blind::account(knob, &opts.probe, &mut expectations, &mut warnings);
    let honoured = honoured::conclude(
        session.root(),
        &knob.id,
        knob.kind,
        std::mem::take(&mut legs.findings),
        legs.watched.clone(),
        overrule,
        legs.applied_legs,
        &mut warnings,
    );
    let flat = |k: usize| -> Vec<f64> {
        legs.rounds
            .iter()
            .flat_map(|r| if k == 0 { &r.0 } else { &r.1 })
            .copied()
            .collect()
    };
    let energy = legs.energy.report(
        command::metric_us(legs.command.as_ref(), &analysis),
        analysis.interval,
    );
    let placed = legs.command.take().map(|p| command::finish(p, &analysis));
    let split_limit = split::not_applicable(session.root(), placement.sleeper, placement.waker);
    Ok(Report {
        host: session.ctx.name.clone(),
        knob: knob.id.clone(),
        probe: opts.probe_name.clone(),
        settings: std::mem::take(&mut legs.settings),
        rounds: legs.rounds.len(),
        seed: opts.seed,
        settle_ms: opts.settle.as_millis() as u64,
        order: std::mem::take(&mut legs.order),
        verdict: analysis.verdict,
        decision: analysis.decision,
        verdict_words: blind::words(&analysis, knob, blind),
        placement,
        honoured,
        idle: std::mem::take(&mut legs.idle),
        hardware: legs.hw.report(knob),
        idle_knob: is_idle_knob(session, knob),
        wake_split: legs.split.report(split_limit),
        samples: [flat(0), flat(1)],
        analysis,
        note: knob.verify.as_ref().and_then(|v| v.note.clone()),
        expectations,
        restored,
        interrupted,
        losses,
        energy,
        command: placed,
        noise: legs.noise.report(),
        warnings,
        ledger: None,
    })
}

/// What stops the verdict from standing, whatever the intervals say: an
/// idle-state knob whose CPU never idled in an as-found leg, or rpc legs that
/// lost far apart; with the losses, summed.
fn overrule(
    session: &Session,
    knob: &Knob,
    legs: &Legs,
    sleeper: u32,
    warnings: &mut Vec<String>,
) -> (Option<Decision>, Option<Losses>) {
    let idle_entries: u64 = legs.idle[0]
        .iter()
        .filter(|c| c.cpu == sleeper)
        .map(|c| c.entries)
        .sum();
    let not_exercised = idle_entries == 0 && !legs.idle[0].is_empty();
    if not_exercised {
        warnings.push(format!(
            "CPU {sleeper} entered no idle state in any as-found leg: something else kept it busy, so this run cannot show what an idle-state knob does"
        ));
    }
    let losses = legs.losses.clone().map(|mut l| {
        l.unequal = l.is_unequal();
        l
    });
    if let Some(l) = losses.as_ref().filter(|l| l.unequal) {
        warnings.push(format!(
            "the rpc probe lost {} of {} requests as found and {} of {} applied: a lost reply is a latency left out of its leg, so the legs are not compared fairly and the verdict is inconclusive",
            l.lost[0], l.sent[0], l.lost[1], l.sent[1]
        ));
    }
    let d = if not_exercised && is_idle_knob(session, knob) {
        Some(Decision::NotExercised)
    } else if losses.as_ref().is_some_and(|l| l.unequal) {
        Some(Decision::UnequalLosses)
    } else {
        None
    };
    (d, losses)
}

/// The probe with its CPUs placed from the knob's target (see `placement`).
pub(crate) fn place_probe(
    session: &Session,
    knob: &Knob,
    opts: &Options,
) -> Result<(LatencyProbe, placement::Placement)> {
    let survey = knob
        .spec
        .survey(&session.ctx)
        .map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.message))?;
    let cpus: Vec<u32> = survey
        .targets
        .iter()
        .filter(|t| t.blocker.is_none())
        .filter_map(|t| t.cpus.as_ref())
        .flat_map(|c| c.as_slice().iter().copied())
        .collect();
    let target: Option<crate::cpulist::CpuList> =
        (!cpus.is_empty()).then(|| cpus.into_iter().collect());
    let allowed = probe::Cpus::read(session.root())?.allowed;
    let mut p = opts.probe.clone();
    let asked = match &p {
        LatencyProbe::Wakeup(o) => placement::Asked {
            sleeper: o.sleeper_cpu,
            waker: o.waker_cpu,
        },
        LatencyProbe::Rpc(o) => placement::Asked {
            sleeper: o.server_cpu,
            waker: o.client_cpu,
        },
        LatencyProbe::Timer(o) => placement::Asked {
            sleeper: o.cpu,
            waker: None,
        },
        // Its CPUs are chosen below (`noise::verify_cpus`), not as a sleeper.
        LatencyProbe::Noise(_) => placement::Asked::default(),
    };
    let mut placed =
        placement::place(session.root(), &allowed, target.as_ref(), asked, opts.force)?;
    match &mut p {
        LatencyProbe::Wakeup(o) => {
            o.sleeper_cpu = Some(placed.sleeper);
            o.waker_cpu = Some(placed.waker);
        }
        LatencyProbe::Rpc(o) => {
            o.server_cpu = Some(placed.sleeper);
            o.client_cpu = Some(placed.waker);
        }
        LatencyProbe::Timer(o) => o.cpu = Some(placed.sleeper),
        LatencyProbe::Noise(o) => {
            let m = placement::noise_cpus(
                session.root(),
                &o.cpus,
                knob.spec.cmdline_args().as_deref(),
                placed.sleeper,
                placed.target_cpus.as_ref(),
            );
            o.cpus = m.cpus.clone();
            placed.measured = Some(m);
        }
    }
    Ok((p, placed))
}

/// The rule for the asked rounds; fewer than `MIN_ROUNDS` is refused.
fn rule_for(opts: &Options) -> Result<Rule> {
    if opts.rounds < paired::MIN_ROUNDS {
        bail!(
            "--rounds {}: at least {} rounds are needed: the verdict tests the per-round ratios, and with fewer the interval is too wide to show any effect worth having",
            opts.rounds,
            paired::MIN_ROUNDS
        );
    }
    let mut rule = Rule::for_rounds(opts.rounds);
    if opts.rounds > rule::MAX_ROUNDS {
        bail!(
            "--rounds {}: at most {} rounds (see --max-rounds)",
            opts.rounds,
            rule::MAX_ROUNDS
        );
    }
    if let Some(max) = opts.max_rounds {
        if max > rule::MAX_ROUNDS {
            bail!(
                "--max-rounds {max}: at most {} rounds: each look spends part of the run's error rate, and a run that has not decided in {} rounds is measuring noise (raise --settle or the probe's --samples instead)",
                rule::MAX_ROUNDS,
                rule::MAX_ROUNDS
            );
        }
        if max < opts.rounds {
            bail!(
                "--max-rounds {max} is below --rounds {}: the cap must allow the first batch",
                opts.rounds
            );
        }
        rule.max_rounds = max;
    }
    Ok(rule)
}

/// The metric the run stops on: the first expectation's, else p50.
fn primary_metric(knob: &Knob) -> Metric {
    knob.verify
        .as_ref()
        .and_then(|v| v.expect.0.first())
        .map(|e| e.metric)
        .unwrap_or_default()
}

/// Refuses a knob with unreverted changes or already in effect: either
/// would leave no `as found` leg to compare.
fn check_verifiable(session: &Session, knob: &Knob) -> Result<()> {
    let journaled = session.journal().entries()?;
    apply::others_on_files(&journaled, knob, &session.ctx).map_err(|e| anyhow::anyhow!(e))?;
    if journaled.iter().any(|e| e.knob == knob.id) {
        bail!(
            "{} has unreverted changes in the journal {}: run `hostknob revert {}` first, so that `as found` is the host's own state",
            knob.id,
            session.journal().path().display(),
            knob.id
        );
    }
    let facts = crate::inventory::facts::Facts::new(session.root());
    if let Some(why) = knob.conditions(&facts)?.detail() {
        bail!(
            "{} is not-applicable on {}: {why}",
            knob.id,
            session.ctx.name
        );
    }
    if let Some(us) = held_request(knob) {
        // Nothing is written: the applied leg holds the request (see `round`).
        if let Some(now) = probe::pmqos::read_aggregate(session.root())
            && now <= i64::from(us)
        {
            bail!(
                "{} is already in effect on {}: {} reads {now} µs (another process holds a request; `hostknob audit` names it): there is no `as found` leg to compare",
                knob.id,
                session.ctx.name,
                crate::inventory::PM_QOS_DEVICE
            );
        }
        return Ok(());
    }
    let planned = apply::plan::plan(&session.ctx, &[knob]).map_err(|e| anyhow::anyhow!(e))?;
    apply::validate::values(&planned).map_err(|e| anyhow::anyhow!(e))?;
    if planned.steps.is_empty() {
        bail!(
            "{} is already in effect on {} (nothing to write): there is no `as found` leg to compare; verify it where it is not applied, or revert it first",
            knob.id,
            session.ctx.name
        );
    }
    Ok(())
}

/// The request a pm-qos knob holds (µs): verify holds it during applied legs.
pub(crate) fn held_request(knob: &Knob) -> Option<u32> {
    (knob.kind == crate::knob::KindName::PmQos)
        .then(|| knob.spec.desired().parse().ok())
        .flatten()
}

/// Is the knob about idle states (what a CPU that never idles cannot show)?
fn is_idle_knob(session: &Session, knob: &Knob) -> bool {
    use crate::knob::KindName;
    match knob.kind {
        // The MSR idle kinds act below cpuidle: a CPU that never idles shows none.
        KindName::CpuidleState
        | KindName::PmQos
        | KindName::PmQosResumeLatency
        | KindName::C1e
        | KindName::PackageCstateLimit
        | KindName::C1Demotion
        | KindName::C1Undemotion => true,
        _ => knob.spec.survey(&session.ctx).is_ok_and(|s| {
            s.targets.iter().any(|t| {
                ["cpuidle", "pm_qos_resume_latency", "haltpoll"]
                    .iter()
                    .any(|w| t.path.contains(w))
            })
        }),
    }
}

/// verify's exit code: 1 when the host is not as found, 128 + the signal when
/// interrupted, 2 when the run contradicts an expectation or the knob is not
/// honoured, 3 when the verdict or an expectation is inconclusive, else 0.
pub fn exit_code(r: &Report) -> i32 {
    use rule::Outcome;
    if !r.restored {
        1
    } else if r.interrupted.is_some() {
        128 + probe::interrupt::signal().unwrap_or(libc::SIGINT)
    } else if r
        .expectations
        .iter()
        .any(|e| e.check.outcome == Outcome::NotMet)
        || r.honoured.status == "not-honoured"
    {
        2
    } else if r.verdict == Verdict::Inconclusive
        || r.expectations
            .iter()
            .any(|e| e.check.outcome == Outcome::Inconclusive)
    {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_that_differ_in_numbers_are_folded_with_a_count() {
        let w = (3..14)
            .map(|n| format!("in {n} of 60 gaps CPU 1 counted no cpuidle entry"))
            .chain(["placement: no CPU outside the target".to_string()])
            .collect();
        let f = fold_warnings(w);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(
            f[0],
            "in 3 of 60 gaps CPU 1 counted no cpuidle entry (and 10 more like it: 11 in all)"
        );
    }

    #[test]
    fn losses_far_apart_are_unequal_and_small_or_close_ones_are_not() {
        let l = |lost: [u64; 2]| Losses {
            sent: [2000, 2000],
            lost,
            unequal: false,
        };
        assert!(l([2, 40]).is_unequal());
        assert!(l([40, 2]).is_unequal());
        assert!(!l([0, 9]).is_unequal(), "fewer than 10: chance");
        assert!(!l([30, 40]).is_unequal(), "close");
        let many = Losses {
            sent: [10_000, 10_000],
            lost: [10, 40],
            unequal: false,
        };
        assert!(!many.is_unequal(), "4x, but under 0.5 points apart");
    }
}
