//! The engine in real headless Chromium against a real firsttoken server (started by
//! `cargo xtask test`, which passes its URL at compile time). The test page is served
//! from another port, so every request here is cross-origin, as a beta user's often is.
//!
//! The engine runs on the test page's own thread here (the worker build exists only in
//! Trunk's output; the end-to-end tests cover the worker).

#![cfg(target_arch = "wasm32")]

use firsttoken::collector;
use firsttoken::engine::{
    Controls, FromEngine, Measured, RequestSpec, RunContext, apply_withdrawn, fresh_base,
    measure_alone, run_plan,
};
use firsttoken::platform::Scope;
use firsttoken_core::plan::{Phase, Plan};
use firsttoken_core::plan::{PhasePlan, Scenario, TargetPlan};
use firsttoken_core::schema::{Client, RecordParts, Run, run_id_from_random};
use firsttoken_core::schema::{ErrorClass, Sample};
use firsttoken_pages::readings::Concurrency;
use firsttoken_pages::report::RunReport;
use firsttoken_stream::dialect::Dialect;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// Not `env!`: clippy and `cargo check` compile this file without a server to name.
fn server() -> &'static str {
    let Some(url) = option_env!("FIRSTTOKEN_TEST_SERVER") else {
        panic!(
            "FIRSTTOKEN_TEST_SERVER names a running firsttoken server: run these tests with `cargo xtask test`"
        );
    };
    url
}

/// The server's port, for `{n}.localhost` host names that reach it under new origins.
fn port() -> &'static str {
    server()
        .rsplit(':')
        .next()
        .expect("the server URL has a port")
}

const BODY: &str = r#"{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;

fn demo(query: &str) -> String {
    format!("{}/v1/chat/completions?{query}", server())
}

fn spec(url: String) -> RequestSpec {
    RequestSpec {
        url,
        body: Some(BODY.to_owned()),
        headers: Vec::new(),
        dialect: Dialect::OpenaiChat,
        timings_pointer: Some("/server_timings".into()),
        timeout_ms: 10_000,
        stall_ms: None,
        send_cookies: false,
        keep_body: false,
    }
}

/// One request outside any plan, with its Resource Timing read as the runner reads it.
async fn measure_one(spec: &RequestSpec) -> Measured {
    let scope = Scope::current();
    let context = RunContext {
        run_start: scope.performance().now(),
        ..RunContext::default()
    };
    measure_alone(&scope, spec, &context).await
}

async fn sample_of(query: &str) -> Sample {
    measure_one(&spec(demo(query))).await.sample
}

fn target(label: &str, url: String) -> TargetPlan {
    let mut target = TargetPlan::new(label, &url, Dialect::OpenaiChat, BODY);
    target.timings_pointer = Some("/server_timings".into());
    target
}

/// The run tag every plan here runs under: it numbers the fresh host names (random in a
/// real run, and never the run id).
const TAG: &str = "0f8fad5bd9cb469fa16570867728950e";

/// Runs a plan on this page and returns its samples and how it finished.
async fn run(plan: &Plan) -> (Vec<Sample>, firsttoken::engine::Finished) {
    plan.validate().expect("a valid plan");
    let (samples, finished) =
        samples_of(&Scope::current(), plan, &Controls::default(), |_| {}).await;
    (samples, finished.expect("the run finished"))
}

/// Runs a plan with `controls`, showing each message to `also`, and keeps the samples
/// as the page does: those handed over, less the labels the run's end withdraws.
async fn samples_of(
    scope: &Scope,
    plan: &Plan,
    controls: &Controls,
    mut also: impl FnMut(&FromEngine),
) -> (Vec<Sample>, Option<firsttoken::engine::Finished>) {
    let (mut samples, mut finished) = (Vec::new(), None);
    run_plan(scope, plan, TAG, controls, |m| {
        also(&m);
        match m {
            FromEngine::Sample(s) => samples.push(*s),
            FromEngine::Finished(f) => finished = Some(f),
            _ => {}
        }
    })
    .await;
    if let Some(f) = &finished {
        apply_withdrawn(&mut samples, &f.withdrawn);
    }
    (samples, finished)
}

