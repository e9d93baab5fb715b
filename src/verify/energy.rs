//! Package energy per leg, from the powercap RAPL counters
//! (`/sys/class/powercap/intel-rapl:N`: `energy_uj`, wrapping at
//! `max_energy_range_uj`), read through the root seam around each probe
//! run. AMD's RAPL registers under the same `intel-rapl` control type
//! (drivers/powercap/intel_rapl_common.c); no `amd-rapl` zone exists. Only
//! the packages of the CPUs under test are summed (a zone's `name` is
//! `package-P` or `package-P-die-D`, P the CPUs' `physical_package_id`). Where
//! the host exposes none (a VM), the report says "energy not exposed", never
//! zero watts.

use std::time::Instant;

use serde::Serialize;

use crate::root::Root;

const POWERCAP: &str = "/sys/class/powercap";

/// A package zone: its directory and the counter's wrap.
#[derive(Clone, Debug)]
struct Zone {
    dir: String,
    max_uj: u64,
    /// P of a `package-P` name (None: unnamed, kept).
    package: Option<u32>,
}

/// The energy counters over the legs.
pub struct Legs {
    zones: Vec<Zone>,
    /// Why there are none (absent, unreadable).
    missing: Option<String>,
    joules: [f64; 2],
    seconds: [f64; 2],
    /// Each leg's average power per round, in order (as found, applied).
    round_watts: [Vec<f64>; 2],
}

/// The counters at the start of a leg's probe run.
pub struct Start {
    at: Instant,
    uj: Vec<Option<u64>>,
}

