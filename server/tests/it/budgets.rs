//! What one network may upload: samples and bytes per hour, counted per IPv4 address or
//! IPv6 /64; what the collector stores at all; and for which targets. Each refusal names
//! what ran out, and nothing already stored is touched.

use crate::common;

use std::time::Duration;

use crate::common::App;
use axum::body::{Body, Bytes};
use firsttoken_server::Config;
use firsttoken_server::db::Table;
use serde_json::Value;

/// Uploads run `n` as if from `from` (the proxy's `X-Forwarded-For` entry); the status and
/// the error code.
async fn upload(app: &App, n: u64, from: &str) -> (u16, Option<String>) {
    let run = common::run_with(n, |_| {});
    let response = app
        .post("/api/v1/runs")
        .header("x-forwarded-for", from)
        .json(&run)
        .send()
        .await;
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (
        response.status.as_u16(),
        body["error"]["code"].as_str().map(str::to_owned),
    )
}

fn behind_a_proxy(config: Config) -> Config {
    Config {
        trust_forwarded_for: true,
        ..config
    }
}

#[tokio::test]
async fn samples_are_budgeted_per_network_with_ipv6_counted_per_64() {
    let t = common::sqlite().await;
    // The example run has 3 samples: two runs fit in an hour, the third does not.
    let config = behind_a_proxy(Config {
        samples_per_hour: 7,
        ..common::config()
    });
    let app = App::new(common::state_with(&t.db, config));
    assert_eq!(upload(&app, 1, "2001:db8::1").await.0, 201);
    assert_eq!(upload(&app, 2, "2001:db8::ffff:2").await.0, 201);
    assert_eq!(
        upload(&app, 3, "2001:db8::3").await,
        (429, Some("over_budget".into())),
        "another address in the same /64 shares the budget"
    );
    assert_eq!(
        upload(&app, 4, "2001:db8:0:1::1").await.0,
        201,
        "the next /64 is another network"
    );
    assert_eq!(upload(&app, 5, "192.0.2.1").await.0, 201);
    // A repeated upload costs nothing.
    assert_eq!(upload(&app, 5, "192.0.2.1").await.0, 200);
    assert_eq!(upload(&app, 6, "192.0.2.1").await.0, 201);
    assert_eq!(t.db.count(Table::Runs).await.expect("count"), 5);
}

/// A proxy that writes the client's port into `X-Forwarded-For` (`1.2.3.4:5`,
/// `[2001:db8::1]:443`): each client keeps its own budget. Read as no address, such an
/// entry once fell back to the proxy's, and every client shared one budget.
#[tokio::test]
async fn forwarded_entries_with_a_port_are_each_clients_own() {
    let t = common::sqlite().await;
    let config = behind_a_proxy(Config {
        samples_per_hour: 7,
        ..common::config()
    });
    let app = App::new(common::state_with(&t.db, config));
    assert_eq!(upload(&app, 1, "192.0.2.1:41000").await.0, 201);
    assert_eq!(upload(&app, 2, "192.0.2.1:41001").await.0, 201);
    assert_eq!(
        upload(&app, 3, "\"192.0.2.1:41002\"").await,
        (429, Some("over_budget".into())),
        "the same address on another port is the same client"
    );
    assert_eq!(upload(&app, 4, "198.51.100.9:5000").await.0, 201);
    assert_eq!(upload(&app, 5, "[2001:db8::1]:443").await.0, 201);
    assert_eq!(upload(&app, 6, "[2001:db8::2]").await.0, 201);
    assert_eq!(
        upload(&app, 7, "2001:db8::3").await.0,
        429,
        "one /64, however written"
    );
}