/// The demo sends its first token 300 ms after the request arrives and the last one
/// 3 × 80 ms later. On loopback the browser must see the first no sooner and not much
/// later (the first request pays for the connection and the CORS preflight, and still
/// gets well under 120 ms of overhead), and the last one that much after it: an engine
/// that stamped every event when the stream ended would fail both.
#[wasm_bindgen_test]
async fn ttft_on_loopback_is_the_configured_delay_and_little_more() {
    const DELAY_MS: f64 = 300.0;
    const GAP_MS: f64 = 80.0;
    let spec = spec(demo("first_token_ms=300&itl_ms=80&tokens=4"));
    for index in 0..3 {
        let Measured { sample, demo, .. } = measure_one(&spec).await;
        assert_eq!((sample.status, sample.error), (200, None), "{sample:?}");
        let ttft = sample.ttft_ms.expect("an answer arrived");
        assert!(
            (DELAY_MS..DELAY_MS + 120.0).contains(&ttft),
            "request {index}: TTFT {ttft} ms is outside [{DELAY_MS}, {DELAY_MS} + 120)"
        );
        // The role-only first chunk arrives at once and is not a token.
        assert!(sample.ttfb_ms.expect("bytes") < ttft - 200.0, "{sample:?}");
        let last = sample.last_token_ms.expect("tokens");
        // The gaps are on an absolute schedule from the request's arrival; a late first
        // token can only shorten the first gap, by less than the 120 ms allowed above.
        assert!(
            last - ttft > 3.0 * GAP_MS - 120.0 && last >= DELAY_MS + 3.0 * GAP_MS,
            "request {index}: first token {ttft} ms, last {last} ms"
        );
        assert_eq!(sample.output_chunks, 4);
        assert_eq!(sample.usage.and_then(|u| u.output_tokens), Some(4));
        assert_eq!(sample.itl_ms.len(), 3);
        assert!(sample.done);
        assert!(sample.e2e_ms.expect("read to the end") >= last);
        assert!(demo, "the demo target says its numbers are simulated");
    }
}

#[wasm_bindgen_test]
async fn server_timing_and_the_streams_own_breakdown_are_recorded() {
    let s = sample_of("first_token_ms=50&itl_ms=1&tokens=3&auth_ms=20&retrieval_ms=30").await;
    let names: Vec<&str> = s.server_timing.iter().map(|t| t.name.as_str()).collect();
    for name in ["auth", "retrieval", "pre-model", "queue", "demo"] {
        assert!(
            names.contains(&name),
            "Server-Timing lacks {name}: {names:?}"
        );
    }
    // The model's time comes after the head: in the stream's breakdown, not among the
    // steps before the head.
    assert!(!names.contains(&"upstream-first-token"), "{names:?}");
    let auth = s
        .server_timing
        .iter()
        .find(|t| t.name == "auth")
        .expect("auth");
    assert!(auth.duration_ms >= 20.0, "{auth:?}");
    let timings = s.stream_timings.expect("the final event's breakdown");
    assert!(timings["retrieval_ms"] >= 30.0);
    assert_eq!(timings["upstream_first_token_ms"], 50.0);
    assert!(
        timings["first_token_written_ms"] >= 100.0,
        "20 + 30 + 50 ms come before the first token: {timings:?}"
    );
    // The app's own work comes before the response head, so it shows in headers_ms.
    assert!(s.headers_ms.expect("headers") >= 50.0);
}

#[wasm_bindgen_test]
async fn several_tokens_per_event_are_one_chunk_and_usage_counts_tokens() {
    let s = sample_of("first_token_ms=10&itl_ms=5&tokens=12&tokens_per_event=4").await;
    assert_eq!(s.output_chunks, 3);
    assert_eq!(s.usage.and_then(|u| u.output_tokens), Some(12));
}

