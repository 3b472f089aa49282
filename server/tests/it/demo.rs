//! The demo target: it streams as configured, and the core crate's recorder reads it as
//! the browser engine would. Most tests call it in-process; those about what a client
//! sees of the connection (timing, its port, a dropped connection) use a real port.

use std::time::Instant;

use axum::http::Method;
use firsttoken_stream::dialect::Dialect;
use firsttoken_stream::recorder::StreamRecorder;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common;
use crate::common::App;

/// A fresh in-process server, the demo's path with `query`, and the guard of its
/// database.
async fn demo(query: &str) -> (App, String, common::TestDb) {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    (app, format!("/v1/chat/completions{query}"), t)
}

/// The demo's URL on a fresh server on a real port, and the guard of its database.
async fn demo_url(query: &str) -> (String, common::TestDb) {
    let t = common::sqlite().await;
    let address = common::serve(common::state(&t.db)).await;
    (format!("http://{address}/v1/chat/completions{query}"), t)
}

fn chat_body(stream: bool) -> Value {
    json!({
        "model": "demo",
        "stream": stream,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "How fast?"}],
    })
}

// A real port: the schedule as a client reads it off the connection, buffers included.
#[tokio::test]
async fn streams_tokens_on_the_configured_schedule() {
    let (url, _db) = demo_url("?first_token_ms=200&itl_ms=20&tokens=6").await;
    let client = reqwest::Client::new();
    let t0 = Instant::now();
    let response = client
        .post(&url)
        .json(&chat_body(true))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["timing-allow-origin"], "*");
    assert_eq!(headers["x-firsttoken-demo"], "simulated");
    // Server-Timing holds the steps before the head, each once; the model's first token
    // comes after it, so it is in the stream's timings, not here (firsttoken_core::layers
    // would take it for a step and the steps would overrun the wait for the head).
    let server_timing = headers["server-timing"].to_str().expect("ascii");
    assert!(
        server_timing.contains("auth;dur=") && !server_timing.contains("first-token"),
        "{server_timing}"
    );

    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat)
        .with_timings_pointer(Some("/server_timings".into()));
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.expect("chunk");
        recorder.on_chunk(t0.elapsed().as_secs_f64() * 1000.0, &chunk);
    }
    let m = recorder.finish();
    let ttft = m.ttft_ms.expect("an answer arrived");
    // Only lower bounds are certain: the server sleeps until each token is due, counted
    // from when the request arrived, which is after t0. The role-only chunk is sent at
    // once (200 ms before the first token) and is not a token.
    assert!(m.ttfb_ms.expect("bytes arrived") < ttft, "{m:?}");
    assert!(
        ttft >= 200.0,
        "first token came before the configured delay: {ttft}"
    );
    assert_eq!(m.content_chunks, 6);
    let last = m.last_token_ms.expect("tokens");
    assert!(
        last >= 200.0 + 5.0 * 20.0,
        "the last token came before it was due: {last}"
    );
    assert_eq!(m.usage.and_then(|u| u.output_tokens), Some(6));
    assert!(m.done);
    assert!(!m.unterminated);
    let timings = m.timings.expect("the stream's timings");
    assert_eq!(timings["upstream_first_token_ms"], 200.0);
    assert!(timings["first_token_written_ms"] >= 200.0, "{timings:?}");
}

#[tokio::test]
async fn defaults_are_realistic_and_usage_is_only_sent_when_asked() {
    let (app, path, _db) = demo("").await;
    let mut body = chat_body(true);
    body.as_object_mut()
        .expect("object")
        .remove("stream_options");
    let text = app.post(&path).json(&body).send().await.text();
    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat);
    recorder.on_chunk(0.0, text.as_bytes());
    let m = recorder.finish();
    assert_eq!(m.content_chunks, 40);
    assert_eq!(m.usage, None);
    assert!(m.done);
}

#[tokio::test]
async fn a_non_streaming_request_gets_one_completion() {
    let (app, path, _db) = demo("?first_token_ms=10&itl_ms=1&tokens=3").await;
    let response = app.post(&path).json(&chat_body(false)).send().await;
    assert_eq!(response.status, 200);
    let body = response.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "Your first token");
    assert_eq!(body["usage"]["completion_tokens"], 3);
}

#[tokio::test]
async fn bad_knobs_and_bodies_are_400_naming_the_problem() {
    for (query, body, expect) in [
        ("?first_token_ms=soon", "{}", "first_token_ms"),
        ("?tokens=0", "{}", "tokens must be between 1 and 4096"),
        (
            "?first_token_ms=999999",
            "{}",
            "first_token_ms must be at most 120000",
        ),
        ("?speed=fast", "{}", "unknown field `speed`"),
        ("", "{oops", "not valid JSON"),
        ("", "[]", "must be a JSON object"),
    ] {
        let (app, path, _db) = demo(query).await;
        let response = app
            .post(&path)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        assert_eq!(response.status, 400, "{query} {body}");
        let error = response.json();
        let message = error["error"]["message"].as_str().expect("message");
        assert!(message.contains(expect), "{query} {body}: {message}");
    }
}

