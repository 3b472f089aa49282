//! Bulk export and purge, behind the admin token, on SQLite and on PostgreSQL.

mod common;

use serde_json::Value;

async fn upload(address: std::net::SocketAddr, n: u64, edit: impl FnOnce(&mut Value)) {
    let run = common::run_with(n, edit);
    let response = reqwest::Client::new()
        .post(format!("http://{address}/api/v1/runs"))
        .json(&run)
        .send()
        .await
        .expect("upload");
    assert_eq!(response.status(), 201);
}

fn admin(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth(common::ADMIN_TOKEN)
}

#[tokio::test]
async fn export_streams_every_matching_sample_as_ndjson_and_csv() {
    for t in common::databases().await {
        let address = common::serve(common::state(&t.db)).await;
        upload(address, 1, |r| r["targets"][0]["demo"] = Value::Bool(false)).await;
        upload(address, 2, |r| {
            r["targets"][0]["demo"] = Value::Bool(false);
            r["targets"][0]["label"] = Value::String("staging, \"blue\"".into());
        })
        .await;
        upload(address, 3, |_| {}).await; // the example is a demo run
        let client = reqwest::Client::new();

        let response = admin(client.get(format!("http://{address}/api/v1/export")))
            .send()
            .await
            .expect("export");
        assert_eq!(response.status(), 200, "{}", t.name);
        assert_eq!(response.headers()["content-type"], "application/x-ndjson");
        let text = response.text().await.expect("body");
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

        let csv = admin(client.get(format!(
            "http://{address}/api/v1/export?format=csv&include_demo=true"
        )))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("body");
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 9, "{}: a header and nine samples", t.name);
        assert!(lines[0].starts_with("run_id,index,received_at_ms,phase"));
        assert!(
            csv.contains("\"staging, \"\"blue\"\"\""),
            "{}: quoted: {csv}",
            t.name
        );

        let filtered = admin(client.get(format!(
            "http://{address}/api/v1/export?target_label=demo&include_demo=only"
        )))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("body");
        assert_eq!(filtered.lines().count(), 3, "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn without_the_admin_token_there_is_no_export_or_purge() {
    let t = common::sqlite().await;
    let address = common::serve(common::state(&t.db)).await;
    let client = reqwest::Client::new();
    let response = client
        .get(format!("http://{address}/api/v1/export"))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 401, "no token");
    let response = client
        .get(format!("http://{address}/api/v1/export"))
        .bearer_auth("guess")
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 401, "a wrong token");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["message"], "that is not the admin token");

    // A server started without an admin token has the tools off altogether.
    let config = firsttoken_server::Config {
        admin_token: None,
        ..common::config()
    };
    let off = common::serve(common::state_with(&t.db, config)).await;
    let response = admin(client.post(format!("http://{off}/api/v1/admin/purge?network=wifi")))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--admin-token"))
    );
}

#[tokio::test]
async fn purge_deletes_matching_runs_and_needs_a_condition() {
    for t in common::databases().await {
        let address = common::serve(common::state(&t.db)).await;
        upload(address, 1, |r| r["targets"][0]["demo"] = Value::Bool(false)).await;
        upload(address, 2, |_| {}).await;
        let client = reqwest::Client::new();
        let response = admin(client.post(format!("http://{address}/api/v1/admin/purge")))
            .send()
            .await
            .expect("purge");
        assert_eq!(
            response.status(),
            400,
            "{}: purging everything needs a condition",
            t.name
        );
        let response = admin(client.post(format!(
            "http://{address}/api/v1/admin/purge?include_demo=only"
        )))
        .send()
        .await
        .expect("purge");
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["deleted_runs"], 1, "{}", t.name);
        assert_eq!(
            t.db.count(firsttoken_server::db::Table::Runs)
                .await
                .expect("count"),
            1
        );
        assert_eq!(
            t.db.count(firsttoken_server::db::Table::Samples)
                .await
                .expect("count"),
            3,
            "{}",
            t.name
        );
        t.cleanup().await;
    }
}
