//! One measured request: `fetch()` with a streaming reader, every chunk stamped with
//! `performance.now()` the moment its read resolves, before anything parses it.

use std::cell::Cell;
use std::rc::Rc;

use firsttoken_core::outcome::{self, Ending, Position, ResponseHead};
use firsttoken_core::schema::DEMO_HEADER;
use firsttoken_core::{Dialect, Sample, StreamRecorder};
use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, Performance, ReadableStreamDefaultReader, RequestCache, RequestInit,
    Response,
};

use super::control::{Cancel, Visibility};
use super::scope::Scope;
use crate::browser::js_error_text;

/// The header by which the demo target tells the client its own port.
const CLIENT_PORT_HEADER: &str = "x-firsttoken-client-port";

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
}

/// A finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub sample: Sample,
    /// The response said it came from the demo target.
    pub demo: bool,
    /// The client port the target saw, when it said (`X-Firsttoken-Client-Port`).
    pub client_port: Option<u16>,
    /// The request needed a CORS preflight (another origin, and a JSON body or custom
    /// headers): the preflight opened any new connection, so Resource Timing shows the
    /// request itself on a reused one.
    pub preflighted: bool,
    /// The URL requested, as the browser writes it: the name of its Resource Timing
    /// entry, even after a redirect.
    pub timing_name: Option<String>,
    /// `performance.now()` just before `fetch()`.
    pub t0: f64,
    /// The body was read to its end (so the browser makes a Resource Timing entry).
    pub completed: bool,
    /// A `429`'s `Retry-After`, in milliseconds from when it arrived.
    pub retry_after_ms: Option<f64>,
}

/// What a request shares with the rest of its run.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    pub cancel: Cancel,
    pub visibility: Visibility,
    /// `performance.now()` at the run's start.
    pub run_start: f64,
}

/// Reads a body chunk by chunk, stamping each read the moment its promise resolves: the
/// stamp is taken in the promise's first reaction, before the engine's task (which may be
/// busy with another request's chunk) gets to it.
struct StampedReader {
    reader: ReadableStreamDefaultReader,
    stamp: Rc<Cell<f64>>,
    on_settled: Closure<dyn FnMut(JsValue)>,
}

impl StampedReader {
    fn new(reader: ReadableStreamDefaultReader, performance: Performance) -> Self {
        let stamp = Rc::new(Cell::new(0.0));
        let on_settled = {
            let stamp = stamp.clone();
            Closure::<dyn FnMut(JsValue)>::new(move |_| stamp.set(performance.now()))
        };
        Self {
            reader,
            stamp,
            on_settled,
        }
    }

    /// The next read's result and when it settled (`performance.now()`).
    async fn read(&self) -> (Result<JsValue, JsValue>, f64) {
        let read: Promise = self.reader.read();
        // Reactions run in the order they were added: this one before JsFuture's. The
        // promise it returns is dropped (its rejection is handled by the second closure).
        let _ = read.then2(&self.on_settled, &self.on_settled);
        let result = JsFuture::from(read).await;
        (result, self.stamp.get())
    }
}

