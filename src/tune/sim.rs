//! Item 9's simulation: the real search (`search::run`) on seeded samples
//! of designs with known truth, and two baselines through the same
//! sampler. The default run is a smoke check; `bench/tune-sim.sh` sets
//! `HOSTKNOB_TUNE_SIM=full` for the whole table (300 searches per design).

use super::Config;
use super::design::Role;
use super::replay::Replay;
use super::search::{self, Outcome};
use super::sim_model::{self, Baseline, Design, Kind, SimHost};

/// What one design's searches give.
#[derive(Default, Debug)]
struct Tally {
    searches: usize,
    false_ship: usize,
    found: usize,
    gain: f64,
    legs: usize,
    exhaustive_legs: usize,
    sham_claims: usize,
    shams: usize,
    single_false: usize,
    single_found: usize,
    racing_false: usize,
    racing_found: usize,
}

fn shipped_config(o: &Outcome) -> Config {
    let dims = sim_model::dims();
    dims.iter()
        .map(|d| {
            o.shipped
                .iter()
                .find(|a| a.knob == d.id)
                .and_then(|a| d.values.iter().position(|v| *v == a.value))
        })
        .collect()
}

/// The planted knob of a design, where it has one: knob 1's value.
fn planted(d: &Design) -> Option<(usize, usize)> {
    match d.kind {
        Kind::Planted(_) | Kind::Harmful => Some((1, 2)),
        Kind::Redundant | Kind::Interacting => Some((1, 0)),
        Kind::Null => None,
    }
}

fn found(d: &Design, set: &Config) -> bool {
    match d.kind {
        // Either of two knobs that do the same thing finds the gain.
        Kind::Redundant => set[1] == Some(0) || set[3] == Some(0),
        _ => planted(d).is_some_and(|(k, v)| set[k] == Some(v)),
    }
}

fn search(d: Design, seed: u64) -> Outcome {
    let mut host = SimHost::new(d, seed);
    search::run(
        &sim_model::dims(),
        &sim_model::settings(seed),
        &mut host,
        &mut |_| {},
    )
    .expect("a simulated search")
}

fn tally(d: Design, searches: usize, first_seed: u64) -> Tally {
    let mut t = Tally::default();
    let best = d.best_gain();
    for s in first_seed..first_seed + searches as u64 {
        let o = search(d, s);
        let set = shipped_config(&o);
        t.searches += 1;
        t.false_ship += !d.false_knobs(&set).is_empty() as usize;
        t.found += found(&d, &set) as usize;
        if best > 0.0 {
            t.gain += -d.truth(&set) / best;
        }
        t.legs += o.legs_used;
        t.exhaustive_legs += 2 * o.plan.planned_rounds * o.plan.steps;
        for st in &o.stages {
            for c in st.comparisons.iter().filter(|c| c.role == Role::Sham) {
                t.shams += 1;
                t.sham_claims += (c.verdict != crate::verify::paired::Verdict::NoDetectableEffect
                    && c.verdict != crate::verify::paired::Verdict::Inconclusive)
                    as usize;
            }
        }
        let base = |f: fn(&mut SimHost) -> Baseline| f(&mut SimHost::new(d, s));
        let a = base(sim_model::single_run);
        t.single_false += !d.false_knobs(&a.set).is_empty() as usize;
        t.single_found += found(&d, &a.set) as usize;
        let r = base(sim_model::racing);
        t.racing_false += !d.false_knobs(&r.set).is_empty() as usize;
        t.racing_found += found(&d, &r.set) as usize;
    }
    t
}

fn name(d: &Design) -> String {
    let k = match d.kind {
        Kind::Null => "null".to_string(),
        Kind::Planted(x) => format!("planted {x}x MDE"),
        Kind::Harmful => "planted 2x + harmful".into(),
        Kind::Redundant => "two doing the same".into(),
        Kind::Interacting => "interacting pair".into(),
    };
    format!(
        "{k}, SD {:.0} %{}",
        d.sd * 100.0,
        if d.drift { ", drift" } else { "" }
    )
}

fn pct(n: usize, of: usize) -> String {
    format!("{:.1} %", 100.0 * n as f64 / of.max(1) as f64)
}

fn row(d: &Design, t: &Tally) -> String {
    let n = t.searches;
    let power = match planted(d) {
        Some(_) => pct(t.found, n),
        None => "-".into(),
    };
    let gain = match d.best_gain() > 0.0 {
        true => format!("{:.0} %", 100.0 * t.gain / n as f64),
        false => "-".into(),
    };
    format!(
        "| {} | {:.1} % | {n} | {} | {power} | {gain} | {:.0} % | {} of {} | {} | {} | {} | {} |",
        name(d),
        100.0 * (1.0 - (-d.unit).exp()),
        pct(t.false_ship, n),
        100.0 * t.legs as f64 / t.exhaustive_legs.max(1) as f64,
        t.sham_claims,
        t.shams,
        pct(t.single_false, n),
        pct(t.single_found, n),
        pct(t.racing_false, n),
        pct(t.racing_found, n),
    )
}