#[wasm_bindgen_test]
async fn each_fault_gets_its_class_and_keeps_what_was_measured() {
    let cases = [
        ("fault=http_429", 429, ErrorClass::Http),
        ("fault=http_500", 500, ErrorClass::Http),
        ("fault=close_before_headers", 0, ErrorClass::Network),
        (
            "fault=wrong_content_type&first_token_ms=5&tokens=3",
            200,
            ErrorClass::Protocol,
        ),
        (
            "fault=close_mid_stream&first_token_ms=5&itl_ms=5&tokens=6&fault_after=3",
            200,
            ErrorClass::Network,
        ),
        (
            "fault=malformed_json&first_token_ms=5&itl_ms=5&tokens=6&fault_after=3",
            200,
            ErrorClass::Parse,
        ),
        (
            "fault=error_event&first_token_ms=5&itl_ms=5&tokens=6&fault_after=3",
            200,
            ErrorClass::Stream,
        ),
        (
            "fault=end_mid_stream&first_token_ms=5&itl_ms=5&tokens=6&fault_after=3",
            200,
            ErrorClass::Truncated,
        ),
    ];
    for (query, status, class) in cases {
        let s = sample_of(query).await;
        assert_eq!((s.status, s.error), (status, Some(class)), "{query}: {s:?}");
        let message = s.error_message.as_deref().unwrap_or_default();
        assert!(!message.is_empty(), "{query}");
        // The demo's own words ("(demo fault)") never reach the record.
        assert!(!message.contains("demo fault"), "{query}: {message}");
        if class == ErrorClass::Protocol {
            // A body that is not an event stream is counted, not parsed.
            assert_eq!((s.ttft_ms, s.output_chunks), (None, 0), "{query}: {s:?}");
            assert!(s.ttfb_ms.is_some(), "{query}");
        }
        if query.contains("fault_after=3") {
            assert!(
                s.ttft_ms.is_some(),
                "{query}: tokens before the fault were measured"
            );
        }
    }
    // A clean end before any answer: cut off, with no first token.
    let s =
        sample_of("fault=end_mid_stream&first_token_ms=5&itl_ms=5&tokens=6&fault_after=0").await;
    assert_eq!(
        (s.error, s.ttft_ms),
        (Some(ErrorClass::Truncated), None),
        "{s:?}"
    );
    assert!(s.e2e_ms.is_some(), "the body was read to its end");
    // A stall: tokens, then silence until the timeout.
    let mut stalled = spec(demo(
        "fault=stall&first_token_ms=5&itl_ms=5&tokens=6&fault_after=2",
    ));
    stalled.timeout_ms = 800;
    let s = measure_one(&stalled).await.sample;
    assert_eq!(s.error, Some(ErrorClass::Timeout), "{s:?}");
    assert!(s.ttft_ms.is_some());
    assert_eq!(s.e2e_ms, None);
}

/// With a stall limit, silence ends a request as stalled long before its timeout, and a
/// long answer that keeps arriving is not cut short by it.
#[wasm_bindgen_test]
async fn a_stall_limit_ends_a_silent_stream_but_not_a_long_one() {
    let mut stalled = spec(demo(
        "fault=stall&first_token_ms=5&itl_ms=5&tokens=6&fault_after=2",
    ));
    stalled.timeout_ms = 20_000;
    stalled.stall_ms = Some(1_000);
    let scope = Scope::current();
    let started = scope.performance().now();
    let s = measure_one(&stalled).await.sample;
    let took = scope.performance().now() - started;
    assert_eq!(s.error, Some(ErrorClass::Stalled), "{s:?}");
    assert!(s.ttft_ms.is_some() && s.e2e_ms.is_none(), "{s:?}");
    assert!(
        (1_000.0..5_000.0).contains(&took),
        "stalled after {took} ms, the limit is 1 s and the timeout 20 s"
    );
    // 30 tokens 100 ms apart: three seconds in all, never a second without a byte.
    let mut long = spec(demo("first_token_ms=100&itl_ms=100&tokens=30"));
    long.stall_ms = Some(1_000);
    let s = measure_one(&long).await.sample;
    assert_eq!(s.error, None, "{s:?}");
    assert!(s.e2e_ms.expect("whole") > 3_000.0);
}

/// A 429's Retry-After is honoured between requests and recorded, and the wait is in no
/// latency.
#[wasm_bindgen_test]
async fn a_retry_after_is_honoured_and_kept_out_of_every_latency() {
    let plan = Plan::steady(target("demo", demo("fault=http_429")), 2);
    let (samples, _) = run(&plan).await;
    assert_eq!(samples.len(), 2);
    for s in &samples {
        assert_eq!((s.status, s.error), (429, Some(ErrorClass::Http)), "{s:?}");
        assert!(s.e2e_ms.expect("a short answer") < 500.0, "{s:?}");
    }
    let waited = samples[0].retry_wait_ms.expect("the demo asks for 1 s");
    assert!((1_000.0..1_500.0).contains(&waited), "waited {waited} ms");
    let gap = samples[1].start_ms - (samples[0].start_ms + samples[0].e2e_ms.expect("ended"));
    assert!(gap >= 1_000.0, "the next request started {gap} ms later");
}

/// `Retry-After`'s other form, an HTTP date (2 s ahead, to the second): the wait is
/// until then, between 1 and 2 s from when the demo answered.
#[wasm_bindgen_test]
async fn a_retry_after_date_is_honoured() {
    let plan = Plan::steady(target("demo", demo("fault=http_429_date")), 2);
    let (samples, _) = run(&plan).await;
    let waited = samples[0].retry_wait_ms.expect("the demo asks for a date");
    assert!((900.0..2_500.0).contains(&waited), "waited {waited} ms");
    let gap = samples[1].start_ms - (samples[0].start_ms + samples[0].e2e_ms.expect("ended"));
    assert!(gap >= 900.0, "the next request started {gap} ms later");
}

