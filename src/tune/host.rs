//! The host as a bench: each leg sets its knobs with apply's own machinery
//! (journal first, write, read back; `verify`'s switch, under the state lock
//! held for the whole search), settles and runs the probe or the user's
//! command. The host is restored on every path: a clean end and an error
//! through [`HostBench::finish`], a panic through the switch's guard, a
//! signal by stopping the search, SIGKILL through the journal (`revert`).

use std::time::Instant;

use anyhow::{Context, Result, anyhow};

use super::design::Dim;
use super::space::Entry;
use super::{Bench, Leg};
use crate::apply::Session;
use crate::manifest::Knob;
use crate::probe::{self, latency};
use crate::verify::{self, Options, Snapshot, Switch, command, placement::Placement};

pub struct HostBench<'a, 's> {
    session: &'a Session<'s>,
    entries: Vec<&'a Entry>,
    switch: Switch<'a, 's>,
    opts: Options,
    placed: Option<command::Placed>,
    before: Vec<Snapshot>,
    pub placement: Placement,
    /// The probe's settings, from its first run.
    pub settings: serde_json::Value,
    pub warnings: Vec<String>,
    /// Seconds each leg took (switch, settle and probe).
    pub leg_times: Vec<f64>,
    /// The time budget (seconds), turned into legs after the pilot.
    pub budget_s: f64,
    pub started: Instant,
    /// After the pilot, the budget is also a deadline: legs slower than the
    /// pilot's would otherwise overrun it.
    deadline: Option<Instant>,
    out_of_time: bool,
}

/// A kind's message about a variant, placed at its entry of the space file
/// (the variant's own `file:line:` counts lines of the document tune wrote).
fn at_entry(file: &std::path::Path, e: &Entry, m: &str) -> anyhow::Error {
    let prefix = format!("{}:", e.base.source.file.display());
    let m = match m.strip_prefix(&prefix) {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, r)| r),
        None => m,
    };
    anyhow!("{}:{}: knobs[{}]: {m}", file.display(), e.line, e.index)
}

/// Each searched entry as the core's dimension, its as-found value found by planning.
pub fn dims(session: &Session, file: &std::path::Path, entries: &[&Entry]) -> Result<Vec<Dim>> {
    entries
        .iter()
        .map(|e| {
            let mut as_found = None;
            for (j, k) in e.variants.iter().enumerate() {
                let p = crate::apply::plan::plan(&session.ctx, &[k])
                    .map_err(|m| at_entry(file, e, &m.to_string()))?;
                if p.steps.is_empty() && verify::held_request(k).is_none() {
                    as_found = Some(j);
                }
            }
            Ok(Dim {
                id: e.id.clone(),
                values: e.values.clone(),
                as_found,
            })
        })
        .collect()
}

impl<'a, 's> HostBench<'a, 's> {
    /// Checks every value against the host (nothing written) and places the probe.
    pub fn new(
        session: &'a Session<'s>,
        entries: Vec<&'a Entry>,
        file: &std::path::Path,
        opts: &Options,
        budget_s: f64,
    ) -> Result<Self> {
        for e in &entries {
            for (j, (k, v)) in e.variants.iter().zip(&e.values).enumerate() {
                verify::check_variant(session, k).with_context(|| {
                    format!(
                        "{}:{}: knobs[{}].values[{j}]: {} value {v}",
                        file.display(),
                        e.line,
                        e.index,
                        e.id
                    )
                })?;
            }
        }
        // The probe is placed by the first knob with CPUs in its target.
        let place_on = entries
            .iter()
            .map(|e| &e.base)
            .find(|k| {
                k.spec
                    .survey(&session.ctx)
                    .is_ok_and(|s| s.targets.iter().any(|t| t.cpus.is_some()))
            })
            .unwrap_or(&entries[0].base);
        let (probe, placement) = verify::place_probe(session, place_on, opts)?;
        let placed = command::placed(session.root(), opts.command.as_deref(), &placement)?;
        let knobs: Vec<&Knob> = entries.iter().map(|e| &e.base).collect();
        let before = verify::snapshot_all(session, &knobs)?;
        probe::interrupt::install()?;
        Ok(HostBench {
            session,
            entries,
            switch: Switch::new(session),
            opts: Options {
                probe,
                probe_name: opts.probe_name.clone(),
                command: opts.command.clone(),
                ..*opts
            },
            placed,
            before,
            placement,
            settings: serde_json::Value::Null,
            warnings: Vec::new(),
            leg_times: Vec::new(),
            budget_s,
            started: Instant::now(),
            deadline: None,
            out_of_time: false,
        })
    }