/// Package zones: `intel-rapl:N` (not their sub-zones, not `psys`, which
/// counts the platform), with a readable counter.
fn zones(root: &Root) -> (Vec<Zone>, Option<String>) {
    let Ok(mut names) = root.read_dir(POWERCAP) else {
        return (Vec::new(), Some(format!("no {POWERCAP}")));
    };
    names.sort();
    let mut out = Vec::new();
    let mut why = format!("no intel-rapl package zone in {POWERCAP} (AMD's is intel-rapl too)");
    for n in names {
        let package = n
            .strip_prefix("intel-rapl:")
            .is_some_and(|i| i.parse::<u32>().is_ok());
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
            (Ok(_), Some(max_uj)) => out.push(Zone {
                dir,
                max_uj,
                package: name.as_deref().and_then(package_of),
            }),
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

/// P of a zone named `package-P` or `package-P-die-D`.
fn package_of(name: &str) -> Option<u32> {
    name.strip_prefix("package-")?
        .split('-')
        .next()?
        .parse()
        .ok()
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
            round_watts: [Vec::new(), Vec::new()],
        }
    }

    /// Keeps the zones of the packages of `cpus` (the CPUs under test): the
    /// other packages' power is other work. A CPU whose package cannot be
    /// read keeps every zone.
    pub fn keep_packages(&mut self, root: &Root, cpus: &[u32]) {
        let mut packages = Vec::new();
        for c in cpus {
            let f = format!("/sys/devices/system/cpu/cpu{c}/topology/physical_package_id");
            match root
                .read_trimmed(&f)
                .ok()
                .flatten()
                .and_then(|t| t.parse::<u32>().ok())
            {
                Some(p) => packages.push(p),
                None => return,
            }
        }
        if packages.is_empty() {
            return;
        }
        let before = self.zones.len();
        self.zones
            .retain(|z| z.package.is_none_or(|p| packages.contains(&p)));
        if self.zones.is_empty() && before > 0 {
            self.missing = Some("no package zone for the CPUs under test".into());
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
        self.round_watts[k].push(uj as f64 / 1e6 / secs.max(1e-9));
    }

    /// The report: watts per leg and what the applied leg's power bought.
    /// `metric_us`: each leg's compared metric in µs (a time metric only);
    /// `ratio_interval`: the verdict's interval of applied / as found.
    pub fn report(&self, metric_us: Option<[f64; 2]>, ratio_interval: [f64; 2]) -> Energy {
        if let Some(why) = self.missing.as_ref().filter(|_| self.zones.is_empty()) {
            return Energy {
                exposed: false,
                zones: Vec::new(),
                joules: None,
                seconds: None,
                watts: None,
                power_interval: None,
                us_saved_per_watt: None,
                us_saved_per_watt_interval: None,
                words: format!("energy not exposed: {why}"),
            };
        }
        let watts = [0, 1].map(|k| self.joules[k] / self.seconds[k].max(1e-9));
        let extra = watts[1] - watts[0];
        let saved = metric_us.map(|m| m[0] - m[1]);
        let diff = power_interval(&self.round_watts);
        let resolved = diff.is_some_and(|[lo, hi]| lo > 0.0 || hi < 0.0);
        let per_watt = saved
            .filter(|_| resolved && extra > 0.01)
            .map(|s| s / extra);
        let iv = diff.map_or_else(
            || "no interval: fewer than 2 rounds".to_string(),
            |[lo, hi]| {
                format!(
                    "{:.2} % interval {lo:+.2} to {hi:+.2} W",
                    (1.0 - ALPHA) * 100.0
                )
            },
        );
        // µs saved over the verdict's ratio interval, W over the power
        // interval: each holds at 1 - alpha, both together at 1 - 2 alpha.
        let per_watt_interval = match (metric_us, diff) {
            (Some([b, _]), Some(w)) if per_watt.is_some() => Some(quotient_interval(
                [b * (1.0 - ratio_interval[1]), b * (1.0 - ratio_interval[0])],
                w,
            )),
            _ => None,
        };
        let cost = match (saved, per_watt, per_watt_interval) {
            (Some(_), Some(p), Some([lo, hi])) => format!(
                "; {p:.2} µs saved per extra watt ({:.1} % interval {lo:.2} to {hi:.2} µs/W; power {iv})",
                (1.0 - 2.0 * ALPHA) * 100.0
            ),
            (Some(_), Some(p), None) => format!("; {p:.2} µs saved per extra watt ({iv})"),
            (Some(_), None, _) if !resolved => {
                format!("; µs saved per watt withheld: the power difference is not resolved ({iv})")
            }
            (Some(s), None, _) => format!(
                "; {s:.2} µs saved at no extra power ({:.2} W {}; {iv})",
                extra.abs(),
                if extra < 0.0 { "less" } else { "more" }
            ),
            (None, _, _) => String::new(),
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
            power_interval: diff,
            us_saved_per_watt: per_watt,
            us_saved_per_watt_interval: per_watt_interval,
        }
    }
}

/// The run's error rate (verify's), for the power difference's interval.
const ALPHA: f64 = super::rule::ALPHA;

/// Student t interval of the per-round power differences (applied − as
/// found); `None` with fewer than 2 paired rounds.
fn power_interval(w: &[Vec<f64>; 2]) -> Option<[f64; 2]> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let d: Vec<f64> = w[0].iter().zip(&w[1]).map(|(a, b)| b - a).collect();
    if d.len() < 2 {
        return None;
    }
    let (mean, sd) = super::rule::mean_sd(&d);
    let t = StudentsT::new(0.0, 1.0, (d.len() - 1) as f64).ok()?;
    let half = t.inverse_cdf(1.0 - ALPHA / 2.0) * sd / (d.len() as f64).sqrt();
    Some([mean - half, mean + half])
}

/// The interval of s / w for s in `s` and w in `w`, when w > 0 throughout
/// (a resolved, positive power difference): the extremes of the quotient lie
/// at the corners.
fn quotient_interval(s: [f64; 2], w: [f64; 2]) -> [f64; 2] {
    let q = [s[0] / w[0], s[0] / w[1], s[1] / w[0], s[1] / w[1]];
    [
        q.iter().copied().fold(f64::INFINITY, f64::min),
        q.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    ]
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
    /// The interval of applied − as found W over the rounds' paired
    /// differences (Student t at 1 − 0.5 %); null with fewer than 2 rounds.
    pub power_interval: Option<[f64; 2]>,
    /// (as found − applied µs of the compared metric) / (applied − as found
    /// W), when the applied leg draws more power, `power_interval` excludes
    /// 0 (else withheld: null) and the metric is a time.
    pub us_saved_per_watt: Option<f64>,
    /// The interval of `us_saved_per_watt`: the µs saved over the verdict's
    /// ratio interval divided by `power_interval` (at 1 − 2 × 0.5 %, as two
    /// intervals at 1 − 0.5 % each hold together at least that often);
    /// null when `us_saved_per_watt` is.
    pub us_saved_per_watt_interval: Option<[f64; 2]>,
    pub words: String,
}