#[wasm_bindgen_test]
async fn an_unreachable_target_is_a_network_failure_sample() {
    // Port 9 (discard) has nothing listening on the test machine.
    let s = measure_one(&spec("http://127.0.0.1:9/v1/chat/completions".into()))
        .await
        .sample;
    assert_eq!((s.status, s.error), (0, Some(ErrorClass::Network)), "{s:?}");
    assert_eq!(s.e2e_ms, None);
    assert!(
        s.error_message
            .expect("a message")
            .contains("before the response")
    );
}

#[wasm_bindgen_test]
async fn a_request_past_its_timeout_is_cancelled_and_classed() {
    let mut slow = spec(demo("first_token_ms=5000"));
    slow.timeout_ms = 1_000;
    let s = measure_one(&slow).await.sample;
    assert_eq!(s.error, Some(ErrorClass::Timeout), "{s:?}");
    assert_eq!((s.ttft_ms, s.e2e_ms), (None, None));
}

#[wasm_bindgen_test]
async fn cancelling_aborts_what_is_in_flight_and_starts_nothing_more() {
    let scope = Scope::current();
    let controls = Controls::default();
    let plan = Plan::steady(target("demo", demo("first_token_ms=2000")), 5);
    let cancel = controls.cancel.clone();
    let canceller = async {
        scope.sleep(300).await;
        cancel.cancel();
    };
    let ((samples, _), ()) =
        futures_util::future::join(samples_of(&scope, &plan, &controls, |_| {}), canceller).await;
    assert_eq!(samples.len(), 1, "nothing starts after a cancel");
    assert_eq!(
        samples[0].error,
        Some(ErrorClass::Aborted),
        "{:?}",
        samples[0]
    );
}

#[wasm_bindgen_test]
async fn warm_requests_reuse_the_connection_and_fresh_origins_open_new_ones() {
    let url = demo("first_token_ms=5&itl_ms=1&tokens=2");
    let mut ports = Vec::new();
    for _ in 0..3 {
        let m = measure_one(&spec(url.clone())).await;
        ports.push(m.client_port.expect("the demo says the client's port"));
        let conn = m
            .sample
            .conn
            .expect("Timing-Allow-Origin lets the page see the connection");
        assert_eq!(conn.protocol.as_deref(), Some("http/1.1"));
    }
    let conn = measure_one(&spec(url.clone()))
        .await
        .sample
        .conn
        .expect("conn");
    assert_eq!(
        conn.reused,
        Some(true),
        "a warm request reuses its connection: {conn:?}"
    );
    assert!(
        ports.windows(2).all(|w| w[0] == w[1]),
        "one connection, one client port: {ports:?}"
    );

    let mut fresh_ports = Vec::new();
    for n in 0..3 {
        let fresh = format!(
            "http://{n}.fresh-{}.localhost:{}/v1/chat/completions?first_token_ms=5&itl_ms=1&tokens=2",
            ports[0],
            port()
        );
        let m = measure_one(&spec(fresh)).await;
        assert_eq!(m.sample.error, None, "{:?}", m.sample);
        let conn = m.sample.conn.expect("conn");
        // The request is cross-origin with a JSON body: its CORS preflight opened the new
        // connection, so Resource Timing shows the request itself on a reused one. Only
        // the port the server saw tells the two apart.
        assert_eq!(
            conn.reused,
            Some(true),
            "the preflight opened the connection: {conn:?}"
        );
        fresh_ports.push(m.client_port.expect("port"));
    }
    fresh_ports.dedup();
    assert_eq!(
        fresh_ports.len(),
        3,
        "three new connections: {fresh_ports:?}"
    );
}

