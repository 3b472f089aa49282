//! The engine in real headless Chromium against a real firsttoken server (started by
//! `cargo xtask test`, which passes its URL at compile time). The test page is served
//! from another port, so every request here is cross-origin, as a beta user's often is.
//!
//! The engine runs on the test page's own thread here (the worker build exists only in
//! Trunk's output; the end-to-end tests cover the worker).

#![cfg(target_arch = "wasm32")]

use firsttoken::collector;
use firsttoken::engine::{
    Controls, FromEngine, Measured, RequestSpec, RunContext, Scope, measure, run_plan,
};
use firsttoken_core::outcome::Position;
use firsttoken_core::plan::{PhasePlan, Scenario, TargetPlan};
use firsttoken_core::schema::{Client, EngineReport, RecordParts, run_id_from_random};
use firsttoken_core::stats::{Concurrency, concurrency_degradation};
use firsttoken_core::{Dialect, ErrorClass, Phase, Plan, Sample};
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
    }
}

async fn measure_one(spec: &RequestSpec) -> Measured {
    let scope = Scope::current();
    let context = RunContext {
        run_start: scope.performance().now(),
        ..RunContext::default()
    };
    measure(&scope, spec, Position::default(), &context).await
}

async fn sample_of(query: &str) -> Sample {
    measure_one(&spec(demo(query))).await.sample
}

fn target(label: &str, url: String) -> TargetPlan {
    let mut target = TargetPlan::new(label, &url, Dialect::OpenaiChat, BODY);
    target.timings_pointer = Some("/server_timings".into());
    target
}

/// Runs a plan on this page and returns its samples and how it finished.
async fn run(plan: &Plan) -> (Vec<Sample>, firsttoken::engine::Finished) {
    plan.validate().expect("a valid plan");
    let mut finished = None;
    let samples = run_plan(
        &Scope::current(),
        plan,
        "0f8fad5b-d9cb-469f-a165-70867728950e",
        &Controls::default(),
        |m| {
            if let FromEngine::Finished(f) = m {
                finished = Some(f);
            }
        },
    )
    .await;
    (samples, finished.expect("the run finished"))
}

/// The demo sends its first token 300 ms after the request arrives. On loopback the
/// browser must see it no sooner, and not much later: the first request pays for the
/// connection and the CORS preflight, and still gets well under 200 ms of overhead.
#[wasm_bindgen_test]
async fn ttft_on_loopback_is_the_configured_delay_and_little_more() {
    const DELAY_MS: f64 = 300.0;
    let spec = spec(demo("first_token_ms=300&itl_ms=10&tokens=8"));
    for index in 0..3 {
        let Measured { sample, demo, .. } = measure_one(&spec).await;
        assert_eq!((sample.status, sample.error), (200, None), "{sample:?}");
        let ttft = sample.ttft_ms.expect("an answer arrived");
        assert!(
            (DELAY_MS..DELAY_MS + 200.0).contains(&ttft),
            "request {index}: TTFT {ttft} ms is outside [{DELAY_MS}, {DELAY_MS} + 200)"
        );
        // The role-only first chunk arrives at once and is not a token.
        assert!(sample.ttfb_ms.expect("bytes") < ttft);
        assert_eq!(sample.output_chunks, 8);
        assert_eq!(sample.usage.and_then(|u| u.output_tokens), Some(8));
        assert_eq!(sample.itl_ms.len(), 7);
        assert!(sample.done);
        // The last token is due 7 × 10 ms after the first, counted from the request's
        // arrival: a lower bound only (the gap between two readings can be shorter).
        assert!(sample.e2e_ms.expect("read to the end") >= DELAY_MS + 7.0 * 10.0);
        assert!(demo, "the demo target says its numbers are simulated");
    }
}

#[wasm_bindgen_test]
async fn server_timing_and_the_streams_own_breakdown_are_recorded() {
    let s = sample_of("first_token_ms=50&itl_ms=1&tokens=3&auth_ms=20&retrieval_ms=30").await;
    let names: Vec<&str> = s.server_timing.iter().map(|t| t.name.as_str()).collect();
    for name in [
        "auth",
        "retrieval",
        "pre-model",
        "queue",
        "upstream-first-token",
        "demo",
    ] {
        assert!(
            names.contains(&name),
            "Server-Timing lacks {name}: {names:?}"
        );
    }
    let auth = s
        .server_timing
        .iter()
        .find(|t| t.name == "auth")
        .expect("auth");
    assert!(auth.duration_ms >= 20.0, "{auth:?}");
    let timings = s.stream_timings.expect("the final event's breakdown");
    assert!(timings["retrieval_ms"] >= 30.0);
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
    ];
    for (query, status, class) in cases {
        let s = sample_of(query).await;
        assert_eq!((s.status, s.error), (status, Some(class)), "{query}: {s:?}");
        assert!(s.error_message.is_some(), "{query}");
        if query.contains("fault_after=3") {
            assert!(
                s.ttft_ms.is_some(),
                "{query}: tokens before the fault were measured"
            );
        }
    }
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
    let (samples, ()) = futures_util::future::join(
        run_plan(
            &scope,
            &plan,
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            &controls,
            |_| {},
        ),
        canceller,
    )
    .await;
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
    assert!(
        conn.reused,
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
        assert!(conn.reused, "the preflight opened the connection: {conn:?}");
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
    let cold = of(Phase::Cold);
    assert_eq!(cold[0].idle_ms, Some(300));
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

    // The record of this run is valid.
    let run = RecordParts {
        run_id: run_id_from_random(Scope::current().random_bytes()),
        started_at_ms: js_sys::Date::now() as u64,
        app_version: "test",
        plan: &plan,
        client: Client::default(),
        engine: finished.engine,
        demo: &finished.demo,
        samples,
    }
    .into_run();
    run.validate().expect("the engine writes valid records");
}

