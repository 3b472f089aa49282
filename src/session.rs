//! One run as the page sees it: the engine started in its worker, samples applied to the
//! page at most once per animation frame, progress, cancel, and the record at the end.

use std::cell::RefCell;
use std::rc::Rc;

use firsttoken_core::plan::Plan;
use firsttoken_core::schema::{NetworkLabel, RecordParts, Run, Sample, run_id_from_random};
use firsttoken_pages::client::RenderingEngine;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;

use crate::browser;
use crate::engine::{Engine, FromEngine, Placement, Progress};
use crate::platform::Scope;

/// Where the run is.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Idle,
    Running,
    Finished {
        cancelled: bool,
    },
    /// The run finished but its record is not valid (a bug or a broken clock): it can be
    /// read and downloaded, not uploaded.
    Invalid(String),
}

/// A run's state, as signals the page draws from.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub samples: RwSignal<Vec<Sample>>,
    pub progress: RwSignal<Option<Progress>>,
    pub status: RwSignal<Status>,
    pub record: RwSignal<Option<Run>>,
    /// `performance.now()` when the run started, for the time left.
    pub started: RwSignal<f64>,
    engine: StoredValue<Option<Engine>, LocalStorage>,
}

/// How long the page waits, after the second animation frame that follows its drawing,
/// before it tells the engine the drawing is done: long enough for WebKit's raster, short
/// against the pause between requests.
const SETTLE_MS: i32 = 30;

/// Applies incoming samples to the page at most once per animation frame: a burst of
/// results (a concurrency batch) is one redraw, and the charts never redraw per token.
/// Once the frame is drawn it tells the engine, which waits for that before its next
/// request ([`crate::engine::control::Drawn`]).
#[derive(Clone)]
struct FrameBatch {
    pending: Rc<RefCell<Vec<Sample>>>,
    scheduled: Rc<RefCell<bool>>,
    samples: RwSignal<Vec<Sample>>,
    engine: StoredValue<Option<Engine>, LocalStorage>,
}

/// Calls `done` once what the page shows now has been drawn: the next animation frame
/// comes once this one has been laid out, painted and handed to the compositor; the one
/// after that, once the compositor has rasterized and shown it (on other threads, which
/// share the cores with the engine). Then [`SETTLE_MS`] more: WebKit rasterizes after its
/// second frame too. A hidden page gets no frames and draws nothing: `done` at once.
fn after_drawing(done: impl FnOnce() + 'static) {
    let Some(window) = web_sys::window().filter(|_| !page_hidden()) else {
        done();
        return;
    };
    let settled = Closure::once_into_js(done);
    let after = Closure::once_into_js(move || {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(
                settled.unchecked_ref(),
                SETTLE_MS,
            );
        }
    });
    let next = Closure::once_into_js(move || {
        if let Some(window) = web_sys::window() {
            let _ = window.request_animation_frame(after.unchecked_ref());
        }
    });
    let _ = window.request_animation_frame(next.unchecked_ref());
}

impl FrameBatch {
    fn push(&self, sample: Sample) {
        self.pending.borrow_mut().push(sample);
        let Some(window) = web_sys::window() else {
            return;
        };
        if page_hidden() {
            // A hidden page gets no animation frames and draws nothing.
            self.flush();
            self.drawn();
            return;
        }
        if self.scheduled.replace(true) {
            return;
        }
        let this = self.clone();
        let frame = Closure::once_into_js(move || {
            this.flush();
            let drawn = this.clone();
            after_drawing(move || drawn.drawn());
        });
        let _ = window.request_animation_frame(frame.unchecked_ref());
    }

    /// Applies what is pending now.
    fn flush(&self) {
        self.scheduled.replace(false);
        let pending: Vec<Sample> = self.pending.borrow_mut().drain(..).collect();
        if !pending.is_empty() {
            self.samples.update(|s| s.extend(pending));
        }
    }

    fn drawn(&self) {
        self.engine.with_value(|e| {
            if let Some(e) = e {
                e.drawn();
            }
        });
    }
}

/// Whether the page's address has `key=value` in its query: the diagnostics
/// `cargo xtask bench` uses (`engine=page`, `charts=off`).
pub fn query_has(pair: &str) -> bool {
    web_sys::window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default()
        .trim_start_matches('?')
        .split('&')
        .any(|kv| kv == pair)
}

/// Where the engine runs: the page's address may ask (`engine=page`, `engine=worker`:
/// the diagnostics the benchmark compares); otherwise in its own worker, so that drawing
/// on the page cannot delay a timestamp, except in WebKit.
///
/// WebKit carries a worker's fetches through the page's thread anyway, so the worker's
/// extra hop buys nothing there and costs: at 3 at once the engine in its worker read
/// 1.7–2.3 ms above WebKit's own JavaScript reader, on the page's thread within 0.6 ms
/// (`cargo xtask bench engine_bias`). On the page's thread the first request waits until
/// the page has drawn the running view ([`Session::start`]).
fn placement() -> Placement {
    let user_agent = web_sys::window()
        .and_then(|w| w.navigator().user_agent().ok())
        .unwrap_or_default();
    if query_has("engine=page") {
        Placement::Page
    } else if query_has("engine=worker") {
        Placement::Worker
    } else if firsttoken_pages::client::rendering_engine(&user_agent)
        == Some(RenderingEngine::WebKit)
    {
        Placement::Page
    } else {
        Placement::Worker
    }
}