#[wasm_bindgen_test]
async fn every_phase_of_a_plan_runs_and_labels_its_samples() {
    let mut main = target("app", demo("first_token_ms=20&itl_ms=2&tokens=4"));
    main.probe_url = Some(format!("{}/api/v1/ping", server()));
    main.fresh_url = Some(format!(
        "http://{{n}}.phases.localhost:{}/v1/chat/completions?first_token_ms=20&itl_ms=2&tokens=4",
        port()
    ));
    main.scenarios.push(Scenario {
        name: "retrieval".into(),
        body: BODY.into(),
    });
    let direct = target("direct", demo("first_token_ms=10&itl_ms=2&tokens=4"));
    let mut plan = Plan::steady(main, 3);
    plan.targets.push(direct);
    plan.phases = vec![
        PhasePlan::Probe { requests: 2 },
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady { requests: 3 },
        PhasePlan::Fresh { requests: 2 },
        PhasePlan::Concurrency {
            levels: vec![1, 3],
            requests_per_level: 3,
        },
        PhasePlan::Cold { idle_ms: vec![300] },
        PhasePlan::Compare { rounds: 2 },
    ];
    let (samples, finished) = run(&plan).await;
    assert_eq!(samples.len() as u64, plan.total_requests());
    let of = |phase: Phase| {
        samples
            .iter()
            .filter(|s| s.phase == phase)
            .collect::<Vec<_>>()
    };
    assert!(samples.iter().all(|s| s.error.is_none()), "{samples:#?}");
    assert!(
        samples
            .iter()
            .enumerate()
            .all(|(i, s)| s.index as usize == i)
    );

    let probes = of(Phase::Probe);
    assert_eq!(probes.len(), 2);
    assert!(
        probes
            .iter()
            .all(|s| s.ttft_ms.is_none() && s.scenario.is_none() && s.headers_ms.is_some())
    );
    // Scenarios take turns.
    let steady: Vec<_> = of(Phase::Steady)
        .iter()
        .map(|s| s.scenario.clone().expect("scenario"))
        .collect();
    assert_eq!(steady, ["retrieval", "default", "retrieval"]);
    // Each fresh request reached a new origin, and the port the demo reports shows a
    // new connection; a steady request after warm-up ran on an old one.
    for s in of(Phase::Fresh) {
        assert_eq!(
            s.conn.as_ref().and_then(|c| c.new_connection),
            Some(true),
            "{s:?}"
        );
    }
    for s in of(Phase::Steady) {
        assert_eq!(
            s.conn.as_ref().and_then(|c| c.new_connection),
            Some(false),
            "{s:?}"
        );
    }
    let concurrency = of(Phase::Concurrency);
    assert_eq!(concurrency.len(), 3 + 3);
    assert_eq!(
        concurrency
            .iter()
            .filter(|s| s.concurrency == 3 && s.batch == Some(0))
            .count(),
        3
    );
    // The cold request waited its idle time, and recorded what it really waited.
    let cold = of(Phase::Cold);
    assert_eq!(cold[0].idle_ms, Some(300));
    let spent = cold[0].idle_spent_ms.expect("measured");
    assert!((300.0..1_000.0).contains(&spent), "idle {spent} ms");
    let before = &samples[cold[0].index as usize - 1];
    let gap = cold[0].start_ms - (before.start_ms + before.e2e_ms.expect("ended"));
    assert!(
        gap >= 300.0,
        "the cold request started {gap} ms after the one before"
    );
    assert!(
        cold[0]
            .idle_timer_late_ms
            .is_some_and(|late| late < 1_000.0)
    );
    // Every request that completed has its own Resource Timing entry (the demo sends
    // Timing-Allow-Origin), the redirect-free probes included.
    for s in &samples {
        let conn = s
            .conn
            .as_ref()
            .unwrap_or_else(|| panic!("no Resource Timing: {s:?}"));
        assert_eq!(conn.protocol.as_deref(), Some("http/1.1"), "{s:?}");
    }
    let compare = of(Phase::Compare);
    assert_eq!(
        compare.iter().map(|s| s.target).collect::<Vec<_>>(),
        [0, 1, 0, 1],
        "interleaved round by round"
    );
    assert_eq!(finished.demo, vec![true, true]);
    assert!(!finished.cancelled);
    assert!(!finished.engine.in_worker);
    assert!(finished.engine.timer_ticks > 0, "{:?}", finished.engine);
    // wasm-bindgen-test-runner serves its page with COOP and COEP, as the app's server
    // does, so the page is cross-origin isolated (and its CORS-mode requests to the
    // server on another port went through, above). Chromium then steps
    // `performance.now()` in 5 µs, not 0.1 ms (and jitters where the steps fall, never
    // their size). It has everything of Resource Timing the engine reads.
    assert_eq!(finished.engine.cross_origin_isolated, Some(true));
    let step = finished.engine.clock_step_ms.expect("the clock moved");
    assert!((0.001..=0.005).contains(&step), "clock step {step} ms");
    assert_eq!(finished.engine.unavailable, []);

    // The record of this run is valid.
    record(&plan, samples, &finished);
}

