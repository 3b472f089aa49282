//! The demo target: an OpenAI-compatible streaming chat endpoint with latency knobs and
//! faults, so the app works out of the box and tests have a real peer that misbehaves on
//! purpose ([`knobs::Knobs`] lists them).
//!
//! A request goes through what a real app does: authentication, rate limiting, retrieval
//! and a pre-model step (blocking its worker when `slots` is set), all before the response
//! starts, so they show in the time to headers. `Server-Timing` reports how long each
//! took. Then the model streams: a role-only chunk at once (not a token: it makes TTFB and
//! TTFT differ, as they do in production), the first token `first_token_ms` later, the
//! rest `itl_ms` apart on an absolute schedule, a `finish_reason` chunk, a usage chunk
//! when the body asks for one (`stream_options.include_usage`), a chunk with the server's
//! timing breakdown at `/server_timings` (the steps again, the model's configured first
//! token, `first_token_written_ms` from the request's arrival to its first token written:
//! what `firsttoken_core::layers` reads as the server's whole time), and `data: [DONE]`.
//!
//! Every response carries `Timing-Allow-Origin` (set for the whole server), [`DEMO_HEADER`]
//! (the engine marks such runs as simulated) and the client's port in
//! `X-Firsttoken-Client-Port`, by which tests see whether a connection was new.

mod knobs;
mod workers;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use axum::Extension;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, OriginalUri, Query, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use firsttoken_core::api::{CLIENT_PORT_HEADER, DEMO_HEADER};
use firsttoken_crowd::stats::SplitMix64;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_stream::wrappers::ReceiverStream;

use crate::AppState;
use crate::config::Demo;
use crate::error::AppError;
use crate::serve::close_connection;
pub use knobs::{Fault, Knobs};
use workers::Worker;

/// The demo's route: the target itself, or, with `--demo off`, an answer that says so.
pub fn router(demo: Demo) -> Router<AppState> {
    match demo {
        Demo::On => Router::new().route("/v1/chat/completions", post(chat_completions)),
        Demo::Off => Router::new().route("/v1/chat/completions", any(demo_off)),
    }
}

async fn demo_off() -> AppError {
    AppError::NotFound(
        "the demo target is off on this server (started with --demo off); measure your own endpoint".into(),
    )
}

/// The words the demo answers with, cycled.
const WORDS: [&str; 24] = [
    "Your",
    " first",
    " token",
    " arrived",
    " after",
    " the",
    " server",
    " finished",
    " its",
    " own",
    " work:",
    " authentication,",
    " rate",
    " limits,",
    " retrieval",
    " and",
    " the",
    " prompt.",
    " Measure",
    " the",
    " path",
    " users",
    " really",
    " take.",
];

static REQUESTS: AtomicU64 = AtomicU64::new(1);

/// The largest chat request the demo reads: prompts are not what it measures.
const DEMO_BODY_LIMIT: usize = 256 * 1024;
/// The most entries an answer's timings have (`odd_values` adds 42 to about 8), and the
/// most bytes one takes: a name of under 30 characters and a number of under 26.
const MOST_TIMINGS: u64 = 64;
const TIMING_BYTES: u64 = 64;

type Chunk = Result<Bytes, std::io::Error>;