fn page_hidden() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .is_some_and(|d| d.hidden())
}

impl Session {
    /// A session that tells its engine when the page is hidden (browsers throttle hidden
    /// pages, and the run records it).
    pub fn new() -> Self {
        let session = Self {
            samples: RwSignal::new(Vec::new()),
            progress: RwSignal::new(None),
            status: RwSignal::new(Status::Idle),
            record: RwSignal::new(None),
            started: RwSignal::new(0.0),
            engine: StoredValue::new_local(None),
        };
        let engine = session.engine;
        let on_visibility = Closure::<dyn FnMut()>::new(move || {
            engine.with_value(|e| {
                if let Some(e) = e {
                    e.set_hidden(page_hidden());
                }
            });
        });
        if let Some(document) = web_sys::window().and_then(|w| w.document()) {
            let _ = document.add_event_listener_with_callback(
                "visibilitychange",
                on_visibility.as_ref().unchecked_ref(),
            );
        }
        on_visibility.forget();
        session
    }

    pub fn running(&self) -> bool {
        self.status.get() == Status::Running
    }

    /// Starts `plan` from the link named `study_id`; `on_record` gets the run's valid
    /// record when it ends.
    pub fn start(
        &self,
        plan: Plan,
        study_id: Option<String>,
        network: NetworkLabel,
        on_record: impl Fn(Run) + 'static,
    ) {
        let this = *self;
        this.samples.set(Vec::new());
        this.record.set(None);
        this.progress.set(None);
        this.status.set(Status::Running);
        let scope = Scope::current();
        this.started.set(scope.performance().now());
        let run_id = run_id_from_random(scope.random_bytes());
        let started_at_ms = browser::unix_now_ms();
        let network_at_start = browser::network_reading();
        let batch = FrameBatch {
            pending: Rc::default(),
            scheduled: Rc::default(),
            samples: this.samples,
            engine: this.engine,
        };
        let recorded_plan = plan.clone();
        let on_message = move |message: FromEngine| match message {
            FromEngine::Ready => {}
            FromEngine::Progress(progress) => this.progress.set(Some(progress)),
            FromEngine::Sample(sample) => batch.push(*sample),
            FromEngine::Finished(finished) => {
                batch.flush();
                if !finished.withdrawn.is_empty() {
                    this.samples.update(|samples| {
                        crate::engine::runner::apply_withdrawn(samples, &finished.withdrawn)
                    });
                }
                let mut engine = finished.engine;
                crate::engine::features::merge(
                    &mut engine.unavailable,
                    browser::page_unavailable(
                        crate::uploads::Uploads::get()
                            .unavailable
                            .with_untracked(Option::is_none),
                    ),
                );
                let mut run = RecordParts {
                    run_id: run_id.clone(),
                    started_at_ms,
                    app_version: env!("CARGO_PKG_VERSION"),
                    study_id: study_id.clone(),
                    plan: &recorded_plan,
                    client: browser::client(network, network_at_start.clone()),
                    engine,
                    demo: &finished.demo,
                    samples: this.samples.get_untracked(),
                }
                .into_run();
                // The engine made each sample clean (anything odd a server sent dropped
                // and counted), so one strange value cannot cost the user the run they
                // sat through; this checks that, and brings the run within its bounds.
                run.clean();
                let status = if run.samples.is_empty() {
                    Status::Finished {
                        cancelled: finished.cancelled,
                    }
                } else {
                    let valid = run.validate();
                    // Kept either way: a record the collector would refuse can still be
                    // read on the page and downloaded.
                    this.record.set(Some(run.clone()));
                    match valid {
                        Ok(()) => {
                            on_record(run);
                            Status::Finished {
                                cancelled: finished.cancelled,
                            }
                        }
                        Err(e) => Status::Invalid(e.to_string()),
                    }
                };
                this.status.set(status);
                // The run is over: let the worker go, once this message handler (which
                // the worker owns) has returned.
                leptos::task::spawn_local(async move { this.engine.set_value(None) });
            }
        };
        // The tag the target sees is random bytes of its own, never the run id.
        let tag: String = scope
            .random_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let engine = Engine::start(plan, tag, page_hidden(), placement(), on_message);
        let on_page = engine.on_page();
        this.engine.set_value(Some(engine));
        if on_page {
            // On the page's thread the engine's first request waits until the page has
            // drawn the running view (in WebKitGTK that takes ~145 ms): read meanwhile,
            // it would be late by the drawing.
            let engine = this.engine;
            after_drawing(move || {
                engine.with_value(|e| {
                    if let Some(e) = e {
                        e.drawn();
                    }
                })
            });
        }
    }

    pub fn cancel(&self) {
        self.engine.with_value(|e| {
            if let Some(e) = e {
                e.cancel();
            }
        });
    }
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}
