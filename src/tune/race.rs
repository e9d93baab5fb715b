//! One race: legs run round by round in a seeded shuffled order (mirrored
//! blocks, as verify's sweeps), comparisons between pairs of legs decided
//! at each look by verify's rule. A decided comparison leaves the race and
//! its legs stop running: the rounds it saves go to the undecided ones.

use anyhow::Result;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::design::{FUTILITY_CONFIDENCE, Guard, Role, Settings};
use super::{Bench, Leg};
use crate::verify::Shuffle;
use crate::verify::paired::{self, Analysis, Decision, Metric, Rule, Verdict};
use crate::verify::rule::SD_FLOOR;

/// A comparison of leg `leg` against leg `base` (the ratio is leg / base).
#[derive(Clone, Debug)]
pub struct Comparison {
    pub label: String,
    pub role: Role,
    pub base: usize,
    pub leg: usize,
    pub rule: Rule,
    /// Drop it once it cannot show this much improvement (steps only).
    pub futility: Option<f64>,
}

/// How a comparison ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Ended {
    /// The rule decided (its verdict says how).
    Decided,
    /// The one-sided bound showed less improvement than the futility effect.
    Futile,
    /// The round cap without a decision.
    RoundCap,
    /// The budget ran out first.
    Budget,
    /// A signal or the time budget stopped the search.
    Stopped,
    /// A sham whose race's steps all ended: the control ran as long as they did.
    StepsEnded,
}

/// A guard on a step's rounds.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct GuardCheck {
    pub guard: String,
    pub outcome: crate::verify::rule::Outcome,
    pub ratio: f64,
    pub interval: [f64; 2],
}

/// A comparison's result.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Compared {
    pub label: String,
    pub role: Role,
    pub ended: Ended,
    /// The rule's verdict at its last look (inconclusive unless decided).
    pub verdict: Verdict,
    pub ratio: f64,
    pub interval: [f64; 2],
    pub rounds: usize,
    pub words: String,
    /// The guards on its rounds (steps only): a step that breaks one is not accepted.
    pub guards: Vec<GuardCheck>,
    pub analysis: Analysis,
}

/// One round as it ran: the legs by label, their order, each leg's samples.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, Serialize, schemars::JsonSchema)]
pub struct RoundRecord {
    pub race: String,
    pub legs: Vec<String>,
    /// Indices into `legs`, in the order they ran.
    pub order: Vec<usize>,
    /// Per leg (in `legs`' order), its samples: ns for the built-in probes, a
    /// command's value (or its inverse where higher is better).
    pub samples: Vec<Vec<f64>>,
}

/// Runs races against a bench within a budget of legs, recording every round.
pub struct Racer<'b> {
    pub bench: &'b mut dyn Bench,
    pub seed: u64,
    pub budget_legs: usize,
    pub legs_used: usize,
    pub records: Vec<RoundRecord>,
    /// Why the search stopped early (a signal, the time budget), if it did.
    pub stopped: Option<String>,
    pub guards: Vec<Guard>,
    pub progress: &'b mut dyn FnMut(&str),
}

impl<'b> Racer<'b> {
    /// A racer with nothing run yet, under `s`'s seed and budget.
    pub fn new(
        bench: &'b mut dyn Bench,
        s: &Settings,
        guards: Vec<Guard>,
        progress: &'b mut dyn FnMut(&str),
    ) -> Racer<'b> {
        Racer {
            bench,
            seed: s.seed,
            budget_legs: s.budget_legs,
            legs_used: 0,
            records: Vec::new(),
            stopped: None,
            guards,
            progress,
        }
    }
}

/// The one-sided bound of improvement: is it below `effect`?
pub fn futile(a: &Analysis, effect: f64) -> bool {
    let n = a.ratios.len();
    if n < paired::MIN_ROUNDS {
        return false;
    }
    let sd = if a.sd_log.is_finite() {
        a.sd_log.max(SD_FLOOR)
    } else {
        return false;
    };
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df >= 1");
    let q = t.inverse_cdf(FUTILITY_CONFIDENCE);
    // The most improvement the data allow at that confidence.
    let best = a.ratio.ln() - q * sd / (n as f64).sqrt();
    best > (1.0 - effect).ln()
}

