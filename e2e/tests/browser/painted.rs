//! The landing painted from the link before the app's module arrives (`paint/`), in
//! headless Chromium, whose DevTools can hold the app's files back: the painted landing
//! says what the app's says, word for word, with its Start waiting, and the app takes its
//! place.

use std::time::Duration;

use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP, PHONE};
use firsttoken_pages::landing::Provenance;
use serde_json::json;
use thirtyfour::prelude::*;

const WAIT: Duration = Duration::from_secs(30);

/// A study with every word the landing can say: a token, the page's own cookies, another
/// target to compare with, every kind of phase.
fn study(server: &TestServer) -> Study {
    let mut main = server.demo_target("first_token_ms=20&itl_ms=2&tokens=4");
    main.send_cookies = true;
    main.headers
        .insert("Authorization".into(), "Bearer bench-only-123".into());
    main.fresh_url = Some(format!(
        "http://{{n}}.localhost:{}/v1/chat/completions",
        server.address.port()
    ));
    let mut direct = server.demo_target("first_token_ms=10&itl_ms=2&tokens=4");
    direct.label = "direct".into();
    let mut plan = Plan::steady(main, 10);
    plan.targets.push(direct);
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady { requests: 10 },
        PhasePlan::Fresh { requests: 3 },
        PhasePlan::Concurrency {
            levels: vec![1, 3],
            requests_per_level: 9,
        },
        PhasePlan::Cold {
            idle_ms: vec![15_000],
        },
        PhasePlan::Compare { rounds: 5 },
    ];
    Study {
        title: "Painted before the app".into(),
        plan,
        collector: None,
        carries_token: true,
        study_id: None,
    }
}

#[tokio::test]
async fn the_landing_is_painted_before_the_app_arrives_in_the_apps_words() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    // Signed by the operator: a link that sends cookies runs only so.
    let link = server.signed_link(&study(&server)).await?;
    for (viewport, name) in [(DESKTOP, "desktop"), (PHONE, "phone")] {
        let browser = Browser::start(viewport).await?;
        let driver = &browser.driver;
        let cdp = driver.cdp();
        cdp.send_raw("Network.enable", json!({})).await?;
        // The app's script and module never come: what shows is the painter's alone.
        cdp.send_raw(
            "Network.setBlockedURLs",
            json!({ "urls": ["*firsttoken-run-*"] }),
        )
        .await?;
        driver.goto(&link).await?;
        browser
            .wait_for_count("[data-testid=painted-landing]", 1, WAIT)
            .await?;
        let painted = driver
            .find(By::Css("section.landing"))
            .await?
            .text()
            .await?;
        let start = driver.find(By::Css("[data-testid=painted-start]")).await?;
        assert_eq!(start.text().await?, "Start");
        assert!(
            !start.is_enabled().await?,
            "the painted Start waits for the app"
        );
        assert!(
            driver
                .find_all(By::Css("[data-testid=start-button]"))
                .await?
                .is_empty()
        );
        let ticked = "document.querySelector('input[name=network]:checked')?.value ?? null";
        let painted_network = driver
            .execute(&format!("return {ticked}"), Vec::new())
            .await?;
        browser.screenshot(&format!("study-{name}-painted")).await?;
        if name == "desktop" {
            // An app that does not come: after a while the page says what to do.
            let still = browser
                .wait_for_text("[data-testid=painted-still-loading]", WAIT, |t| {
                    !t.is_empty()
                })
                .await?;
            assert_eq!(still, firsttoken_pages::landing::STILL_LOADING);
            browser
                .screenshot("study-desktop-painted-still-loading")
                .await?;
        }

        cdp.send_raw("Network.setBlockedURLs", json!({ "urls": [] }))
            .await?;
        driver.refresh().await?;
        browser
            .wait_for_count("[data-testid=start-button]", 1, WAIT)
            .await?;
        // Whichever module came first, one landing is left: the app removes a painted
        // one, and the painter paints nothing once the app is there. A painter that came
        // second would have run within this second.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            driver
                .find_all(By::Css("[data-testid=painted-landing]"))
                .await?
                .is_empty(),
            "the app took the painted landing's place"
        );
        let landings = driver.find_all(By::Css("section.landing")).await?;
        assert_eq!(landings.len(), 1);
        let app = landings[0].text().await?;
        // Word for word, but for who made the link: the painter cannot know, and says it
        // is being checked; the app says what the page's server answered.
        let host = format!("127.0.0.1:{}", server.address.port());
        let checking = Provenance::Checking.words(&host);
        let answered = driver
            .find(By::Css("[data-testid=provenance]"))
            .await?
            .text()
            .await?;
        assert!(
            answered.starts_with(&format!("Made by the operator of {host}")),
            "{answered}"
        );
        assert!(painted.contains(&checking), "{painted}");
        assert_eq!(painted.replace(&checking, &answered), app);
        // The same network is ticked (the browser's guess, or "Not sure").
        let app_network = driver
            .execute(&format!("return {ticked}"), Vec::new())
            .await?;
        assert_eq!(painted_network.json(), app_network.json());
        assert!(
            painted_network.json().is_string(),
            "{:?}",
            painted_network.json()
        );
        // Every study-dependent part is in it.
        for words in [
            "Painted before the app",
            "This page measures how long",
            "signed-in session",
            "access token for the measured service",
            "3 requests, each on a new connection",
            "after waiting idle (15 s), one request each",
            "Compared with: direct",
            "*.localhost:",
            "and nowhere else",
            "What is never sent",
        ] {
            assert!(app.contains(words), "{words:?} in {app}");
        }
        browser.quit().await?;
    }
    Ok(())
}