/// TTFTs of a concurrency sweep, per level.
async fn sweep(query: &str) -> Vec<(u32, Vec<f64>)> {
    let mut plan = Plan::steady(target("demo", demo(query)), 1);
    plan.phases = vec![PhasePlan::Concurrency {
        levels: vec![1, 3, 5],
        requests_per_level: 10,
    }];
    let (samples, _) = run(&plan).await;
    [1, 3, 5]
        .into_iter()
        .map(|k| {
            let ttfts = samples
                .iter()
                .filter(|s| s.concurrency == k)
                .map(|s| s.ttft_ms.expect("answered"))
                .collect();
            (k, ttfts)
        })
        .collect()
}

/// A 1-worker app with a blocking pre-model step serves one request at a time: median TTFT
/// at c = k grows like (k + 1) / 2. With a worker per request it stays near 1.
#[wasm_bindgen_test]
async fn a_serialized_server_degrades_like_the_serial_model_and_a_parallel_one_does_not() {
    let serial = concurrency_degradation(
        &sweep("pre_model_ms=200&first_token_ms=0&itl_ms=1&tokens=2&slots=1&pool=sweep-serial")
            .await,
    );
    for level in &serial[1..] {
        let ratio = level.ratio.expect("a level-1 baseline");
        assert!(
            (ratio - level.serial_model).abs() < 0.35 * level.serial_model,
            "c={}: ratio {ratio}, serial model {}",
            level.level,
            level.serial_model
        );
        assert_eq!(level.reading(), Some(Concurrency::Serial), "{level:?}");
    }
    let parallel = concurrency_degradation(
        &sweep("pre_model_ms=200&first_token_ms=0&itl_ms=1&tokens=2&slots=5&pool=sweep-parallel")
            .await,
    );
    for level in &parallel[1..] {
        let ratio = level.ratio.expect("a level-1 baseline");
        assert!(ratio < 1.3, "c={}: ratio {ratio}", level.level);
        assert_eq!(level.reading(), Some(Concurrency::Parallel), "{level:?}");
    }
}

#[wasm_bindgen_test]
async fn a_measured_run_uploads_once() {
    let scope = Scope::current();
    let plan = Plan::steady(
        target("demo", demo("first_token_ms=20&itl_ms=1&tokens=3")),
        1,
    );
    let (samples, finished) = run(&plan).await;
    let run = RecordParts {
        run_id: run_id_from_random(scope.random_bytes()),
        started_at_ms: js_sys::Date::now() as u64,
        app_version: "test",
        plan: &plan,
        client: Client::default(),
        engine: EngineReport::default(),
        demo: &finished.demo,
        samples,
    }
    .into_run();
    run.validate().expect("the engine writes valid records");
    let runs_url = format!("{}{}", server(), collector::RUNS_PATH);
    let record = serde_json::to_string(&run).expect("json");
    let stored = collector::upload_record(&scope, &runs_url, &record)
        .await
        .expect("stored");
    assert_eq!(stored.run_id, run.run_id);
    assert_eq!(stored.delete_token.as_deref().map(str::len), Some(64));
    assert_eq!(
        stored.absolute_url(&runs_url),
        format!("{}/api/v1/runs/{}", server(), run.run_id)
    );
    let again = collector::upload_record(&scope, &runs_url, &record)
        .await
        .expect("acknowledged again");
    assert_eq!(
        (again.run_id.as_str(), again.delete_token),
        (run.run_id.as_str(), None)
    );
    let mut broken = run.clone();
    broken.samples[0].ttft_ms = Some(-1.0);
    let refused = collector::upload_record(
        &scope,
        &runs_url,
        &serde_json::to_string(&broken).expect("json"),
    )
    .await
    .expect_err("refused");
    // A record that breaks a rule is refused for good, not retried.
    assert!(
        matches!(&refused, collector::Failure::Refused(m) if m.contains("samples[0].ttft_ms")),
        "{refused}"
    );
    // A collector that is not there is worth trying again.
    let gone = collector::upload_record(&scope, "http://127.0.0.1:9/api/v1/runs", &record)
        .await
        .expect_err("nobody there");
    assert!(matches!(gone, collector::Failure::Retry(_)), "{gone}");
}
