//! `hostknob verify KNOB`: an A/B of one knob with its declared probe, in
//! rounds whose leg order is shuffled (seeded), with the host left as found
//! on every path.
//!
//! The knob is switched with apply's own machinery (journal first, write,
//! read back), under the state lock held for the whole run, so a SIGKILL at
//! any point leaves a journal that `hostknob revert` restores from. Success,
//! a probe error, a panic (a guard) and SIGINT/SIGTERM/SIGHUP (a flag the
//! probes and the loop check) all end with the knob reverted and read back.

pub mod expect;
pub mod honoured;
pub mod order;
pub mod paired;
pub mod placement;
mod record;

pub use record::{record, summary};

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::apply::{self, ApplyError, ApplyOptions, Session};
use crate::manifest::Knob;
use crate::probe;
use crate::probe::latency::{self, LatencyProbe};
use order::LegOrder;
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
}

/// What the kernel did against what the knob asked, over the applied legs.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Honoured {
    /// `honoured` or `not-honoured`.
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
    /// The manifest's `verify.note`.
    pub note: Option<String>,
    pub expectations: Vec<ExpectationCheck>,
    /// The knob's files read the same after the run as before it.
    pub restored: bool,
    pub warnings: Vec<String>,
    pub ledger: Option<String>,
    #[serde(skip)]
    pub samples: [Vec<u64>; 2],
}

/// Reverts the knob if it is applied when the run ends early (an error or a
/// panic); a clean end reverts explicitly and disarms it.
struct Guard<'a, 's> {
    session: &'a Session<'s>,
    id: String,
    applied: bool,
}

impl Guard<'_, '_> {
    /// A leg's switch: no ledger entry each, under the lock verify already holds.
    const LEG: ApplyOptions = ApplyOptions {
        dry_run: false,
        wait: false,
        record: false,
        lock_held: true,
    };

