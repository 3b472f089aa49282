//! The results page reads the collector's summaries: grouped percentiles with intervals,
//! distribution curves, and a before/after comparison of two versions, in Chromium,
//! Firefox and WebKitGTK. Screenshots of each
//! state land in `target/e2e-screenshots/`.

use std::time::Duration;

use firsttoken_core::plan::{Phase, PhasePlan};
use firsttoken_core::schema::{NetworkLabel, Run};
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP, Engine, PHONE, Viewport};
use thirtyfour::prelude::*;

const WAIT: Duration = Duration::from_secs(30);

/// A real (not demo) run: `requests` steady samples around `ttft` ms.
fn run(n: u64, network: NetworkLabel, version: &str, ttft: f64) -> Run {
    let example =
        std::fs::read(firsttoken_e2e::workspace_root().join("core/schema/example-run.v1.json"))
            .expect("example");
    let mut run: Run = serde_json::from_slice(&example).expect("example parses");
    run.run_id = format!("00000000-0000-4000-8000-{n:012x}");
    run.client.network = network;
    run.targets[0].label = "chat".into();
    run.targets[0].origin = "https://chat.example.com".into();
    run.targets[0].version = Some(version.into());
    run.targets[0].demo = false;
    let template = run.samples[0].clone();
    // Each wait splits whole: 15 ms before sending, the network's round trip and the
    // server's own time (first_token_written_ms), the rest of it.
    let network_ms = if network == NetworkLabel::Cellular {
        195.0
    } else {
        90.0
    };
    run.samples = (0..20u32)
        .map(|i| {
            let t = ttft + f64::from(i * 7 % 13) * 4.0;
            let mut conn = template.conn.clone().unwrap_or_default();
            conn.sent_ms = Some(15.0);
            let server_ms = t - 15.0 - network_ms;
            firsttoken_core::schema::Sample {
                index: i,
                phase: Phase::Steady,
                ttft_any_ms: Some(t),
                ttft_ms: Some(t),
                last_token_ms: Some(t + 900.0),
                e2e_ms: Some(t + 910.0),
                conn: Some(conn),
                stream_timings: Some([("first_token_written_ms".to_owned(), server_ms)].into()),
                ..template.clone()
            }
        })
        .collect();
    run.plan.phases = vec![PhasePlan::Steady { requests: 20 }];
    run.validate().expect("valid");
    run
}

async fn seeded_server() -> anyhow::Result<TestServer> {
    let server = TestServer::start().await?;
    let mut n = 0;
    for (version, slowdown) in [("v1", 400.0), ("v2", 0.0)] {
        for (network, base) in [
            (NetworkLabel::Fiber, 300.0),
            (NetworkLabel::Cellular, 650.0),
        ] {
            // Ten runs a group: intervals resample whole runs, and need ten.
            for _ in 0..10 {
                n += 1;
                let run = run(n, network, version, base + slowdown);
                server
                    .db
                    .insert_run(&run, &serde_json::to_string(&run)?, 1_796_000_000_000, None)
                    .await?;
            }
        }
    }
    Ok(server)
}

