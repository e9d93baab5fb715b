//! Package energy per leg, from the powercap RAPL counters
//! (`/sys/class/powercap/intel-rapl:N`, `amd-rapl:N`: `energy_uj`, wrapping
//! at `max_energy_range_uj`), read through the root seam around each probe
//! run. Where the host exposes none (a VM), the report says "energy not
//! exposed", never zero watts.

use std::time::Instant;

use serde::Serialize;

use crate::root::Root;

const POWERCAP: &str = "/sys/class/powercap";

/// A package zone: its directory and the counter's wrap.
#[derive(Clone, Debug)]
struct Zone {
    dir: String,
    max_uj: u64,
}

/// The energy counters over the legs.
pub struct Legs {
    zones: Vec<Zone>,
    /// Why there are none (absent, unreadable).
    missing: Option<String>,
    joules: [f64; 2],
    seconds: [f64; 2],
}

/// The counters at the start of a leg's probe run.
pub struct Start {
    at: Instant,
    uj: Vec<Option<u64>>,
}

/// Package zones: `intel-rapl:N` / `amd-rapl:N` (not their sub-zones, not
/// `psys`, which counts the platform), with a readable counter.
fn zones(root: &Root) -> (Vec<Zone>, Option<String>) {
    let Ok(mut names) = root.read_dir(POWERCAP) else {
        return (Vec::new(), Some(format!("no {POWERCAP}")));
    };
    names.sort();
    let mut out = Vec::new();
    let mut why = format!("no intel-rapl or amd-rapl package zone in {POWERCAP}");
    for n in names {
        let package = ["intel-rapl:", "amd-rapl:"]
            .iter()
            .any(|p| n.strip_prefix(p).is_some_and(|i| i.parse::<u32>().is_ok()));
        if !package {
            continue;
        }
        let dir = format!("{POWERCAP}/{n}");
        let name = root.read_trimmed(&format!("{dir}/name")).ok().flatten();
        if name.as_deref().is_some_and(|n| !n.starts_with("package")) {
            continue;
        }
        let max = root
            .read_trimmed(&format!("{dir}/max_energy_range_uj"))
            .ok()
            .flatten()
            .and_then(|t| t.parse::<u64>().ok());
        match (read_uj(root, &dir), max) {
            (Ok(_), Some(max_uj)) => out.push(Zone { dir, max_uj }),
            (Err(e), _) => {
                why =
                    format!("{dir}/energy_uj cannot be read ({e}; it is root-only on most kernels)")
            }
            (Ok(_), None) => why = format!("{dir}/max_energy_range_uj cannot be read"),
        }
    }
    let why = out.is_empty().then_some(why);
    (out, why)
}

fn read_uj(root: &Root, dir: &str) -> std::io::Result<u64> {
    let t = root
        .read_trimmed(&format!("{dir}/energy_uj"))?
        .unwrap_or_default();
    t.parse()
        .map_err(|_| std::io::Error::other(format!("{t:?} is not a count")))
}

/// `end - start` of a counter that wraps to 0 after `max`.
pub fn delta(start: u64, end: u64, max: u64) -> u64 {
    if end >= start {
        end - start
    } else {
        end + max.saturating_sub(start) + 1
    }
}

impl Legs {
    pub fn new(root: &Root) -> Legs {
        let (zones, missing) = zones(root);
        Legs {
            zones,
            missing,
            joules: [0.0; 2],
            seconds: [0.0; 2],
        }
    }

    pub fn start(&self, root: &Root) -> Start {
        Start {
            at: Instant::now(),
            uj: self
                .zones
                .iter()
                .map(|z| read_uj(root, &z.dir).ok())
                .collect(),
        }
    }

