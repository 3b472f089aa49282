//! How late the engine's timers fire. A timer that fires late means the thread was busy or
//! throttled, and every timestamp taken meanwhile may be as late; the run records it so a
//! run taken on a struggling phone can be recognised.

use std::cell::RefCell;
use std::rc::Rc;

use firsttoken_crowd::stats::percentile;
use wasm_bindgen::prelude::*;

use crate::platform::Scope;

/// How long [`clock_step_ms`] watches the clock, at most.
const CLOCK_WATCH_MS: f64 = 50.0;
/// How many steps of the clock it waits for, at most.
const CLOCK_STEPS: u32 = 8;
/// How many steps it must see to name the step: one step alone may be the thread being
/// descheduled (a busy machine), not the clock's grain.
const CLOCK_STEPS_NEEDED: u32 = 3;

/// The smallest step `performance.now()` takes, watched for a few steps (at most
/// [`CLOCK_WATCH_MS`]): browsers coarsen the clock (Chromium to 0.1 ms, Firefox and WebKit
/// to 1 ms on a page that is not cross-origin isolated), and a time finer than the step
/// is not measured. Two readings of a coarsened clock differ by whole steps, so the
/// smallest difference seen is the step; a pause of the thread only makes one difference
/// larger. `None` if the clock moved fewer than [`CLOCK_STEPS_NEEDED`] times: too few to
/// tell its grain from a pause.
pub fn clock_step_ms(scope: &Scope) -> Option<f64> {
    let performance = scope.performance();
    let start = performance.now();
    let (mut last, mut smallest, mut steps) = (start, f64::INFINITY, 0);
    while steps < CLOCK_STEPS {
        let now = performance.now();
        if now > last {
            smallest = smallest.min(now - last);
            steps += 1;
            last = now;
        }
        if now - start > CLOCK_WATCH_MS {
            break;
        }
    }
    // Rounded to a microsecond: the readings' own float error is far below it.
    (steps >= CLOCK_STEPS_NEEDED).then(|| (smallest * 1000.0).round().max(1.0) / 1000.0)
}

/// The period of the probe timer.
const PERIOD_MS: f64 = 100.0;

/// A repeating timer that records how late each tick came; stops when dropped.
#[derive(Debug)]
pub struct TimerProbe {
    scope: Scope,
    handle: Option<i32>,
    lateness: Rc<RefCell<Vec<f64>>>,
    _tick: Closure<dyn FnMut()>,
}

impl TimerProbe {
    pub fn start(scope: &Scope) -> Self {
        let lateness = Rc::new(RefCell::new(Vec::new()));
        let performance = scope.performance();
        let mut last = performance.now();
        let record = lateness.clone();
        let tick = Closure::<dyn FnMut()>::new(move || {
            let now = performance.now();
            record.borrow_mut().push((now - last - PERIOD_MS).max(0.0));
            last = now;
        });
        let handle = scope.set_interval(&tick, PERIOD_MS as i32);
        Self {
            scope: scope.clone(),
            handle,
            lateness,
            _tick: tick,
        }
    }

    /// The 99th percentile and the worst lateness so far, and how many ticks.
    pub fn report(&self) -> (f64, f64, u32) {
        let lateness = self.lateness.borrow();
        (
            percentile(&lateness, 99.0).unwrap_or(0.0),
            lateness.iter().copied().fold(0.0, f64::max),
            lateness.len() as u32,
        )
    }
}

impl Drop for TimerProbe {
    fn drop(&mut self) {
        if let Some(handle) = self.handle {
            self.scope.clear_interval(handle);
        }
    }
}