async fn chat_completions(
    State(state): State<AppState>,
    // The path as the client sent it, the base path included (a nested router's `Uri`
    // has it taken off): the redirect must lead back here.
    OriginalUri(uri): OriginalUri,
    query: Result<Query<Knobs>, QueryRejection>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    request_headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    let arrived = Instant::now();
    let Query(knobs) = query.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let knobs = knobs.check()?;
    let limit = Duration::from_secs(state.config.demo_max_request_secs);
    let planned = knobs.planned();
    if planned > limit {
        return Err(AppError::BadRequest(format!(
            "these knobs ask for a request of up to {} s; this server's demo allows {} s (--demo-max-request-secs)",
            planned.as_secs_f64().ceil(),
            limit.as_secs()
        )));
    }
    // Held until the answer's last byte: the stream task owns it.
    let stream_permit = state
        .demo_streams
        .clone()
        .try_acquire_owned()
        .map_err(|_| AppError::Busy {
            what: "demo streams",
            retry_after: 1,
        })?;
    let deadline = arrived + limit;
    let body = crate::body::read(
        body,
        &request_headers,
        DEMO_BODY_LIMIT,
        Duration::from_secs(state.config.body_read_timeout_secs),
    )
    .await?;
    if knobs.redirect {
        let rest: Vec<&str> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|kv| !kv.is_empty() && kv.split('=').next() != Some("redirect"))
            .collect();
        let location = format!("{}?{}", uri.path(), rest.join("&"));
        return Ok((
            StatusCode::TEMPORARY_REDIRECT,
            [(
                header::LOCATION,
                HeaderValue::from_str(&location).map_err(anyhow::Error::from)?,
            )],
        )
            .into_response());
    }
    let request: Value = serde_json::from_slice(&body)
        .map_err(|e| AppError::MalformedJson(format!("the request body is not valid JSON: {e}")))?;
    if !request.is_object() {
        return Err(AppError::BadRequest(
            "the request body must be a JSON object".into(),
        ));
    }
    let number = REQUESTS.fetch_add(1, Ordering::Relaxed);
    let mut jitter = Jitter::new(knobs.jitter_ms, number);
    let answer = Answer {
        id: format!("chatcmpl-demo-{number}"),
        model: request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("firsttoken-demo")
            .chars()
            .take(64)
            .collect(),
        include_usage: request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    };
    let client = state.client_address(
        &request_headers,
        peer.as_ref().map(|Extension(ConnectInfo(p))| *p),
    );
    // Counted at the most this answer can send, before anything is sent: a network past
    // its allowance is refused at once, not cut off mid-answer.
    if let (Some(budget), Some(address)) = (&state.demo_bytes, client) {
        budget
            .take(
                crate::limit::Prefix::from(address),
                answer.most_bytes(&knobs) as f64,
                std::time::Instant::now(),
            )
            .map_err(|retry| AppError::OverBudget {
                what: "demo answer bytes (--demo-bytes-per-hour)",
                retry_after: retry.0,
            })?;
    }

    match knobs.fault {
        Some(fault @ (Fault::Http429 | Fault::Http429Date)) => {
            let retry_after = if fault == Fault::Http429 {
                "1".to_owned()
            } else {
                httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2))
            };
            return Ok((
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after)],
                axum::Json(json!({"error": {"code": "rate_limited", "message": "too many requests (demo fault)"}})),
            )
                .into_response());
        }
        Some(Fault::Http500) => {
            return Ok((
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": {"code": "internal", "message": "internal error (demo fault)"}})),
            )
                .into_response());
        }
        Some(Fault::CloseBeforeHeaders) => {
            // The server drops the connection without writing a byte.
            return Ok(close_connection());
        }
        _ => {}
    }

    // The app's own work before it calls the model.
    let mut timings = Map::new();
    for (name, ms) in [
        ("auth_ms", knobs.auth_ms),
        ("rate_limit_ms", knobs.rate_limit_ms),
        ("retrieval_ms", knobs.retrieval_ms),
    ] {
        let start = Instant::now();
        sleep(jitter.vary(ms)).await;
        timings.insert(name.to_owned(), json!(millis(start.elapsed())));
    }
    // Pools are the client network's own (workers.rs).
    let network = client
        .map(|address| format!("{:?}", crate::limit::Prefix::from(address)))
        .unwrap_or_default();
    let worker = (knobs.slots > 0)
        .then(|| Worker::assign(&network, &knobs.pool, knobs.slots))
        .transpose()?;
    let pre_model = jitter.vary(knobs.pre_model_ms);
    let queued = match &worker {
        Some(worker) => tokio::time::timeout_at(deadline, worker.block_for(pre_model))
            .await
            .map_err(|_| AppError::Busy {
                what: "demo request time (the worker stayed busy)",
                retry_after: 1,
            })?,
        None => {
            sleep(pre_model).await;
            Duration::ZERO
        }
    };
    timings.insert("queue_ms".into(), json!(millis(queued)));
    timings.insert("pre_model_ms".into(), json!(millis(pre_model)));
    let model_called = Instant::now();

    // The steps before the head, each once: `Server-Timing` says what was spent before
    // the response started (firsttoken_core::layers); the model's time comes after it, in
    // the stream's breakdown.
    let server_timing = timings
        .iter()
        .map(|(name, ms)| {
            format!(
                "{};dur={ms}",
                name.trim_end_matches("_ms").replace('_', "-")
            )
        })
        .chain(["demo;desc=\"firsttoken demo target (simulated)\"".to_owned()])
        // Over a day: no request of this demo lasts that long.
        .chain(knobs.odd_values.then(|| "cache;dur=90000000".to_owned()))
        .collect::<Vec<_>>()
        .join(", ");
    timings.insert(
        "upstream_first_token_ms".into(),
        json!(knobs.first_token_ms),
    );
    let mut headers = vec![
        (
            HeaderName::from_static("server-timing"),
            HeaderValue::from_str(&server_timing).map_err(anyhow::Error::from)?,
        ),
        (
            HeaderName::from_static(DEMO_HEADER),
            HeaderValue::from_static("simulated"),
        ),
    ];
    if let Some(Extension(ConnectInfo(peer))) = peer {
        headers.push((
            HeaderName::from_static(CLIENT_PORT_HEADER),
            HeaderValue::from(peer.port()),
        ));
    }
    if knobs.connection_close {
        headers.push((header::CONNECTION, HeaderValue::from_static("close")));
    }

    if !request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        // The whole answer at once, after the time the stream would have taken.
        let events = knobs.tokens.div_ceil(knobs.tokens_per_event);
        sleep_until(
            model_called
                + Duration::from_millis(
                    knobs.first_token_ms + u64::from(events - 1) * knobs.itl_ms,
                ),
        )
        .await;
        let body = json!({
            "id": answer.id, "object": "chat.completion", "created": unix_seconds(), "model": answer.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": words(0, knobs.tokens)}}],
            "usage": usage(knobs.tokens),
        });
        let mut response = axum::Json(body).into_response();
        response.headers_mut().extend(headers);
        return Ok(response);
    }

    let content_type = if knobs.fault == Some(Fault::WrongContentType) {
        "text/plain; charset=utf-8"
    } else {
        "text/event-stream"
    };
    headers.extend([
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        // Tells nginx-style proxies in front of the demo not to buffer the stream.
        (
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        ),
    ]);
    let (tx, rx) = mpsc::channel::<Chunk>(16);
    let answering = stream_answer(
        tx.clone(),
        knobs,
        answer,
        jitter,
        arrived,
        model_called,
        timings,
    );
    let stopping = state.stopping();
    tokio::spawn(async move {
        // The answer ends at its end, at the demo's time limit, or when the server shuts
        // down, whichever comes first; the last two close the stream with an error, so
        // the client sees a cut-off stream, not a finished one.
        let cut = tokio::select! {
            () = answering => false,
            () = sleep_until(deadline) => true,
            () = stopping => true,
        };
        if cut {
            // Best effort: a client that stopped reading has a full channel, and
            // dropping the sender ends its stream anyway.
            let _ = tx.try_send(Err(std::io::Error::other(
                "demo stream ended by the server",
            )));
        }
        drop(stream_permit);
    });
    let mut response = Body::from_stream(ReceiverStream::new(rx)).into_response();
    response.headers_mut().extend(headers);
    Ok(response)
}

