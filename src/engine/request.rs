//! One measured request: `fetch()` with a streaming reader, every chunk stamped with
//! `performance.now()` the moment its read resolves, before anything parses it.
//!
//! The chunks are kept, stamped, and parsed only once the request has ended
//! ([`Ended::finish`], which gathers what the request showed into an [`Observation`]);
//! the runner finishes a batch's requests when all of them have ended, completes their
//! observations with Resource Timing and makes each one's sample
//! ([`Observation::into_sample`]). Parsing is the engine's main work per chunk, and with
//! ten streams at once a chunk parsed while another stream's first token waits in the
//! queue would delay that token's stamp by the parse.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use firsttoken_core::api::{CLIENT_PORT_HEADER, DEMO_HEADER};
use firsttoken_core::outcome::{self, Ending, Observation, Position, ResponseHead};
use firsttoken_core::schema::Sample;
use firsttoken_stream::dialect::Dialect;
use firsttoken_stream::recorder::StreamRecorder;
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, Performance, ReadableStreamDefaultReader, RequestCache,
    RequestCredentials, RequestInit, Response,
};

use super::control::{Cancel, InFlight, Visibility, VisibilityMark};
use super::timing;
use crate::platform::{Every, Scope, Timeout, js_error_text};

/// What to send.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub url: String,
    /// The JSON body to POST; `None` sends a GET (a probe).
    pub body: Option<String>,
    pub headers: Vec<(String, String)>,
    pub dialect: Dialect,
    pub timings_pointer: Option<String>,
    pub timeout_ms: u32,
    /// Nothing received for this long ends the request as stalled.
    pub stall_ms: Option<u32>,
    /// Send the page's cookies, to the page's own origin only ([`TargetPlan::send_cookies`]).
    ///
    /// [`TargetPlan::send_cookies`]: firsttoken_core::plan::TargetPlan::send_cookies
    pub send_cookies: bool,
    /// Keep the start of the body ([`Measured::body_start`]): the target check reads it to
    /// tell which stream format a body is in when it is not the one chosen.
    pub keep_body: bool,
}

/// A finished request, its sample made ([`Observed::into_measured`]), and its [`Exchange`].
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub sample: Sample,
    pub demo: bool,
    pub client_port: Option<u16>,
    pub preflighted: bool,
    pub timing_name: Option<String>,
    pub redirected: bool,
    pub t0: f64,
    pub completed: bool,
    pub retry_after_ms: Option<f64>,
    pub content_type: Option<String>,
    pub body_start: Vec<u8>,
}

/// A finished request, its sample not made yet: its [`Observation`] (which Resource
/// Timing completes) and its [`Exchange`].
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub observation: Observation,
    pub exchange: Exchange,
}

impl Observed {
    /// The request as its batch's Resource Timing entries are paired to it.
    pub fn requested(&self) -> timing::Requested<'_> {
        timing::Requested {
            name: self.exchange.timing_name.as_deref(),
            t0: self.exchange.t0,
            completed: self.exchange.completed,
            ended: self.observation.e2e_ms().map(|e2e| self.exchange.t0 + e2e),
        }
    }

    /// Makes the sample, once ([`Observation::into_sample`]).
    pub fn into_measured(self) -> Measured {
        let e = self.exchange;
        Measured {
            sample: self.observation.into_sample(),
            demo: e.demo,
            client_port: e.client_port,
            preflighted: e.preflighted,
            timing_name: e.timing_name,
            redirected: e.redirected,
            t0: e.t0,
            completed: e.completed,
            retry_after_ms: e.retry_after_ms,
            content_type: e.content_type,
            body_start: e.body_start,
        }
    }
}