fn mix(seed: u64, text: &str, at: usize) -> u64 {
    // FNV-1a: a fixed, documented mixing, so a replay orders as the run did.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in text.bytes().chain(at.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Racer<'_> {
    /// Runs `legs` until every comparison ends; `reserve` legs of the budget
    /// are kept for the races after this one.
    pub fn race(
        &mut self,
        name: &str,
        legs: &[Leg],
        comps: &[Comparison],
        metric: Metric,
        reserve: usize,
    ) -> Result<Vec<Compared>> {
        let mut samples: Vec<Vec<Vec<f64>>> = vec![Vec::new(); legs.len()];
        let mut done: Vec<Option<Compared>> = vec![None; comps.len()];
        let looks = comps.first().map(|c| c.rule.looks()).unwrap_or_default();
        let mut run = 0;
        let mut active_before: Vec<usize> = Vec::new();
        let mut shuffle = Shuffle::new(mix(self.seed, name, 0));
        'looks: for at in looks {
            while run < at {
                let active = active_legs(comps, &done);
                if active.is_empty() {
                    break 'looks;
                }
                if self.stopped.is_some() {
                    break 'looks;
                }
                if self.legs_used + active.len() + reserve > self.budget_legs {
                    self.end_open(comps, &mut done, &samples, metric, Ended::Budget, run);
                    break 'looks;
                }
                if active != active_before {
                    // A new set of legs starts a new block of orders.
                    shuffle = Shuffle::new(mix(self.seed, name, run));
                    active_before = active.clone();
                }
                let order = shuffle.next(active.len());
                let these: Vec<Leg> = active.iter().map(|&i| legs[i].clone()).collect();
                let Some(got) = self.bench.round(name, &these, &order)? else {
                    self.stopped = Some(self.bench.stop_reason());
                    break 'looks;
                };
                self.legs_used += active.len();
                for (k, &i) in active.iter().enumerate() {
                    samples[i].push(got[k].clone());
                }
                self.records.push(RoundRecord {
                    race: name.to_string(),
                    legs: these.iter().map(|l| l.label.clone()).collect(),
                    order,
                    samples: got,
                });
                run += 1;
            }
            for (c, d) in comps.iter().zip(done.iter_mut()) {
                if d.is_some() {
                    continue;
                }
                let a = paired::analyze(&pairs(&samples, c), metric, c.rule);
                let ended = match a.decision {
                    Decision::MoreRounds => match c.futility {
                        Some(e) if futile(&a, e) => Ended::Futile,
                        _ => continue,
                    },
                    Decision::RoundCap => Ended::RoundCap,
                    _ => Ended::Decided,
                };
                let l = line(name, c, &a, ended, self);
                (self.progress)(&l);
                let mut done = compared(c, a, ended, None);
                if c.role == Role::Step {
                    done.guards = check_guards(&self.guards, &pairs(&samples, c), c.rule);
                }
                *d = Some(done);
            }
            // A sham is its steps' negative control under the same rule and
            // rounds: once they have ended, its further rounds decide nothing
            // (at 20-30 % noise they were most of a race's legs).
            let steps_ended = comps
                .iter()
                .zip(done.iter())
                .all(|(c, d)| c.role != Role::Step || d.is_some());
            if steps_ended && comps.iter().any(|c| c.role == Role::Step) {
                self.end_open(comps, &mut done, &samples, metric, Ended::StepsEnded, run);
                break 'looks;
            }
        }
        let why = if self.stopped.is_some() {
            Ended::Stopped
        } else {
            Ended::RoundCap
        };
        self.end_open(comps, &mut done, &samples, metric, why, run);
        Ok(done
            .into_iter()
            .map(|d| d.expect("every comparison ended"))
            .collect())
    }

    fn end_open(
        &mut self,
        comps: &[Comparison],
        done: &mut [Option<Compared>],
        samples: &[Vec<Vec<f64>>],
        metric: Metric,
        why: Ended,
        _run: usize,
    ) {
        for (c, d) in comps.iter().zip(done.iter_mut()) {
            if d.is_none() {
                let mut a = paired::analyze(&pairs(samples, c), metric, c.rule);
                a.overrule(Decision::RoundCap, why == Ended::Stopped);
                let l = line("", c, &a, why, self);
                (self.progress)(&l);
                *d = Some(compared(c, a, why, self.stopped.as_deref()));
            }
        }
    }
}

