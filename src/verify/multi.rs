//! Rounds of more than two legs (sweeps and bundles): leg 0 is the host as
//! found, every other leg applies a set of knobs. Each round runs every leg
//! once in a seeded shuffled order, and the next round runs that order
//! reversed (mirrored blocks, as ABBA for two legs), so a leg's position
//! cancels over a block. A guard reverts whatever is applied on every early
//! end, as the two-leg run's does; the journal covers a SIGKILL.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use super::legs::settle;
use super::paired::{self, Analysis, Decision, Metric, Rule};
use super::{Options, held_request, honoured, placement};
use crate::apply::{self, ApplyOptions, Session};
use crate::manifest::Knob;
use crate::probe::{self, latency};

/// One leg: a label and the knobs it applies (none: as found).
pub(super) struct Variant<'k> {
    pub(super) label: String,
    pub(super) knobs: Vec<&'k Knob>,
}

/// Leg orders from a seed (ChaCha8 keyed as `order::LegOrder` is): a
/// Fisher-Yates shuffle for the first round of a block, its mirror for the second.
pub struct Shuffle {
    rng: ChaCha8Rng,
    last: Option<Vec<usize>>,
}

impl Shuffle {
    pub fn new(seed: u64) -> Shuffle {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        // A different stream from the two-leg order's for the same seed.
        key[8] = 1;
        Shuffle {
            rng: ChaCha8Rng::from_seed(key),
            last: None,
        }
    }

    /// The next round's order of legs `0..n`.
    pub fn next(&mut self, n: usize) -> Vec<usize> {
        if let Some(mut prev) = self.last.take() {
            prev.reverse();
            return prev;
        }
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            // Rejection keeps every order equally likely.
            let bound = u32::MAX - u32::MAX % (i as u32 + 1);
            let j = loop {
                let x = self.rng.next_u32();
                if x < bound {
                    break (x % (i as u32 + 1)) as usize;
                }
            };
            v.swap(i, j);
        }
        self.last = Some(v.clone());
        v
    }
}

/// What is applied now, by knob id and value; reverts it all on an early end.
pub(crate) struct Switch<'a, 's> {
    session: &'a Session<'s>,
    applied: Vec<(String, String)>,
}

const LEG: ApplyOptions = super::legs::Guard::LEG;

impl<'a, 's> Switch<'a, 's> {
    pub(crate) fn new(session: &'a Session<'s>) -> Self {
        Switch {
            session,
            applied: Vec::new(),
        }
    }

    /// Reverts what the leg does not want, then applies what it wants that is not applied.
    pub(crate) fn to(&mut self, want: &[&Knob]) -> Result<()> {
        let key = |k: &Knob| (k.id.clone(), k.spec.desired());
        let written: Vec<&Knob> = want
            .iter()
            .copied()
            .filter(|k| held_request(k).is_none())
            .collect();
        let keys: Vec<(String, String)> = written.iter().map(|k| key(k)).collect();
        let drop: Vec<String> = self
            .applied
            .iter()
            .filter(|a| !keys.contains(a))
            .map(|a| a.0.clone())
            .collect();
        if !drop.is_empty() {
            self.revert(&drop)?;
        }
        let add: Vec<&Knob> = written
            .into_iter()
            .filter(|k| !self.applied.contains(&key(k)))
            .collect();
        if !add.is_empty() {
            // Marked first: a failure part-way is rolled back by apply, and a
            // revert of nothing is harmless.
            self.applied.extend(add.iter().map(|k| key(k)));
            apply::apply(self.session, &add, &LEG).map_err(|e| anyhow!("{e}"))?;
        }
        Ok(())
    }

    fn revert(&mut self, ids: &[String]) -> Result<()> {
        // A leg whose value the host already had wrote nothing: nothing to revert.
        let journaled = self.session.journal().entries()?;
        let written: Vec<String> = ids
            .iter()
            .filter(|id| journaled.iter().any(|e| &e.knob == *id))
            .cloned()
            .collect();
        if written.is_empty() {
            self.applied.retain(|a| !ids.contains(&a.0));
            return Ok(());
        }
        let o =
            apply::revert_with(self.session, None, &written, &LEG).map_err(|e| anyhow!("{e}"))?;
        if let Some(l) = o.left_alone.first() {
            bail!(
                "{} was changed by someone else during the run ({} reads {:?}): left alone; `hostknob revert {} --force` restores it",
                l.knob,
                l.path,
                l.now.as_deref().unwrap_or("no file"),
                l.knob
            );
        }
        self.applied.retain(|a| !ids.contains(&a.0));
        Ok(())
    }

    pub(crate) fn restore(&mut self) -> Result<()> {
        let ids: Vec<String> = self.applied.iter().map(|a| a.0.clone()).collect();
        self.revert(&ids)
    }
}