async fn grouped_and_compared(engine: Engine, viewport: Viewport) -> anyhow::Result<()> {
    let server = seeded_server().await?;
    let browser = Browser::start_engine(engine, viewport).await?;
    let driver = &browser.driver;
    let shot = |state: &str| format!("results-page-{}-{state}", viewport.name);
    driver.goto(server.url("/results")).await?;
    let rows = browser
        .wait_for_count("[data-testid=results-row]", 2, WAIT)
        .await?;
    assert_eq!(rows.len(), 2, "grouped by network: cellular and fiber");
    // How runs are weighed is said beside the numbers.
    let weighting = driver
        .find(By::Css("[data-testid=results-weighting]"))
        .await?
        .text()
        .await?;
    assert!(
        weighting.contains("at most 120 requests of each phase"),
        "{weighting}"
    );
    let first = rows[0].text().await?;
    assert!(first.starts_with("cellular"), "{first}");
    // 20 runs of 20 requests; p50 with its interval beneath.
    assert!(
        first.contains("400") && first.contains(" ms") && first.contains("–"),
        "{first}"
    );
    assert!(
        first.trim_end().ends_with("0.0%"),
        "no request failed: {first:?}"
    );
    driver
        .query(By::Css("[data-testid=cdf-chart] path.cdf-line"))
        .first()
        .await?;
    // Where each network's wait goes, in layers with their shares.
    let split = driver
        .find_all(By::Css(
            "[data-testid=crowd-split] [data-testid=crowd-split-row]",
        ))
        .await?;
    assert_eq!(split.len(), 2);
    let cellular = split[0].text().await?;
    for words in [
        "cellular",
        "400 requests split whole",
        "before sending",
        "the server",
        "network and delivery",
        "%",
    ] {
        assert!(cellular.contains(words), "{words:?} in {cellular}");
    }
    browser.screenshot(&shot("1-grouped")).await?;

    // Before and after: v1 was 400 ms slower everywhere.
    driver
        .find(By::Css("[data-testid=compare-before]"))
        .await?
        .send_keys("v1")
        .await?;
    driver
        .find(By::Css("[data-testid=compare-after]"))
        .await?
        .send_keys("v2")
        .await?;
    driver
        .find(By::Css("[data-testid=compare-button]"))
        .await?
        .click()
        .await?;
    let compared = browser
        .wait_for_count("[data-testid=compare-row]", 2, WAIT)
        .await?;
    for row in compared {
        let text = row.text().await?;
        assert!(text.contains("faster"), "{text}");
    }
    // The 400 ms were the server's: its layer moved, the network's did not.
    let by_layer = driver
        .find_all(By::Css("[data-testid=compare-layers]"))
        .await?;
    assert_eq!(by_layer.len(), 2);
    for line in by_layer {
        let layers = line.text().await?;
        assert!(
            layers.contains("the server: −")
                && layers.contains("network and delivery: +0.0 ms (+0%): no clear difference"),
            "{layers}"
        );
        let server = layers.split("the server: ").nth(1).unwrap_or_default();
        assert!(
            server
                .split(';')
                .next()
                .unwrap_or_default()
                .ends_with("faster"),
            "{layers}"
        );
    }
    browser.screenshot(&shot("2-compared")).await?;
    browser.quit().await
}

#[tokio::test]
async fn results_group_and_compare_on_a_desktop() -> anyhow::Result<()> {
    grouped_and_compared(Engine::Chromium, DESKTOP).await
}

#[tokio::test]
async fn results_group_and_compare_on_a_phone() -> anyhow::Result<()> {
    grouped_and_compared(Engine::Chromium, PHONE).await
}

#[tokio::test]
async fn results_group_and_compare_in_firefox() -> anyhow::Result<()> {
    grouped_and_compared(Engine::Firefox, PHONE).await
}

#[tokio::test]
async fn results_group_and_compare_in_webkit() -> anyhow::Result<()> {
    grouped_and_compared(Engine::WebKit, PHONE).await
}

/// The compose page sends the operator to `/results?study=…` for one link's runs: the page
/// shows that link alone and says so, and clearing the field shows every link.
#[tokio::test]
async fn one_links_results_alone() -> anyhow::Result<()> {
    const LINK: &str = "onelinkaaaaaaaaa";
    let server = seeded_server().await?;
    for n in 0..10 {
        let mut run = run(100 + n, NetworkLabel::Fiber, "v3", 150.0);
        run.study_id = Some(LINK.into());
        server
            .db
            .insert_run(&run, &serde_json::to_string(&run)?, 1_796_000_000_000, None)
            .await?;
    }
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver
        .goto(server.url(&format!("/results?study={LINK}")))
        .await?;
    browser
        .wait_for_count("[data-testid=results-row]", 1, WAIT)
        .await?;
    let banner = driver
        .find(By::Css("[data-testid=results-of-link]"))
        .await?
        .text()
        .await?;
    assert!(banner.contains(LINK), "{banner}");
    let rows = driver
        .find_all(By::Css("[data-testid=results-row]"))
        .await?;
    assert_eq!(rows.len(), 1, "this link's runs are all on fiber");
    let row = rows[0].text().await?;
    assert!(row.starts_with("fiber") || row.contains("Fiber"), "{row}");
    browser.screenshot("results-page-desktop-one-link").await?;

    // Every link again: the seeded runs' cellular group comes back.
    let field = driver.find(By::Css("[data-testid=filter-study]")).await?;
    assert_eq!(field.prop("value").await?.as_deref(), Some(LINK));
    field.send_keys(Key::Control + "a").await?;
    field.send_keys(Key::Backspace).await?;
    driver
        .find(By::Css("[data-testid=show-results]"))
        .await?
        .click()
        .await?;
    browser
        .wait_for_count("[data-testid=results-row]", 2, WAIT)
        .await?;
    browser.quit().await
}

