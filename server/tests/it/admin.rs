//! Bulk export and purge, behind the admin token, on SQLite and on PostgreSQL.

use crate::common;

use crate::common::App;
use serde_json::Value;

async fn upload(app: &App, n: u64, edit: impl FnOnce(&mut Value)) {
    let run = common::run_with(n, edit);
    let response = app.post("/api/v1/runs").json(&run).send().await;
    assert_eq!(response.status, 201);
}

fn admin(request: common::Call) -> common::Call {
    request.bearer_auth(common::ADMIN_TOKEN)
}

#[tokio::test]
async fn export_streams_every_matching_sample_as_ndjson_and_csv() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        upload(&app, 1, |r| r["targets"][0]["demo"] = Value::Bool(false)).await;
        upload(&app, 2, |r| {
            r["targets"][0]["demo"] = Value::Bool(false);
            r["targets"][0]["label"] = Value::String("staging, \"blue\"".into());
        })
        .await;
        upload(&app, 3, |_| {}).await; // the example is a demo run

        let response = admin(app.get("/api/v1/export")).send().await;
        assert_eq!(response.status, 200, "{}", t.name);
        assert_eq!(response.headers["content-type"], "application/x-ndjson");
        let text = response.text();
        let rows: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(
            rows.len(),
            6,
            "{}: two real runs of three samples, the demo left out",
            t.name
        );
        assert_eq!(rows[0]["ttft_ms"], 306.2);
        assert_eq!(rows[0]["phase"], "steady");
        // Columns the samples table does not hold come from the stored record.
        assert_eq!(rows[0]["itl_ms"], serde_json::json!([25.3, 24.8, 25.1]));
        assert_eq!(rows[1]["error"], "http");
        assert!(rows[1]["error_message"].is_string(), "{}", rows[1]);
        assert!(rows[0]["received_at_ms"].as_i64().is_some_and(|t| t > 0));
        let names: Vec<&str> = firsttoken_core::export::COLUMNS
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            rows[0].as_object().expect("an object").keys().count(),
            names.len()
        );

        let csv = admin(app.get("/api/v1/export?format=csv&include_demo=true"))
            .send()
            .await
            .text();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 9, "{}: a header and nine samples", t.name);
        // One CSV format everywhere: the page's download has the same header.
        assert_eq!(
            format!("{}\n", lines[0]),
            firsttoken_core::export::csv_header()
        );
        assert!(
            csv.contains("\"staging, \"\"blue\"\"\""),
            "{}: quoted: {csv}",
            t.name
        );

        let filtered = admin(app.get("/api/v1/export?target_label=demo&include_demo=only"))
            .send()
            .await
            .text();
        assert_eq!(filtered.lines().count(), 3, "{}", t.name);

        // A filter on a sample's own field takes only those samples of a run.
        upload(&app, 4, |r| {
            r["targets"][0]["scenarios"] = serde_json::json!(["default", "long"]);
            r["samples"][1]["scenario"] = Value::String("long".into());
        })
        .await;
        let long = admin(app.get("/api/v1/export?scenario=long&include_demo=true"))
            .send()
            .await
            .text();
        let rows: Vec<Value> = long
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(rows.len(), 1, "{}: {long}", t.name);
        assert_eq!(
            (&rows[0]["index"], &rows[0]["scenario"]),
            (&Value::from(1), &Value::from("long"))
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn without_the_admin_token_there_is_no_export_or_purge() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let response = app.get("/api/v1/export").send().await;
    assert_eq!(response.status, 401, "no token");
    let response = app.get("/api/v1/export").bearer_auth("guess").send().await;
    assert_eq!(response.status, 401, "a wrong token");
    let body = response.json();
    assert_eq!(body["error"]["message"], "that is not the admin token");

    // A server started without an admin token has the tools off altogether.
    let config = firsttoken_server::Config {
        admin_token: None,
        ..common::config()
    };
    let off = App::new(common::state_with(&t.db, config));
    let response = admin(off.post("/api/v1/admin/purge?network=wifi"))
        .send()
        .await;
    assert_eq!(response.status, 403);
    let body = response.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--admin-token"))
    );
}

#[tokio::test]
async fn purge_deletes_matching_runs_and_needs_a_condition() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        upload(&app, 1, |r| r["targets"][0]["demo"] = Value::Bool(false)).await;
        upload(&app, 2, |_| {}).await;
        let response = admin(app.post("/api/v1/admin/purge")).send().await;
        assert_eq!(
            response.status, 400,
            "{}: purging everything needs a condition",
            t.name
        );
        let response = admin(app.post("/api/v1/admin/purge?include_demo=only"))
            .send()
            .await;
        assert_eq!(response.status, 200);
        let body = response.json();
        assert_eq!(body["deleted_runs"], 1, "{}", t.name);
        assert_eq!(
            t.db.count(firsttoken_server::db::Table::Runs)
                .await
                .expect("count"),
            1
        );
        assert_eq!(t.db.stored_samples().await.expect("count"), 3, "{}", t.name);
        t.cleanup().await;
    }
}

/// Purging while uploads are being written: every purge succeeds (on SQLite a purge that
/// chose its runs by a read first failed with "database is locked" whenever the upload
/// writer held the lock or wrote after the read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_succeed_while_uploads_are_written() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        let stop = Arc::new(AtomicBool::new(false));
        let uploads = tokio::spawn({
            let (app, stop) = (app.clone(), stop.clone());
            async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    upload(&app, n, |_| {}).await;
                    n += 1;
                }
                n
            }
        });
        let mut failed = Vec::new();
        for _ in 0..40 {
            let response = admin(app.post("/api/v1/admin/purge?include_demo=only"))
                .send()
                .await;
            if response.status != 200 {
                failed.push(format!("{}: {}", response.status, response.text()));
            }
        }
        stop.store(true, Ordering::Relaxed);
        let uploaded = uploads.await.expect("the uploads");
        assert!(uploaded > 0, "{}: uploads went on meanwhile", t.name);
        assert!(
            failed.is_empty(),
            "{}: {} of 40 purges failed with {uploaded} uploads meanwhile: {:?}",
            t.name,
            failed.len(),
            failed.first()
        );
        t.cleanup().await;
    }
}