impl Drop for Switch<'_, '_> {
    fn drop(&mut self) {
        if self.applied.is_empty() {
            return;
        }
        let ids: Vec<String> = self.applied.iter().map(|a| a.0.clone()).collect();
        match self.restore() {
            Ok(()) => eprintln!(
                "hostknob: verify stopped early; {} reverted and read back",
                ids.join(", ")
            ),
            Err(e) => eprintln!(
                "{}",
                crate::advice::runnable(format!(
                    "hostknob: verify stopped early and reverting {} failed: {e:#}; run `hostknob revert {}`",
                    ids.join(", "),
                    ids.join(" ")
                ))
            ),
        }
    }
}

/// Every round's samples, per leg (index 0: as found).
#[derive(Default)]
pub(super) struct Rounds {
    pub(super) samples: Vec<Vec<Vec<f64>>>,
    /// Each round's leg order, by index into the variants.
    pub(super) order: Vec<Vec<usize>>,
    pub(super) settings: serde_json::Value,
    pub(super) warnings: Vec<String>,
    /// Idle-state counters per leg, summed over the rounds.
    pub(super) idle: Vec<Vec<honoured::StateCount>>,
    pub(super) interrupted: bool,
}

impl Rounds {
    /// Per round: the as-found leg's and leg `v`'s samples.
    pub(super) fn against(&self, base: usize, v: usize) -> Vec<paired::Round> {
        self.samples
            .iter()
            .map(|r| (r[base].clone(), r[v].clone()))
            .collect()
    }
}

/// What a run of several legs leaves: the rounds, where they ran, and
/// whether the host reads as found.
pub(super) struct MultiRun {
    pub(super) rounds: Rounds,
    pub(super) placement: placement::Placement,
    pub(super) restored: bool,
    pub(super) interrupted: Option<String>,
    /// An idle knob whose CPU entered no idle state as found: no verdict stands.
    pub(super) not_exercised: bool,
    pub(super) warnings: Vec<String>,
}

impl MultiRun {
    /// Each round's legs in the order they ran, by label.
    pub(super) fn order_labels(&self, legs: &[Variant]) -> Vec<Vec<String>> {
        self.rounds
            .order
            .iter()
            .map(|o| o.iter().map(|&i| legs[i].label.clone()).collect())
            .collect()
    }
}

/// Refuses a knob with unreverted changes or another knob's files in the
/// journal, and a value the host cannot take. A value already in effect is
/// allowed: its leg writes nothing (an as-found control).
pub(crate) fn check_variant(session: &Session, knob: &Knob) -> Result<()> {
    let journaled = session.journal().entries()?;
    apply::others_on_files(&journaled, knob, &session.ctx).map_err(|e| anyhow!(e))?;
    if journaled.iter().any(|e| e.knob == knob.id) {
        bail!(
            "{} has unreverted changes in the journal {}: run `hostknob revert {}` first, so that `as found` is the host's own state",
            knob.id,
            session.journal().path().display(),
            knob.id
        );
    }
    if held_request(knob).is_none() {
        let planned = apply::plan::plan(&session.ctx, &[knob]).map_err(|e| anyhow!(e))?;
        apply::validate::values(&planned).map_err(|e| anyhow!(e))?;
    }
    Ok(())
}

/// Runs the legs under the state lock until `decided` says so or the rule's
/// cap; the host restored on every path.
pub(super) fn run(
    session: &Session,
    variants: &[Variant],
    place_on: &Knob,
    opts: &Options,
    rule: Rule,
    decided: &dyn Fn(&Rounds) -> bool,
    progress: &mut dyn FnMut(&str),
) -> Result<MultiRun> {
    probe::require_live(session.root(), "verify")?;
    let lock = session.lock(opts.wait).map_err(|e| anyhow!("{e}"))?;
    let out = run_locked(session, variants, place_on, opts, rule, decided, progress);
    if matches!(session.journal().remove_if_empty(), Ok(true)) {
        let _ = lock.remove(session.root(), &session.state_dir);
    }
    out
}

/// The distinct knobs of the legs, first of each id (their files are the same).
fn distinct<'k>(variants: &[Variant<'k>]) -> Vec<&'k Knob> {
    let mut out: Vec<&Knob> = Vec::new();
    for k in variants.iter().flat_map(|v| v.knobs.iter().copied()) {
        if !out.iter().any(|o| o.id == k.id) {
            out.push(k);
        }
    }
    out
}

/// Each knob's files and what they held (`None`: absent).
pub(crate) type Snapshot = Vec<(String, Option<String>)>;

pub(crate) fn snapshot_all(session: &Session, knobs: &[&Knob]) -> Result<Vec<Snapshot>> {
    knobs.iter().map(|k| super::snapshot(session, k)).collect()
}

