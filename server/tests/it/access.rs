//! Who reads the crowd's numbers: with `--results-token`, summaries answer only those who
//! send it (or the admin token); uploads stay open to every beta user; a wrong guess costs
//! the network part of its hourly allowance.

use crate::common;

use firsttoken_server::Config;
use firsttoken_server::config::Secret;

const RESULTS_TOKEN: &str = "results-test-token-of-at-least-32-chars";

#[tokio::test]
async fn summaries_need_the_results_token_once_one_is_set() {
    let t = common::sqlite().await;
    let config = Config {
        results_token: Some(Secret(RESULTS_TOKEN.into())),
        ..common::config()
    };
    let app = common::App::new(common::state_with(&t.db, config));

    // Uploads need no token: beta users have none.
    let upload = app
        .post("/api/v1/runs")
        .json(&common::run_with(1, |_| {}))
        .send()
        .await;
    assert_eq!(upload.status, 201);

    let summary = |token: Option<&str>| {
        let request = app.get("/api/v1/summary?include_demo=true&phase=any");
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
        .send()
    };
    let without = summary(None).await;
    assert_eq!(without.status, 401);
    let body = without.json();
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(
        body["error"]["message"],
        "send the results token as Authorization: Bearer <token>"
    );
    assert!(body.get("groups").is_none(), "no numbers without the token");

    let wrong = summary(Some("not-the-token")).await;
    assert_eq!(wrong.status, 401);

    for token in [RESULTS_TOKEN, common::ADMIN_TOKEN] {
        let right = summary(Some(token)).await;
        assert_eq!(right.status, 200, "{token}");
        let body = right.json();
        assert_eq!(body["groups"][0]["runs"], 1, "{body}");
    }

    // A cached answer is no way around the token.
    let again = summary(None).await;
    assert_eq!(again.status, 401);

    // The results token cannot export or purge: that stays the operator's.
    let export = app
        .get("/api/v1/export")
        .bearer_auth(RESULTS_TOKEN)
        .send()
        .await;
    assert_eq!(export.status, 401);
}

#[tokio::test]
async fn without_a_results_token_summaries_are_open() {
    let t = common::sqlite().await;
    let app = common::App::new(common::state(&t.db));
    let response = app.get("/api/v1/summary").send().await;
    assert_eq!(response.status, 200);
}

#[test]
fn a_short_results_token_is_refused_at_start() {
    let refused = Config {
        results_token: Some(Secret("short".into())),
        ..common::config()
    }
    .check()
    .expect_err("too short");
    assert!(refused.flag.starts_with("--results-token"), "{refused}");
}
