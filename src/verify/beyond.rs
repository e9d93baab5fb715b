//! "About N more rounds" only where N is a run someone would make: past
//! [`PRACTICAL`] times `--max-rounds`, the count says what would help
//! instead, and the smallest effect the run can tell from none.

use super::rule::{Rule, SD_FLOOR};

/// A round count above this many times `max_rounds` is no advice.
pub const PRACTICAL: usize = 10;

/// The smallest change (a fraction: 0.08 = 8 %) that `max_rounds` rounds at
/// per-round log-ratio SD `sd_log` can tell from none: the interval's
/// half-width `q · sd / √max_rounds` at the last look.
pub fn smallest_effect(rule: &Rule, sd_log: f64) -> f64 {
    let sd = sd_log.max(SD_FLOOR);
    let n = rule.max_rounds.max(2);
    (rule.quantile(n) * sd / (n as f64).sqrt()).exp() - 1.0
}

/// The words for `more` rounds still needed to `what` ("decide", "show it").
pub fn more_rounds(more: usize, rule: &Rule, sd_log: f64, what: &str) -> String {
    if more <= rule.max_rounds.saturating_mul(PRACTICAL) {
        return format!("about {more} more rounds at this noise would {what}");
    }
    format!(
        "no practical run would {what} at this noise (it would take over {PRACTICAL} times --max-rounds {}): \
         within {} rounds only a change of about {:.0} % or more can be told from none; what would help is more \
         samples per round (the probe's --samples, a longer --duration), a quieter host (the probe's CPUs \
         isolated, other work stopped), or looking for a larger effect",
        rule.max_rounds,
        rule.max_rounds,
        smallest_effect(rule, sd_log) * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::expect::Metric;
    use crate::verify::paired::{Round, analyze};

    /// Rounds whose log ratios average `mean` with spread `spread`.
    fn rounds(mean: f64, spread: f64, n: usize) -> Vec<Round> {
        (0..n)
            .map(|k| {
                let d = mean + if k % 2 == 0 { spread } else { -spread };
                (vec![1000.0; 20], vec![1000.0 * d.exp(); 20])
            })
            .collect()
    }

    #[test]
    fn a_count_beyond_any_practical_run_says_what_would_help_instead() {
        let rule = Rule::for_rounds(6);
        // Noisy rounds whose mean sits at the minimum effect: the interval
        // could only settle after about a million rounds.
        let a = analyze(&rounds(1.05f64.ln() - 0.0003, 0.3, 6), Metric::P50, rule);
        let need = a.more_rounds_needed.expect("undecided");
        assert!(need > rule.max_rounds * PRACTICAL, "{need}");
        let words = a.verdict_words();
        assert!(!words.contains(&need.to_string()), "{words}");
        assert!(
            words.contains("no practical run would decide")
                && words.contains("more samples per round")
                && words.contains("quieter host"),
            "{words}"
        );
        // A count a run could reach is still given.
        assert_eq!(
            more_rounds(12, &rule, 0.1, "decide"),
            "about 12 more rounds at this noise would decide"
        );
        // Noisier rounds: a larger smallest effect.
        assert!(smallest_effect(&rule, 0.4) > smallest_effect(&rule, 0.1));
    }
}
