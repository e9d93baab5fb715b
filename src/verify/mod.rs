//! `hostknob verify KNOB`: an A/B of one knob with its declared probe, in
//! rounds whose leg order is shuffled (seeded), with the host left as found
//! on every path.
//!
//! The knob is switched with apply's own machinery (journal first, write,
//! read back), under the state lock held for the whole run, so a SIGKILL at
//! any point leaves a journal that `hostknob revert` restores from. Success,
//! a probe error, a panic (a guard) and SIGINT/SIGTERM/SIGHUP (a flag the
//! probes and the loop check) all end with the knob reverted and read back.

pub mod verdict;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::apply::{self, ApplyError, ApplyOptions, Session};
use crate::manifest::{Knob, ledger};
use crate::probe;
use crate::probe::latency::{self, LatencyProbe};
use verdict::{Analysis, Expectation, Rule, Verdict};

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
    pub rounds: usize,
    pub settle: Duration,
    pub seed: u64,
    pub probe_name: String,
    pub probe: LatencyProbe,
    pub wait: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExpectationCheck {
    pub text: String,
    /// `None` when the text is prose hostknob cannot check.
    pub met: Option<bool>,
    pub measured: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub host: String,
    pub knob: String,
    pub probe: String,
    /// The probe's settings (from the first run).
    pub settings: serde_json::Value,
    pub rounds: usize,
    pub seed: u64,
    pub settle_ms: u64,
    /// Each round's leg order.
    pub order: Vec<[Leg; 2]>,
    pub analysis: Analysis,
    /// The verdict, also inside `analysis`: improved, regressed or no-detectable-effect.
    pub verdict: Verdict,
    pub expectation: Option<ExpectationCheck>,
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
        apply::revert_with(self.session, None, std::slice::from_ref(&self.id), &opts)
            .map_err(|e: ApplyError| anyhow::anyhow!("{e}"))?;
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

extern "C" fn on_signal(_: libc::c_int) {
    probe::cancel();
}

/// SIGINT, SIGTERM and SIGHUP only set the cancel flag: the loop restores.
fn catch_signals() -> Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        unsafe { sigaction(sig, &action) }
            .with_context(|| format!("installing a {sig} handler"))?;
    }
    Ok(())
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
    if opts.rounds < 2 {
        bail!(
            "--rounds {}: at least 2 rounds are needed to see run-to-run noise",
            opts.rounds
        );
    }
    let _lock = session
        .lock(opts.wait)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    check_verifiable(session, knob)?;
    let before = snapshot(session, knob)?;
    catch_signals()?;
    probe::warn_if_not_live(session.root());
    progress(&format!(
        "verifying {} with the {} probe: {} rounds, seed {}, settle {} ms",
        knob.id,
        opts.probe_name,
        opts.rounds,
        opts.seed,
        opts.settle.as_millis()
    ));

    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut guard = Guard {
        session,
        id: knob.id.clone(),
        applied: false,
    };
    let mut samples: [Vec<Vec<u64>>; 2] = [Vec::new(), Vec::new()];
    let mut order = Vec::new();
    let mut settings = serde_json::Value::Null;
    let mut warnings = Vec::new();
    let total = opts.rounds * 2;
    for round in 0..opts.rounds {
        let mut legs = [Leg::Baseline, Leg::Applied];
        legs.shuffle(&mut rng);
        order.push(legs);
        for (k, leg) in legs.into_iter().enumerate() {
            let done = round * 2 + k;
            if probe::cancelled() {
                return Err(interrupted(done, total));
            }
            guard.set(leg, knob).with_context(|| {
                format!("round {}: setting the {} leg", round + 1, leg.as_str())
            })?;
            if !settle(opts.settle) {
                return Err(interrupted(done, total));
            }
            let run = match latency::run(session.root(), &opts.probe) {
                Ok(r) => r,
                Err(_) if probe::cancelled() => return Err(interrupted(done, total)),
                Err(e) => {
                    return Err(e.context(format!(
                        "round {}: the {} probe ({} leg)",
                        round + 1,
                        opts.probe_name,
                        leg.as_str()
                    )));
                }
            };
            for w in run.warnings {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            if settings.is_null() {
                settings = run.settings;
            }
            let p50 = crate::stats::Summary::from_ns(&run.samples_ns)
                .map(|s| s.p50_ns)
                .unwrap_or(0);
            progress(&format!(
                "round {}/{}: {:<8} p50 {:>9.1} µs ({} samples)",
                round + 1,
                opts.rounds,
                leg.as_str(),
                p50 as f64 / 1e3,
                run.samples_ns.len()
            ));
            samples[(leg == Leg::Applied) as usize].push(run.samples_ns);
        }
    }
    if guard.applied {
        guard
            .restore()
            .context("restoring the knob after the last round")?;
    }
    let restored = snapshot(session, knob)? == before;
    if !restored {
        warnings.push(format!(
            "{}'s files do not read as they did before the run: check `hostknob audit {}`",
            knob.id, knob.id
        ));
    }

    let analysis = verdict::analyze(&samples[0], &samples[1], Rule::default());
    let expectation = check_expectation(knob, &analysis);
    let flat = |legs: &Vec<Vec<u64>>| legs.iter().flatten().copied().collect::<Vec<u64>>();
    Ok(Report {
        host: session.ctx.name.clone(),
        knob: knob.id.clone(),
        probe: opts.probe_name.clone(),
        settings,
        rounds: opts.rounds,
        seed: opts.seed,
        settle_ms: opts.settle.as_millis() as u64,
        order,
        verdict: analysis.verdict,
        samples: [flat(&samples[0]), flat(&samples[1])],
        analysis,
        expectation,
        restored,
        warnings,
        ledger: None,
    })
}