#[tokio::test]
async fn cross_origin_callers_are_allowed() {
    let (app, path, _db) = demo("").await;
    let response = app
        .call(Method::OPTIONS, &path)
        .header("origin", "http://127.0.0.1:9")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,authorization",
        )
        .send()
        .await;
    assert!(response.status.is_success());
    assert_eq!(response.headers["access-control-allow-origin"], "*");
    // Named, not `*`: a wildcard would not let `Authorization` through (a delete, a
    // summary behind the results token).
    let allowed = response.headers["access-control-allow-headers"]
        .to_str()
        .expect("ascii")
        .to_ascii_lowercase();
    assert!(allowed.contains("authorization"), "{allowed}");
    let methods = response.headers["access-control-allow-methods"]
        .to_str()
        .expect("ascii");
    assert!(methods.contains("DELETE"), "{methods}");
}

#[tokio::test]
async fn faults_happen_as_asked() {
    let post = |(app, path, _db): (App, String, common::TestDb)| async move {
        app.post(&path).json(&chat_body(true)).send().await
    };

    let response = post(demo("?fault=http_429").await).await;
    assert_eq!(response.status, 429);
    assert_eq!(response.headers["retry-after"], "1");
    let response = post(demo("?fault=http_429_date").await).await;
    assert_eq!(response.status, 429);
    let at = httpdate::parse_http_date(response.headers["retry-after"].to_str().expect("text"))
        .expect("an HTTP date");
    let ahead = at
        .duration_since(std::time::SystemTime::now())
        .expect("a date ahead");
    assert!(ahead <= std::time::Duration::from_secs(2), "{ahead:?}");

    let text =
        post(demo("?fault=error_event&first_token_ms=1&itl_ms=1&tokens=6&fault_after=2").await)
            .await
            .text();
    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat);
    recorder.on_chunk(0.0, text.as_bytes());
    let m = recorder.finish();
    assert_eq!(m.content_chunks, 2);
    assert_eq!(
        m.stream_error.as_deref(),
        Some("upstream overloaded (demo fault)")
    );
    assert!(!m.done);

    let response = post(demo("?fault=wrong_content_type&first_token_ms=1&tokens=2").await).await;
    assert_eq!(
        response.headers["content-type"],
        "text/plain; charset=utf-8"
    );

    // A clean end mid-answer: the body ends normally, without the stream's end marker
    // (`send` fails the test on a body that ends with an error).
    let text =
        post(demo("?fault=end_mid_stream&first_token_ms=1&itl_ms=1&tokens=6&fault_after=2").await)
            .await
            .text();
    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat);
    recorder.on_chunk(0.0, text.as_bytes());
    let m = recorder.finish();
    assert_eq!(m.content_chunks, 2);
    assert!(
        !m.done && !m.unterminated && m.stream_error.is_none(),
        "{m:?}"
    );
    assert!(m.expects_end_marker);
}

// A real port: these faults drop the connection, which only a client on a socket sees.
#[tokio::test]
async fn connection_faults_reach_the_client_as_a_dropped_connection() {
    let client = reqwest::Client::new();
    let post = |url: String| client.post(url).json(&chat_body(true)).send();

    let (url, _db) = demo_url("?fault=close_before_headers").await;
    let err = post(url).await.expect_err("no response at all");
    assert!(
        err.is_request() || err.is_connect() || err.is_body(),
        "{err:?}"
    );

    let (url, _db) =
        demo_url("?fault=close_mid_stream&first_token_ms=1&itl_ms=1&tokens=6&fault_after=2").await;
    let response = post(url).await.expect("headers arrive");
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.is_err(), "the body is cut off");
}

#[tokio::test]
async fn a_redirect_leads_to_the_same_answer() {
    let (app, path, _db) = demo("?redirect=true&first_token_ms=1&itl_ms=1&tokens=3").await;
    let response = app.post(&path).json(&chat_body(true)).send().await;
    assert_eq!(response.status, 307);
    let location = response.headers["location"].to_str().expect("ascii");
    assert_eq!(
        location,
        "/v1/chat/completions?first_token_ms=1&itl_ms=1&tokens=3"
    );
    // Followed as a client follows a 307: the same method and body, to the new place.
    let followed = app.post(location).json(&chat_body(true)).send().await;
    assert_eq!(followed.status, 200);
    assert!(followed.text().contains("[DONE]"));
}

