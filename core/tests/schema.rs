//! The record the code writes matches the committed JSON Schema (`schema/run.v1.json`),
//! and validation refuses what the schema and the rules refuse, naming the field.

use std::path::Path;

use firsttoken_core::plan::MAX_SAMPLES;
use firsttoken_core::schema::Run;
use serde_json::{Value, json};

fn read_json(relative: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    serde_json::from_slice(&std::fs::read(&path).expect("file readable")).expect("valid JSON")
}

fn example() -> Value {
    read_json("schema/example-run.v1.json")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&read_json("schema/run.v1.json")).expect("the schema compiles")
}

/// What the JSON Schema says about `value`, as readable lines.
fn schema_errors(value: &Value) -> Vec<String> {
    validator()
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

#[test]
fn the_example_round_trips_and_what_the_code_writes_matches_the_schema() {
    let run: Run = serde_json::from_value(example()).expect("example deserializes");
    run.validate().expect("example is valid");
    let written = serde_json::to_value(&run).expect("serializes");
    assert_eq!(written, example(), "serialization changed the record");
    assert_eq!(schema_errors(&written), Vec::<String>::new());
}

#[test]
fn a_run_built_in_code_matches_the_schema() {
    // Built through the types, with every optional field set, so a field added to the
    // structs but not to the schema fails here (the schema forbids unknown properties).
    let mut run: Run = serde_json::from_value(example()).expect("example deserializes");
    run.targets[0].version = Some("v1.4.2".into());
    run.samples[0].error_message = Some("fine".into());
    run.samples[0].batch = Some(2);
    run.samples[0].idle_ms = Some(30_000);
    run.samples[0].idle_spent_ms = Some(30_012.5);
    run.samples[0].idle_timer_late_ms = Some(4.5);
    run.samples[0].retry_wait_ms = Some(1000.0);
    run.samples[0].reasoning_chunks = 3;
    run.samples[0].dropped = 2;
    run.samples[0].error = Some(firsttoken_core::schema::ErrorClass::Truncated);
    run.samples[0].usage = Some(firsttoken_stream::dialect::Usage {
        input_tokens: Some(9),
        output_tokens: Some(40),
        reasoning_tokens: Some(30),
    });
    run.plan.stall_timeout_ms = Some(10_000);
    run.engine.cross_origin_isolated = Some(false);
    run.engine.unavailable = firsttoken_core::schema::Unavailable::ALL.to_vec();
    run.targets.push(firsttoken_core::schema::Target {
        label: "custom".into(),
        origin: "https://app.example.com".into(),
        version: None,
        dialect: serde_json::from_value(
            json!({"custom": {"token_event": "token", "token_pointer": "/t",
            "done_event": "done", "timings_pointer": "/timings", "error_pointer": "/error"}}),
        )
        .expect("custom dialect"),
        demo: false,
        scenarios: vec!["rag".into()],
    });
    run.validate().expect("valid");
    let written = serde_json::to_value(&run).expect("serializes");
    assert_eq!(schema_errors(&written), Vec::<String>::new());
}

/// Applies `edit` to the example and returns the field the validation names.
fn rejected_field(edit: impl FnOnce(&mut Value)) -> String {
    let mut value = example();
    edit(&mut value);
    assert!(
        !schema_errors(&value).is_empty(),
        "the JSON Schema accepts an edit the validation is expected to refuse: {value}"
    );
    match serde_json::from_value::<Run>(value) {
        Ok(run) => run.validate().expect_err("validation must refuse").field,
        Err(e) => format!("serde: {e}"),
    }
}

#[test]
fn bad_records_are_refused_by_both_with_the_field_named() {
    assert_eq!(
        rejected_field(|v| v["schema_version"] = json!(2)),
        "schema_version"
    );
    assert_eq!(
        rejected_field(|v| v["run_id"] = json!("not-a-uuid")),
        "run_id"
    );
    assert_eq!(
        rejected_field(|v| v["started_at_ms"] = json!(5)),
        "started_at_ms"
    );
    assert_eq!(
        rejected_field(|v| v["targets"][0]["label"] = json!("")),
        "targets[0].label"
    );
    assert_eq!(
        rejected_field(|v| v["targets"][0]["origin"] = json!("https://x.example/v1?key=secret")),
        "targets[0].origin"
    );
    assert_eq!(
        rejected_field(|v| v["targets"][0]["label"] = json!("x".repeat(65))),
        "targets[0].label"
    );
    assert_eq!(
        rejected_field(|v| v["client"]["effective_type"] = json!("5g")),
        "client.effective_type"
    );
    assert_eq!(
        rejected_field(|v| v["client"]["at_start"] = json!({"effective_type": "5g"})),
        "client.at_start.effective_type"
    );
    assert_eq!(
        rejected_field(|v| v["client"]["at_start"] = json!({"downlink_mbps": -1.0})),
        "client.at_start.downlink_mbps"
    );
    assert_eq!(
        rejected_field(|v| v["samples"][0]["ttft_ms"] = json!(-5.0)),
        "samples[0].ttft_ms"
    );
    assert_eq!(
        rejected_field(|v| v["samples"][0]["e2e_ms"] = json!(86_400_000.0)),
        "samples[0].e2e_ms"
    );
    assert_eq!(
        rejected_field(|v| v["samples"][1]["status"] = json!(600)),
        "samples[1].status"
    );
    assert_eq!(
        rejected_field(|v| v["plan"]["phases"][0]["requests"] = json!(0)),
        "plan.phases[0].requests"
    );
    assert_eq!(rejected_field(|v| v["samples"] = json!([])), "samples");
    assert_eq!(
        rejected_field(
            |v| v["samples"][0]["stream_timings"]["first_token_written_ms"] = json!(-1.0)
        ),
        "samples[0].stream_timings.first_token_written_ms"
    );
    assert_eq!(
        rejected_field(|v| v["samples"][0]["conn"]["protocol"] = json!("<h2>")),
        "samples[0].conn.protocol"
    );
    assert_eq!(
        rejected_field(|v| v["engine"]["hidden_ms"] = json!(-4.0)),
        "engine.hidden_ms"
    );
    assert_eq!(
        rejected_field(|v| v["engine"]["clock_step_ms"] = json!(0.0)),
        "engine.clock_step_ms"
    );
    assert_eq!(
        rejected_field(|v| v["engine"]["clock_step_ms"] = json!(250.0)),
        "engine.clock_step_ms"
    );
    assert_eq!(
        rejected_field(|v| v["engine"]["unavailable"] = json!(["server-timing", "server-timing"])),
        "engine.unavailable"
    );
    assert!(
        rejected_field(|v| v["engine"]["unavailable"] = json!(["webgpu"]))
            .contains("unknown variant `webgpu`")
    );
    assert_eq!(
        rejected_field(|v| v["plan"]["phases"][0] =
            json!({"phase": "concurrency", "levels": [0], "requests_per_level": 1})),
        "plan.phases[0].levels[0]"
    );
}

#[test]
fn rules_beyond_the_schema_are_enforced() {
    let check = |edit: fn(&mut Run)| {
        let mut run: Run = serde_json::from_value(example()).expect("example");
        edit(&mut run);
        run.validate().expect_err("must be refused")
    };
    // Text no reader sees, or that turns the text around, in a field the Results page
    // groups by: a group `Chrome\u{200b}` would look like `Chrome`.
    let hidden = check(|r| r.client.browser = Some("Chrome\u{200b}".into()));
    assert_eq!(hidden.field, "client.browser");
    assert!(hidden.message.contains("U+200B"), "{hidden}");
    assert_eq!(
        check(|r| r.targets[0].label = "v1\u{202e}2.4".into()).field,
        "targets[0].label"
    );
    // What a target reported (an error message) is cleaned instead: never a lost run.
    assert_eq!(
        firsttoken_core::text::clean_text("busy\u{2066}\u{200b} now\n", 64),
        "busy now "
    );
    // Missing features are listed in one order, so equal records are equal JSON.
    assert_eq!(
        check(|r| r.engine.unavailable = vec![
            firsttoken_core::schema::Unavailable::ServerTiming,
            firsttoken_core::schema::Unavailable::NetworkInformation,
        ])
        .field,
        "engine.unavailable"
    );
    // Times are one clock's readings in order.
    let err = check(|r| r.samples[0].ttft_ms = Some(1.0));
    assert_eq!(err.field, "samples[0].ttft_ms");
    assert!(err.message.contains("earlier than ttft_any_ms"), "{err}");
    assert_eq!(check(|r| r.samples[1].index = 7).field, "samples[1].index");
    assert_eq!(
        check(|r| r.samples[2].error = None).field,
        "samples[2].error"
    );
    assert_eq!(
        check(|r| r.samples[0].ttft_ms = Some(f64::NAN)).field,
        "samples[0].ttft_ms"
    );
    assert_eq!(
        check(|r| r.targets[0].label = "tab\tin label".into()).field,
        "targets[0].label"
    );
    assert_eq!(
        check(|r| r.samples[0].target = 3).field,
        "samples[0].target"
    );
    assert_eq!(
        check(|r| r.samples[0].scenario = Some("rag".into())).field,
        "samples[0].scenario"
    );
    // Samples are what the run's own plan makes (here 3 steady requests, one at a time):
    // no phase, level or target it does not have, and no more of a phase than it makes.
    let err = check(|r| r.samples[0].concurrency = 500);
    assert_eq!(err.field, "samples[0].concurrency");
    assert!(
        err.message.contains("no steady requests 500 at once"),
        "{err}"
    );
    let err = check(|r| r.samples[1].phase = firsttoken_core::plan::Phase::Cold);
    assert_eq!(
        (err.field.as_str(), err.message.as_str()),
        ("samples[1].phase", "the run's plan has no cold requests")
    );
    let err = check(|r| {
        r.plan.phases[0] = firsttoken_core::plan::PhasePlan::Steady { requests: 2 };
    });
    assert_eq!(
        (err.field.as_str(), err.message.as_str()),
        (
            "samples",
            "the plan makes 2 requests, the run has 3 samples"
        )
    );
    let err = check(|r| {
        r.plan.phases = vec![
            firsttoken_core::plan::PhasePlan::Steady { requests: 2 },
            firsttoken_core::plan::PhasePlan::Warmup { requests: 1 },
        ];
    });
    assert_eq!(
        (err.field.as_str(), err.message.as_str()),
        (
            "samples[2].phase",
            "the run's plan makes 2 steady requests, and this is one more"
        )
    );
    // A concurrency phase's opening batch is warm-up at its highest level.
    let mut run: Run = serde_json::from_value(example()).expect("example");
    run.plan.phases = vec![firsttoken_core::plan::PhasePlan::Concurrency {
        levels: vec![1, 3],
        requests_per_level: 3,
    }];
    for (i, (phase, k)) in [
        (firsttoken_core::plan::Phase::Warmup, 3),
        (firsttoken_core::plan::Phase::Concurrency, 1),
        (firsttoken_core::plan::Phase::Concurrency, 3),
    ]
    .into_iter()
    .enumerate()
    {
        run.samples[i].phase = phase;
        run.samples[i].concurrency = k;
        run.samples[i].batch = (phase == firsttoken_core::plan::Phase::Concurrency).then_some(0);
    }
    assert_eq!(run.validate(), Ok(()));
    run.samples[1].concurrency = 2;
    assert_eq!(
        run.validate().expect_err("level 2").field,
        "samples[1].concurrency"
    );
    // Over HTTP/1.1 a browser opens six connections per host: more would queue unseen.
    let err = check(|r| {
        r.plan.phases[0] = firsttoken_core::plan::PhasePlan::Concurrency {
            levels: vec![8],
            requests_per_level: 8,
        }
    });
    assert_eq!(err.field, "plan.phases[0].levels[0]");
    let mut run: Run = serde_json::from_value(example()).expect("example");
    let one = run.samples[0].clone();
    run.samples = (0..=MAX_SAMPLES as u32)
        .map(|i| firsttoken_core::schema::Sample {
            index: i,
            ..one.clone()
        })
        .collect();
    assert_eq!(run.validate().expect_err("too many").field, "samples");
}

#[test]
fn unknown_fields_are_refused() {
    let mut value = example();
    value["client"]["ip"] = json!("203.0.113.9");
    let err = serde_json::from_value::<Run>(value).expect_err("unknown field");
    assert!(err.to_string().contains("unknown field `ip`"), "{err}");
}

#[test]
fn times_survive_a_json_round_trip_exactly() {
    // serde_json's default float parser can land one unit off; a collector that stores
    // and recomputes times must read back exactly what was written.
    let mut run: Run = serde_json::from_value(example()).expect("example");
    run.samples[0].e2e_ms = Some(910.926_249_999_999_9);
    run.samples[0].itl_ms = vec![0.1 + 0.2, 1e-7, 86_399_999.999_999_99];
    let back: Run =
        serde_json::from_str(&serde_json::to_string(&run).expect("json")).expect("parses");
    assert_eq!(back, run);
}

#[test]
fn a_record_from_a_page_that_did_not_read_its_clock_step_is_still_valid() {
    let mut value = example();
    value["engine"]
        .as_object_mut()
        .expect("engine")
        .remove("clock_step_ms");
    assert_eq!(schema_errors(&value), Vec::<String>::new());
    let run: Run = serde_json::from_value(value).expect("a record");
    run.validate().expect("valid");
    assert_eq!(run.engine.clock_step_ms, None);
}

#[test]
fn a_record_from_a_page_that_did_not_list_missing_features_is_still_valid() {
    let mut value = example();
    let engine = value["engine"].as_object_mut().expect("engine");
    engine.remove("cross_origin_isolated");
    engine.remove("unavailable");
    assert_eq!(schema_errors(&value), Vec::<String>::new());
    let run: Run = serde_json::from_value(value).expect("a record");
    run.validate().expect("valid");
    assert_eq!(run.engine.cross_origin_isolated, None);
    assert!(run.engine.unavailable.is_empty());
}

#[test]
fn every_missing_feature_has_its_schema_name() {
    use firsttoken_core::schema::Unavailable;
    let names: Vec<Value> = Unavailable::ALL.iter().map(|u| json!(u.name())).collect();
    assert_eq!(
        serde_json::to_value(Unavailable::ALL).expect("json"),
        Value::Array(names.clone())
    );
    let schema = read_json("schema/run.v1.json");
    let listed = &schema["properties"]["engine"]["properties"]["unavailable"];
    assert_eq!(listed["items"]["enum"], Value::Array(names));
    assert_eq!(listed["maxItems"], json!(Unavailable::ALL.len()));
}
