//! The engine's side of the benchmark: the app run from a share link as a beta user runs
//! it, its stored record read back, and the browser's CPU slowed for a phone's cases.

use std::time::Duration;

use anyhow::{Context, bail};
use firsttoken_core::plan::{HTTP1_CONNECTIONS_PER_HOST, PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::Browser;
use serde_json::{Value, json};

use super::{BUSY, Case, KNOBS, Reader, warmup_requests};

/// Slows the browser's CPU `slowdown` times for the page loaded now (1: as it is), as
/// Chromium's DevTools does for mobile page tests; Chromium only.
pub(super) async fn slow_down(browser: &Browser, slowdown: u32) -> anyhow::Result<()> {
    if slowdown > 1 {
        browser
            .driver
            .cdp()
            .send_raw(
                "Emulation.setCPUThrottlingRate",
                json!({ "rate": slowdown }),
            )
            .await?;
    }
    Ok(())
}

/// Runs the demo from a share link on the app's own page, uploads, and reads the record.
pub(super) async fn run_in_app(
    server: &TestServer,
    browser: &Browser,
    target: &str,
    case: &Case,
    requests: u32,
    busy: bool,
) -> anyhow::Result<(Vec<f64>, Option<f64>)> {
    let (level, reader) = (case.level, case.reader);
    let driver = &browser.driver;
    let mut demo = server.demo_target(KNOBS);
    demo.url = target.to_owned();
    // One warm-up request first, as the JS reader makes one and as every protocol a beta
    // user runs begins with one: the first request after the page loads pays for the
    // connection (over TLS, its handshake) and the CORS preflight.
    let mut plan = Plan::steady(demo, requests);
    let measured = if level > 1 {
        PhasePlan::Concurrency {
            levels: vec![level],
            requests_per_level: requests,
        }
    } else {
        PhasePlan::Steady { requests }
    };
    plan.phases = vec![
        PhasePlan::Warmup {
            requests: warmup_requests()?,
        },
        measured,
    ];
    plan.multiplexed = level > HTTP1_CONNECTIONS_PER_HOST;
    let study = Study {
        title: "Engine bias".into(),
        plan,
        collector: None,
        carries_token: false,
        study_id: None,
    };
    // Each engine placement asked for by name: WebKit's default is the page's thread.
    let query = match reader {
        Reader::Still => "?charts=off&engine=worker",
        Reader::Charts => "?engine=worker",
        Reader::Page => "?engine=page",
        _ => "",
    };
    // Two cases can share a URL, and navigating to the page's own URL with a fragment
    // would only scroll: leave the page first so each case loads the app afresh.
    driver.goto("about:blank").await?;
    driver
        .goto(server.url(&format!("/run{query}#{}", study.to_fragment())))
        .await?;
    browser
        .wait_for_count("[data-testid=start-button]", 1, Duration::from_secs(30))
        .await?;
    slow_down(browser, case.slowdown).await?;
    if busy {
        driver.execute(BUSY, Vec::new()).await?;
    }
    // Waited for from inside the page: polling through WebDriver during the run would
    // take the page's thread and the browser's while the engine measures, as the JS
    // readers' cases (one script each) never do.
    let record: Value = serde_json::from_str(&server.run_and_read_record(browser).await?)?;
    if level > HTTP1_CONNECTIONS_PER_HOST {
        let protocols: Vec<&str> = record["samples"]
            .as_array()
            .context("samples")?
            .iter()
            .filter(|s| s["phase"] != "warmup")
            .filter_map(|s| s["conn"]["protocol"].as_str())
            .collect();
        if protocols.len() != requests as usize || protocols.iter().any(|p| *p != "h2") {
            bail!("{level} at once must run over HTTP/2: {protocols:?}");
        }
    }
    let in_worker = record["engine"]["in_worker"].as_bool() == Some(true);
    if in_worker != (reader != Reader::Page) {
        bail!("the record says in_worker = {in_worker}, not where the case asked");
    }
    let bias = record["samples"]
        .as_array()
        .context("samples")?
        .iter()
        .filter(|s| s["phase"] != "warmup")
        .filter_map(|s| {
            Some(s["ttft_ms"].as_f64()? - s["stream_timings"]["first_token_written_ms"].as_f64()?)
        })
        .collect();
    Ok((bias, record["engine"]["timer_lateness_p99_ms"].as_f64()))
}