#[tokio::test]
async fn demo_runs_stay_out_until_asked_for() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let example =
        std::fs::read(firsttoken_e2e::workspace_root().join("core/schema/example-run.v1.json"))?;
    let demo: Run = serde_json::from_slice(&example)?;
    server
        .db
        .insert_run(
            &demo,
            &serde_json::to_string(&demo)?,
            1_796_000_000_000,
            None,
        )
        .await?;
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(server.url("/results")).await?;
    let empty = browser
        .wait_for_text("[data-testid=results-empty]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        empty.contains("left out unless you include them"),
        "{empty}"
    );
    browser.screenshot("results-page-desktop-empty").await?;
    driver
        .find(By::Css("[data-testid=include-demo]"))
        .await?
        .click()
        .await?;
    driver
        .find(By::Css("[data-testid=show-results]"))
        .await?
        .click()
        .await?;
    let rows = browser
        .wait_for_count("[data-testid=results-row]", 1, WAIT)
        .await?;
    let text = rows[0].text().await?;
    // One run: below the five runs a group needs to publish anything.
    assert!(
        text.contains("fewer than 5 runs: nothing about this group is published"),
        "one demo run is below the minimum: {text}"
    );
    browser.quit().await
}

/// A collector started with `--results-token` shows its numbers only to those who have
/// it: the page asks once, says so when the token is wrong, and keeps the right one for
/// the browser session.
#[tokio::test]
async fn a_results_token_is_asked_for_once_per_browser_session() -> anyhow::Result<()> {
    const TOKEN: &str = "results-e2e-token-of-at-least-32-characters";
    let server = TestServer::start_with(|config| {
        config.results_token = Some(firsttoken_server::config::Secret(TOKEN.into()));
    })
    .await?;
    let run = run(1, NetworkLabel::Fiber, "v1", 300.0);
    server
        .db
        .insert_run(&run, &serde_json::to_string(&run)?, 1_796_000_000_000, None)
        .await?;
    let browser = Browser::start(PHONE).await?;
    let driver = &browser.driver;
    driver.goto(server.url("/results")).await?;
    let token_input = driver
        .query(By::Css("[data-testid=results-token]"))
        .first()
        .await?;
    assert!(
        driver
            .find_all(By::Css("[data-testid=results-row]"))
            .await?
            .is_empty(),
        "no numbers without the token"
    );
    browser.screenshot("results-page-phone-token").await?;

    token_input.send_keys("a-wrong-guess").await?;
    driver
        .find(By::Css("[data-testid=results-token-submit]"))
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("[data-testid=results-token-form]", WAIT, |t| {
            t.contains("did not accept that token")
        })
        .await?;

    let token_input = driver.find(By::Css("[data-testid=results-token]")).await?;
    token_input.clear().await?;
    token_input.send_keys(TOKEN).await?;
    driver
        .find(By::Css("[data-testid=results-token-submit]"))
        .await?
        .click()
        .await?;
    browser
        .wait_for_count("[data-testid=results-row]", 1, WAIT)
        .await?;
    // A reload in the same session does not ask again.
    driver.refresh().await?;
    browser
        .wait_for_count("[data-testid=results-row]", 1, WAIT)
        .await?;
    browser.quit().await
}
