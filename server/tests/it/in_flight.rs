//! Uploads cost bounded memory: the bytes of uploads being read, parsed and stored at
//! once are counted from their declared length before a byte is read, and past
//! `--upload-bytes-in-flight` an upload is told to come back (503, `Retry-After`)
//! instead of waiting in memory.

use std::time::Duration;

use axum::body::{Body, Bytes};
use firsttoken_server::Config;

use crate::common::{self, App};

/// A valid run padded with whitespace to `bytes` (JSON allows it; the record stored is
/// the collector's own, without it).
fn run_of(n: u64, bytes: usize) -> Vec<u8> {
    let mut json = serde_json::to_vec(&common::run_with(n, |_| {})).expect("json");
    json.resize(bytes.max(json.len()), b' ');
    json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_past_the_bytes_in_flight_are_told_to_come_back() {
    let t = common::sqlite().await;
    let config = Config {
        max_body_bytes: 256 * 1024,
        upload_bytes_in_flight: 256 * 1024,
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    // A slow upload declares 200 KiB and sends one byte: its share is taken until it
    // ends.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let slow = {
        let request = app
            .post("/api/v1/runs")
            .header("content-type", "application/json")
            .header("content-length", 200 * 1024)
            .stream(Body::from_stream(
                tokio_stream::wrappers::ReceiverStream::new(rx),
            ));
        tokio::spawn(request.send())
    };
    tx.send(Ok(Bytes::from_static(b"{"))).await.expect("sent");
    tokio::time::sleep(Duration::from_millis(200)).await;

    // 64 KiB more does not fit in the 56 KiB left: refused at once, nothing read.
    let big = app
        .post("/api/v1/runs")
        .body(run_of(1, 64 * 1024))
        .send()
        .await;
    assert_eq!(big.status, 503, "{}", big.text());
    assert!(big.headers.contains_key("retry-after"), "{big:?}");
    assert!(
        big.text().contains("--upload-bytes-in-flight"),
        "{}",
        big.text()
    );
    // A small one still fits beside it.
    let small = app.post("/api/v1/runs").body(run_of(2, 0)).send().await;
    assert_eq!(small.status, 201, "{}", small.text());

    // The slow upload ends (cut off): its share comes back, and the big one gets in.
    drop(tx);
    let cut = slow.await.expect("answered");
    assert_eq!(cut.status, 400, "{}", cut.text());
    let again = app
        .post("/api/v1/runs")
        .body(run_of(1, 64 * 1024))
        .send()
        .await;
    assert_eq!(again.status, 201, "{}", again.text());
}

#[test]
fn the_bytes_in_flight_hold_the_largest_upload() {
    let config = Config {
        upload_bytes_in_flight: 1024 * 1024,
        ..Config::defaults()
    };
    let refused = config.check().expect_err("smaller than one upload");
    assert_eq!(
        refused.flag,
        "--upload-bytes-in-flight (FIRSTTOKEN_UPLOAD_BYTES_IN_FLIGHT)"
    );
}

/// The body limit is the largest run the page makes: that run, as the page sends it,
/// is stored under the default limit, and a hand-made run past a run's bounds (more
/// inter-token gaps in all than a run keeps) is refused naming them.
#[tokio::test]
async fn the_largest_run_the_page_makes_is_stored_under_the_default_limit() {
    use firsttoken_core::schema::{MAX_RECORD_BYTES, MAX_RUN_ITL_GAPS, largest_run};
    let t = common::sqlite().await;
    let defaults = Config::defaults();
    assert_eq!(defaults.max_body_bytes, MAX_RECORD_BYTES);
    let config = Config {
        max_body_bytes: defaults.max_body_bytes,
        upload_bytes_in_flight: defaults.upload_bytes_in_flight,
        upload_bytes_per_hour: defaults.upload_bytes_per_hour,
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    let example: firsttoken_core::schema::Run =
        serde_json::from_value(common::example_run()).expect("a run");
    let largest = largest_run(&example);
    let body = serde_json::to_vec(&largest).expect("json");
    assert!(body.len() > MAX_RECORD_BYTES / 2, "{} bytes", body.len());
    let stored = app.post("/api/v1/runs").body(body).send().await;
    assert_eq!(stored.status, 201, "{}", stored.text());

    let mut over = largest;
    over.run_id = "00000000-0000-4000-8000-00000000abcd".into();
    over.samples.truncate(10);
    over.plan.phases = vec![firsttoken_core::plan::PhasePlan::Steady { requests: 10 }];
    for sample in &mut over.samples {
        sample.itl_ms = vec![25.0; MAX_RUN_ITL_GAPS / 10 + 1];
        sample.last_token_ms = Some(86_399_999.99);
    }
    let refused = app
        .post("/api/v1/runs")
        .body(serde_json::to_vec(&over).expect("json"))
        .send()
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        refused.text().contains("inter-token gaps"),
        "{}",
        refused.text()
    );
}
