//! The page's life while it measures: a tab the browser freezes during a cold request's
//! wait (as browsers freeze background tabs to save power) shows in that request's
//! record, so an idle time the browser stretched is never taken for the one planned.

use std::time::Duration;

use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_page_frozen_during_a_cold_wait_shows_in_that_requests_record() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let mut plan = Plan::steady(server.demo_target("first_token_ms=5&itl_ms=1&tokens=2"), 1);
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Cold {
            idle_ms: vec![3_000, 300],
        },
    ];
    let study = Study {
        title: "A frozen tab".into(),
        plan,
        collector: None,
        carries_token: false,
        study_id: None,
    };
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(server.link(&study)).await?;
    browser
        .wait_for_count("[data-testid=start-button]", 1, WAIT)
        .await?;
    browser.consent_and_start().await?;
    browser
        .wait_for_text("[data-testid=run-status]", WAIT, |t| t.contains("waiting"))
        .await?;
    // Frozen from about 0.3 s into the 3 s wait until 0.8 s past its end, as Chromium
    // freezes a background tab; nothing asks the page anything meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lifecycle = |state: &str| {
        let state = state.to_owned();
        async move {
            driver
                .cdp()
                .send_raw("Page.setWebLifecycleState", json!({ "state": state }))
                .await
        }
    };
    lifecycle("frozen").await?;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    lifecycle("active").await?;
    browser
        .wait_for_count("[data-testid=stored-run-link]", 1, WAIT)
        .await?;
    let id = server
        .db
        .run_ids()
        .await?
        .pop()
        .expect("the run was stored");
    let record: Value = serde_json::from_str(&server.db.run_record(&id).await?.expect("stored"))?;
    let cold: Vec<(f64, f64)> = record["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter(|s| s["phase"] == "cold")
        .map(|s| {
            let ms = |field: &str| s[field].as_f64().unwrap_or(f64::NAN);
            (ms("idle_spent_ms"), ms("idle_timer_late_ms"))
        })
        .collect();
    let [(spent, late), (calm_spent, calm_late)] = cold[..] else {
        panic!("two cold requests, not {cold:?}");
    };
    assert!(
        spent >= 3_500.0 && late >= 500.0,
        "frozen: idle {spent} ms, the timer {late} ms late"
    );
    assert!(
        (300.0..1_000.0).contains(&calm_spent) && calm_late < 500.0,
        "not frozen: idle {calm_spent} ms, the timer {calm_late} ms late"
    );
    browser.quit().await
}
