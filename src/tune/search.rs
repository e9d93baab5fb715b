//! The search: a pilot, one race per knob, then the confirmation of the
//! accepted set against the host as found, pruned by backward elimination.

use anyhow::Result;
use serde::Serialize;

use super::design::{self, Dim, PILOT_ROUNDS, Plan, Role, Settings};
use super::race::{Compared, Comparison, Ended, Racer, RoundRecord};
use super::{Bench, Config, Leg};
use crate::verify::bundle::{self, Share};
use crate::verify::paired::{Analysis, Rule, Verdict};
use crate::verify::rule::Outcome as Met;

/// One knob's race.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Stage {
    pub knob: String,
    /// The configuration it started from, as `knob=value` (empty: as found).
    pub from: Vec<String>,
    pub comparisons: Vec<Compared>,
    /// The value accepted (the improved step with the lowest ratio), if any.
    pub accepted: Option<String>,
}

/// A knob moved to a value by an accepted step.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Accepted {
    pub knob: String,
    pub value: String,
    /// The accepted step's ratio and interval (against the configuration before it).
    pub ratio: f64,
    pub interval: [f64; 2],
    pub rounds: usize,
}

/// How the negative controls came out.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Shams {
    pub run: usize,
    /// Shams the rule called improved or regressed: evidence of drift or a broken design.
    pub claimed: Vec<String>,
    pub words: String,
}

/// The accepted set against the host as found, and its pruning.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Confirm {
    /// All accepted knobs together / as found.
    pub together: Compared,
    /// Per accepted knob: all / all without it (below 1: it helps).
    pub shares: Vec<Compared>,
    /// Knobs the backward elimination drops, with why.
    pub drops: Vec<bundle::Drop>,
    pub elimination: Vec<bundle::Retest>,
    /// Accepted steps whose share the confirmation did not show improved.
    pub not_reproduced: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Outcome {
    pub plan: Plan,
    pub pilot: Option<Compared>,
    pub stages: Vec<Stage>,
    pub shams: Shams,
    pub accepted: Vec<Accepted>,
    pub confirm: Option<Confirm>,
    /// What the search advises: the accepted steps the pruning kept.
    pub shipped: Vec<Accepted>,
    pub legs_used: usize,
    /// The search stopped early (a signal, the time budget): what it decided so far.
    pub partial: bool,
    /// Why it stopped early, where it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    pub warnings: Vec<String>,
    #[serde(skip)]
    pub records: Vec<RoundRecord>,
}

/// The configuration in words.
fn words(dims: &[Dim], c: &Config) -> Vec<String> {
    dims.iter()
        .zip(c)
        .filter_map(|(d, v)| v.map(|v| format!("{}={}", d.id, d.values[v])))
        .collect()
}

fn leg(label: String, c: Config) -> Leg {
    Leg { label, config: c }
}

/// Runs the pilot and plans: the pilot's A/A comparison and the plan.
pub fn pilot(dims: &[Dim], s: &Settings, racer: &mut Racer) -> Result<(Option<Compared>, Plan)> {
    let draft = design::plan(dims, s, None)?;
    let none: Config = vec![None; dims.len()];
    let legs = [
        leg("as found".into(), none.clone()),
        leg("as found again".into(), none),
    ];
    let c = Comparison {
        label: "as found again / as found".into(),
        role: Role::Pilot,
        base: 0,
        leg: 1,
        rule: Rule {
            rounds: PILOT_ROUNDS,
            max_rounds: PILOT_ROUNDS,
            ..draft.step_rule()
        },
        futility: None,
    };
    let reserve = s
        .budget_legs
        .saturating_sub(racer.legs_used + 2 * PILOT_ROUNDS);
    let got = racer.race("pilot", &legs, &[c], s.metric, reserve)?;
    let pilot = got.into_iter().next();
    let sd = pilot
        .as_ref()
        .filter(|p| p.analysis.ratios.len() >= 2)
        .map(|p| p.analysis.sd_log.max(crate::verify::rule::SD_FLOOR));
    let mut s = s.clone();
    if let Some(b) = racer.bench.budget_legs(racer.legs_used) {
        s.budget_legs = b;
        racer.budget_legs = b;
    }
    let mut plan = design::plan(dims, &s, sd)?;
    plan.leg_seconds = racer.bench.leg_seconds();
    Ok((pilot, plan))
}