/// Sends one request and measures it. Never fails: a failed request is a sample too.
/// `at.start_ms` is set here, from this request's `t0`. Resource Timing is read by the
/// caller, once every request of its batch has ended.
pub async fn measure(
    scope: &Scope,
    spec: &RequestSpec,
    at: Position,
    run: &RunContext,
) -> Measured {
    let performance = scope.performance();
    let controller = AbortController::new().ok();
    let _in_flight = controller.clone().map(|c| run.cancel.register(c));
    let timed_out = Rc::new(Cell::new(false));
    let stalled = Rc::new(Cell::new(false));
    // When the response head or the latest chunk arrived; the stall watch reads it.
    let progress = Rc::new(Cell::new(f64::INFINITY));
    let init = RequestInit::new();
    init.set_cache(RequestCache::NoStore);
    if let Ok(headers) = Headers::new() {
        if spec.body.is_some() {
            let _ = headers.set("content-type", "application/json");
        }
        for (name, value) in &spec.headers {
            let _ = headers.set(name, value);
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
    let _timer = {
        let (controller, timed_out) = (controller.clone(), timed_out.clone());
        scope.timeout(spec.timeout_ms, move || {
            timed_out.set(true);
            if let Some(controller) = controller {
                controller.abort();
            }
        })
    };
    let _stall_watch = spec.stall_ms.map(|limit| {
        let (controller, stalled, progress) =
            (controller.clone(), stalled.clone(), progress.clone());
        let performance = performance.clone();
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
    let cancel = run.cancel.clone();
    let failure = |error: JsValue| {
        if stalled.get() {
            Ending::Stalled(spec.stall_ms.unwrap_or_default())
        } else if timed_out.get() {
            Ending::TimedOut
        } else if cancel.is_cancelled() {
            Ending::Aborted
        } else {
            Ending::Failed(js_error_text(&error))
        }
    };

    let origin = firsttoken_core::schema::origin_of(&spec.url);
    let preflighted = origin.as_deref() != Some(scope.origin().as_str())
        && (spec.body.is_some() || !spec.headers.is_empty());
    let timing_name = web_sys::Url::new(&spec.url).ok().map(|url| {
        url.set_hash("");
        url.href()
    });
    let visibility = run.visibility.mark();
    let mut recorder = StreamRecorder::new(spec.dialect.clone())
        .with_timings_pointer(spec.timings_pointer.clone());
    let t0 = performance.now();
    progress.set(t0);
    let at = Position {
        start_ms: t0 - run.run_start,
        ..at
    };
    let fetched = JsFuture::from(scope.fetch(&spec.url, &init)).await;
    let headers_ms = performance.now() - t0;
    let mut measured = Measured {
        sample: Sample::default(),
        demo: false,
        client_port: None,
        preflighted,
        timing_name,
        t0,
        completed: false,
        retry_after_ms: None,
    };
    let response: Response = match fetched {
        Ok(response) => response.unchecked_into(),
        Err(error) => {
            let ending = failure(error);
            measured.sample = outcome::sample(at, None, recorder.finish(), &ending, headers_ms);
            measured.sample.hidden = run.visibility.hidden_since(visibility);
            return measured;
        }
    };
    progress.set(t0 + headers_ms);
    let header = |name: &str| response.headers().get(name).ok().flatten();
    let head = ResponseHead {
        status: response.status(),
        status_text: response.status_text(),
        content_type: header("content-type").unwrap_or_default(),
        headers_ms,
    };
    measured.demo = header(DEMO_HEADER).is_some();
    measured.client_port = header(CLIENT_PORT_HEADER).and_then(|p| p.trim().parse().ok());
    if head.status == 429 {
        measured.retry_after_ms = header("retry-after").and_then(|v| retry_after_ms(&v));
    }

    // The body is read to its end whatever the status, so the connection can be reused
    // and an error response's time is known too.
    let mut ending = Ending::Completed;
    let mut end_ms = headers_ms;
    if let Some(body) = response.body() {
        let reader = StampedReader::new(body.get_reader().unchecked_into(), performance.clone());
        let mut buffer = Vec::new();
        loop {
            let (read, stamp) = reader.read().await;
            let t = stamp - t0;
            progress.set(stamp);
            end_ms = t;
            let result = match read {
                Ok(result) => result,
                Err(error) => {
                    ending = failure(error);
                    break;
                }
            };
            if Reflect::get(&result, &"done".into())
                .ok()
                .and_then(|d| d.as_bool())
                != Some(false)
            {
                break;
            }
            let Ok(value) = Reflect::get(&result, &"value".into()) else {
                break;
            };
            let chunk: Uint8Array = value.unchecked_into();
            buffer.resize(chunk.length() as usize, 0);
            chunk.copy_to(&mut buffer);
            recorder.on_chunk(t, &buffer);
        }
    }
    measured.completed = ending == Ending::Completed;
    measured.sample = outcome::sample(at, Some(&head), recorder.finish(), &ending, end_ms);
    measured.sample.hidden = run.visibility.hidden_since(visibility);
    measured
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