/// A page hidden during a cold request's idle wait, and shown again before the request
/// is sent, marks that cold sample hidden (a browser may have slowed the wait's timers or
/// closed idle sockets); a later cold wait with the page in view does not.
#[wasm_bindgen_test]
async fn a_page_hidden_during_the_cold_wait_marks_the_cold_sample() {
    let mut plan = Plan::steady(target("app", demo("first_token_ms=5&itl_ms=1&tokens=2")), 1);
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Cold {
            idle_ms: vec![600, 600],
        },
    ];
    plan.validate().expect("a valid plan");
    let controls = Controls::default();
    let visibility = controls.visibility.clone();
    let mut waits = 0;
    let scope = Scope::current();
    let (samples, _) = samples_of(&scope, &plan, &controls, |m| {
        if let FromEngine::Progress(p) = m
            && p.idle_ms.is_some()
        {
            waits += 1;
            if waits == 1 {
                // Hidden from 150 to 300 ms into the first wait only.
                let (scope, visibility) = (Scope::current(), visibility.clone());
                wasm_bindgen_futures::spawn_local(async move {
                    scope.sleep(150).await;
                    visibility.set(true, scope.performance().now());
                    scope.sleep(150).await;
                    visibility.set(false, scope.performance().now());
                });
            }
        }
    })
    .await;
    assert_eq!(waits, 2);
    let hidden: Vec<(Phase, bool)> = samples.iter().map(|s| (s.phase, s.hidden)).collect();
    assert_eq!(
        hidden,
        [
            (Phase::Warmup, false),
            (Phase::Cold, true),
            (Phase::Cold, false)
        ],
        "only the first cold wait saw the page hidden"
    );
    for cold in samples.iter().filter(|s| s.phase == Phase::Cold) {
        let spent = cold.idle_spent_ms.expect("measured");
        assert!((600.0..1_500.0).contains(&spent), "idle {spent} ms");
    }
}

/// Values no record may hold (a Unix timestamp and a negative duration in the timing
/// object, 40 more entries than fit, a `Server-Timing` duration over a day, a token count
/// of 10^11) are dropped where they enter and counted; the measurement and the record
/// survive.
#[wasm_bindgen_test]
async fn odd_values_from_a_target_are_dropped_and_counted_and_the_run_stays_valid() {
    let plan = Plan::steady(
        target(
            "odd",
            demo("odd_values=true&first_token_ms=20&itl_ms=2&tokens=4"),
        ),
        2,
    );
    let (samples, finished) = run(&plan).await;
    assert_eq!(samples.len(), 2);
    for s in &samples {
        assert!(s.error.is_none(), "{s:?}");
        assert!(s.ttft_ms.is_some_and(|t| t >= 20.0), "{s:?}");
        let timings = s.stream_timings.as_ref().expect("the timing object");
        assert!(timings.len() <= 32, "{} entries kept", timings.len());
        assert!(
            !timings.contains_key("generated_at_ms") && !timings.contains_key("clock_skew_ms"),
            "{timings:?}"
        );
        assert!(
            !s.server_timing.is_empty() && s.server_timing.iter().all(|e| e.name != "cache"),
            "{:?}",
            s.server_timing
        );
        let usage = s.usage.as_ref().expect("usage");
        assert_eq!(
            usage.output_tokens, None,
            "10^11 tokens is no answer's count"
        );
        // At least the timestamp, the negative duration, the entries past 32, the
        // day-long Server-Timing entry and the token count: five.
        const AT_LEAST: u32 = 5;
        assert!(s.dropped >= AT_LEAST, "dropped {}", s.dropped);
    }
    let run = record(&plan, samples, &finished);
    assert!(run.samples.iter().all(|s| s.dropped > 0));
}

/// The record of a run made on this page, and its report.
fn record(plan: &Plan, samples: Vec<Sample>, finished: &firsttoken::engine::Finished) -> Run {
    let run = RecordParts {
        run_id: run_id_from_random(Scope::current().random_bytes()),
        started_at_ms: js_sys::Date::now() as u64,
        app_version: "test",
        study_id: None,
        plan,
        client: Client::default(),
        engine: finished.engine.clone(),
        demo: &finished.demo,
        samples,
    }
    .into_run();
    run.validate().expect("the engine writes valid records");
    run
}

/// A concurrency sweep at 1, 3 and 5 at once, read as the report reads it.
async fn sweep(query: &str) -> RunReport {
    let mut plan = Plan::steady(target("demo", demo(query)), 1);
    plan.phases = vec![PhasePlan::Concurrency {
        levels: vec![1, 3, 5],
        requests_per_level: 15,
    }];
    let (samples, finished) = run(&plan).await;
    RunReport::of(&record(&plan, samples, &finished))
}

