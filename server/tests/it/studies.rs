//! Links the operator made, told from links anyone made: signing needs the admin token,
//! the page's check says whose a link is and whether it may send cookies, the key is
//! shared by every instance on one database, and `--signed-studies-only` keeps other
//! runs out. On SQLite and on PostgreSQL.

use serde_json::{Value, json};

use crate::common::{self, App};

/// A study as the Compose page makes it, measuring `url`, sending cookies when `cookies`.
fn study(url: &str, cookies: bool) -> Value {
    json!({
        "title": "Checkout assistant, December beta",
        "plan": {
            "targets": [{
                "label": "app",
                "url": url,
                "dialect": "openai-chat",
                "scenarios": [{"name": "chat", "body": "{\"stream\":true}"}],
                "send_cookies": cookies,
            }],
            "phases": [{"phase": "steady", "requests": 5}],
            "timeout_ms": 60000,
        },
    })
}

async fn sign(app: &App, study: &Value) -> common::Answer {
    app.post("/api/v1/studies")
        .bearer_auth(common::ADMIN_TOKEN)
        .json(study)
        .send()
        .await
}

async fn check(app: &App, fragment: &str) -> Value {
    let answer = app
        .post("/api/v1/studies/check")
        .body(fragment.to_owned())
        .send()
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

fn config_with_prefix(prefix: &str) -> firsttoken_server::Config {
    firsttoken_server::Config {
        cookie_target_prefixes: vec![prefix.to_owned()],
        ..common::config()
    }
}

#[tokio::test]
async fn the_operators_link_is_signed_and_anyone_elses_is_not() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        let plain = study("https://chat.example.com/v1/chat", false);
        // Without the admin token nothing is signed.
        let refused = app.post("/api/v1/studies").json(&plain).send().await;
        assert_eq!(refused.status, 401, "{}: {}", t.name, refused.text());
        let signed = sign(&app, &plain).await;
        assert_eq!(signed.status, 201, "{}: {}", t.name, signed.text());
        let signed = signed.json();
        let fragment = signed["fragment"].as_str().expect("a fragment").to_owned();
        let study_id = signed["study_id"].as_str().expect("an id made for it");
        assert!(
            firsttoken_core::study_id::is_study_id(study_id),
            "{study_id}"
        );
        assert_eq!(signed["path"], format!("/run#{fragment}"));
        let answer = check(&app, &fragment).await;
        assert_eq!(answer["signed"], true, "{}: {answer}", t.name);
        assert_eq!(answer["signed_at_ms"], signed["signed_at_ms"]);
        assert!(answer.get("cookies_refused").is_none(), "{answer}");

        // The same study without its signature, or with a changed study under it, or with
        // another key's signature, is anyone's.
        let (unsigned, signature) = fragment.rsplit_once('.').expect("signed");
        let answer = check(&app, unsigned).await;
        assert_eq!(answer["signed"], false);
        assert!(
            answer["unsigned_reason"]
                .as_str()
                .is_some_and(|r| r == "no signature"),
            "{answer}"
        );
        let mut other = firsttoken_core::share::Study::from_fragment(unsigned).expect("a study");
        other.title = "Something else".into();
        let changed = format!("{}.{signature}", other.to_fragment());
        let answer = check(&app, &changed).await;
        assert_eq!(
            answer["signed"], false,
            "a changed study keeps no signature"
        );
        assert!(
            answer["unsigned_reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("a signature that is not this site's")),
            "{answer}"
        );
        let elsewhere = common::sqlite().await;
        let foreign = App::new(common::state(&elsewhere.db));
        let answer = check(&foreign, &fragment).await;
        assert_eq!(answer["signed"], false, "another collector's key");

        // A damaged link is named as one.
        let damaged = app
            .post("/api/v1/studies/check")
            .body("v1.abc.def")
            .send()
            .await;
        assert_eq!(damaged.status, 422, "{}", damaged.text());
        assert!(
            damaged.text().contains("signature is not whole"),
            "{}",
            damaged.text()
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn cookies_go_only_to_urls_the_operator_allows_and_only_on_signed_links() {
    for t in common::databases().await {
        let cookies = study("https://chat.example.com/api/chat", true);
        // With no prefix configured, no link may send cookies.
        let app = App::new(common::state(&t.db));
        let refused = sign(&app, &cookies).await;
        assert_eq!(refused.status, 422, "{}", t.name);
        assert!(
            refused.text().contains("--cookie-target-prefix"),
            "{}",
            refused.text()
        );
        // Under a prefix it is signed, and the check lets its cookies go.
        let app = App::new(common::state_with(
            &t.db,
            config_with_prefix("https://chat.example.com/api/"),
        ));
        let signed = sign(&app, &cookies).await;
        assert_eq!(signed.status, 201, "{}: {}", t.name, signed.text());
        let fragment = signed.json()["fragment"]
            .as_str()
            .expect("fragment")
            .to_owned();
        let answer = check(&app, &fragment).await;
        assert_eq!(
            (answer["signed"].clone(), answer.get("cookies_refused")),
            (json!(true), None)
        );
        // The operator narrows the prefixes: the same signed link may no longer.
        let narrowed = App::new(common::state_with(
            &t.db,
            config_with_prefix("https://chat.example.com/api/other/"),
        ));
        let answer = check(&narrowed, &fragment).await;
        assert_eq!(answer["signed"], true, "the key is the database's");
        assert!(
            answer["cookies_refused"]
                .as_str()
                .is_some_and(|r| r.contains("https://chat.example.com/api/chat is not under")),
            "{answer}"
        );
        // A path that climbs out of the prefix is not under it.
        let climbing = study("https://chat.example.com/api/../settings", true);
        assert_eq!(sign(&app, &climbing).await.status, 422);
        t.cleanup().await;
    }
}

/// Every instance on one database signs with the same key, made once.
#[tokio::test]
async fn every_instance_on_a_database_signs_alike() {
    for t in common::databases().await {
        let second = t.second_instance().await;
        let (a, b) = (t.db.signing_key(), second.signing_key());
        let (a, b) = tokio::join!(a, b);
        assert_eq!(a.expect("a key"), b.expect("the same key"), "{}", t.name);
        let first = App::new(common::state(&t.db));
        let other = App::new(common::state(&second));
        let fragment = sign(&first, &study("https://chat.example.com/v1/chat", false))
            .await
            .json()["fragment"]
            .as_str()
            .expect("fragment")
            .to_owned();
        assert_eq!(check(&other, &fragment).await["signed"], true, "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn signed_studies_only_accepts_runs_of_signed_links() {
    for t in common::databases().await {
        let app = App::new(common::state_with(
            &t.db,
            firsttoken_server::Config {
                signed_studies_only: true,
                ..common::config()
            },
        ));
        let signed = sign(&app, &study("https://chat.example.com/v1/chat", false)).await;
        let study_id = signed.json()["study_id"].as_str().expect("id").to_owned();
        let anyones = common::run_with(1, |r| r["study_id"] = json!("aaaaaaaaaaaaaaaa"));
        let refused = app.post("/api/v1/runs").json(&anyones).send().await;
        assert_eq!(refused.status, 422, "{}: {}", t.name, refused.text());
        assert_eq!(refused.json()["error"]["field"], "study_id");
        let without = common::run_with(2, |r| {
            r.as_object_mut().expect("object").remove("study_id");
        });
        assert_eq!(
            app.post("/api/v1/runs").json(&without).send().await.status,
            422
        );
        let operators = common::run_with(3, |r| r["study_id"] = json!(study_id));
        let stored = app.post("/api/v1/runs").json(&operators).send().await;
        assert_eq!(stored.status, 201, "{}: {}", t.name, stored.text());
        t.cleanup().await;
    }
}

/// The check is public: its body is bounded, and each network gets a page-load's worth
/// a minute.
#[tokio::test]
async fn the_check_is_bounded() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    let huge = format!("v1.{}", "A".repeat(20_000));
    let answer = app.post("/api/v1/studies/check").body(huge).send().await;
    assert_eq!(answer.status, 413, "{}", answer.text());
    let signed = sign(&app, &study("https://chat.example.com/v1/chat", false)).await;
    let signed = signed.json()["fragment"]
        .as_str()
        .expect("fragment")
        .to_owned();
    // Without its signature: the check then reads the study and asks for nothing else.
    let fragment = firsttoken_core::share::Study::from_fragment(&signed)
        .expect("study")
        .to_fragment();
    let mut statuses = Vec::new();
    for _ in 0..firsttoken_server::routes::studies::LINK_CHECKS_PER_MINUTE + 5 {
        let answer = app
            .post("/api/v1/studies/check")
            .body(fragment.clone())
            .send()
            .await;
        statuses.push(answer.status);
    }
    assert!(statuses[..100].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(statuses.last().map(|s| s.as_u16()), Some(429));
}
