//! Progress on stderr for runs that take more than a couple of seconds
//! (probes, verify legs, waiting for the lock, a big capture). Drawn only
//! when stderr is a terminal and the command was not given `--quiet`;
//! otherwise every call here is a no-op and no thread is started.
//!
//! Measuring threads never draw: they bump a [`Ticker`]'s counter (one
//! relaxed atomic add, outside any timed interval) and a thread of the
//! ticker's own, placed by the caller away from the measured CPU, draws it.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// How often a ticker's thread redraws.
const REDRAW: Duration = Duration::from_millis(200);
/// Nothing is drawn for work done sooner: no flash on a quick run.
const DELAY: Duration = Duration::from_secs(1);

/// Turns progress on (when stderr is a terminal) or off, for the process.
pub fn enable(on: bool) {
    ENABLED.store(on && std::io::stderr().is_terminal(), Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn bar(total: Option<u64>, what: &str) -> ProgressBar {
    let (bar, style) = match total {
        Some(n) => (
            ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            "{msg} {wide_bar} {pos}/{len} {elapsed}",
        ),
        None => (
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            "{spinner} {msg} {elapsed}",
        ),
    };
    if let Ok(s) = ProgressStyle::with_template(style) {
        bar.set_style(s);
    }
    bar.set_message(what.to_string());
    bar
}

/// A count of work done, drawn as a bar by a thread of its own.
pub struct Ticker {
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    drawer: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts drawing `what` towards `total` (a spinner when `None`).
    /// `place` runs first on the drawing thread (e.g. pin it off the CPU
    /// being measured). Without progress, no thread is started.
    pub fn start(what: &str, total: Option<u64>, place: impl FnOnce() + Send + 'static) -> Ticker {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let drawer = enabled().then(|| {
            let (done, stop, what) = (done.clone(), stop.clone(), what.to_string());
            std::thread::spawn(move || {
                place();
                let started = std::time::Instant::now();
                let until = started + DELAY;
                while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
                    std::thread::park_timeout(until - std::time::Instant::now());
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let bar = bar(total, &what);
                bar.set_elapsed(started.elapsed());
                while !stop.load(Ordering::Relaxed) {
                    bar.set_position(done.load(Ordering::Relaxed));
                    bar.tick();
                    std::thread::park_timeout(REDRAW);
                }
                bar.finish_and_clear();
            })
        });
        Ticker { done, stop, drawer }
    }

    /// One more unit done: cheap enough for a measuring thread.
    #[inline]
    pub fn tick(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.drawer.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}
