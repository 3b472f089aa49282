//! What the page can change while a run goes on: cancellation, visibility, and word that
//! it has drawn what it was sent.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use web_sys::AbortController;

use crate::platform::Scope;

/// Cancels a run: aborts every request in flight and stops anything new from starting.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Rc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: Cell<bool>,
    in_flight: RefCell<Vec<(u64, AbortController)>>,
    next_id: Cell<u64>,
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.cancelled.set(true);
        for (_, controller) in self.0.in_flight.borrow_mut().drain(..) {
            controller.abort();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.get()
    }

    /// Registers a request's controller until the returned guard is dropped.
    pub fn register(&self, controller: AbortController) -> InFlight {
        let id = self.0.next_id.get();
        self.0.next_id.set(id + 1);
        self.0.in_flight.borrow_mut().push((id, controller));
        InFlight {
            cancel: self.clone(),
            id,
        }
    }

    /// Waits `ms` milliseconds, or less when the run is cancelled meanwhile. Waits in
    /// steps, so a cancel is noticed within 200 ms; returns how late the latest step came
    /// back (a page the browser froze comes back seconds late), or `None` when the run was
    /// cancelled.
    pub async fn sleep(&self, scope: &Scope, ms: u32) -> Option<f64> {
        let performance = scope.performance();
        let end = performance.now() + f64::from(ms);
        let mut latest = 0.0f64;
        loop {
            if self.is_cancelled() {
                return None;
            }
            let now = performance.now();
            let left = end - now;
            if left <= 0.0 {
                return Some(latest);
            }
            let step = left.min(200.0).ceil();
            scope.sleep(step as u32).await;
            latest = latest.max(performance.now() - now - step);
        }
    }
}

/// A request registered with [`Cancel`].
#[derive(Debug)]
pub struct InFlight {
    cancel: Cancel,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.cancel
            .0
            .in_flight
            .borrow_mut()
            .retain(|(id, _)| *id != self.id);
    }
}

/// The page's word that it has drawn every sample it was sent. Drawing a sample (charts,
/// tables, layout, paint) takes the page's main thread and, on a phone or a 2-core laptop,
/// the cores the browser's network threads and the engine's worker need too: a request
/// that starts meanwhile is dispatched late, and its time to first token grows by the
/// drawing. So the engine waits for this word (or [`Drawn::TIMEOUT_MS`]) before it starts
/// the next request: the page draws between requests, never during one. Off unless a
/// page that draws asks for it ([`Drawn::awaited`]); nothing waits for a caller that does
/// not draw.
#[derive(Debug, Clone, Default)]
pub struct Drawn(Rc<DrawnState>);

#[derive(Debug, Default)]
struct DrawnState {
    /// A page draws the samples and says when it has.
    awaited: bool,
    /// Samples sent to the page and not yet drawn.
    pending: Cell<bool>,
}

impl Drawn {
    /// The longest wait for the page: one that takes longer to draw is struggling anyway,
    /// and the run must go on.
    pub const TIMEOUT_MS: u32 = 250;

    /// A gate the engine waits at: the page will say when it has drawn.
    pub fn awaited() -> Self {
        Self(Rc::new(DrawnState {
            awaited: true,
            pending: Cell::new(false),
        }))
    }

    /// The same gate, closed until the page's first word: the page is drawing the view
    /// the run is shown in, and the engine on the page's own thread would read its first
    /// request late by that drawing.
    pub fn awaited_from_the_start() -> Self {
        Self(Rc::new(DrawnState {
            awaited: true,
            pending: Cell::new(true),
        }))
    }

    /// Samples were just sent to the page.
    pub fn sent(&self) {
        self.0.pending.set(self.0.awaited);
    }

    /// The page has drawn everything it was sent.
    pub fn drawn(&self) {
        self.0.pending.set(false);
    }

    /// Waits until the page has drawn what it was sent, at most [`Self::TIMEOUT_MS`].
    pub async fn wait(&self, scope: &Scope, cancel: &Cancel) {
        let performance = scope.performance();
        let until = performance.now() + f64::from(Self::TIMEOUT_MS);
        while self.0.pending.get() && !cancel.is_cancelled() && performance.now() < until {
            scope.sleep(2).await;
        }
    }
}

/// Whether the page is hidden, as the page reports it.
#[derive(Debug, Clone, Default)]
pub struct Visibility(Rc<VisibilityState>);

#[derive(Debug, Default)]
struct VisibilityState {
    hidden: Cell<bool>,
    /// Changes so far: a request during which this moved saw the page hidden.
    changes: Cell<u64>,
    hidden_since: Cell<Option<f64>>,
    hidden_total_ms: Cell<f64>,
}

/// What a request remembers of visibility when it starts.
#[derive(Debug, Clone, Copy)]
pub struct VisibilityMark {
    hidden: bool,
    changes: u64,
}

impl Visibility {
    /// Records a change reported at `now` (the engine's clock).
    pub fn set(&self, hidden: bool, now: f64) {
        let state = &self.0;
        if state.hidden.get() == hidden {
            return;
        }
        state.hidden.set(hidden);
        state.changes.set(state.changes.get() + 1);
        if hidden {
            state.hidden_since.set(Some(now));
        } else if let Some(since) = state.hidden_since.take() {
            state
                .hidden_total_ms
                .set(state.hidden_total_ms.get() + (now - since));
        }
    }

    pub fn mark(&self) -> VisibilityMark {
        VisibilityMark {
            hidden: self.0.hidden.get(),
            changes: self.0.changes.get(),
        }
    }

    /// Whether the page was hidden at any moment since `mark`.
    pub fn hidden_since(&self, mark: VisibilityMark) -> bool {
        mark.hidden || self.0.hidden.get() || self.0.changes.get() != mark.changes
    }

    /// How long the page has been hidden in all, up to `now`.
    pub fn hidden_ms(&self, now: f64) -> f64 {
        let open = self.0.hidden_since.get().map_or(0.0, |since| now - since);
        self.0.hidden_total_ms.get() + open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen_test(unsupported = test)]
    fn a_request_sees_the_page_hidden_if_it_was_at_any_moment() {
        let visibility = Visibility::default();
        let mark = visibility.mark();
        assert!(!visibility.hidden_since(mark));
        visibility.set(true, 100.0);
        visibility.set(false, 400.0);
        assert!(
            visibility.hidden_since(mark),
            "hidden and shown again during the request"
        );
        let later = visibility.mark();
        assert!(!visibility.hidden_since(later));
        visibility.set(true, 1000.0);
        assert_eq!(visibility.hidden_ms(1500.0), 300.0 + 500.0);
        // A repeated report changes nothing.
        visibility.set(true, 1200.0);
        assert_eq!(visibility.hidden_ms(1500.0), 800.0);
    }
}