/// What a request showed besides its measurement (for Resource Timing, the connection
/// log, the target check).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The response said it came from the demo target.
    pub demo: bool,
    /// The client port the target saw, when it said (`X-Firsttoken-Client-Port`).
    pub client_port: Option<u16>,
    /// The request needed a CORS preflight (another origin, and a JSON body or custom
    /// headers), which opened any new connection: Resource Timing shows it reused.
    pub preflighted: bool,
    /// The URL requested, as the browser writes it: the name of its Resource Timing
    /// entry, even after a redirect.
    pub timing_name: Option<String>,
    /// The response came after a redirect (`Response.redirected`).
    pub redirected: bool,
    /// `performance.now()` just before `fetch()`.
    pub t0: f64,
    /// The body was read to its end (so the browser makes a Resource Timing entry).
    pub completed: bool,
    /// A `429`'s `Retry-After`, in milliseconds from when it arrived.
    pub retry_after_ms: Option<f64>,
    /// The response's `Content-Type`, when a response arrived.
    pub content_type: Option<String>,
    /// The first [`KEPT_BODY_BYTES`] of an event stream's body, when the request asked
    /// ([`RequestSpec::keep_body`]); empty otherwise.
    pub body_start: Vec<u8>,
}

/// How much of a body [`RequestSpec::keep_body`] keeps.
pub const KEPT_BODY_BYTES: usize = 64 * 1024;

/// What a request shares with the rest of its run.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    pub cancel: Cancel,
    pub visibility: Visibility,
    /// `performance.now()` at the run's start.
    pub run_start: f64,
}

/// Reads a body chunk by chunk, stamping each read the moment its promise settles: the
/// stamp is taken in the promise's own reaction, before the engine's task (which may be
/// busy with another request's chunk) gets to it. The two reactions are made once per
/// request, not once per read, so reading makes no garbage of its own beyond what the
/// stream hands over: a garbage collection in the worker is a pause in every timestamp.
struct StampedReader {
    reader: ReadableStreamDefaultReader,
    slot: Rc<RefCell<ReadSlot>>,
    on_value: Closure<dyn FnMut(JsValue)>,
    on_error: Closure<dyn FnMut(JsValue)>,
    done_key: JsValue,
    value_key: JsValue,
}

/// Where a settled read waits for the engine's task.
#[derive(Default)]
struct ReadSlot {
    settled: Option<(Result<JsValue, JsValue>, f64)>,
    waker: Option<Waker>,
}

/// One read: ready once its promise settled.
struct Read(Rc<RefCell<ReadSlot>>);