// A real port: the port is the connection's, so `serve` must hand handlers the peer.
#[tokio::test]
async fn the_stream_reports_the_apps_own_timing_and_the_client_port() {
    let (url, _db) = demo_url(
        "?first_token_ms=30&itl_ms=1&tokens=3&auth_ms=20&retrieval_ms=10&connection_close=true",
    )
    .await;
    let response = reqwest::Client::new()
        .post(&url)
        .json(&chat_body(true))
        .send()
        .await
        .expect("response");
    let headers = response.headers().clone();
    assert!(
        headers["x-firsttoken-client-port"]
            .to_str()
            .expect("ascii")
            .parse::<u16>()
            .is_ok()
    );
    assert_eq!(headers["connection"], "close");
    let server_timing = headers["server-timing"].to_str().expect("ascii");
    assert!(server_timing.contains("auth;dur="), "{server_timing}");
    assert!(server_timing.contains("retrieval;dur="), "{server_timing}");
    let text = response.text().await.expect("body");
    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat)
        .with_timings_pointer(Some("/server_timings".into()));
    recorder.on_chunk(0.0, text.as_bytes());
    let timings = recorder.finish().timings.expect("a timing breakdown");
    assert!(timings["auth_ms"] >= 20.0, "{timings:?}");
    assert!(timings["first_token_written_ms"] >= 60.0, "{timings:?}");
    assert_eq!(timings["upstream_first_token_ms"], 30.0);
}

/// A pool keeps its size while a request uses it; once none does it is gone, so pool
/// names cost no memory after their requests end.
#[tokio::test]
async fn a_pool_keeps_its_size_while_in_use() {
    let (app, path, _db) =
        demo("?first_token_ms=1&tokens=1&slots=2&pool=sized&pre_model_ms=1000").await;
    let busy = tokio::spawn(app.post(&path).json(&chat_body(true)).response());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (app, path, _db) = demo("?first_token_ms=1&tokens=1&slots=3&pool=sized").await;
    let response = app.post(&path).json(&chat_body(true)).send().await;
    assert_eq!(response.status, 400);
    let error = response.json();
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("already has 2 slots")
    );
    let busy = busy.await.expect("joined");
    assert_eq!(busy.status(), 200);
    common::body(busy).await.expect("the answer");
    let again = app.post(&path).json(&chat_body(true)).send().await;
    assert_eq!(again.status, 200, "the name is free once unused");
}

#[tokio::test]
async fn one_slot_and_a_blocking_step_serve_one_request_at_a_time() {
    let (app, path, _db) =
        demo("?pre_model_ms=100&first_token_ms=0&itl_ms=1&tokens=1&slots=1&pool=serial-native")
            .await;
    let start = Instant::now();
    let requests = (0..3).map(|_| {
        let request = app.post(&path).json(&chat_body(true));
        async move {
            let response = request.response().await;
            let queue: f64 = response.headers()["server-timing"]
                .to_str()
                .expect("ascii")
                .split(", ")
                .find_map(|entry| entry.strip_prefix("queue;dur="))
                .expect("a queue entry")
                .parse()
                .expect("a number");
            common::body(response).await.expect("body");
            queue
        }
    });
    let queues = futures_util::future::join_all(requests).await;
    // Three exclusive 100 ms steps cannot end in less than 300 ms (in parallel they would
    // take 100). How long each waited depends on when it arrived, so only the total is a
    // bound; the queue times are reported for a reader of a failure.
    let elapsed = start.elapsed().as_millis();
    assert!(elapsed >= 300, "{elapsed} ms, queues {queues:?}");
}

/// A network's demo answers stop at its hourly allowance of bytes, counted at the most
/// each answer could send: what it was sent never passes the allowance, and at least
/// half of it was sent before the refusal (the count is not far above what is sent).
/// Another network, and another address of the same /24, are still served.
#[tokio::test]
async fn a_networks_demo_answers_stop_at_its_hourly_bytes() {
    let t = common::sqlite().await;
    let allowance = 2_000_000;
    let app = App::new(common::state_with(
        &t.db,
        firsttoken_server::config::Config {
            demo_bytes_per_hour: allowance,
            ..common::config()
        },
    ));
    let path = "/v1/chat/completions?first_token_ms=0&itl_ms=0&tokens=600&odd_values=true";
    let mut body = chat_body(true);
    // The longest model name an answer repeats, each character escaped in JSON.
    body["model"] = json!("\"".repeat(64));
    let peer = |last: [u8; 2]| std::net::SocketAddr::from(([127, 0, last[0], last[1]], 4000));
    let (mut sent, mut answers) = (0usize, 0);
    let refusal = loop {
        let answer = app.post(path).json(&body).peer(peer([9, 1])).send().await;
        if answer.status != 200 {
            break answer;
        }
        sent += answer.body.len();
        answers += 1;
        assert!(answers < 100, "never refused");
    };
    assert_eq!(refusal.status, 429, "{}", refusal.text());
    assert!(refusal.headers.contains_key("retry-after"));
    assert!(
        refusal.text().contains("--demo-bytes-per-hour"),
        "{}",
        refusal.text()
    );
    assert!(sent as u64 <= allowance, "sent {sent} of {allowance}");
    assert!(sent as u64 >= allowance / 2, "sent {sent} of {allowance}");
    for other in [[9, 2], [10, 1]] {
        let answer = app.post(path).json(&body).peer(peer(other)).send().await;
        assert_eq!(answer.status, 200, "{other:?}");
    }
    t.cleanup().await;
}
