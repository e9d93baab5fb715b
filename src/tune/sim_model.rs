//! The simulation's host: a true log metric per configuration, and seeded
//! per-round samples of it with noise and drift, served to the real search
//! (and to the two baselines) as a [`Bench`].

use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::design::{self, Dim, Settings};
use super::{Bench, Config, Leg};

/// Knobs and values of every simulated space: knob 0 lists the host's own
/// value first (its leg is a sham).
pub const KNOBS: usize = 4;
pub const VALUES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Null,
    /// Knob 1's value 2 improves by this many MDEs.
    Planted(f64),
    /// A planted 2x MDE, and knob 2's value 1 worsens by 2 MDEs.
    Harmful,
    /// Knobs 1 and 3 (value 0) each improve by 2 MDEs, together no more.
    Redundant,
    /// Knobs 1 and 2 (value 0) improve by 2 MDEs together, nothing alone.
    Interacting,
}

#[derive(Clone, Copy, Debug)]
pub struct Design {
    pub kind: Kind,
    /// SD of the per-round log ratio of two legs.
    pub sd: f64,
    /// Drift: a random walk of the round's level and a trend within each round.
    pub drift: bool,
    /// The log effect of one MDE at this noise (the plan's own figure).
    pub unit: f64,
}

pub fn dims() -> Vec<Dim> {
    (0..KNOBS)
        .map(|i| Dim {
            id: format!("k{i}"),
            values: (0..VALUES).map(|v| format!("v{v}")).collect(),
            as_found: (i == 0).then_some(0),
        })
        .collect()
}

/// The budget of every simulated search: 60 rounds per comparison at worst.
pub fn settings(seed: u64) -> Settings {
    let legs = design::plan(&dims(), &Settings::new(usize::MAX, 0), None)
        .map(|p| p.worst_legs_at(&dims(), 60))
        .unwrap_or(0);
    Settings::new(legs, seed)
}

impl Design {
    pub fn new(kind: Kind, sd: f64, drift: bool) -> Design {
        let p = design::plan(&dims(), &settings(0), Some(sd)).expect("a plan");
        Design {
            kind,
            sd,
            drift,
            unit: -(1.0 - p.mde.expect("with an SD")).ln(),
        }
    }

    /// The true log metric of a configuration (0: as found; below: better).
    pub fn truth(&self, c: &Config) -> f64 {
        let m = self.unit;
        let is = |k: usize, v: usize| c[k] == Some(v);
        match self.kind {
            Kind::Null => 0.0,
            Kind::Planted(x) => -x * m * is(1, 2) as u8 as f64,
            Kind::Harmful => -2.0 * m * is(1, 2) as u8 as f64 + 2.0 * m * is(2, 1) as u8 as f64,
            Kind::Redundant => -2.0 * m * (is(1, 0) || is(3, 0)) as u8 as f64,
            Kind::Interacting => -2.0 * m * (is(1, 0) && is(2, 0)) as u8 as f64,
        }
    }

    /// The best true gain over every configuration.
    pub fn best_gain(&self) -> f64 {
        let mut best: f64 = 0.0;
        for n in 0..(VALUES + 1).pow(KNOBS as u32) {
            let c: Config = (0..KNOBS)
                .map(|k| match (n / (VALUES + 1).pow(k as u32)) % (VALUES + 1) {
                    0 => None,
                    v => Some(v - 1),
                })
                .collect();
            best = best.max(-self.truth(&c));
        }
        best
    }

    /// Knobs of `set` whose true effect in it is none or harmful.
    pub fn false_knobs(&self, set: &Config) -> Vec<usize> {
        (0..KNOBS)
            .filter(|&k| set[k].is_some())
            .filter(|&k| {
                let mut w = set.clone();
                w[k] = None;
                // Knob 0's value 0 is the host's own: moving to it is no step.
                !(k == 0 && set[k] == Some(0)) && self.truth(set) - self.truth(&w) >= -1e-12
            })
            .collect()
    }
}

/// The seeded host: one sample per leg per round.
pub struct SimHost {
    pub design: Design,
    rng: ChaCha8Rng,
    level: f64,
    pub legs: usize,
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl SimHost {
    pub fn new(design: Design, seed: u64) -> SimHost {
        SimHost {
            design,
            rng: ChaCha8Rng::seed_from_u64(seed),
            level: 0.0,
            legs: 0,
        }
    }

    /// One round of `configs` in `order`: the log samples.
    pub fn sample(&mut self, configs: &[&Config], order: &[usize]) -> Vec<f64> {
        let sd = self.design.sd;
        // Two legs' noise of SD sd/√2 each give a log ratio of SD sd.
        let leg_sd = sd / std::f64::consts::SQRT_2;
        let trend = if self.design.drift {
            self.level += sd * normal(&mut self.rng);
            0.25 * sd
        } else {
            self.level = sd * normal(&mut self.rng);
            0.0
        };
        let mut out = vec![0.0; configs.len()];
        for (pos, &i) in order.iter().enumerate() {
            out[i] = self.design.truth(configs[i])
                + self.level
                + trend * pos as f64
                + leg_sd * normal(&mut self.rng);
        }
        self.legs += configs.len();
        out
    }
}

impl Bench for SimHost {
    fn round(&mut self, _: &str, legs: &[Leg], order: &[usize]) -> Result<Option<Vec<Vec<f64>>>> {
        let configs: Vec<&Config> = legs.iter().map(|l| &l.config).collect();
        let logs = self.sample(&configs, order);
        Ok(Some(
            logs.into_iter().map(|l| vec![1e5 * l.exp()]).collect(),
        ))
    }
}

/// A baseline's result: the configuration it ships and the legs it ran.
pub struct Baseline {
    pub set: Config,
    /// Legs it ran (a baseline spends a few per value).
    #[allow(dead_code)]
    pub legs: usize,
}

/// A-Tune's `abtest`: per knob, one run of the current configuration and
/// one of each value; the best single run wins.
pub fn single_run(host: &mut SimHost) -> Baseline {
    let dims = dims();
    let mut cur: Config = vec![None; KNOBS];
    for (k, d) in dims.iter().enumerate() {
        let mut legs: Vec<Config> = vec![cur.clone()];
        for v in 0..d.values.len() {
            let mut c = cur.clone();
            c[k] = Some(v);
            legs.push(c);
        }
        let refs: Vec<&Config> = legs.iter().collect();
        let order: Vec<usize> = (0..legs.len()).collect();
        let got = host.sample(&refs, &order);
        let best = (0..legs.len())
            .min_by(|&a, &b| got[a].total_cmp(&got[b]))
            .unwrap_or(0);
        cur = legs[best].clone();
    }
    Baseline {
        set: cur,
        legs: host.legs,
    }
}

/// SMAC's intensifier with its default of 3 runs: each value races the
/// incumbent on 3 paired runs and replaces it when its mean is better; no test.
pub fn racing(host: &mut SimHost) -> Baseline {
    let dims = dims();
    let mut inc: Config = vec![None; KNOBS];
    for (k, d) in dims.iter().enumerate() {
        for v in 0..d.values.len() {
            let mut ch = inc.clone();
            ch[k] = Some(v);
            let mut diff = 0.0;
            for r in 0..3 {
                let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
                let got = host.sample(&[&inc, &ch], &order);
                diff += got[1] - got[0];
            }
            if diff < 0.0 {
                inc = ch;
            }
        }
    }
    Baseline {
        set: inc,
        legs: host.legs,
    }
}
