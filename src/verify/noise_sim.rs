//! Simulation of the noise verdict as coded: seeded sparse Poisson noise on
//! a quiet (`nohz_full`-like) CPU becomes each leg's gaps, the probe's own
//! figures (`cpu_noise`, `round_lost_per_s`) make each round's samples, and
//! `paired::analyze` decides at each of verify's looks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::probe::noise;
use crate::probe::noise_attrib::Attributed;
use crate::probe::noise_spin::Spin;
use crate::verify::paired::{self, Analysis, Decision, Metric, Round, Rule, Verdict};

/// verify's default leg: `probe noise`'s 10 s at its 1 µs threshold.
const LEG_NS: u64 = 10_000_000_000;
const THRESHOLD_NS: u64 = 1_000;

/// One leg: events at `rate` per second (exponential spacing), each a gap
/// of log-normal length around 10 µs (a tick, an IPI, a kworker's slice).
fn leg(rng: &mut ChaCha8Rng, rate: f64) -> Vec<f64> {
    let mut gaps = Vec::new();
    let mut at = 0.0f64;
    loop {
        at += -rng.random::<f64>().max(1e-12).ln() / rate * 1e9;
        if at >= LEG_NS as f64 {
            break;
        }
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let len = (10_000.0 * (0.5 * z).exp()) as u64;
        gaps.push((at as u64, len.max(THRESHOLD_NS + 1)));
    }
    let spin = Spin {
        cpu: 1,
        tid: 0,
        start_ns: 0,
        end_ns: LEG_NS,
        loops: 1,
        gaps,
    };
    let cpu = noise::cpu_noise(spin, Attributed::default());
    vec![noise::round_lost_per_s(&[cpu], THRESHOLD_NS)]
}

/// One verify run: rounds of both legs up to each look, until it decides.
fn verify(rng: &mut ChaCha8Rng, found: f64, applied: f64) -> Analysis {
    let rule = Rule::default();
    let mut rounds: Vec<Round> = Vec::new();
    for at in rule.looks() {
        while rounds.len() < at {
            rounds.push((leg(rng, found), leg(rng, applied)));
        }
        let a = paired::analyze(&rounds, Metric::P50, rule);
        if a.decision != Decision::MoreRounds {
            return a;
        }
    }
    unreachable!("the last look is at max_rounds")
}

#[test]
fn sparse_noise_falling_fivefold_is_found_and_aa_stays_under_one_percent() {
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    let runs = 300;
    // 5 events/s as found, 1 applied: the rule sees the drop.
    let mut found = 0;
    let mut ratios = Vec::new();
    for _ in 0..runs {
        let a = verify(&mut rng, 5.0, 1.0);
        found += (a.verdict == Verdict::Improved) as usize;
        ratios.push(a.ratio);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[runs / 2];
    eprintln!("5 -> 1 events/s: improved in {found}/{runs}, median ratio {median:.3}");
    assert!(found * 100 >= runs * 99, "{found}/{runs} found the drop");
    assert!((0.15..0.25).contains(&median), "ratio {median}");
    // A/A at either rate: at most 1 % of 1000 runs claim an effect (3000
    // each gave 10, a third of that).
    let runs = 1000;
    for rate in [5.0, 1.0] {
        let false_effects = (0..runs)
            .filter(|_| {
                matches!(
                    verify(&mut rng, rate, rate).verdict,
                    Verdict::Improved | Verdict::Regressed
                )
            })
            .count();
        eprintln!("A/A at {rate} events/s: {false_effects}/{runs} false verdicts");
        assert!(
            false_effects * 100 <= runs,
            "{rate}/s: {false_effects}/{runs}"
        );
    }
}
