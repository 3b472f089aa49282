//! One measured request: `fetch()` with a streaming reader, every chunk stamped with
//! `performance.now()` the moment the reader hands it over, before anything parses it.

use std::cell::Cell;
use std::rc::Rc;

use firsttoken_core::outcome::{self, Ending, Position, ResponseHead};
use firsttoken_core::schema::DEMO_HEADER;
use firsttoken_core::{Dialect, Sample, StreamRecorder};
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, ReadableStreamDefaultReader, RequestCache, RequestInit, Response,
};

use super::control::{Cancel, Visibility};
use super::scope::Scope;
use super::timing;
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
}

/// A finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub sample: Sample,
    /// The response said it came from the demo target.
    pub demo: bool,
    /// The client port the target saw, when it said (`X-Firsttoken-Client-Port`).
    pub client_port: Option<u16>,
    /// The origin the request reached.
    pub origin: Option<String>,
    /// The request needed a CORS preflight (another origin, and a JSON body or custom
    /// headers): the preflight opened any new connection, so Resource Timing shows the
    /// request itself on a reused one.
    pub preflighted: bool,
}

/// What a request shares with the rest of its run.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    pub cancel: Cancel,
    pub visibility: Visibility,
    /// `performance.now()` at the run's start.
    pub run_start: f64,
}

/// Sends one request and measures it. Never fails: a failed request is a sample too.
/// `at.start_ms` is set here, from this request's `t0`.
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
    let cancel = run.cancel.clone();
    let failure = |error: JsValue| {
        if timed_out.get() {
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
    let visibility = run.visibility.mark();
    let mut recorder = StreamRecorder::new(spec.dialect.clone())
        .with_timings_pointer(spec.timings_pointer.clone());
    let t0 = performance.now();
    let at = Position {
        start_ms: t0 - run.run_start,
        ..at
    };
    let fetched = JsFuture::from(scope.fetch(&spec.url, &init)).await;
    let headers_ms = performance.now() - t0;
    let response: Response = match fetched {
        Ok(response) => response.unchecked_into(),
        Err(error) => {
            let ending = failure(error);
            let mut sample = outcome::sample(at, None, recorder.finish(), &ending, headers_ms);
            sample.hidden = run.visibility.hidden_since(visibility);
            return Measured {
                sample,
                demo: false,
                client_port: None,
                origin,
                preflighted,
            };
        }
    };
    let header = |name: &str| response.headers().get(name).ok().flatten();
    let head = ResponseHead {
        status: response.status(),
        status_text: response.status_text(),
        content_type: header("content-type").unwrap_or_default(),
        headers_ms,
    };
    let demo = header(DEMO_HEADER).is_some();
    let client_port = header(CLIENT_PORT_HEADER).and_then(|p| p.parse().ok());

    // The body is read to its end whatever the status, so the connection can be reused
    // and an error response's time is known too.
    let mut ending = Ending::Completed;
    let mut end_ms = headers_ms;
    if let Some(body) = response.body() {
        let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
        let mut buffer = Vec::new();
        loop {
            let read = JsFuture::from(reader.read()).await;
            // The stamp comes first: nothing may run between the reader's hand-over and it.
            let t = performance.now() - t0;
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
    let mut sample = outcome::sample(at, Some(&head), recorder.finish(), &ending, end_ms);
    // The entry is there only now that the body has been read to its end; it is named by
    // the final URL (after redirects), as the browser normalised it.
    let (conn, server_timing) = timing::read(&performance, &response.url(), t0);
    sample.conn = conn;
    sample.server_timing = server_timing;
    sample.hidden = run.visibility.hidden_since(visibility);
    Measured {
        sample,
        demo,
        client_port,
        origin,
        preflighted,
    }
}