/// The whole search on `bench`.
pub fn run(
    dims: &[Dim],
    s: &Settings,
    bench: &mut dyn Bench,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    let mut racer = Racer::new(bench, s, s.guards.clone(), progress);
    let (pilot, plan) = pilot(dims, s, &mut racer)?;
    for l in plan.words() {
        (racer.progress)(&l);
    }
    let mut current: Config = vec![None; dims.len()];
    let mut stages = Vec::new();
    let mut accepted = Vec::new();
    for (i, d) in dims.iter().enumerate() {
        if racer.stopped.is_some() {
            break;
        }
        let reserve: usize = dims[i + 1..]
            .iter()
            .map(|d| d.steps() + 2)
            .sum::<usize>()
            .saturating_add(dims.len() + 2)
            * plan.planned_rounds;
        let stage = race_knob(&mut racer, dims, i, &current, &plan, s, reserve)?;
        if let Some(v) = &stage.accepted {
            let j = d
                .values
                .iter()
                .position(|x| x == v)
                .expect("a value of the knob");
            current[i] = Some(j);
            let c = stage
                .comparisons
                .iter()
                .find(|c| c.label == step_label(d, j))
                .expect("the accepted comparison");
            accepted.push(Accepted {
                knob: d.id.clone(),
                value: v.clone(),
                ratio: c.ratio,
                interval: c.interval,
                rounds: c.rounds,
            });
        }
        stages.push(stage);
    }
    let shams = shams(&stages);
    let mut warnings = Vec::new();
    if !shams.claimed.is_empty() {
        warnings.push(shams.words.clone());
    }
    let confirm = match (accepted.is_empty(), racer.stopped.is_some()) {
        (false, false) => Some(confirm(&mut racer, dims, &current, &plan, s)?),
        _ => None,
    };
    let shipped = match &confirm {
        Some(c) => accepted
            .iter()
            .filter(|a| !c.drops.iter().any(|d| d.knob == a.knob))
            .cloned()
            .collect(),
        None if racer.stopped.is_some() => Vec::new(),
        None => accepted.clone(),
    };
    Ok(Outcome {
        plan,
        pilot,
        stages,
        shams,
        accepted,
        confirm,
        shipped,
        legs_used: racer.legs_used,
        partial: racer.stopped.is_some(),
        stopped: racer.stopped.clone(),
        warnings,
        records: std::mem::take(&mut racer.records),
    })
}

fn step_label(d: &Dim, j: usize) -> String {
    format!("{}={}", d.id, d.values[j])
}

/// The race of knob `i` from `current`: a sham and every value.
fn race_knob(
    racer: &mut Racer,
    dims: &[Dim],
    i: usize,
    current: &Config,
    plan: &Plan,
    s: &Settings,
    reserve: usize,
) -> Result<Stage> {
    let d = &dims[i];
    let mut legs = vec![leg("current".into(), current.clone())];
    let mut comps = Vec::new();
    let rule = plan.step_rule();
    // The sham: the host's own value where the space lists it, else the
    // current configuration again. Nothing is written in its leg.
    let sham_label = match d.as_found {
        Some(j) => format!("{} (sham: the host's own value)", step_label(d, j)),
        None => format!("{}: current again (sham)", d.id),
    };
    legs.push(leg(sham_label.clone(), current.clone()));
    comps.push(Comparison {
        label: sham_label,
        role: Role::Sham,
        base: 0,
        leg: 1,
        rule,
        futility: Some(plan.futility_effect),
    });
    for j in (0..d.values.len()).filter(|&j| d.as_found != Some(j)) {
        let mut c = current.clone();
        c[i] = Some(j);
        legs.push(leg(step_label(d, j), c));
        comps.push(Comparison {
            label: step_label(d, j),
            role: Role::Step,
            base: 0,
            leg: legs.len() - 1,
            rule,
            futility: Some(plan.futility_effect),
        });
    }
    let name = format!("knob {} of {}: {}", i + 1, dims.len(), d.id);
    let got = racer.race(&name, &legs, &comps, s.metric, reserve)?;
    let best = got
        .iter()
        .filter(|c| c.role == Role::Step && c.ended == Ended::Decided)
        .filter(|c| c.verdict == Verdict::Improved)
        .filter(|c| !c.guards.iter().any(|g| g.outcome == Met::NotMet))
        .min_by(|a, b| a.ratio.total_cmp(&b.ratio));
    let accepted = best.map(|c| {
        let j = (0..d.values.len())
            .find(|&j| step_label(d, j) == c.label)
            .expect("a step of this knob");
        d.values[j].clone()
    });
    Ok(Stage {
        knob: d.id.clone(),
        from: words(dims, current),
        comparisons: got,
        accepted,
    })
}

fn shams(stages: &[Stage]) -> Shams {
    let all: Vec<&Compared> = stages
        .iter()
        .flat_map(|s| s.comparisons.iter())
        .filter(|c| c.role == Role::Sham)
        .collect();
    let claimed: Vec<String> = all
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Improved | Verdict::Regressed))
        .map(|c| format!("{}: {}", c.label, c.words))
        .collect();
    let words = match claimed.len() {
        0 => format!(
            "{} sham steps (nothing written) went through the same rule: none was called an effect",
            all.len()
        ),
        n => format!(
            "SHAM STEP CALLED AN EFFECT: {n} of {} sham steps (nothing written) were called improved or regressed: the host drifted or the design is broken, and the accepted steps are suspect: {}",
            all.len(),
            claimed.join("; ")
        ),
    };
    Shams {
        run: all.len(),
        claimed,
        words,
    }
}