    /// Adds the leg's energy (summed over the package zones) to leg `k`.
    pub fn end(&mut self, root: &Root, k: usize, s: Start) {
        if self.zones.is_empty() {
            return;
        }
        #[cfg(feature = "test-hooks")]
        test_advance(root, &self.zones, k);
        let secs = s.at.elapsed().as_secs_f64();
        let mut uj = 0u64;
        for (z, before) in self.zones.iter().zip(s.uj) {
            match (before, read_uj(root, &z.dir).ok()) {
                (Some(b), Some(e)) => uj += delta(b, e, z.max_uj),
                // A zone that failed mid-run leaves nothing trustworthy.
                _ => {
                    self.missing = Some(format!("{}/energy_uj stopped being readable", z.dir));
                    self.zones.clear();
                    return;
                }
            }
        }
        self.joules[k] += uj as f64 / 1e6;
        self.seconds[k] += secs;
    }

    /// The report: watts per leg and what the applied leg's power bought.
    /// `metric_us`: each leg's compared metric in µs (a time metric only).
    pub fn report(&self, metric_us: Option<[f64; 2]>) -> Energy {
        if let Some(why) = self.missing.as_ref().filter(|_| self.zones.is_empty()) {
            return Energy {
                exposed: false,
                zones: Vec::new(),
                joules: None,
                seconds: None,
                watts: None,
                us_saved_per_watt: None,
                words: format!("energy not exposed: {why}"),
            };
        }
        let watts = [0, 1].map(|k| self.joules[k] / self.seconds[k].max(1e-9));
        let extra = watts[1] - watts[0];
        let saved = metric_us.map(|m| m[0] - m[1]);
        let per_watt = saved.filter(|_| extra > 0.01).map(|s| s / extra);
        let cost = match (saved, per_watt) {
            (Some(_), Some(p)) => format!("; {p:.2} µs saved per extra watt"),
            (Some(s), None) => format!(
                "; {s:.2} µs saved at no extra power ({:.2} W {})",
                extra.abs(),
                if extra < 0.0 { "less" } else { "more" }
            ),
            (None, _) => String::new(),
        };
        Energy {
            exposed: true,
            zones: self.zones.iter().map(|z| z.dir.clone()).collect(),
            joules: Some(self.joules),
            seconds: Some(self.seconds),
            words: format!(
                "package power {:.2} W as found, {:.2} W applied ({:+.2} W){cost}",
                watts[0], watts[1], extra
            ),
            watts: Some(watts),
            us_saved_per_watt: per_watt,
        }
    }
}

/// Package energy over the probe runs of each leg (as found, applied).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Energy {
    /// The host exposes RAPL package counters; when false, every figure is null.
    pub exposed: bool,
    /// The powercap zones summed.
    pub zones: Vec<String>,
    /// Joules over the probe runs, per leg (as found, applied).
    pub joules: Option<[f64; 2]>,
    /// Seconds of probe runs the joules cover, per leg.
    pub seconds: Option<[f64; 2]>,
    /// Average package power per leg.
    pub watts: Option<[f64; 2]>,
    /// (as found − applied µs of the compared metric) / (applied − as found
    /// W), when the applied leg draws more power and the metric is a time.
    pub us_saved_per_watt: Option<f64>,
    pub words: String,
}

/// Test builds: `HOSTKNOB_TEST_ENERGY_UJ=AS_FOUND,APPLIED` advances every
/// zone's `energy_uj` in the tree by that much (wrapping) before a leg's end
/// is read, as a package drawing that energy would.
#[cfg(feature = "test-hooks")]
fn test_advance(root: &Root, zones: &[Zone], k: usize) {
    // Never the live sysfs: only a tree's copy.
    let Some(v) = std::env::var("HOSTKNOB_TEST_ENERGY_UJ")
        .ok()
        .filter(|_| !root.is_live())
    else {
        return;
    };
    let step: Option<u64> = v.split(',').nth(k).and_then(|s| s.trim().parse().ok());
    for z in zones {
        if let (Some(step), Ok(now)) = (step, read_uj(root, &z.dir)) {
            let next = (now as u128 + step as u128) % (z.max_uj as u128 + 1);
            let _ =
                root.write_existing(&format!("{}/energy_uj", z.dir), next.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_counter_that_wrapped_counts_across_the_wrap() {
        assert_eq!(super::delta(100, 350, 1000), 250);
        assert_eq!(super::delta(900, 50, 999), 150);
    }
}
