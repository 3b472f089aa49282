//! No IP address, user-agent string or cookie is ever stored or logged: requests from a
//! distinct loopback address carry marked headers, and neither the server's log output
//! (at debug level) nor any stored row contains any of them.

#[path = "it/common/mod.rs"]
mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

const CLIENT_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const USER_AGENT: &str =
    "Mozilla/5.0 (X11; Linux x86_64) UA-MARKER-4af1 Chrome/156.0.0.0 Safari/537.36";
const COOKIE: &str = "session=COOKIE-MARKER-77d2";
const FORWARDED: &str = "203.0.113.77";

/// Everything the server logs, kept for the test to read.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

// A real port: the address must come from a real connection, whose handling logs too.
#[tokio::test(flavor = "multi_thread")]
async fn no_address_user_agent_or_cookie_is_stored_or_logged() {
    let logs = Captured::default();
    tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_env_filter(EnvFilter::new("debug"))
        .with_ansi(false)
        .init();

    for t in common::databases().await {
        let address = common::serve(common::state(&t.db)).await;
        let base = format!("http://{address}");
        let client = reqwest::Client::builder()
            .local_address(IpAddr::V4(CLIENT_ADDRESS))
            .user_agent(USER_AGENT)
            .default_headers(
                [
                    (reqwest::header::COOKIE, COOKIE.parse().expect("header")),
                    (
                        "x-forwarded-for".parse().expect("name"),
                        FORWARDED.parse().expect("header"),
                    ),
                ]
                .into_iter()
                .collect(),
            )
            .build()
            .expect("client");
        let run = common::example_run();
        let id = run["run_id"].as_str().expect("id");
        let stored = client
            .post(format!("{base}/api/v1/runs"))
            .json(&run)
            .send()
            .await
            .expect("upload");
        assert_eq!(stored.status(), 201, "{}", t.name);
        let token = stored.json::<serde_json::Value>().await.expect("json")["delete_token"]
            .as_str()
            .expect("token")
            .to_owned();
        let mut broken = run.clone();
        broken["samples"][0]["ttft_ms"] = (-1.0).into();
        broken["run_id"] = "00000000-0000-4000-8000-000000000001".into();
        for response in [
            client
                .post(format!("{base}/api/v1/runs"))
                .json(&run)
                .send()
                .await,
            client
                .post(format!("{base}/api/v1/runs"))
                .json(&broken)
                .send()
                .await,
            client.get(format!("{base}/api/v1/runs/{id}")).send().await,
            client
                .get(format!(
                    "{base}/api/v1/summary?group_by=browser&include_demo=true"
                ))
                .send()
                .await,
            client.get(format!("{base}/api/v1/ping")).send().await,
            client.get(format!("{base}/healthz")).send().await,
            client
                .post(format!(
                    "{base}/v1/chat/completions?first_token_ms=1&tokens=2"
                ))
                .body(r#"{"stream":true}"#)
                .send()
                .await,
            client
                .delete(format!("{base}/api/v1/runs/{id}"))
                .bearer_auth("wrong")
                .send()
                .await,
        ] {
            response.expect("response").bytes().await.expect("body");
        }
        // When it arrived is kept to the hour only, which no access log can be matched to.
        let exported = client
            .get(format!("{base}/api/v1/export?include_demo=true"))
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await
            .expect("export")
            .text()
            .await
            .expect("text");
        let first: serde_json::Value =
            serde_json::from_str(exported.lines().next().expect("a row")).expect("json");
        let received = first["received_at_ms"].as_i64().expect("received_at_ms");
        assert_eq!(received % 3_600_000, 0, "{}: {received}", t.name);
        let rows = t.db.all_text().await.expect("rows");
        assert!(
            rows.contains("Chrome"),
            "{}: the coarse browser family is kept",
            t.name
        );
        for secret in [
            CLIENT_ADDRESS.to_string(),
            "UA-MARKER".into(),
            "COOKIE-MARKER".into(),
            FORWARDED.into(),
            token.clone(),
        ] {
            assert!(
                !rows.contains(&secret),
                "{}: a stored row holds {secret:?}",
                t.name
            );
        }
        t.cleanup().await;
    }

    let logged = String::from_utf8(logs.0.lock().expect("log buffer").clone()).expect("UTF-8 logs");
    assert!(
        logged.contains("run stored"),
        "the log is captured: {logged}"
    );
    // Nor the run's id: with a proxy's access log, an id and a time would say whose run
    // it is (the paths that carry one are logged with `{run_id}` in its place).
    let id = common::example_run()["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert!(logged.contains("/api/v1/runs/{run_id}"), "{logged}");
    for secret in [
        CLIENT_ADDRESS.to_string(),
        "UA-MARKER".into(),
        "COOKIE-MARKER".into(),
        FORWARDED.into(),
        id,
    ] {
        assert!(
            !logged.contains(&secret),
            "the log holds {secret:?}:\n{logged}"
        );
    }
}