/// Refuses a knob with unreverted changes or already in effect: either
/// would leave no `as found` leg to compare.
fn check_verifiable(session: &Session, knob: &Knob) -> Result<()> {
    if session
        .journal()
        .entries()?
        .iter()
        .any(|e| e.knob == knob.id)
    {
        bail!(
            "{} has unreverted changes in the journal {}: run `hostknob revert {}` first, so that `as found` is the host's own state",
            knob.id,
            session.journal().path().display(),
            knob.id
        );
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

/// The manifest's `verify.expect`, checked against the analysis when
/// hostknob can read it.
fn check_expectation(knob: &Knob, analysis: &Analysis) -> Option<ExpectationCheck> {
    knob.verify
        .as_ref()
        .map(|v| match Expectation::parse(&v.expect) {
            Some(e) => {
                let (met, words) = e.check(analysis);
                ExpectationCheck {
                    text: v.expect.clone(),
                    met: Some(met),
                    measured: Some(words),
                }
            }
            None => ExpectationCheck {
                text: v.expect.clone(),
                met: None,
                measured: None,
            },
        })
}

/// The one-line summary the ledger and the host document show.
pub fn summary(r: &Report) -> String {
    let a = &r.analysis;
    let mut s = format!(
        "{} probe, {} rounds (seed {}): p50 {:.1} -> {:.1} µs, median per-round ratio {:.3}, CV {:.1}% / {:.1}%, p = {:.2e}: {}",
        r.probe,
        r.rounds,
        r.seed,
        a.baseline.p50_ns as f64 / 1e3,
        a.applied.p50_ns as f64 / 1e3,
        a.median_ratio,
        a.baseline.cv * 100.0,
        a.applied.cv * 100.0,
        a.p_value,
        r.verdict.as_str()
    );
    if let Some(e) = &r.expectation {
        match (e.met, &e.measured) {
            (Some(met), Some(m)) => {
                s += &format!(
                    "; expected \"{}\": {} ({m})",
                    e.text,
                    if met { "met" } else { "not met" }
                )
            }
            _ => s += &format!("; expected \"{}\" (not machine-checkable)", e.text),
        }
    }
    s
}

/// Appends the evidence to the host's ledger.
pub fn record(session: &Session, knob: &Knob, r: &mut Report) -> Result<()> {
    let mut entry = apply::ledger_entry(
        &session.ctx.name,
        knob,
        ledger::Action::Verified,
        Vec::new(),
        &apply::who(),
    );
    entry.note = Some(summary(r));
    entry.evidence = Some(serde_json::json!({
        "probe": r.probe,
        "settings": r.settings,
        "rounds": r.rounds,
        "seed": r.seed,
        "settle_ms": r.settle_ms,
        "baseline": r.analysis.baseline,
        "applied": r.analysis.applied,
        "ratios": r.analysis.ratios,
        "median_ratio": r.analysis.median_ratio,
        "p_value": r.analysis.p_value,
        "verdict": r.verdict,
        "expectation": r.expectation,
    }));
    session.record(&entry).map_err(|e| anyhow::anyhow!("{e}"))?;
    r.ledger = Some(
        ledger::path_for(&session.manifest_dir, &session.ctx.name)
            .display()
            .to_string(),
    );
    Ok(())
}
