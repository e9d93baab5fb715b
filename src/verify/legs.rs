//! The rounds of a verify run: switching the knob per leg (with a guard that
//! reverts it on every early end) and running the probe in each leg.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{Leg, Losses, Options, held_request, honoured, order::LegOrder, residency, split};
use crate::apply::{self, ApplyError, ApplyOptions, Session};
use crate::manifest::Knob;
use crate::probe::{self, latency};

/// Reverts the knob if it is applied when the run ends early (an error or a
/// panic); a clean end reverts explicitly and disarms it.
pub(super) struct Guard<'a, 's> {
    pub(super) session: &'a Session<'s>,
    pub(super) id: String,
    pub(super) applied: bool,
}

impl Guard<'_, '_> {
    /// A leg's switch: no ledger entry each, under the lock verify already holds
    /// (sweeps and bundles switch their legs with it too).
    pub(super) const LEG: ApplyOptions = ApplyOptions {
        dry_run: false,
        wait: false,
        record: false,
        lock_held: true,
        // A leg goes back to as found; tuned's profile is audit's and apply's concern.
        force: true,
        force_knobs: Vec::new(),
    };

    pub(super) fn set(&mut self, leg: Leg, knob: &Knob) -> Result<()> {
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

    pub(super) fn restore(&mut self) -> Result<()> {
        let opts = Guard::LEG;
        let o = apply::revert_with(self.session, None, std::slice::from_ref(&self.id), &opts)
            .map_err(|e: ApplyError| anyhow::anyhow!("{e}"))?;
        if let Some(l) = o.left_alone.first() {
            anyhow::bail!(
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
                    "{}",
                    crate::advice::runnable(format!(
                        "hostknob: verify stopped early and reverting {} failed: {e:#}; run `hostknob revert {}`",
                        self.id, self.id
                    ))
                ),
            }
        }
    }
}

/// Sleeps `d` in short slices so a signal ends it promptly.
pub(crate) fn settle(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if probe::cancelled() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    !probe::cancelled()
}

/// The rounds run so far and what switching the legs needs.
pub(super) struct Legs<'a, 's> {
    pub(super) guard: Guard<'a, 's>,
    pub(super) knob: &'a Knob,
    pub(super) opts: &'a Options,
    pub(super) order_rng: LegOrder,
    /// Per round: the as-found and the applied leg's samples.
    pub(super) rounds: Vec<super::paired::Round>,
    pub(super) order: Vec<[Leg; 2]>,
    pub(super) settings: serde_json::Value,
    pub(super) warnings: Vec<String>,
    /// The CPUs whose idle counters each leg reads.
    pub(super) watched: Vec<u32>,
    pub(super) idle: [Vec<honoured::StateCount>; 2],
    pub(super) findings: Vec<String>,
    /// Hardware residency counters of the watched CPUs, per leg.
    pub(super) hw: residency::Watch<'a>,
    /// The wakeup probe's wake and run-delay parts, per leg.
    pub(super) split: split::Pool,
    /// A signal stopped the run; the rounds so far are complete.
    pub(super) interrupted: bool,
    /// The rpc probe's losses, when it reports them.
    pub(super) losses: Option<Losses>,
    /// The command probe's placement and values.
    pub(super) command: Option<super::command::Placed>,
    pub(super) energy: super::energy::Legs,
    pub(super) noise: super::noise::Pool,
    /// When the first round began: the time left is estimated from it.
    pub(super) started: Option<Instant>,
    /// Applied legs that ran to their end (their counters were checked).
    pub(super) applied_legs: usize,
}