/// A 1-worker app with a blocking pre-model step serves one request at a time: median TTFT
/// at c = k grows like (k + 1) / 2. With a worker per request it stays near 1. Both read
/// so only because the ratio's interval excludes the other model.
#[wasm_bindgen_test]
async fn a_serialized_server_degrades_like_the_serial_model_and_a_parallel_one_does_not() {
    let serial =
        sweep("pre_model_ms=200&first_token_ms=0&itl_ms=1&tokens=2&slots=1&pool=sweep-serial")
            .await;
    for level in &serial.degradation[1..] {
        let ratio = level.ratio.expect("a level-1 baseline");
        assert!(
            (ratio.value - level.serial_model).abs() < 0.35 * level.serial_model,
            "c={}: ratio {ratio:?}, serial model {}",
            level.level,
            level.serial_model
        );
        assert!(ratio.low > 1.0, "{level:?}");
        assert_eq!(level.reading(), Some(Concurrency::Serial), "{level:?}");
    }
    let parallel =
        sweep("pre_model_ms=200&first_token_ms=0&itl_ms=1&tokens=2&slots=5&pool=sweep-parallel")
            .await;
    for level in &parallel.degradation[1..] {
        let ratio = level.ratio.expect("a level-1 baseline");
        assert!(ratio.value < 1.3, "c={}: ratio {ratio:?}", level.level);
        assert!(ratio.high < level.serial_model, "{level:?}");
        assert_eq!(level.reading(), Some(Concurrency::Parallel), "{level:?}");
    }
}

/// Inside a batch every request has the same URL and starts within a millisecond of the
/// others; each must still get its own Resource Timing entry. Against a one-at-a-time
/// server the three requests of a batch wait 0, 1 and 2 turns, so each response's
/// Server-Timing queue time is its own, and must equal the queue time its own stream
/// reported.
#[wasm_bindgen_test]
async fn each_request_in_a_batch_gets_its_own_resource_timing_entry() {
    let mut plan = Plan::steady(
        target(
            "demo",
            demo("pre_model_ms=100&first_token_ms=0&itl_ms=1&tokens=2&slots=1&pool=batch-timing"),
        ),
        1,
    );
    plan.phases = vec![PhasePlan::Concurrency {
        levels: vec![3],
        requests_per_level: 9,
    }];
    let (samples, _) = run(&plan).await;
    // The phase's opening batch of 3 (recorded as warm-up), then three batches of 3.
    assert_eq!(samples.len(), 12);
    assert_eq!(
        samples.iter().filter(|s| s.phase == Phase::Warmup).count(),
        3
    );
    let mut queues = Vec::new();
    for s in &samples {
        let header = s
            .server_timing
            .iter()
            .find(|t| t.name == "queue")
            .unwrap_or_else(|| panic!("no Server-Timing queue entry: {s:?}"))
            .duration_ms;
        let stream = s.stream_timings.as_ref().expect("the stream's breakdown")["queue_ms"];
        assert_eq!(header, stream, "sample {}: {s:?}", s.index);
        queues.push(stream);
    }
    // The batches really queued: in each, one request waited about two turns.
    assert!(
        queues.iter().filter(|q| **q >= 150.0).count() >= 3,
        "{queues:?}"
    );
}

/// A request that was redirected has its entry under the URL requested.
#[wasm_bindgen_test]
async fn a_redirected_request_keeps_its_resource_timing() {
    let plan = Plan::steady(
        target(
            "demo",
            demo("redirect=true&first_token_ms=5&itl_ms=1&tokens=2"),
        ),
        2,
    );
    let (samples, _) = run(&plan).await;
    for s in &samples {
        assert_eq!((s.status, s.error), (200, None), "{s:?}");
        assert!(
            s.conn.is_some(),
            "no Resource Timing after a redirect: {s:?}"
        );
        assert!(
            s.server_timing.iter().any(|t| t.name == "queue"),
            "the final response's Server-Timing: {s:?}"
        );
    }
}