/// The legs the open comparisons need, in leg order.
fn active_legs(comps: &[Comparison], done: &[Option<Compared>]) -> Vec<usize> {
    let mut v: Vec<usize> = comps
        .iter()
        .zip(done)
        .filter(|(_, d)| d.is_none())
        .flat_map(|(c, _)| [c.base, c.leg])
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The rounds both legs of `c` ran, as verify's pairs (base, leg). An open
/// comparison's legs ran in every round since its race began.
fn pairs(samples: &[Vec<Vec<f64>>], c: &Comparison) -> Vec<paired::Round> {
    samples[c.base]
        .iter()
        .zip(&samples[c.leg])
        .map(|(b, a)| (b.clone(), a.clone()))
        .collect()
}

fn compared(c: &Comparison, a: Analysis, ended: Ended, stopped: Option<&str>) -> Compared {
    let words = match ended {
        Ended::Futile => format!(
            "dropped: cannot show {:.1} % improvement (one-sided {:.0} % bound; {})",
            c.futility.unwrap_or(0.0) * 100.0,
            FUTILITY_CONFIDENCE * 100.0,
            a.interval_words()
        ),
        Ended::Budget => format!("the budget ran out: {}", a.verdict_words()),
        Ended::StepsEnded => format!(
            "ended with its race's steps (a control runs as long as they do): {}",
            a.verdict_words()
        ),
        Ended::Stopped => format!(
            "stopped ({}): {}",
            stopped.unwrap_or(super::SIGNAL),
            a.verdict_words()
        ),
        _ => a.verdict_words(),
    };
    Compared {
        label: c.label.clone(),
        role: c.role,
        ended,
        verdict: a.verdict,
        ratio: a.ratio,
        interval: a.interval,
        rounds: a.ratios.len(),
        words,
        guards: Vec::new(),
        analysis: a,
    }
}

fn check_guards(guards: &[Guard], rounds: &[paired::Round], rule: Rule) -> Vec<GuardCheck> {
    guards
        .iter()
        .map(|g| {
            let a = paired::analyze(rounds, g.metric, rule);
            GuardCheck {
                guard: g.text.clone(),
                outcome: crate::verify::rule::interval_within(a.interval, g.limit, g.upper),
                ratio: a.ratio,
                interval: a.interval,
            }
        })
        .collect()
}

/// One progress line per decided comparison, with the budget used and left.
fn line(race: &str, c: &Comparison, a: &Analysis, ended: Ended, r: &Racer) -> String {
    let what = match ended {
        Ended::Decided => a.verdict_label(),
        Ended::Futile => "dropped (cannot reach the effect looked for)".into(),
        Ended::RoundCap => "inconclusive at the round cap".into(),
        Ended::Budget => "inconclusive: the budget ran out".into(),
        Ended::Stopped => "stopped".into(),
        Ended::StepsEnded => "ended with its race's steps".into(),
    };
    let left = r.budget_legs.saturating_sub(r.legs_used);
    format!(
        "{}{}: {what}, ratio {:.3} ({:.3}-{:.3}) after {} rounds; {} legs used, {left} left",
        if race.is_empty() {
            String::new()
        } else {
            format!("{race}: ")
        },
        c.label,
        a.ratio,
        a.interval[0],
        a.interval[1],
        a.ratios.len(),
        r.legs_used
    )
}