impl Future for Read {
    type Output = (Result<JsValue, JsValue>, f64);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.0.borrow_mut();
        match slot.settled.take() {
            Some(settled) => Poll::Ready(settled),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A chunk of the body, or its end.
enum Chunk {
    Bytes(Uint8Array),
    End,
}

impl StampedReader {
    fn new(reader: ReadableStreamDefaultReader, performance: Performance) -> Self {
        let slot = Rc::new(RefCell::new(ReadSlot::default()));
        let settle = |ok: bool| {
            let (slot, performance) = (slot.clone(), performance.clone());
            Closure::<dyn FnMut(JsValue)>::new(move |value: JsValue| {
                let stamp = performance.now();
                let mut s = slot.borrow_mut();
                s.settled = Some((if ok { Ok(value) } else { Err(value) }, stamp));
                if let Some(waker) = s.waker.take() {
                    drop(s);
                    waker.wake();
                }
            })
        };
        Self {
            reader,
            on_value: settle(true),
            on_error: settle(false),
            slot,
            done_key: JsValue::from_str("done"),
            value_key: JsValue::from_str("value"),
        }
    }

    /// The next chunk (or the end) and when its read settled (`performance.now()`).
    async fn read(&self) -> (Result<Chunk, JsValue>, f64) {
        // The promise `then2` returns is dropped: both outcomes are handled.
        let _ = self.reader.read().then2(&self.on_value, &self.on_error);
        let (settled, stamp) = Read(self.slot.clone()).await;
        let chunk = settled.map(|result| {
            let done = Reflect::get(&result, &self.done_key)
                .ok()
                .and_then(|d| d.as_bool());
            match (done, Reflect::get(&result, &self.value_key)) {
                (Some(false), Ok(value)) => Chunk::Bytes(value.unchecked_into()),
                _ => Chunk::End,
            }
        });
        (chunk, stamp)
    }
}

/// Sends one request and observes it; never fails (a failed request is observed too).
/// `at.start_ms` is set from its `t0`. The caller reads Resource Timing, once every
/// request of its batch has ended, and makes the sample.
pub async fn measure(
    scope: &Scope,
    spec: &RequestSpec,
    at: Position,
    run: &RunContext,
) -> Observed {
    send(scope, spec, at, run).await.finish()
}

/// One request outside any plan (a check, a test), with its Resource Timing read as the
/// runner reads a batch's: its connection and `Server-Timing` are in its sample.
pub async fn measure_alone(scope: &Scope, spec: &RequestSpec, run: &RunContext) -> Measured {
    let mut observed = measure(scope, spec, Position::default(), run).await;
    // Alone, its entry is the only one: no tie to break, so any clock grain does.
    let timing = timing::read_batch(scope, &[observed.requested()], 1.0).await;
    if let Some((conn, server_timing)) = timing.into_iter().next() {
        observed.observation.conn = conn;
        observed.observation.server_timing = server_timing;
    }
    timing::clear(&scope.performance());
    observed.into_measured()
}

/// The most body bytes a request keeps unparsed; past it, it parses as it reads, so a
/// very long answer cannot hold the memory of a phone.
const MAX_UNPARSED_BYTES: usize = 1 << 20;

/// A response body as it was read: stamped chunks, parsed when the request has ended.
#[derive(Debug)]
struct StampedBody {
    recorder: StreamRecorder,
    unparsed: Vec<(f64, Vec<u8>)>,
    unparsed_bytes: usize,
    /// The body is not an event stream where one was expected: it is counted (first
    /// byte, length) and dropped, never parsed.
    not_a_stream: bool,
    /// The start of the body, when the request keeps it.
    kept: Option<Vec<u8>>,
}

impl StampedBody {
    fn push(&mut self, t: f64, chunk: &Uint8Array) {
        if self.not_a_stream {
            self.recorder.on_unparsed_chunk(t, chunk.length() as usize);
            return;
        }
        let bytes = chunk.to_vec();
        if let Some(kept) = &mut self.kept {
            let room = KEPT_BODY_BYTES.saturating_sub(kept.len());
            kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
        }
        self.unparsed_bytes += bytes.len();
        self.unparsed.push((t, bytes));
        if self.unparsed_bytes > MAX_UNPARSED_BYTES {
            self.parse();
        }
    }

    fn parse(&mut self) {
        for (t, bytes) in self.unparsed.drain(..) {
            self.recorder.on_chunk(t, &bytes);
        }
        self.unparsed_bytes = 0;
    }

    fn finish(mut self) -> firsttoken_stream::recorder::StreamMetrics {
        self.parse();
        self.recorder.finish()
    }
}

/// A request that has ended, its body stamped and not yet parsed.
#[derive(Debug)]
pub struct Ended {
    exchange: Exchange,
    at: Position,
    head: Option<ResponseHead>,
    body: StampedBody,
    ending: Ending,
    end_ms: f64,
    hidden: bool,
}

impl Ended {
    /// Parses the body and gathers what the request showed.
    pub fn finish(mut self) -> Observed {
        let mut exchange = self.exchange;
        exchange.body_start = self.body.kept.take().unwrap_or_default();
        let mut observation = Observation::new(
            self.at,
            self.head,
            self.body.finish(),
            self.ending,
            self.end_ms,
        );
        observation.hidden = self.hidden;
        observation.redirected = exchange.redirected;
        Observed {
            observation,
            exchange,
        }
    }
}

/// A request ready to go: everything set up but the `fetch()` call, so that the requests
/// of a batch can be sent back to back. (A worker dispatches the requests it fetches when
/// its task ends: a setup between two `fetch()` calls would lengthen the first one's
/// measured times by the second one's setup.)
pub struct Prepared {
    scope: Scope,
    url: String,
    init: RequestInit,
    at: Position,
    run_start: f64,
    visibility: Visibility,
    mark: VisibilityMark,
    cancel: Cancel,
    stall_ms: Option<u32>,
    timed_out: Rc<Cell<bool>>,
    stalled: Rc<Cell<bool>>,
    /// When the response head or the latest chunk arrived; the stall watch reads it.
    progress: Rc<Cell<f64>>,
    body: StampedBody,
    exchange: Exchange,
    _in_flight: Option<InFlight>,
    _timer: Timeout,
    _stall_watch: Option<Every>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("url", &self.url).finish()
    }
}

/// Sets one request up; [`Prepared::send`] sends it.
pub fn prepare(scope: &Scope, spec: &RequestSpec, at: Position, run: &RunContext) -> Prepared {
    let performance = scope.performance();
    let controller = AbortController::new().ok();
    let in_flight = controller.clone().map(|c| run.cancel.register(c));
    let timed_out = Rc::new(Cell::new(false));
    let stalled = Rc::new(Cell::new(false));
    let progress = Rc::new(Cell::new(f64::INFINITY));
    let init = RequestInit::new();
    if spec.body.is_none() {
        // A probe's GET must reach the server, never a cache. A chat request's POST is
        // never served from a cache anyway, and keeps the default mode, as the app's own
        // fetch does: `no-store` also bypasses the CORS-preflight cache (Chromium), so
        // every cross-origin request would pay a preflight round trip the app does not.
        init.set_cache(RequestCache::NoStore);
    }
    // No cookie goes anywhere unless the plan asks, and then only to the page's origin.
    init.set_credentials(if spec.send_cookies {
        RequestCredentials::SameOrigin
    } else {
        RequestCredentials::Omit
    });
    if let Ok(headers) = Headers::new() {
        for (name, value) in &spec.headers {
            let _ = headers.set(name, value);
        }
        // Set last, so no header of the plan can replace it (`Plan::validate` refuses one
        // too): a text/plain POST would go out without a CORS preflight.
        if spec.body.is_some() {
            let _ = headers.set("content-type", "application/json");
        }
        init.set_headers(&headers);
    }
    match &spec.body {
        Some(body) => {
            init.set_method("POST");
            init.set_body(&JsValue::from_str(body));
        }
        None => init.set_method("GET"),
    }
    if let Some(controller) = &controller {
        init.set_signal(Some(&controller.signal()));
    }
    let timer = {
        let (controller, timed_out) = (controller.clone(), timed_out.clone());
        scope.timeout(spec.timeout_ms, move || {
            timed_out.set(true);
            if let Some(controller) = controller {
                controller.abort();
            }
        })
    };
    let stall_watch = spec.stall_ms.map(|limit| {
        let (controller, stalled, progress) =
            (controller.clone(), stalled.clone(), progress.clone());
        // Checked four times per limit, so a stall is noticed within a quarter of it.
        scope.every((limit / 4).clamp(50, 1000), move || {
            if performance.now() - progress.get() > f64::from(limit)
                && !stalled.replace(true)
                && let Some(controller) = &controller
            {
                controller.abort();
            }
        })
    });
    let origin = firsttoken_core::url::origin_of(&spec.url);
    let preflighted = origin.as_deref() != Some(scope.origin().as_str())
        && (spec.body.is_some() || !spec.headers.is_empty());
    let timing_name = web_sys::Url::new(&spec.url).ok().map(|url| {
        url.set_hash("");
        url.href()
    });
    Prepared {
        scope: scope.clone(),
        url: spec.url.clone(),
        init,
        at,
        run_start: run.run_start,
        visibility: run.visibility.clone(),
        mark: run.visibility.mark(),
        cancel: run.cancel.clone(),
        stall_ms: spec.stall_ms,
        timed_out,
        stalled,
        progress,
        body: StampedBody {
            recorder: StreamRecorder::new(spec.dialect.clone())
                .with_timings_pointer(spec.timings_pointer.clone()),
            unparsed: Vec::new(),
            unparsed_bytes: 0,
            not_a_stream: false,
            kept: spec.keep_body.then(Vec::new),
        },
        exchange: Exchange {
            demo: false,
            client_port: None,
            preflighted,
            timing_name,
            redirected: false,
            t0: 0.0,
            completed: false,
            retry_after_ms: None,
            content_type: None,
            body_start: Vec::new(),
        },
        _in_flight: in_flight,
        _timer: timer,
        _stall_watch: stall_watch,
    }
}

/// Sets one request up and sends it ([`prepare`], then [`Prepared::send`]).
pub async fn send(scope: &Scope, spec: &RequestSpec, at: Position, run: &RunContext) -> Ended {
    prepare(scope, spec, at, run).send().await
}

impl Prepared {
    /// How a request that did not end normally ended.
    fn failure(&self, error: JsValue) -> Ending {
        if self.stalled.get() {
            Ending::Stalled(self.stall_ms.unwrap_or_default())
        } else if self.timed_out.get() {
            Ending::TimedOut
        } else if self.cancel.is_cancelled() {
            Ending::Aborted
        } else {
            Ending::Failed(js_error_text(&error))
        }
    }

