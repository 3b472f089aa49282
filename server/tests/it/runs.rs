//! The collector's upload API through the router, on SQLite and on PostgreSQL.

use crate::common;

use crate::common::App;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use firsttoken_server::AppState;
use firsttoken_server::db::Table;
use serde_json::{Value, json};

async fn send(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let answer = App::new(state.clone()).send(request).await;
    let body = serde_json::from_slice(&answer.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&answer.body).into_owned()));
    (answer.status, body)
}

fn post(body: impl Into<Body>) -> Request<Body> {
    Request::post("/api/v1/runs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .expect("request")
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).expect("request")
}

async fn counts(state: &AppState) -> (i64, i64) {
    (
        state.db.count(Table::Runs).await.expect("count"),
        state.db.stored_samples().await.expect("count"),
    )
}

#[tokio::test]
async fn a_valid_run_is_stored_once_and_read_back() {
    for t in common::databases().await {
        let state = common::state(&t.db);
        let run = common::example_run();
        let id = run["run_id"].as_str().expect("id").to_owned();

        let (status, body) = send(&state, post(run.to_string())).await;
        assert_eq!(status, StatusCode::CREATED, "{}: {body}", t.name);
        assert_eq!(body["run_id"], id);
        assert_eq!(body["url"], format!("/api/v1/runs/{id}"));
        assert_eq!(
            body["delete_token"].as_str().map(str::len),
            Some(64),
            "{body}"
        );
        assert_eq!(counts(&state).await, (1, 3), "{}", t.name);

        // The same run again, even re-formatted, is acknowledged and not stored twice,
        // and its delete token is not handed out again.
        let (status, body) = send(
            &state,
            post(serde_json::to_string_pretty(&run).expect("json")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}: {body}", t.name);
        assert_eq!(
            (body["run_id"].as_str(), &body["delete_token"]),
            (Some(id.as_str()), &Value::Null)
        );
        assert_eq!(counts(&state).await, (1, 3), "{}", t.name);

        let (status, stored) = send(&state, get(&format!("/api/v1/runs/{id}"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(stored, run, "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_run_is_deleted_only_with_its_token() {
    for t in common::databases().await {
        let state = common::state(&t.db);
        let run = common::example_run();
        let id = run["run_id"].as_str().expect("id").to_owned();
        let (_, body) = send(&state, post(run.to_string())).await;
        let token = body["delete_token"].as_str().expect("token").to_owned();
        let delete = |token: Option<&str>| {
            let mut request = Request::delete(format!("/api/v1/runs/{id}"));
            if let Some(token) = token {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            request.body(Body::empty()).expect("request")
        };
        let (status, body) = send(&state, delete(None)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        let (status, _) = send(&state, delete(Some(&"0".repeat(64)))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(
            counts(&state).await,
            (1, 3),
            "{}: a wrong token deletes nothing",
            t.name
        );
        let (status, _) = send(&state, delete(Some(&token))).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{}", t.name);
        assert_eq!(
            counts(&state).await,
            (0, 0),
            "{}: the samples went with the run",
            t.name
        );
        let left = state.db.count(Table::Cells).await.expect("count");
        assert_eq!(left, 0, "{}: the cells went with the run", t.name);
        // Its id stays, as a tombstone.
        let left = state.db.count(Table::RunIds).await.expect("count");
        assert_eq!(left, 1, "{}: the run's id stays as a tombstone", t.name);
        let (status, _) = send(&state, delete(Some(&token))).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The same record sent again (a stale tab's retry) is refused for good, and so is
        // an outsider's copy with a token of its own.
        let (status, body) = send(&state, post(run.to_string())).await;
        assert_eq!(status, StatusCode::GONE, "{}: {body}", t.name);
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("deleted")),
            "{body}"
        );
        let outsider = Request::post("/api/v1/runs")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-delete-token-sha256", "a".repeat(64))
            .body(Body::from(run.to_string()))
            .expect("request");
        let (status, _) = send(&state, outsider).await;
        assert_eq!(status, StatusCode::GONE, "{}", t.name);
        assert_eq!(
            counts(&state).await,
            (0, 0),
            "{}: nothing came back",
            t.name
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_uploaders_own_token_deletes_whichever_copy_was_stored() {
    use sha2::{Digest, Sha256};
    for t in common::databases().await {
        let state = common::state(&t.db);
        let run = common::example_run();
        let id = run["run_id"].as_str().expect("id").to_owned();
        // The browser makes the token and sends only its digest, with every attempt.
        let token = "f".repeat(64);
        let digest = format!("{:x}", Sha256::digest(token.as_bytes()));
        let upload = |digest: &str| {
            Request::post("/api/v1/runs")
                .header(header::CONTENT_TYPE, "application/json")
                .header("x-delete-token-sha256", digest)
                .body(Body::from(run.to_string()))
                .expect("request")
        };
        let (status, body) = send(&state, upload(&digest)).await;
        assert_eq!(status, StatusCode::CREATED, "{}: {body}", t.name);
        assert!(
            body.get("delete_token").is_none(),
            "the browser has it: {body}"
        );
        // The answer is lost; the second attempt is a repeat, and the token still works.
        let (status, _) = send(&state, upload(&digest)).await;
        assert_eq!(status, StatusCode::OK);

        let (status, body) = send(&state, upload("not-a-digest")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("x-delete-token-sha256")),
            "{body}"
        );

        let delete = Request::delete(format!("/api/v1/runs/{id}"))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .expect("request");
        let (status, body) = send(&state, delete).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{}: {body}", t.name);
        assert_eq!(counts(&state).await, (0, 0), "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_different_run_under_a_taken_id_is_a_conflict() {
    for t in common::databases().await {
        let state = common::state(&t.db);
        let run = common::example_run();
        assert_eq!(
            send(&state, post(run.to_string())).await.0,
            StatusCode::CREATED
        );
        let mut other = run.clone();
        other["samples"][0]["ttft_ms"] = json!(400.0);
        let (status, body) = send(&state, post(other.to_string())).await;
        assert_eq!(status, StatusCode::CONFLICT, "{}: {body}", t.name);
        assert_eq!(body["error"]["code"], "conflict");
        let id = run["run_id"].as_str().expect("id");
        let (_, stored) = send(&state, get(&format!("/api/v1/runs/{id}"))).await;
        assert_eq!(stored, run, "{}: the first record must be kept", t.name);
        t.cleanup().await;
    }
}

/// Sends a bad upload to both backends and checks the status, the error code, the field
/// it names and that nothing was written; returns the message.
async fn refused(body: &str, status: StatusCode, code: &str, field: Option<&str>) -> String {
    let mut message = String::new();
    for t in common::databases().await {
        let state = common::state(&t.db);
        let (got, answer) = send(&state, post(body.to_owned())).await;
        assert_eq!(got, status, "{}: {answer}", t.name);
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["error"]["field"].as_str(), field, "{answer}");
        assert_eq!(
            counts(&state).await,
            (0, 0),
            "{}: a refused upload wrote rows",
            t.name
        );
        message = answer["error"]["message"]
            .as_str()
            .expect("message")
            .to_owned();
        t.cleanup().await;
    }
    message
}

#[tokio::test]
async fn malformed_json_is_400() {
    let message = refused(
        "{\"run_id\": ",
        StatusCode::BAD_REQUEST,
        "malformed_json",
        None,
    )
    .await;
    assert!(message.contains("not valid JSON"), "{message}");
    refused(
        "[1, 2] trailing",
        StatusCode::BAD_REQUEST,
        "malformed_json",
        None,
    )
    .await;
    refused("", StatusCode::BAD_REQUEST, "malformed_json", None).await;
}

#[tokio::test]
async fn wrong_shapes_and_broken_rules_are_422_naming_the_field() {
    let cases: Vec<(Value, Option<&str>, &str)> = vec![
        (
            common::run_with(1, |r| r["samples"][0]["ttft_ms"] = json!(-3.0)),
            Some("samples[0].ttft_ms"),
            "between 0 and",
        ),
        (
            common::run_with(2, |r| r["samples"][1]["e2e_ms"] = json!("fast")),
            Some("samples[1].e2e_ms"),
            "invalid type",
        ),
        (
            common::run_with(3, |r| r["samples"][0]["ttft_ms"] = json!(1e300)),
            Some("samples[0].ttft_ms"),
            "between 0 and",
        ),
        (
            common::run_with(4, |r| r["samples"][0]["output_chunks"] = json!(-1)),
            Some("samples[0].output_chunks"),
            "invalid value",
        ),
        (
            common::run_with(5, |r| r["samples"][0]["status"] = json!(99999)),
            Some("samples[0].status"),
            "invalid value",
        ),
        (
            common::run_with(6, |r| {
                r.as_object_mut().expect("object").remove("targets");
            }),
            None,
            "missing field `targets`",
        ),
        (
            common::run_with(7, |r| {
                r["client"]["user_agent"] = json!("Mozilla/5.0 (full string)")
            }),
            Some("client.user_agent"),
            "unknown field",
        ),
        (
            common::run_with(8, |r| {
                r["targets"][0]["label"] = json!("<script>alert(1)</script>\u{7}")
            }),
            Some("targets[0].label"),
            "control characters",
        ),
        (
            common::run_with(9, |r| r["targets"][0]["label"] = json!("x".repeat(10_000))),
            Some("targets[0].label"),
            "at most 64",
        ),
        (
            common::run_with(10, |r| r["client"]["browser"] = json!("Chrome\u{0}")),
            Some("client.browser"),
            "control characters",
        ),
        (
            common::run_with(11, |r| {
                r["samples"][0]["error_message"] = json!("\u{1b}[31mred")
            }),
            Some("samples[0].error_message"),
            "control characters",
        ),
        (
            common::run_with(12, |r| {
                r["samples"][0]["server_timing"] =
                    json!([{"name": "a", "duration_ms": f64::MAX, "description": null}])
            }),
            Some("samples[0].server_timing.duration_ms"),
            "between 0 and",
        ),
    ];
    for (run, field, says) in cases {
        let message = refused(
            &run.to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            field,
        )
        .await;
        assert!(message.contains(says), "{field:?}: {message}");
    }
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let message = refused(&huge, StatusCode::PAYLOAD_TOO_LARGE, "too_large", None).await;
    assert!(message.contains("1048576 bytes"), "{message}");
}

#[tokio::test]
async fn reading_runs_that_do_not_exist() {
    let t = common::sqlite().await;
    let state = common::state(&t.db);
    let (status, body) = send(
        &state,
        get("/api/v1/runs/0f8fad5b-d9cb-469f-a165-000000000000"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    let (status, _) = send(&state, get("/api/v1/runs/nope")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = send(&state, get("/api/v1/nothing-here")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["error"]["message"],
        "no API endpoint at /api/v1/nothing-here"
    );
}

#[tokio::test]
async fn ping_answers_uncached() {
    let t = common::sqlite().await;
    let response = App::new(common::state(&t.db))
        .get("/api/v1/ping")
        .send()
        .await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(response.headers["timing-allow-origin"], "*");
}

#[tokio::test]
async fn uploads_beyond_an_addresss_allowance_wait() {
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        uploads_per_minute: 2,
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    let upload = |n| app.post("/api/v1/runs").json(&common::run_with(n, |_| {}));
    for n in 0..2 {
        assert_eq!(upload(n).send().await.status, 201);
    }
    let response = upload(9).send().await;
    assert_eq!(response.status, 429);
    assert_eq!(response.headers["retry-after"], "30");
    let body = response.json();
    assert_eq!(body["error"]["code"], "rate_limited");
    assert_eq!(t.db.count(Table::Runs).await.expect("count"), 2);
    // The allowance is the address's: another has its own.
    let elsewhere = "192.0.2.7:40000".parse().expect("address");
    assert_eq!(upload(9).peer(elsewhere).send().await.status, 201);
}

#[tokio::test]
async fn the_database_survives_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let run = common::example_run();
    {
        let db = firsttoken_server::Db::connect(&url).await.expect("opens");
        assert_eq!(
            send(&common::state(&db), post(run.to_string())).await.0,
            StatusCode::CREATED
        );
    }
    let db = firsttoken_server::Db::connect(&url).await.expect("reopens");
    let record = db
        .run_record(run["run_id"].as_str().expect("id"))
        .await
        .expect("query");
    assert!(record.is_some());
}

/// Deleting while uploads are being written: every delete with its token succeeds. On
/// SQLite a transaction that reads and then writes, begun deferred, failed at once with
/// "database is locked" whenever the upload writer held the lock or wrote after its read
/// (no busy handler runs for a read that becomes a write): a user's delete broke exactly
/// when the collector was busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_succeed_while_uploads_are_written() {
    for t in common::databases().await {
        let state = common::state(&t.db);
        const RUNS: u64 = 200;
        let mut tokens = Vec::new();
        for n in 0..RUNS {
            let run = common::run_with(n, |_| {});
            let (status, body) = send(&state, post(run.to_string())).await;
            assert_eq!(status, StatusCode::CREATED, "{}: {body}", t.name);
            let token = body["delete_token"].as_str().expect("token").to_owned();
            tokens.push((run["run_id"].as_str().expect("id").to_owned(), token));
        }
        // Uploads from another task, as fast as they are answered, while the deletes go.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let uploads = tokio::spawn({
            let (state, stop) = (state.clone(), stop.clone());
            async move {
                let mut n = RUNS;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let run = common::run_with(n, |_| {});
                    let (status, body) = send(&state, post(run.to_string())).await;
                    assert_eq!(status, StatusCode::CREATED, "{body}");
                    n += 1;
                }
                n - RUNS
            }
        });
        let mut failed = Vec::new();
        for (id, token) in &tokens {
            let delete = Request::delete(format!("/api/v1/runs/{id}"))
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .expect("request");
            let (status, body) = send(&state, delete).await;
            if status != StatusCode::NO_CONTENT {
                failed.push(format!("{status}: {body}"));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let uploaded = uploads.await.expect("the uploads");
        assert!(uploaded > 0, "{}: uploads went on meanwhile", t.name);
        assert!(
            failed.is_empty(),
            "{}: {} of {RUNS} deletes failed with {uploaded} uploads meanwhile: {:?}",
            t.name,
            failed.len(),
            failed.first()
        );
        t.cleanup().await;
    }
}

/// Another website cannot have its visitors' browsers upload (a `text/plain` POST needs
/// no preflight): an upload whose `Origin` is not this server's own host is refused
/// unless `--accept-upload-origin` names it. Tools that send no `Origin` still upload.
#[tokio::test]
async fn uploads_come_only_from_the_servers_own_pages_unless_configured() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let upload = |n: u64, origin: Option<&str>| {
        let mut call = app
            .post("/api/v1/runs")
            .header("host", "bench.example.com")
            .header("content-type", "text/plain")
            .body(common::run_with(n, |_| {}).to_string());
        if let Some(origin) = origin {
            call = call.header("origin", origin);
        }
        call.send()
    };
    let refused = upload(1, Some("https://evil.example")).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("--accept-upload-origin"),
        "{}",
        refused.text()
    );
    assert_eq!(upload(1, Some("null")).await.status, 403);
    assert_eq!(
        upload(1, Some("https://bench.example.com")).await.status,
        201
    );
    // A proxy's Host may drop the port the page's origin has.
    assert_eq!(
        upload(2, Some("http://bench.example.com:8080"))
            .await
            .status,
        201
    );
    assert_eq!(upload(3, None).await.status, 201);

    let allowing = App::new(common::state_with(
        &t.db,
        firsttoken_server::Config {
            accept_upload_origins: vec!["https://chat.example.com".into()],
            ..common::config()
        },
    ));
    let from_chat = allowing
        .post("/api/v1/runs")
        .header("host", "collect.example.com")
        .header("origin", "https://chat.example.com")
        .json(&common::run_with(4, |_| {}))
        .send()
        .await;
    assert_eq!(from_chat.status, 201, "{}", from_chat.text());
}

/// The contract's types, as the app reads them, parse what the collector answers: an
/// accepted upload as `StoredRun` (with the token the collector made, which deletes the
/// run), and a refused one as `ErrorBody` naming the field. Written again with the same
/// types, each answer is the same JSON.
#[tokio::test]
async fn the_contracts_types_read_the_collectors_answers_and_write_them_back() {
    use firsttoken_core::api::{ErrorBody, RUNS_PATH, StoredRun};

    let t = common::sqlite().await;
    let state = common::state(&t.db);
    let run = common::example_run();
    let id = run["run_id"].as_str().expect("id").to_owned();
    let (status, body) = send(&state, post(run.to_string())).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let stored: StoredRun = serde_json::from_value(body.clone()).expect("a StoredRun");
    assert_eq!(stored.run_id, id);
    assert_eq!(stored.url, format!("{RUNS_PATH}/{id}"));
    assert_eq!(serde_json::to_value(&stored).expect("json"), body);
    let token = stored.delete_token.expect("the collector made a token");
    let deleted = App::new(state.clone())
        .delete(&stored.url)
        .bearer_auth(&token)
        .send()
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.text());

    let broken = common::run_with(2, |run| run["samples"][0]["ttft_ms"] = json!(-1.0));
    let (status, body) = send(&state, post(broken.to_string())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let error: ErrorBody = serde_json::from_value(body.clone()).expect("an ErrorBody");
    assert_eq!(error.error.field.as_deref(), Some("samples[0].ttft_ms"));
    assert!(
        error.error.message.contains("samples[0].ttft_ms"),
        "{}",
        error.error.message
    );
    assert_eq!(serde_json::to_value(&error).expect("json"), body);
    // What the app reads of it: the message alone.
    assert_eq!(
        ErrorBody::message_of(&body.to_string()),
        Some(error.error.message.clone())
    );
    t.cleanup().await;
}