/// The accepted set against as found and against it without each knob, in
/// a fresh run; then the backward elimination over the shares.
fn confirm(
    racer: &mut Racer,
    dims: &[Dim],
    set: &Config,
    plan: &Plan,
    s: &Settings,
) -> Result<Confirm> {
    let on: Vec<usize> = (0..dims.len()).filter(|&i| set[i].is_some()).collect();
    let without = |k: usize| -> Config {
        let mut c = set.clone();
        c[k] = None;
        c
    };
    let mut legs = vec![
        leg("as found".into(), vec![None; dims.len()]),
        leg("accepted set".into(), set.clone()),
    ];
    let rule = plan.confirm_rule(1 + on.len());
    let mut comps = vec![Comparison {
        label: "accepted set / as found".into(),
        role: Role::Together,
        base: 0,
        leg: 1,
        rule,
        futility: None,
    }];
    if on.len() > 1 {
        for &k in &on {
            legs.push(leg(format!("without {}", dims[k].id), without(k)));
            comps.push(Comparison {
                label: format!("accepted set / without {}", dims[k].id),
                role: Role::Share,
                base: legs.len() - 1,
                leg: 1,
                rule,
                futility: None,
            });
        }
    }
    let got = racer.race("confirmation", &legs, &comps, s.metric, 0)?;
    let together = got[0].clone();
    let shares: Vec<Compared> = match on.len() {
        1 => vec![Compared {
            label: format!("accepted set / without {}", dims[on[0]].id),
            ..together.clone()
        }],
        _ => got[1..].to_vec(),
    };
    let as_shares: Vec<Share> = on
        .iter()
        .zip(&shares)
        .map(|(&k, c)| share(&dims[k].id, &c.analysis, together.ratio))
        .collect();
    let ids: Vec<String> = on.iter().map(|&k| dims[k].id.clone()).collect();
    let mut retest = |kept: &[String], cands: &[String]| -> Result<Option<Vec<Analysis>>> {
        retest(racer, dims, set, kept, cands, plan, s)
    };
    let e = if racer_stopped(&shares) {
        bundle::Elimination {
            drops: Vec::new(),
            needed: Vec::new(),
            retests: Vec::new(),
        }
    } else {
        bundle::eliminate(&ids, &as_shares, &mut retest)?
    };
    let not_reproduced = on
        .iter()
        .zip(&shares)
        .filter(|(_, c)| c.verdict != Verdict::Improved)
        .map(|(&k, c)| format!("{}: {}", dims[k].id, c.words))
        .collect();
    Ok(Confirm {
        together,
        shares,
        drops: e.drops,
        elimination: e.retests,
        not_reproduced,
    })
}

fn racer_stopped(shares: &[Compared]) -> bool {
    shares.iter().any(|c| c.ended == Ended::Stopped)
}

/// A confirmation share in the bundle's terms, for its elimination.
fn share(id: &str, a: &Analysis, together: f64) -> Share {
    let fraction = (together.ln().abs() > 1e-9)
        .then(|| a.ratio.ln() / together.ln())
        .filter(|f| f.is_finite());
    Share {
        knob: id.to_string(),
        ratio: a.ratio,
        interval: a.interval,
        verdict: a.verdict,
        decision: a.decision,
        fraction,
        words: a.verdict_words(),
        analysis: a.clone(),
    }
}

/// One re-test of the elimination: the reduced set against it without each candidate.
fn retest(
    racer: &mut Racer,
    dims: &[Dim],
    set: &Config,
    kept: &[String],
    cands: &[String],
    plan: &Plan,
    s: &Settings,
) -> Result<Option<Vec<Analysis>>> {
    let reduced: Config = dims
        .iter()
        .zip(set)
        .map(|(d, v)| v.filter(|_| kept.contains(&d.id)))
        .collect();
    let mut legs = vec![leg(format!("reduced {}", kept.join("+")), reduced.clone())];
    let rule = plan.confirm_rule(cands.len());
    let mut comps = Vec::new();
    for c in cands {
        let mut w = reduced.clone();
        if let Some(k) = dims.iter().position(|d| &d.id == c) {
            w[k] = None;
        }
        legs.push(leg(format!("reduced without {c}"), w));
        comps.push(Comparison {
            label: format!("reduced / without {c}"),
            role: Role::Retest,
            base: legs.len() - 1,
            leg: 0,
            rule,
            futility: None,
        });
    }
    let got = racer.race(
        &format!("re-test {}", cands.join(", ")),
        &legs,
        &comps,
        s.metric,
        0,
    )?;
    if racer.stopped.is_some() || got.iter().any(|c| c.ended == Ended::Budget) {
        return Ok(None);
    }
    Ok(Some(got.into_iter().map(|c| c.analysis).collect()))
}
