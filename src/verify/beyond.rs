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