    /// Sends the request and reads its body to the end, stamping each chunk; parses
    /// nothing. `t0` is read here, immediately before `fetch()`.
    pub async fn send(mut self) -> Ended {
        let performance = self.scope.performance();
        let t0 = performance.now();
        let fetched = self.scope.fetch(&self.url, &self.init);
        self.progress.set(t0);
        let at = Position {
            start_ms: t0 - self.run_start,
            ..self.at.clone()
        };
        self.exchange.t0 = t0;
        let fetched = JsFuture::from(fetched).await;
        let headers_ms = performance.now() - t0;
        let response: Response = match fetched {
            Ok(response) => response.unchecked_into(),
            Err(error) => {
                let ending = self.failure(error);
                let hidden = self.visibility.hidden_since(self.mark);
                return Ended {
                    exchange: self.exchange,
                    at,
                    head: None,
                    body: self.body,
                    ending,
                    end_ms: headers_ms,
                    hidden,
                };
            }
        };
        self.progress.set(t0 + headers_ms);
        let header = |name: &str| response.headers().get(name).ok().flatten();
        let head = ResponseHead {
            status: response.status(),
            status_text: response.status_text(),
            content_type: header("content-type").unwrap_or_default(),
            headers_ms,
        };
        self.body.not_a_stream =
            at.phase.streams() && !outcome::is_event_stream(&head.content_type);
        self.exchange.content_type = Some(head.content_type.clone());
        self.exchange.demo = header(DEMO_HEADER).is_some();
        self.exchange.redirected = response.redirected();
        self.exchange.client_port = header(CLIENT_PORT_HEADER).and_then(|p| p.trim().parse().ok());
        if head.status == 429 {
            self.exchange.retry_after_ms = header("retry-after").and_then(|v| retry_after_ms(&v));
        }

        // The body is read to its end whatever the status, so the connection can be
        // reused and an error response's time is known too.
        let mut ending = Ending::Completed;
        let mut end_ms = headers_ms;
        if let Some(stream) = response.body() {
            let reader =
                StampedReader::new(stream.get_reader().unchecked_into(), performance.clone());
            loop {
                let (read, stamp) = reader.read().await;
                let t = stamp - t0;
                self.progress.set(stamp);
                end_ms = t;
                match read {
                    Ok(Chunk::Bytes(chunk)) => self.body.push(t, &chunk),
                    Ok(Chunk::End) => break,
                    Err(error) => {
                        ending = self.failure(error);
                        break;
                    }
                }
            }
        }
        self.exchange.completed = ending == Ending::Completed;
        let hidden = self.visibility.hidden_since(self.mark);
        Ended {
            exchange: self.exchange,
            at,
            head: Some(head),
            body: self.body,
            ending,
            end_ms,
            hidden,
        }
    }
}

/// A `Retry-After` value in milliseconds: delay-seconds, or an HTTP date (RFC 9110,
/// section 10.2.3) read against the browser's clock.
fn retry_after_ms(value: &str) -> Option<f64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u32>() {
        return Some(f64::from(seconds) * 1000.0);
    }
    let at = js_sys::Date::parse(value);
    at.is_finite().then(|| (at - js_sys::Date::now()).max(0.0))
}