impl<'a, 's> Legs<'a, 's> {
    pub(super) fn new(session: &'a Session<'s>, knob: &'a Knob, opts: &'a Options) -> Self {
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
            hw: residency::Watch::none(),
            split: split::Pool::default(),
            interrupted: false,
            losses: None,
            command: None,
            energy: super::energy::Legs::new(session.root()),
            noise: super::noise::Pool::default(),
            started: None,
            applied_legs: 0,
        }
    }

    /// After an applied leg: the kernel's counters and the knob's files
    /// against what the knob asked.
    fn check_applied(
        &mut self,
        round: usize,
        delta: &[honoured::StateCount],
        hw: &[crate::probe::residency::Count],
    ) {
        let session = self.guard.session;
        let held = held_request(self.knob).map(u64::from);
        let mut found = honoured::findings(session.root(), delta, held);
        found.extend(residency::findings(self.knob, hw, delta));
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

    /// One leg's probe run (the command's values kept per round), its
    /// package energy read around it.
    fn run_probe(&mut self, root: &crate::root::Root, leg: Leg) -> Result<latency::LatencyRun> {
        let k = (leg == Leg::Applied) as usize;
        let at = self.energy.start(root);
        let run = match (&self.opts.command, &mut self.command) {
            (Some(c), Some(p)) => {
                let (run, values) = super::command::run_leg(c, p)?;
                p.values[k].push(values);
                Ok(run)
            }
            _ => latency::run(root, &self.opts.probe),
        };
        if run.is_ok() {
            self.energy.end(root, k, at);
        }
        run
    }

    /// Runs one more round, both legs in the seeded order.
    pub(super) fn round(
        &mut self,
        look: usize,
        cap: usize,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let round = self.rounds.len();
        let started = *self.started.get_or_insert_with(Instant::now);
        self.hw.open_once(self.guard.session.root(), &self.watched);
        let legs = if self.order_rng.applied_first() {
            [Leg::Applied, Leg::Baseline]
        } else {
            [Leg::Baseline, Leg::Applied]
        };
        self.order.push(legs);
        let mut got: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for (k, leg) in legs.into_iter().enumerate() {
            if probe::cancelled() {
                self.interrupted = true;
                return Ok(());
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
                self.interrupted = true;
                return Ok(());
            }
            let counters = honoured::read(root, &self.watched);
            let hw = self.hw.read();
            let run = match self.run_probe(root, leg) {
                Ok(r) => r,
                Err(_) if probe::cancelled() => {
                    self.interrupted = true;
                    return Ok(());
                }
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
            if let Some((sent, lost)) = run.lost {
                let l = self.losses.get_or_insert_with(Losses::default);
                let k = (leg == Leg::Applied) as usize;
                l.sent[k] += sent;
                l.lost[k] += lost;
            }
            self.split.add(leg == Leg::Applied, run.split);
            self.noise.add(leg == Leg::Applied, run.evidence);
            if self.settings.is_null() {
                self.settings = run.settings;
            }
            residency::leg_gate(round * 2 + k, leg == Leg::Applied);
            let d = honoured::delta(&counters, &honoured::read(root, &self.watched));
            honoured::accumulate(&mut self.idle[(leg == Leg::Applied) as usize], &d);
            let hw = self.hw.end(leg == Leg::Applied, &hw);
            if leg == Leg::Applied {
                self.check_applied(round, &d, &hw);
                self.applied_legs += 1;
            }
            got[(leg == Leg::Applied) as usize] = run.samples;
        }
        let line = self.round_done(&got, started.elapsed(), look, cap);
        progress(&line);
        let [b, a] = got;
        self.rounds.push((b, a));
        Ok(())
    }

    /// One line per complete round: rounds done, each leg's p50 and the
    /// time left to the next look (the mean round so far times the rounds left).
    fn round_done(
        &self,
        got: &[Vec<f64>; 2],
        elapsed: Duration,
        look: usize,
        cap: usize,
    ) -> String {
        let done = self.rounds.len() + 1;
        let p50 = |s: &[f64]| {
            let ns = super::paired::RoundFigures::of(s).map_or(0.0, |s| s.p50);
            match &self.command {
                Some(c) => super::command::shown(c, ns),
                None => format!("{:.1} µs", ns / 1e3),
            }
        };
        let left = elapsed.mul_f64(look.saturating_sub(done) as f64 / done as f64);
        format!(
            "round {done} of {look} done (cap {cap}): as found p50 {}, applied p50 {}; {}",
            p50(&got[0]),
            p50(&got[1]),
            if done >= look {
                format!("the look at round {look} now")
            } else {
                format!("about {} left to the look at round {look}", eta_words(left))
            }
        )
    }
}

/// A time left, to the second: `42 s`, `3 min 5 s`.
pub(super) fn eta_words(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s} s"),
        _ => format!("{} min {} s", s / 60, s % 60),
    }
}
