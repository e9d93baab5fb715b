//! "About N more rounds" only where N is a run verify makes: past
//! `--max-rounds`, the `--max-rounds` that reaches it; past the most verify
//! runs, what would help instead, and the smallest effect the run can tell
//! from none.

use super::rule::{MAX_ROUNDS, Rule, SD_FLOOR};

/// The smallest change (a fraction: 0.08 = 8 %) that `max_rounds` rounds at
/// per-round log-ratio SD `sd_log` can tell from none: the interval's
/// half-width `q · sd / √max_rounds` at the last look.
pub fn smallest_effect(rule: &Rule, sd_log: f64) -> f64 {
    let sd = sd_log.max(SD_FLOOR);
    let n = rule.max_rounds.max(2);
    (rule.quantile(n) * sd / (n as f64).sqrt()).exp() - 1.0
}

/// The words for `more` rounds still needed, after `run`, to `what`
/// ("decide", "show it"): past --max-rounds, the --max-rounds that would
/// reach it, or past what verify runs, what would help instead.
pub fn more_rounds(more: usize, run: usize, rule: &Rule, sd_log: f64, what: &str) -> String {
    let all = run.saturating_add(more);
    if all <= rule.max_rounds {
        return format!("about {more} more rounds at this noise would {what}");
    }
    if all <= MAX_ROUNDS {
        return format!(
            "about {more} more rounds at this noise would {what}, past --max-rounds {}: run again with --max-rounds {all}",
            rule.max_rounds
        );
    }
    format!(
        "no run verify makes would {what} at this noise (it would take about {} rounds in all; verify runs at most {MAX_ROUNDS}): \
         within {} rounds only a change of about {:.0} % or more can be told from none; what would help is more \
         samples per round (the probe's --samples, a longer --duration), a quieter host (the probe's CPUs \
         isolated, other work stopped), or looking for a larger effect",
        round_words(all),
        rule.max_rounds,
        smallest_effect(rule, sd_log) * 100.0
    )
}

/// A large count to two significant figures: it is an estimate.
fn round_words(n: usize) -> String {
    let mut scale = 1;
    while n / scale >= 100 {
        scale *= 10;
    }
    (n / scale * scale).to_string()
}

/// Said at the first look: what this run can decide at the noise it sees.
pub fn first_look(rule: &Rule, sd_log: f64) -> String {
    format!(
        "at the noise of these rounds, a run of --max-rounds {} can tell a change of about {:.0} % or more from none",
        rule.max_rounds,
        smallest_effect(rule, sd_log) * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_a_run_can_reach_is_given_and_past_max_rounds_the_option_that_reaches_it() {
        let rule = Rule::for_rounds(6);
        assert_eq!(
            more_rounds(12, 6, &rule, 0.1, "decide"),
            "about 12 more rounds at this noise would decide"
        );
        // Past --max-rounds (24) but within what verify runs.
        assert_eq!(
            more_rounds(30, 6, &rule, 0.1, "decide"),
            "about 30 more rounds at this noise would decide, past --max-rounds 24: run again with --max-rounds 36"
        );
        // Noisier rounds: a larger smallest effect.
        assert!(smallest_effect(&rule, 0.4) > smallest_effect(&rule, 0.1));
    }
}