/// What every chunk of one answer shares.
struct Answer {
    id: String,
    model: String,
    include_usage: bool,
}

impl Answer {
    fn chunk(&self, delta: Value, finish: Value) -> Bytes {
        event(&json!({
            "id": self.id, "object": "chat.completion.chunk", "created": unix_seconds(), "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    }

    /// The most bytes this answer can send with `knobs`, streamed or whole: each event
    /// at its longest (this answer's id and model, every word the longest of
    /// [`WORDS`]), the opening and closing chunks, usage, the timings (at most
    /// [`MOST_TIMINGS`] entries) and `[DONE]`.
    fn most_bytes(&self, knobs: &Knobs) -> u64 {
        let longest_word = WORDS.iter().map(|w| w.len()).max().unwrap_or(0) as u64;
        let empty = self.chunk(json!({"content": ""}), Value::Null).len() as u64;
        let events = u64::from(knobs.tokens.div_ceil(knobs.tokens_per_event));
        let opening = self
            .chunk(json!({"role": "assistant", "content": ""}), Value::Null)
            .len() as u64;
        let usage = self.extra("usage", json!({"prompt_tokens": 24, "completion_tokens": 99_999_999_999u64, "total_tokens": 99_999_999_999u64})).len() as u64;
        let timings =
            self.extra("server_timings", json!({})).len() as u64 + MOST_TIMINGS * TIMING_BYTES;
        // A fault's event or broken line is shorter than a token's event.
        opening
            + events * empty
            + u64::from(knobs.tokens) * longest_word
            + empty
            + usage
            + timings
            + b"data: [DONE]\n\n".len() as u64
    }

    /// A chunk with no choices and extra top-level fields (usage, timings).
    fn extra(&self, key: &str, value: Value) -> Bytes {
        event(&json!({
            "id": self.id, "object": "chat.completion.chunk", "created": unix_seconds(), "model": self.model,
            "choices": [], key: value,
        }))
    }
}

/// Sends the answer on its schedule. A failed send means the client has gone; then there
/// is nobody left to write to, and the task ends.
async fn stream_answer(
    tx: mpsc::Sender<Chunk>,
    knobs: Knobs,
    answer: Answer,
    mut jitter: Jitter,
    arrived: Instant,
    model_called: Instant,
    mut timings: Map<String, Value>,
) {
    let send = async |bytes: Bytes| tx.send(Ok(bytes)).await.is_ok();
    if !send(answer.chunk(json!({"role": "assistant", "content": ""}), Value::Null)).await {
        return;
    }
    let fault_at = knobs.tokens_before_fault();
    let first_due = model_called + Duration::from_millis(knobs.first_token_ms);
    let mut previous = model_called;
    let (mut sent, mut events) = (0u32, 0u64);
    while sent < knobs.tokens {
        // An absolute schedule (no drift), each event shifted by its own jitter, and never
        // before the one it follows.
        let due = jitter
            .shift(first_due + Duration::from_millis(events * knobs.itl_ms))
            .max(previous);
        sleep_until(due).await;
        previous = due;
        events += 1;
        let take = knobs.tokens_per_event.min(knobs.tokens - sent);
        let faulty = knobs
            .fault
            .filter(|_| sent + take > fault_at && sent <= fault_at);
        match faulty {
            Some(Fault::CloseMidStream) => {
                // An error in the body makes hyper drop the connection mid-response.
                let _ = tx
                    .send(Err(std::io::Error::other("demo fault: close mid-stream")))
                    .await;
                return;
            }
            Some(Fault::EndMidStream) => {
                // The body simply ends: a clean close, as a proxy timeout or a crashed
                // upstream behind a gateway often looks.
                return;
            }
            Some(Fault::Stall) => {
                // Nothing more, ever: hold the stream open until the client gives up.
                tx.closed().await;
                return;
            }
            Some(Fault::ErrorEvent) => {
                let error =
                    json!({"error": {"message": "upstream overloaded (demo fault)", "code": 502}});
                let _ = send(event(&error)).await;
                return;
            }
            _ => {}
        }
        if faulty == Some(Fault::MalformedJson)
            && !send(Bytes::from_static(
                b"data: {\"choices\": [{\"delta\": {\"content\": \"broken\n\n",
            ))
            .await
        {
            return;
        }
        if !send(answer.chunk(json!({"content": words(sent, take)}), Value::Null)).await {
            return;
        }
        if sent == 0 {
            timings.insert(
                "first_token_written_ms".into(),
                json!(millis(arrived.elapsed())),
            );
        }
        sent += take;
    }
    let mut tail = vec![answer.chunk(json!({}), json!("stop"))];
    if answer.include_usage {
        let mut usage = usage(knobs.tokens);
        if knobs.odd_values {
            usage["completion_tokens"] = json!(99_999_999_999u64);
        }
        tail.push(answer.extra("usage", usage));
    }
    timings.insert("total_ms".into(), json!(millis(arrived.elapsed())));
    if knobs.odd_values {
        timings.insert("generated_at_ms".into(), json!(unix_seconds() * 1000));
        timings.insert("clock_skew_ms".into(), json!(-3.5));
        for step in 0..40 {
            timings.insert(format!("step_{step:02}_ms"), json!(0.1));
        }
    }
    tail.push(answer.extra("server_timings", Value::Object(timings)));
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    for bytes in tail {
        if !send(bytes).await {
            return;
        }
    }
}

/// Random variation of delays, seeded per request so a run can be replayed.
struct Jitter {
    max_ms: u64,
    rng: SplitMix64,
}

impl Jitter {
    fn new(max_ms: u64, seed: u64) -> Self {
        Self {
            max_ms,
            rng: SplitMix64::new(seed),
        }
    }

    /// A whole number of milliseconds in −max…+max.
    fn offset_ms(&mut self) -> i64 {
        if self.max_ms == 0 {
            return 0;
        }
        let span = 2 * self.max_ms as usize + 1;
        self.rng.below(span) as i64 - self.max_ms as i64
    }

    /// `ms` ± up to the jitter, never below zero.
    fn vary(&mut self, ms: u64) -> Duration {
        Duration::from_millis(ms.saturating_add_signed(self.offset_ms()))
    }

    /// An instant moved by ± up to the jitter.
    fn shift(&mut self, at: Instant) -> Instant {
        let offset = self.offset_ms();
        let by = Duration::from_millis(offset.unsigned_abs());
        if offset >= 0 {
            at + by
        } else {
            at.checked_sub(by).unwrap_or(at)
        }
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

fn event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// `count` words of the answer, starting at word `from`.
fn words(from: u32, count: u32) -> String {
    (from..from + count)
        .map(|i| WORDS[i as usize % WORDS.len()])
        .collect()
}

fn usage(tokens: u32) -> Value {
    json!({"prompt_tokens": 24, "completion_tokens": tokens, "total_tokens": 24 + tokens})
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