#[tokio::test]
async fn bytes_are_budgeted_before_the_body_is_read() {
    let t = common::sqlite().await;
    let one_run = serde_json::to_vec(&common::run_with(1, |_| {}))
        .expect("json")
        .len() as u64;
    let config = behind_a_proxy(Config {
        upload_bytes_per_hour: one_run + one_run / 2,
        ..common::config()
    });
    let app = App::new(common::state_with(&t.db, config));
    assert_eq!(upload(&app, 1, "198.51.100.1").await.0, 201);
    let (status, code) = upload(&app, 2, "198.51.100.1").await;
    assert_eq!((status, code.as_deref()), (429, Some("over_budget")));
    assert_eq!(upload(&app, 3, "198.51.100.2").await.0, 201);

    // Refused from the headers alone: the body never arrives.
    let never = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
    let answer = tokio::time::timeout(
        Duration::from_secs(3),
        app.post("/api/v1/runs")
            .header("x-forwarded-for", "198.51.100.1")
            .header("content-type", "application/json")
            .header("content-length", 4000)
            .stream(Body::from_stream(never))
            .send(),
    )
    .await
    .expect("answered without the body");
    assert_eq!(answer.status, 429, "{}", answer.text());
    assert!(answer.headers.contains_key("retry-after"), "{answer:?}");
    assert!(answer.text().contains("over_budget"), "{}", answer.text());
}

#[tokio::test]
async fn a_full_store_answers_507_and_keeps_what_it_has() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        assert_eq!(upload(&app, 1, "192.0.2.1").await.0, 201, "{}", t.name);
        let used = t.db.storage_bytes().await.expect("size");
        assert!(used > 0, "{}", t.name);
        let full = Config {
            max_storage_bytes: used,
            ..common::config()
        };
        let app = App::new(common::state_with(&t.db, full));
        let response = app
            .post("/api/v1/runs")
            .json(&common::run_with(2, |_| {}))
            .send()
            .await;
        assert_eq!(response.status, 507, "{}", t.name);
        let body = response.json();
        assert_eq!(body["error"]["code"], "storage_full");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("storage is full")),
            "{body}"
        );
        // Reads go on, and the stored run is still there.
        let stored = app
            .get("/api/v1/runs/00000000-0000-4000-8000-000000000001")
            .send()
            .await;
        assert_eq!(stored.status, 200, "{}", t.name);
        assert_eq!(t.db.count(Table::Runs).await.expect("count"), 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn only_the_operators_targets_are_accepted_when_named() {
    let t = common::sqlite().await;
    let config = Config {
        accept_target_origins: vec!["https://chat.example.com".into()],
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    let response = app
        .post("/api/v1/runs")
        .json(&common::run_with(1, |_| {}))
        .send()
        .await;
    assert_eq!(response.status, 422);
    let body = response.json();
    assert_eq!(body["error"]["field"], "targets[0].origin");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("https://chat.example.com")),
        "{body}"
    );
    let accepted = app
        .post("/api/v1/runs")
        .json(&common::run_with(2, |run| {
            run["targets"][0]["origin"] = "https://chat.example.com".into();
        }))
        .send()
        .await;
    assert_eq!(accepted.status, 201);

    let refused = Config {
        accept_target_origins: vec!["chat.example.com".into()],
        ..common::config()
    }
    .check()
    .expect_err("not an origin");
    assert_eq!(refused.flag, "--accept-target-origin", "{refused}");
}

/// A purge frees the storage budget. On SQLite the file keeps its size (freed pages go to
/// its free list until a `VACUUM`), and the budget once counted them; on PostgreSQL the
/// tables' size on disk shrinks only when whole months are dropped, and the budget once
/// counted that. Either way a store filled with junk stayed full for good after the
/// operator purged it.
#[tokio::test]
async fn a_purge_frees_the_storage_budget() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        // What the empty schema takes (its tables' and indexes' first pages) stays.
        let empty = t.db.storage_bytes().await.expect("size");
        for n in 0..40 {
            assert_eq!(upload(&app, n, "192.0.2.1").await.0, 201, "{}", t.name);
        }
        let used = t.db.storage_bytes().await.expect("size");
        let purged = app
            .post("/api/v1/admin/purge?include_demo=only")
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await;
        assert_eq!(purged.status, 200, "{}", purged.text());
        let after = t.db.storage_bytes().await.expect("size");
        assert!(
            after - empty < (used - empty) / 2,
            "{}: {after} bytes counted after purging every run, {used} before, {empty} empty",
            t.name
        );
        // A store whose limit the junk had reached takes uploads again.
        let full_before = Config {
            max_storage_bytes: used,
            ..common::config()
        };
        let app = App::new(common::state_with(&t.db, full_before));
        assert_eq!(upload(&app, 1000, "192.0.2.1").await.0, 201, "{}", t.name);
        t.cleanup().await;
    }
}