/// Test binary ([`crate::test_hooks`]): `HOSTKNOB_TEST_ENERGY_UJ=AS_FOUND,APPLIED` advances every
/// zone's `energy_uj` in the tree by that much (wrapping) before a leg's end
/// is read, as a package drawing that energy would.
fn test_advance(root: &Root, zones: &[Zone], k: usize) {
    // Never the live sysfs: only a tree's copy.
    let Some(v) = crate::test_hooks::var("HOSTKNOB_TEST_ENERGY_UJ").filter(|_| !root.is_live())
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
    fn power_per_watt_needs_a_resolved_power_difference() {
        let mut l = super::Legs {
            zones: vec![super::Zone {
                dir: "z".into(),
                max_uj: 1,
                package: Some(0),
            }],
            missing: None,
            joules: [10.0, 10.5],
            seconds: [10.0, 10.0],
            // +0.05 W on average, but rounds disagree on its sign.
            round_watts: [vec![1.0, 1.0, 1.0, 1.0], vec![1.5, 0.6, 1.4, 0.7]],
        };
        let e = l.report(Some([100.0, 80.0]), [0.7, 0.9]);
        assert_eq!(e.us_saved_per_watt, None, "{}", e.words);
        assert_eq!(e.us_saved_per_watt_interval, None, "{}", e.words);
        assert!(
            e.words
                .contains("withheld: the power difference is not resolved"),
            "{}",
            e.words
        );
        let [lo, hi] = e.power_interval.unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        // Every round 0.5 W more: resolved, and given with its interval.
        l.round_watts[1] = vec![1.5, 1.49, 1.51, 1.5];
        l.joules[1] = 15.0;
        let e = l.report(Some([100.0, 80.0]), [0.7, 0.9]);
        assert!(
            (e.us_saved_per_watt.unwrap() - 40.0).abs() < 1e-9,
            "{}",
            e.words
        );
        // Its own interval: 10..30 µs saved (ratio 0.7..0.9 of 100 µs) over
        // the power interval's bounds, which lie either side of 0.5 W.
        let [lo, hi] = e.us_saved_per_watt_interval.unwrap();
        let [wlo, whi] = e.power_interval.unwrap();
        assert!(0.0 < wlo && wlo < 0.5 && whi > 0.5, "{wlo} {whi}");
        assert!((lo - 10.0 / whi).abs() < 1e-9 && (hi - 30.0 / wlo).abs() < 1e-9);
        assert!(lo < 40.0 && 40.0 < hi, "{}", e.words);
        assert!(
            e.words.contains(&format!(
                "40.00 µs saved per extra watt (99.0 % interval {lo:.2} to {hi:.2} µs/W; power 99.50 % interval"
            )),
            "{}",
            e.words
        );
        // A saving whose ratio interval reaches past 1 (a possible loss)
        // gives an interval that reaches below 0.
        let e = l.report(Some([100.0, 80.0]), [0.7, 1.05]);
        assert!(
            e.us_saved_per_watt_interval.unwrap()[0] < 0.0,
            "{}",
            e.words
        );
    }

    #[test]
    fn zones_are_named_by_package() {
        assert_eq!(super::package_of("package-1"), Some(1));
        assert_eq!(super::package_of("package-0-die-1"), Some(0));
        assert_eq!(super::package_of("psys"), None);
    }

    #[test]
    fn a_counter_that_wrapped_counts_across_the_wrap() {
        assert_eq!(super::delta(100, 350, 1000), 250);
        assert_eq!(super::delta(900, 50, 999), 150);
    }
}