    fn set(&mut self, leg: Leg, knob: &Knob) -> Result<()> {
        let opts = Guard::LEG;
        match (leg, self.applied) {
            (Leg::Applied, false) => {
                // Marked first: a failure part-way is rolled back by apply, and
                // a revert of nothing is harmless.
                self.applied = true;
                apply::apply(self.session, &[knob], &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            (Leg::Baseline, true) => {
                self.restore()?;
            }
            _ => {}
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        let opts = Guard::LEG;
        let o = apply::revert_with(self.session, None, std::slice::from_ref(&self.id), &opts)
            .map_err(|e: ApplyError| anyhow::anyhow!("{e}"))?;
        if let Some(l) = o.left_alone.first() {
            bail!(
                "{} was changed by someone else during the run ({} reads {:?}): left alone; `hostknob revert {} --force` restores it",
                self.id,
                l.path,
                l.now.as_deref().unwrap_or("no file"),
                self.id
            );
        }
        self.applied = false;
        Ok(())
    }
}

impl Drop for Guard<'_, '_> {
    fn drop(&mut self) {
        if self.applied {
            match self.restore() {
                Ok(()) => eprintln!(
                    "hostknob: verify stopped early; {} was reverted and read back",
                    self.id
                ),
                Err(e) => eprintln!(
                    "hostknob: verify stopped early and reverting {} failed: {e:#}; run `hostknob revert {}`",
                    self.id, self.id
                ),
            }
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP only set the cancel flag (and wake a probe's
/// sleeping threads): the loop restores.
fn catch_signals() -> Result<()> {
    probe::interrupt::install()
}

fn interrupted(done: usize, total: usize) -> anyhow::Error {
    anyhow::anyhow!("interrupted after {done} of {total} legs: nothing recorded")
}

/// Sleeps `d` in short slices so a signal ends it promptly.
fn settle(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if probe::cancelled() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    !probe::cancelled()
}

/// The knob's files and values, to check that the host is as found.
fn snapshot(session: &Session, knob: &Knob) -> Result<Vec<(String, Option<String>)>> {
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
    let _lock = session
        .lock(opts.wait)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    check_verifiable(session, knob)?;
    let (probe, placement) = place_probe(session, knob, opts)?;
    let opts = &Options {
        probe,
        probe_name: opts.probe_name.clone(),
        ..*opts
    };
    let before = snapshot(session, knob)?;
    catch_signals()?;
    progress(&format!(
        "verifying {} with the {} probe on CPU {} (from CPU {}): {} rounds first, up to {}, seed {}, settle {} ms",
        knob.id,
        opts.probe_name,
        placement.sleeper,
        placement.waker,
        rule.rounds,
        rule.max_rounds,
        opts.seed,
        opts.settle.as_millis()
    ));
    let metric = primary_metric(knob);
    let mut legs = Legs::new(session, knob, opts);
    legs.watched = honoured::watched(placement.sleeper, placement.target_cpus.as_ref());
    let mut analysis = None;
    for at in rule.looks() {
        while legs.rounds.len() < at {
            legs.round(at, rule.max_rounds, progress)?;
        }
        let a = paired::analyze(&legs.rounds, metric, rule);
        let more = a.decision == Decision::MoreRounds;
        if more {
            progress(&format!(
                "after {at} rounds: {}; more rounds",
                a.verdict_words()
            ));
        }
        analysis = Some(a);
        if !more {
            break;
        }
    }
    let analysis = analysis.expect("looks() is never empty");
    if legs.guard.applied {
        legs.guard
            .restore()
            .context("restoring the knob after the last round")?;
    }
    let restored = snapshot(session, knob)? == before;
    let mut warnings = std::mem::take(&mut legs.warnings);
    if !restored {
        warnings.push(format!(
            "{}'s files do not read as they did before the run: check `hostknob audit {}`",
            knob.id, knob.id
        ));
    }
    let idle_entries: u64 = legs.idle[0]
        .iter()
        .filter(|c| c.cpu == placement.sleeper)
        .map(|c| c.entries)
        .sum();
    if idle_entries == 0 && !legs.idle[0].is_empty() {
        warnings.push(format!(
            "CPU {} entered no idle state in any as-found leg: something else kept it busy, so this run cannot show what an idle-state knob does",
            placement.sleeper
        ));
    }
    let expectations = check_expectations(knob, &legs.rounds, rule);
    let findings = std::mem::take(&mut legs.findings);
    let honoured = Honoured {
        status: if findings.is_empty() {
            "honoured"
        } else {
            "not-honoured"
        },
        cause: (!findings.is_empty())
            .then(|| honoured::likely_cause(session.root()))
            .flatten(),
        findings,
        cpus: legs.watched.clone(),
    };
    if honoured.status == "not-honoured" {
        warnings.push(format!(
            "{} is not honoured by the kernel: {}{}",
            knob.id,
            honoured.findings[0],
            honoured
                .cause
                .as_ref()
                .map(|c| format!("; likely cause: {c}"))
                .unwrap_or_default()
        ));
    }
    let flat = |k: usize| -> Vec<u64> {
        legs.rounds
            .iter()
            .flat_map(|r| if k == 0 { &r.0 } else { &r.1 })
            .copied()
            .collect()
    };
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
        verdict_words: analysis.verdict_words(),
        placement,
        honoured,
        idle: std::mem::take(&mut legs.idle),
        samples: [flat(0), flat(1)],
        analysis,
        note: knob.verify.as_ref().and_then(|v| v.note.clone()),
        expectations,
        restored,
        warnings,
        ledger: None,
    })
}

/// The probe with its CPUs placed from the knob's target (see `placement`).
fn place_probe(
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
    };
    let placed = placement::place(session.root(), &allowed, target.as_ref(), asked, opts.force)?;
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
    if let Some(max) = opts.max_rounds {
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

/// The rounds run so far and what switching the legs needs.
struct Legs<'a, 's> {
    guard: Guard<'a, 's>,
    knob: &'a Knob,
    opts: &'a Options,
    order_rng: LegOrder,
    /// Per round: the as-found and the applied leg's samples.
    rounds: Vec<(Vec<u64>, Vec<u64>)>,
    order: Vec<[Leg; 2]>,
    settings: serde_json::Value,
    warnings: Vec<String>,
    /// The CPUs whose idle counters each leg reads.
    watched: Vec<u32>,
    idle: [Vec<honoured::StateCount>; 2],
    findings: Vec<String>,
}

impl<'a, 's> Legs<'a, 's> {
    fn new(session: &'a Session<'s>, knob: &'a Knob, opts: &'a Options) -> Self {
        Legs {
            guard: Guard {
                session,
                id: knob.id.clone(),
                applied: false,
            },
            knob,
            opts,
            order_rng: LegOrder::new(opts.seed),
            rounds: Vec::new(),
            order: Vec::new(),
            settings: serde_json::Value::Null,
            warnings: Vec::new(),
            watched: Vec::new(),
            idle: [Vec::new(), Vec::new()],
            findings: Vec::new(),
        }
    }

    /// After an applied leg: the kernel's counters and the knob's files
    /// against what the knob asked.
    fn check_applied(&mut self, round: usize, delta: &[honoured::StateCount]) {
        let session = self.guard.session;
        let mut found = honoured::findings(session.root(), delta);
        if let Ok(survey) = self.knob.spec.survey(&session.ctx) {
            for t in survey
                .targets
                .iter()
                .filter(|t| t.blocker.is_none() && !t.in_effect)
            {
                found.push(format!(
                    "{} reads {} at the end of the applied leg, not {}: something changed it back mid-run",
                    t.path,
                    t.current.as_deref().unwrap_or("nothing"),
                    t.desired
                ));
            }
        }
        self.findings.extend(
            found
                .into_iter()
                .map(|f| format!("round {}: {f}", round + 1)),
        );
    }

    /// Runs one more round, both legs in the seeded order.
    fn round(&mut self, look: usize, cap: usize, progress: &mut dyn FnMut(&str)) -> Result<()> {
        let round = self.rounds.len();
        let legs = if self.order_rng.applied_first() {
            [Leg::Applied, Leg::Baseline]
        } else {
            [Leg::Baseline, Leg::Applied]
        };
        self.order.push(legs);
        let mut got: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        for (k, leg) in legs.into_iter().enumerate() {
            let done = round * 2 + k;
            let total = look * 2;
            if probe::cancelled() {
                return Err(interrupted(done, total));
            }
            let held = held_request(self.knob);
            if held.is_none() {
                self.guard.set(leg, self.knob).with_context(|| {
                    format!("round {}: setting the {} leg", round + 1, leg.as_str())
                })?;
            }
            let root = self.guard.session.root();
            // A pm-qos request lives while its file is open: held for the
            // applied leg (settle included), withdrawn when the leg ends.
            let _held = match (leg, held) {
                (Leg::Applied, Some(us)) => {
                    Some(probe::pmqos::hold(root, us).with_context(|| {
                        format!("round {}: holding the applied leg's request", round + 1)
                    })?)
                }
                _ => None,
            };
            if !settle(self.opts.settle) {
                return Err(interrupted(done, total));
            }
            let counters = honoured::read(root, &self.watched);
            let run = match latency::run(root, &self.opts.probe) {
                Ok(r) => r,
                Err(_) if probe::cancelled() => return Err(interrupted(done, total)),
                Err(e) => {
                    return Err(e.context(format!(
                        "round {}: the {} probe ({} leg)",
                        round + 1,
                        self.opts.probe_name,
                        leg.as_str()
                    )));
                }
            };
            for w in run.warnings {
                if !self.warnings.contains(&w) {
                    self.warnings.push(w);
                }
            }
            if self.settings.is_null() {
                self.settings = run.settings;
            }
            let p50 = crate::stats::Summary::from_ns(&run.samples_ns)
                .map(|s| s.p50_ns)
                .unwrap_or(0);
            progress(&format!(
                "round {}/{} (cap {cap}): {:<8} p50 {:>9.1} µs ({} samples)",
                round + 1,
                look,
                leg.as_str(),
                p50 as f64 / 1e3,
                run.samples_ns.len()
            ));
            let d = honoured::delta(&counters, &honoured::read(root, &self.watched));
            honoured::accumulate(&mut self.idle[(leg == Leg::Applied) as usize], &d);
            if leg == Leg::Applied {
                self.check_applied(round, &d);
            }
            got[(leg == Leg::Applied) as usize] = run.samples_ns;
        }
        let [b, a] = got;
        self.rounds.push((b, a));
        Ok(())
    }
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
fn held_request(knob: &Knob) -> Option<u32> {
    (knob.kind == crate::knob::KindName::PmQos)
        .then(|| knob.spec.desired().parse().ok())
        .flatten()
}

/// Each of the manifest's `verify.expect`, checked on an analysis of its own metric.
fn check_expectations(
    knob: &Knob,
    rounds: &[(Vec<u64>, Vec<u64>)],
    rule: Rule,
) -> Vec<ExpectationCheck> {
    let Some(v) = &knob.verify else {
        return Vec::new();
    };
    v.expect
        .0
        .iter()
        .map(|e| {
            let a = paired::analyze(rounds, e.metric, rule);
            ExpectationCheck {
                text: e.to_string(),
                check: expect::check(e, &a),
                verdict_words: a.verdict_words(),
            }
        })
        .collect()
}

/// verify's exit code: 2 when the run contradicts a declared expectation.
pub fn exit_code(r: &Report) -> i32 {
    if !r.restored {
        1
    } else if r.expectations.iter().any(|e| !e.check.met) || r.honoured.status != "honoured" {
        2
    } else {
        0
    }
}