fn designs() -> Vec<Design> {
    let mut v = Vec::new();
    for sd in [0.02, 0.05, 0.10, 0.20, 0.30] {
        for kind in [
            Kind::Null,
            Kind::Planted(1.0),
            Kind::Planted(2.0),
            Kind::Planted(4.0),
            Kind::Harmful,
            Kind::Redundant,
            Kind::Interacting,
        ] {
            v.push(Design::new(kind, sd, false));
        }
    }
    for sd in [0.05, 0.20] {
        for kind in [Kind::Null, Kind::Planted(2.0)] {
            v.push(Design::new(kind, sd, true));
        }
    }
    v
}

/// The whole table (`HOSTKNOB_TUNE_SIM=full`), or a smoke check of a few designs.
#[test]
fn the_search_ships_no_null_knob_and_finds_planted_ones() {
    let full = std::env::var("HOSTKNOB_TUNE_SIM").is_ok_and(|v| v == "full");
    let searches = if full { 300 } else { 40 };
    let chosen: Vec<Design> = if full {
        designs()
    } else {
        vec![
            Design::new(Kind::Null, 0.05, false),
            Design::new(Kind::Planted(2.0), 0.05, false),
            Design::new(Kind::Redundant, 0.10, false),
            Design::new(Kind::Null, 0.20, false),
        ]
    };
    println!(
        "| design | MDE | searches | false ship | found (power) | gain | legs vs exhaustive | sham claims | single-run false ship | single-run found | 3-run racing false ship | 3-run racing found |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let rows: Vec<(Design, Tally)> = std::thread::scope(|s| {
        let handles: Vec<_> = chosen
            .chunks(chosen.len().div_ceil(2))
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|d| (*d, tally(*d, searches, 1)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for (d, t) in &rows {
        println!("{}", row(d, t));
        let n = t.searches;
        // Issue 48's goal: at most 25 % of the legs of an exhaustive test.
        assert!(
            t.legs * 4 <= t.exhaustive_legs,
            "{}: {} legs against {} exhaustive",
            name(d),
            t.legs,
            t.exhaustive_legs
        );
        if d.kind == Kind::Null {
            assert!(
                t.false_ship * 100 <= n,
                "{}: {}/{n} shipped",
                name(d),
                t.false_ship
            );
            // The baselines ship noise: that is what the test prevents.
            assert!(t.single_false * 2 > n, "{}: {}", name(d), t.single_false);
        }
        if d.kind == Kind::Planted(2.0) && !d.drift {
            assert!(t.found * 10 >= n * 8, "{}: power {}/{n}", name(d), t.found);
        }
        if d.kind == Kind::Redundant {
            assert!(
                t.false_ship * 20 <= n,
                "{}: {}/{n} shipped both",
                name(d),
                t.false_ship
            );
        }
    }
}

#[test]
fn a_replay_of_the_recorded_rounds_reaches_every_decision_again() {
    for (seed, kind) in [(3, Kind::Planted(4.0)), (4, Kind::Redundant)] {
        let d = Design::new(kind, 0.05, false);
        let o = search(d, seed);
        assert!(
            !o.shipped.is_empty(),
            "seed {seed}: the planted knob was found"
        );
        let mut replay = Replay::new(o.records.clone());
        let again = search::run(
            &sim_model::dims(),
            &sim_model::settings(seed),
            &mut replay,
            &mut |_| {},
        )
        .unwrap();
        replay.finish().unwrap();
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&o).unwrap()
        );
        // A changed sample changes a decision's numbers; a changed seed diverges.
        let mut other = Replay::new(o.records.clone());
        let e = search::run(
            &sim_model::dims(),
            &sim_model::settings(seed + 1),
            &mut other,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("diverged"), "{e}");
    }
}

#[test]
fn a_cut_record_replays_as_a_partial_search() {
    let d = Design::new(Kind::Planted(4.0), 0.05, false);
    let o = search(d, 9);
    let cut: Vec<_> = o.records[..o.records.len() / 2].to_vec();
    let p = search::run(
        &sim_model::dims(),
        &sim_model::settings(9),
        &mut Replay::new(cut),
        &mut |_| {},
    )
    .unwrap();
    assert!(p.partial && p.confirm.is_none() && p.shipped.is_empty());
    assert!(p.legs_used < o.legs_used);
}