fn run_locked(
    session: &Session,
    variants: &[Variant],
    place_on: &Knob,
    opts: &Options,
    rule: Rule,
    decided: &dyn Fn(&Rounds) -> bool,
    progress: &mut dyn FnMut(&str),
) -> Result<MultiRun> {
    for k in variants.iter().flat_map(|v| v.knobs.iter()) {
        check_variant(session, k).with_context(|| format!("leg {}", k.spec.desired()))?;
    }
    if opts.command.is_some() {
        anyhow::bail!(
            "{}: its verify.probe is a command; sweeps and bundles run the built-in \
             probes only (give --probe wakeup, rpc or timer)",
            place_on.id
        );
    }
    let (probe, placement) = super::place_probe(session, place_on, opts)?;
    let opts = &Options {
        probe,
        probe_name: opts.probe_name.clone(),
        command: None,
        ..*opts
    };
    let knobs = distinct(variants);
    let before = snapshot_all(session, &knobs)?;
    super::catch_signals()?;
    let watched = honoured::watched(placement.sleeper, placement.target_cpus.as_ref());
    let mut switch = Switch {
        session,
        applied: Vec::new(),
    };
    let mut rounds = Rounds {
        idle: vec![Vec::new(); variants.len()],
        ..Rounds::default()
    };
    let mut shuffle = Shuffle::new(opts.seed);
    'looks: for at in rule.looks() {
        while rounds.samples.len() < at {
            let order = shuffle.next(variants.len());
            rounds.order.push(order.clone());
            let r = rounds.samples.len();
            let mut got = vec![Vec::new(); variants.len()];
            for &leg in &order {
                let v = &variants[leg];
                let samples = one_leg(session, &mut switch, (leg, v), opts, &watched, &mut rounds)
                    .with_context(|| format!("round {}: the {} leg", r + 1, v.label))?;
                let Some(samples) = samples else {
                    rounds.interrupted = true;
                    rounds.order.pop();
                    break 'looks;
                };
                let p50 = paired::RoundFigures::of(&samples).map_or(0.0, |s| s.p50);
                progress(&format!(
                    "round {}/{at} (cap {}): {:<14} p50 {:>9.1} µs ({} samples)",
                    r + 1,
                    rule.max_rounds,
                    v.label,
                    p50 / 1e3,
                    samples.len()
                ));
                got[leg] = samples;
            }
            rounds.samples.push(got);
        }
        if decided(&rounds) {
            break;
        }
        progress(&format!("after {at} rounds: undecided; more rounds"));
    }
    switch
        .restore()
        .context("restoring the knobs after the last round")?;
    let restored = snapshot_all(session, &knobs)? == before;
    let mut warnings = super::fold_warnings(std::mem::take(&mut rounds.warnings));
    if !restored {
        warnings.push(format!(
            "{}'s files do not read as they did before the run: check `hostknob audit`",
            knobs
                .iter()
                .map(|k| k.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let entries: u64 = rounds.idle[0]
        .iter()
        .filter(|c| c.cpu == placement.sleeper)
        .map(|c| c.entries)
        .sum();
    let idle_knob = knobs.iter().any(|k| super::is_idle_knob(session, k));
    let not_exercised = idle_knob && entries == 0 && !rounds.idle[0].is_empty();
    if not_exercised {
        warnings.push(format!(
            "CPU {} entered no idle state in any as-found leg: something else kept it busy, so this run cannot show what an idle-state knob does",
            placement.sleeper
        ));
    }
    let interrupted = rounds.interrupted.then(|| {
        probe::interrupt::signal()
            .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
            .map_or("a signal", |s| s.as_str())
            .to_string()
    });
    Ok(MultiRun {
        rounds,
        placement,
        restored,
        interrupted,
        not_exercised,
        warnings,
    })
}

/// Sets one leg's state, settles and probes; `None` when a signal ended it.
fn one_leg(
    session: &Session,
    switch: &mut Switch,
    (leg, v): (usize, &Variant),
    opts: &Options,
    watched: &[u32],
    rounds: &mut Rounds,
) -> Result<Option<Vec<f64>>> {
    if probe::cancelled() {
        return Ok(None);
    }
    switch.to(&v.knobs)?;
    let root = session.root();
    // pm-qos requests live while their file is open: held for this leg only.
    let mut held = Vec::new();
    for us in v.knobs.iter().filter_map(|k| held_request(k)) {
        held.push(probe::pmqos::hold(root, us).context("holding the leg's pm-qos request")?);
    }
    if !settle(opts.settle) {
        return Ok(None);
    }
    let counters = honoured::read(root, watched);
    let run = match latency::run(root, &opts.probe) {
        Ok(r) => r,
        Err(_) if probe::cancelled() => return Ok(None),
        Err(e) => return Err(e.context(format!("the {} probe", opts.probe_name))),
    };
    let d = honoured::delta(&counters, &honoured::read(root, watched));
    honoured::accumulate(&mut rounds.idle[leg], &d);
    for w in run.warnings {
        if !rounds.warnings.contains(&w) {
            rounds.warnings.push(w);
        }
    }
    if rounds.settings.is_null() {
        rounds.settings = run.settings;
    }
    drop(held);
    Ok(Some(run.samples))
}

/// One comparison of a leg against another, with the run's overrules applied.
pub(super) fn compare(
    run: &MultiRun,
    base: usize,
    leg: usize,
    metric: Metric,
    rule: Rule,
) -> Analysis {
    let mut a = paired::analyze(&run.rounds.against(base, leg), metric, rule);
    let overrule = if run.interrupted.is_some() {
        Some(Decision::Interrupted)
    } else if run.not_exercised {
        Some(Decision::NotExercised)
    } else {
        None
    };
    if let Some(d) = overrule {
        a.overrule(d, run.interrupted.is_some());
    }
    a
}

/// The rule for `comparisons` tests in one run: the run's alpha split
/// equally among them, so the chance that any of them errs stays at most
/// `rule::ALPHA` (the two-leg verdict's own guarantee).
pub(super) fn split_rule(rule: Rule, comparisons: usize) -> Rule {
    Rule {
        alpha: rule.alpha / comparisons.max(1) as f64,
        ..rule
    }
}

/// Legs, rounds and the estimated time, said before the run.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Plan {
    /// Legs per round, the as-found leg included.
    pub legs: usize,
    pub first_rounds: usize,
    pub max_rounds: usize,
    /// Estimated seconds for the first rounds and for the round cap (null:
    /// the probe's duration is not known before it runs).
    pub first_s: Option<f64>,
    pub max_s: Option<f64>,
}

/// One leg's probe time from its options, where they tell it.
fn probe_time(p: &latency::LatencyProbe) -> Option<Duration> {
    #[allow(unreachable_patterns)]
    match p {
        latency::LatencyProbe::Wakeup(o) => Some(Duration::from_micros(
            o.samples as u64 * (o.gaps.min_us + o.gaps.max_us) / 2,
        )),
        latency::LatencyProbe::Rpc(o) => Some(Duration::from_micros(
            o.samples as u64 * (o.gaps.min_us + o.gaps.max_us) / 2,
        )),
        latency::LatencyProbe::Timer(o) => Some(o.interval * o.loops as u32),
        latency::LatencyProbe::Noise(o) => Some(o.duration),
        _ => None,
    }
}

pub(super) fn plan(legs: usize, rule: Rule, opts: &Options) -> Plan {
    let per = probe_time(&opts.probe).map(|p| (p + opts.settle).as_secs_f64() * legs as f64);
    Plan {
        legs,
        first_rounds: rule.rounds,
        max_rounds: rule.max_rounds,
        first_s: per.map(|s| s * rule.rounds as f64),
        max_s: per.map(|s| s * rule.max_rounds as f64),
    }
}

impl Plan {
    pub fn words(&self) -> String {
        let t = |s: Option<f64>| match s {
            Some(s) if s >= 120.0 => format!("about {:.0} min", s / 60.0),
            Some(s) => format!("about {s:.0} s"),
            None => "time unknown".into(),
        };
        format!(
            "{} legs per round; {} rounds first ({}), up to {} rounds ({})",
            self.legs,
            self.first_rounds,
            t(self.first_s),
            self.max_rounds,
            t(self.max_s)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_leg_once_and_blocks_mirror() {
        let mut s = Shuffle::new(7);
        let orders: Vec<Vec<usize>> = (0..40).map(|_| s.next(6)).collect();
        for o in &orders {
            let mut v = o.clone();
            v.sort_unstable();
            assert_eq!(v, (0..6).collect::<Vec<_>>());
        }
        for b in orders.chunks(2) {
            let mut r = b[0].clone();
            r.reverse();
            assert_eq!(r, b[1]);
        }
        // Shuffled: not the same order every block, and each leg first somewhere.
        assert!(orders.iter().any(|o| o != &orders[0]));
        assert!((0..6).all(|l| orders.iter().any(|o| o[0] == l)));
        // The seed repeats it.
        let mut again = Shuffle::new(7);
        assert_eq!((0..40).map(|_| again.next(6)).collect::<Vec<_>>(), orders);
    }

    #[test]
    fn split_rule_keeps_the_family_error_rate() {
        let r = split_rule(Rule::for_rounds(6), 4);
        assert!((r.alpha - super::super::rule::ALPHA / 4.0).abs() < 1e-15);
        assert_eq!(r.max_rounds, 24);
    }
}
