//! Hardware residency per leg (issue 22 item 5): what the CPU counted while
//! the probe ran, for knobs whose effect the OS idle counters cannot show
//! (C1E, package C-states). Read through `probe::residency`; where the host
//! exposes none, the report says so and why, never a zero.
//!
//! The honoured check adds what the hardware contradicts in an applied leg:
//! - a package C-state deeper than a `package-cstate-limit` knob's limit
//!   whose residency rose;
//! - a core C-state whose residency rose on a CPU where every OS idle state
//!   that asks for it or deeper reads disabled.

use serde::Serialize;

use super::honoured::StateCount;
use crate::knob::KindName;
use crate::manifest::Knob;
use crate::probe::residency::{self, Count, Residency, Scope};
use crate::root::Root;

/// Hardware residency on the watched CPUs, summed over the rounds per leg.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Hardware {
    /// `measured` or `not-exposed`.
    pub status: &'static str,
    /// `perf` (the cstate_core/cstate_pkg PMUs) or `msr` (the residency MSRs).
    pub source: Option<&'static str>,
    /// Why the host exposes no hardware residency (status `not-exposed`).
    pub reason: Option<String>,
    /// Per leg (as found, applied): each counter's ticks, the TSC's, and the share in %.
    pub legs: [Vec<LegCount>; 2],
    /// What the counters cannot show for this knob, when that matters.
    pub note: Option<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LegCount {
    #[serde(flatten)]
    pub count: Count,
    /// `ticks / tsc`, in %.
    pub percent: f64,
}

/// The counters of one run and the legs' sums.
pub struct Watch<'r> {
    res: Result<Residency<'r>, String>,
    legs: [Vec<Count>; 2],
    opened: bool,
}

impl<'r> Watch<'r> {
    pub fn none() -> Watch<'r> {
        Watch {
            res: Err("hardware residency not read: no leg ran".into()),
            legs: [Vec::new(), Vec::new()],
            opened: false,
        }
    }

    /// Opens the counters of `cpus` once, before the first leg.
    pub fn open_once(&mut self, root: &'r Root, cpus: &[u32]) {
        if !self.opened {
            self.res = Residency::open(root, cpus);
            self.opened = true;
        }
    }

    /// The counters now (nothing when not exposed).
    pub fn read(&self) -> Vec<Count> {
        self.res.as_ref().map(|r| r.read()).unwrap_or_default()
    }

    /// Ends a leg that began with `before`: its change, added to the leg's sum.
    pub fn end(&mut self, applied: bool, before: &[Count]) -> Vec<Count> {
        let d = residency::delta(before, &self.read());
        residency::accumulate(&mut self.legs[applied as usize], &d);
        d
    }

    pub fn report(&mut self, knob: &Knob) -> Hardware {
        let legs = std::mem::take(&mut self.legs).map(|l| {
            l.into_iter()
                .map(|count| LegCount {
                    percent: count.percent(),
                    count,
                })
                .collect()
        });
        let note = (knob.kind == KindName::C1e).then(|| {
            "C1E has no residency counter of its own (it is a sub-state of C1): the counters show where the time went, not C1E itself".to_string()
        });
        match &self.res {
            Ok(r) => Hardware {
                status: "measured",
                source: Some(r.source),
                reason: None,
                legs,
                note,
            },
            Err(why) => Hardware {
                status: "not-exposed",
                source: None,
                reason: Some(why.clone()),
                legs,
                note,
            },
        }
    }
}

/// The number of an OS idle state named `C6`, `C6S`, `C1E`, `C10`.
fn os_number(name: &str) -> Option<u32> {
    let digits: String = name
        .strip_prefix('C')?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What the hardware counted in an applied leg against what was asked.
pub fn findings(knob: &Knob, hw: &[Count], idle: &[StateCount]) -> Vec<String> {
    let mut out = Vec::new();
    if knob.kind == KindName::PackageCstateLimit {
        let limit = knob.spec.desired();
        let n: Option<u32> = limit
            .strip_prefix("PC")
            .map(|r| {
                r.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|d| d.parse().ok());
        if let Some(n) = n {
            for c in hw
                .iter()
                .filter(|c| c.scope == Scope::Package && c.number() > n && c.ticks > 0)
            {
                out.push(format!(
                    "package C-state limit {limit} but {} residency rose to {:.2}% of the TSC on the package of CPU {} ({})",
                    c.state,
                    c.percent(),
                    c.cpu,
                    c.counter
                ));
            }
        }
    }
    for c in hw.iter().filter(|c| c.scope == Scope::Core && c.ticks > 0) {
        let asking: Vec<&StateCount> = idle
            .iter()
            .filter(|s| s.cpu == c.cpu && os_number(&s.state).is_some_and(|k| k >= c.number()))
            .collect();
        if !asking.is_empty() && asking.iter().all(|s| s.disabled) {
            let names: Vec<&str> = asking.iter().map(|s| s.state.as_str()).collect();
            out.push(format!(
                "CPU {}: {} disabled but core {} residency rose to {:.2}% of the TSC ({})",
                c.cpu,
                names.join(", "),
                c.state,
                c.percent(),
                c.counter
            ));
        }
    }
    out
}

/// Test binary only ([`crate::test_hooks`]): `HOSTKNOB_TEST_LEG_GATE=DIR` makes each leg, after its
/// probe and before its closing counter reads, create `DIR/leg-I-applied`
/// (or `-as-found`; I counts legs from 0) and wait for `DIR/go-I`, so a test
/// can change a captured tree's counters inside a leg.
pub fn leg_gate(index: usize, applied: bool) {
    let Some(dir) =
        crate::test_hooks::var_os("HOSTKNOB_TEST_LEG_GATE").map(std::path::PathBuf::from)
    else {
        return;
    };
    let name = if applied { "applied" } else { "as-found" };
    let _ = std::fs::write(dir.join(format!("leg-{index}-{name}")), b"");
    let go = dir.join(format!("go-{index}"));
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !go.exists() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_state_names_give_their_c_state_number() {
        assert_eq!(os_number("C6"), Some(6));
        assert_eq!(os_number("C1E"), Some(1));
        assert_eq!(os_number("C10"), Some(10));
        assert_eq!(os_number("C6S"), Some(6));
        assert_eq!(os_number("POLL"), None);
        assert_eq!(os_number("haltpoll idle"), None);
    }
}
