//! What operators read: health, metrics, and an OpenAPI document that matches the routes.

use crate::common;

use crate::common::App;

#[tokio::test]
async fn health_says_which_database_answers() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        let response = app.get("/healthz").send().await;
        assert_eq!(response.status, 200);
        let body = response.json();
        assert_eq!(body["status"], "ok");
        assert_eq!(body["database"], t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn health_answers_at_once_and_notices_a_database_that_is_gone() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let health = || async { app.get("/healthz").send().await.status.as_u16() };
    assert_eq!(health().await, 200);
    t.db.close().await;
    // Within the last good answer's 3 s and the check's 2 s, it says so.
    let started = std::time::Instant::now();
    while health().await == 200 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(8),
            "still healthy {:?} after the database went away",
            started.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(health().await, 503);
}

#[tokio::test]
async fn metrics_count_uploads_by_outcome_and_time_requests_by_route() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let url = "/api/v1/runs";
    let run = common::example_run();
    app.post(url).json(&run).send().await; // stored
    app.post(url).json(&run).send().await; // repeated
    app.post(url).body("{oops").send().await; // malformed
    let mut invalid = run.clone();
    invalid["run_id"] = "nope".into();
    app.post(url).json(&invalid).send().await; // invalid
    app.get(&format!(
        "/api/v1/runs/{}",
        run["run_id"].as_str().expect("id")
    ))
    .send()
    .await;
    let metrics = app.get("/metrics").send().await;
    assert!(
        metrics.headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain; version=0.0.4")
    );
    let text = metrics.text();
    for line in [
        "firsttoken_uploads_accepted_total 1",
        "firsttoken_uploads_repeated_total 1",
        "firsttoken_uploads_rejected_total{reason=\"malformed_json\"} 1",
        "firsttoken_uploads_rejected_total{reason=\"invalid\"} 1",
        "firsttoken_http_request_duration_seconds_count{route=\"/api/v1/runs\",method=\"POST\",status=\"201\"} 1",
        "firsttoken_http_request_duration_seconds_count{route=\"/api/v1/runs/{run_id}\",method=\"GET\",status=\"200\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
}

/// The book's operations page lists every metric `/metrics` declares, with its type, as a
/// row that starts with `` | `name` | type | ``.
#[tokio::test]
async fn the_books_operations_page_lists_every_metric() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let text = app.get("/metrics").send().await.text();
    let page = include_str!("../../../docs/src/deploy/operations.md");
    let declared: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .collect();
    assert!(declared.len() >= 9, "{text}");
    let missing: Vec<String> = declared
        .iter()
        .filter_map(|line| {
            let (name, kind) = line.split_once(' ')?;
            let row = format!("| `{name}` | {kind} |");
            (!page.contains(&row)).then_some(row)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/deploy/operations.md lacks: {missing:?}"
    );
}

/// The book's API page lists every operation of the OpenAPI document, as a row that
/// starts with `` `METHOD path` ``.
#[test]
fn the_books_api_page_lists_every_operation() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../openapi.json")).expect("openapi.json is JSON");
    let page = include_str!("../../../docs/src/reference/api.md");
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "delete", "put", "patch"] {
            let row = format!("| `{} {path}` |", method.to_uppercase());
            if item.get(method).is_some() && !page.contains(&row) {
                missing.push(row);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/src/reference/api.md lacks: {missing:?}"
    );
}

#[tokio::test]
async fn every_documented_operation_exists() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let doc = app.get("/api/v1/openapi.json").send().await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let concrete = path.replace("{run_id}", "0f8fad5b-d9cb-469f-a165-70867728950e");
        for method in ["get", "post", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            operations += 1;
            let response = app
                .call(method.to_uppercase().parse().expect("method"), &concrete)
                .send()
                .await;
            // A route that exists answers something other than "no such endpoint" or
            // "method not allowed" (its own 404 says what was not found).
            assert_ne!(response.status, 405, "{method} {path}");
            if response.status == 404 {
                let body = response.json();
                let message = body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                assert!(
                    !message.starts_with("no API endpoint"),
                    "{method} {path}: {message}"
                );
            }
        }
    }
    assert_eq!(operations, 15);
    // The schema the document refers to is served too.
    let schema = app.get("/api/v1/schema/run.v1.json").send().await.json();
    assert_eq!(schema["title"], "firsttoken run, schema version 1");
}

/// `--help` never shows a secret, even when the environment holds it: clap prints each
/// option's environment value beside it unless told not to, and once printed the admin
/// token, the results token and the database password.
#[test]
fn help_never_prints_a_secret() {
    let secrets = [
        (
            "FIRSTTOKEN_ADMIN_TOKEN",
            "admin-secret-of-at-least-32-characters-0001",
        ),
        (
            "FIRSTTOKEN_RESULTS_TOKEN",
            "results-secret-of-at-least-32-characters-01",
        ),
        (
            "DATABASE_URL",
            "postgres://firsttoken:db-password-0001@127.0.0.1/test",
        ),
    ];
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_firsttoken-server"))
        .arg("--help")
        .envs(secrets)
        .output()
        .expect("the server binary runs");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("FIRSTTOKEN_ADMIN_TOKEN"), "{help}");
    for (name, value) in secrets {
        let shown = if name == "DATABASE_URL" {
            "db-password-0001"
        } else {
            value
        };
        assert!(!help.contains(shown), "--help shows {name}: {help}");
    }
}

/// With a metrics token, `/metrics` answers only to it (or the admin token): its live
/// upload counts tell an outsider when people take part. Without one it stays open.
#[tokio::test]
async fn metrics_can_be_kept_behind_a_token() {
    let t = common::sqlite().await;
    let open = App::new(common::state(&t.db));
    assert_eq!(open.get("/metrics").send().await.status, 200);
    let token = "metrics-token-of-at-least-32-characters-01";
    let config = firsttoken_server::Config {
        metrics_token: Some(firsttoken_server::config::Secret(token.into())),
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    let refused = app.get("/metrics").send().await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert!(
        refused.text().contains("metrics token"),
        "{}",
        refused.text()
    );
    assert_eq!(
        app.get("/metrics").bearer_auth(token).send().await.status,
        200
    );
    let admin = app
        .get("/metrics")
        .bearer_auth(common::ADMIN_TOKEN)
        .send()
        .await;
    assert_eq!(admin.status, 200);
    t.cleanup().await;
}