    /// Restores every knob and checks each file reads as it did before.
    pub fn finish(mut self) -> Result<bool> {
        self.switch
            .restore()
            .context("restoring the knobs after the search")?;
        let knobs: Vec<&Knob> = self.entries.iter().map(|e| &e.base).collect();
        Ok(verify::snapshot_all(self.session, &knobs)? == self.before)
    }

    pub fn placed(&self) -> Option<&command::Placed> {
        self.placed.as_ref()
    }

    fn one_leg(&mut self, leg: &Leg) -> Result<Option<Vec<f64>>> {
        let started = Instant::now();
        let knobs: Vec<&Knob> = leg
            .config
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| &self.entries[k].variants[v]))
            .collect();
        self.switch.to(&knobs)?;
        let root = self.session.root();
        // pm-qos requests live while their file is open: held for this leg only.
        let mut held = Vec::new();
        for us in knobs.iter().filter_map(|k| verify::held_request(k)) {
            held.push(probe::pmqos::hold(root, us).context("holding the leg's pm-qos request")?);
        }
        if !verify::settle(self.opts.settle) {
            return Ok(None);
        }
        let run = match (&self.opts.command, &self.placed) {
            (Some(c), Some(p)) => command::run_leg(c, p).map(|r| r.0),
            _ => latency::run(root, &self.opts.probe),
        };
        let run = match run {
            Ok(r) => r,
            Err(_) if probe::cancelled() => return Ok(None),
            Err(e) => return Err(e.context(format!("the {} probe", self.opts.probe_name))),
        };
        drop(held);
        for w in run.warnings {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
        if self.settings.is_null() {
            self.settings = run.settings;
        }
        self.leg_times.push(started.elapsed().as_secs_f64());
        Ok(Some(run.samples))
    }

    pub fn leg_seconds(&self) -> Option<f64> {
        let n = self.leg_times.len();
        (n > 0).then(|| self.leg_times.iter().sum::<f64>() / n as f64)
    }
}

impl Bench for HostBench<'_, '_> {
    fn round(
        &mut self,
        race: &str,
        legs: &[Leg],
        order: &[usize],
    ) -> Result<Option<Vec<Vec<f64>>>> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.out_of_time = true;
            return Ok(None);
        }
        let mut got = vec![Vec::new(); legs.len()];
        for &i in order {
            if probe::cancelled() {
                return Ok(None);
            }
            match self
                .one_leg(&legs[i])
                .with_context(|| format!("{race}: the {} leg", legs[i].label))?
            {
                Some(s) => got[i] = s,
                None => return Ok(None),
            }
        }
        Ok(Some(got))
    }

    fn budget_legs(&mut self, used: usize) -> Option<usize> {
        self.deadline = Some(self.started + std::time::Duration::from_secs_f64(self.budget_s));
        let per = self.leg_seconds()?;
        let left = self.budget_s - self.started.elapsed().as_secs_f64();
        Some(used + (left.max(0.0) / per) as usize)
    }

    fn leg_seconds(&self) -> Option<f64> {
        HostBench::leg_seconds(self)
    }

    fn stop_reason(&self) -> String {
        if self.out_of_time {
            super::OUT_OF_TIME
        } else {
            super::SIGNAL
        }
        .into()
    }
}
