//! The rounds of one verify, look by look: more rounds while the verdict
//! or a `lower`/`higher` margin is undecided; and the expectations checked.

use anyhow::Result;

use super::legs::Legs;
use super::paired::{self, Analysis, Decision, Metric, Rule};
use super::{ExpectationCheck, command, expect, rule};
use crate::manifest::Knob;

/// Runs rounds up to each look until the analysis decides (or an interrupt);
/// the last look's analysis, if one was reached.
pub(super) fn run(
    legs: &mut Legs,
    knob: &Knob,
    metric: Metric,
    rule: Rule,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<Analysis>> {
    let mut analysis = None;
    'looks: for at in rule.looks() {
        while legs.rounds.len() < at {
            legs.round(at, rule.max_rounds, progress)?;
            if legs.interrupted {
                break 'looks;
            }
        }
        let a = paired::analyze(&legs.rounds, metric, rule);
        if at == rule.rounds && a.sd_log.is_finite() {
            progress(&super::beyond::first_look(&rule, a.sd_log));
        }
        // A `lower`/`higher` by a margin is decided by the interval: rounds
        // go on while it straddles the margin (the looks' alpha split holds).
        let more = a.decision == Decision::MoreRounds
            || (at < rule.max_rounds && margin_open(knob, &legs.rounds, rule));
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
    Ok(analysis)
}

/// Is a `lower`/`higher` expectation still inconclusive (its interval across its margin)?
pub(super) fn margin_open(knob: &Knob, rounds: &[paired::Round], rule: Rule) -> bool {
    use crate::schema::expect::Change;
    knob.verify.as_ref().is_some_and(|v| {
        v.expect.0.iter().any(|e| {
            matches!(e.change, Change::Lower | Change::Higher)
                && expect::check(e, &paired::analyze(rounds, e.metric, rule)).outcome
                    == rule::Outcome::Inconclusive
        })
    })
}

/// Each of the manifest's `verify.expect`, checked on an analysis of its own metric.
pub(super) fn check_expectations(
    knob: &Knob,
    rounds: &[paired::Round],
    rule: Rule,
    overrule: Option<Decision>,
    command: Option<&command::Placed>,
) -> Vec<ExpectationCheck> {
    let Some(v) = &knob.verify else {
        return Vec::new();
    };
    v.expect
        .0
        .iter()
        .map(|e| {
            let mut a = paired::analyze(rounds, e.metric, rule);
            if let Some(d) = overrule {
                let partial = a.partial;
                a.overrule(d, partial);
            }
            let mut check = expect::check(e, &a);
            if let Some(c) = command {
                check.measured = expect::measured(&a, &|v| command::shown(c, v));
            }
            ExpectationCheck {
                text: e.to_string(),
                check,
                verdict_words: a.verdict_words(),
            }
        })
        .collect()
}