/// "New connection" is a verdict from the client port, so it can be "no": here the main
/// target's host name is the first fresh request's, so that request finds the warm-up's
/// connection and must be labelled reused, while the next one is new.
#[wasm_bindgen_test]
async fn a_fresh_request_on_a_connection_already_used_is_labelled_reused() {
    let first = fresh_base(TAG) + 1;
    let query = "first_token_ms=5&itl_ms=1&tokens=2";
    let mut main = target(
        "app",
        format!(
            "http://{first}.reuse.localhost:{}/v1/chat/completions?{query}",
            port()
        ),
    );
    main.fresh_url = Some(format!(
        "http://{{n}}.reuse.localhost:{}/v1/chat/completions?{query}",
        port()
    ));
    let mut plan = Plan::steady(main, 1);
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Fresh { requests: 2 },
    ];
    let (samples, finished) = run(&plan).await;
    let new: Vec<Option<bool>> = samples
        .iter()
        .map(|s| s.conn.as_ref().and_then(|c| c.new_connection))
        .collect();
    assert_eq!(new, [Some(true), Some(false), Some(true)], "{samples:#?}");
    let connection = RunReport::of(&record(&plan, samples, &finished))
        .connection
        .expect("a fresh phase");
    assert_eq!((connection.verified_new, connection.reused), (1, 1));
}

#[wasm_bindgen_test]
async fn a_measured_run_uploads_once_and_its_own_token_deletes_it() {
    let scope = Scope::current();
    let plan = Plan::steady(
        target("demo", demo("first_token_ms=20&itl_ms=1&tokens=3")),
        1,
    );
    let (samples, finished) = run(&plan).await;
    let run = record(&plan, samples, &finished);
    let runs_url = format!("{}{}", server(), firsttoken_core::api::RUNS_PATH);
    let record = serde_json::to_string(&run).expect("json");
    // The token is made here; the collector is told only its digest.
    let token = "a1".repeat(32);
    let digest = firsttoken::uploads::token_digest(&token);
    let stored = collector::upload_record(&scope, &runs_url, &record, Some(&digest))
        .await
        .expect("stored");
    assert_eq!(stored.run_id, run.run_id);
    assert_eq!(stored.delete_token, None, "the browser has it already");
    let run_url = stored.absolute_url(&runs_url);
    assert_eq!(run_url, format!("{}/api/v1/runs/{}", server(), run.run_id));
    let again = collector::upload_record(&scope, &runs_url, &record, Some(&digest))
        .await
        .expect("acknowledged again");
    assert_eq!(again.run_id, run.run_id);

    let mut broken = run.clone();
    broken.samples[0].ttft_ms = Some(-1.0);
    let refused = collector::upload_record(
        &scope,
        &runs_url,
        &serde_json::to_string(&broken).expect("json"),
        None,
    )
    .await
    .expect_err("refused");
    // A record that breaks a rule is refused for good, not retried.
    assert!(
        matches!(&refused, collector::Failure::Refused(m) if m.contains("samples[0].ttft_ms")),
        "{refused}"
    );
    // A collector that is not there, a 404 (a proxy's, during a deploy) and a 429 are
    // all worth trying again, the 429 no sooner than it asked.
    let gone = collector::upload_record(&scope, "http://127.0.0.1:9/api/v1/runs", &record, None)
        .await
        .expect_err("nobody there");
    assert!(matches!(gone, collector::Failure::Retry { .. }), "{gone}");
    let not_found = collector::upload_record(
        &scope,
        &format!("{}/api/v1/not-here", server()),
        &record,
        None,
    )
    .await
    .expect_err("404");
    assert!(
        matches!(&not_found, collector::Failure::Retry { why, .. } if why.contains("404")),
        "{not_found}"
    );
    let busy = collector::upload_record(&scope, &demo("fault=http_429"), &record, None)
        .await
        .expect_err("429");
    assert!(
        matches!(
            busy,
            collector::Failure::Retry {
                after_ms: Some(1000),
                ..
            }
        ),
        "{busy}"
    );

    // A DELETE from this page is cross-origin with Authorization: the preflight must let
    // it through.
    let refused = collector::delete_run(&scope, &run_url, &"b2".repeat(32)).await;
    assert_eq!(
        refused,
        Err(collector::CollectorError::Answered {
            status: 403,
            message: Some("that is not this run's delete token".to_owned())
        })
    );
    assert_eq!(
        refused.expect_err("refused").to_string(),
        "the collector answered 403: that is not this run's delete token"
    );
    assert_eq!(
        collector::delete_run(&scope, &run_url, &token).await,
        Ok(collector::DeleteOutcome::Deleted)
    );
    assert_eq!(
        collector::delete_run(&scope, &run_url, &token).await,
        Ok(collector::DeleteOutcome::AlreadyGone)
    );
    // Sent again after the delete (a stale tab's retry): 410, never stored again, and
    // the queue marks the run deleted rather than sent.
    let gone = collector::upload_record(&scope, &runs_url, &record, Some(&digest))
        .await
        .expect_err("deleted for good");
    assert!(
        matches!(&gone, collector::Failure::Deleted(m) if m.contains("deleted")),
        "{gone}"
    );
}
