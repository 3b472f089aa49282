//! The engine's bias on loopback: the TTFT the browser measured minus the demo server's own
//! time from receiving the request to writing the first token (which the demo reports in
//! its final event). Measured for the engine in its Web Worker and on the page's thread,
//! each with the page still (`?charts=off`: nothing redraws but the progress line), with
//! the live charts redrawing as a beta user sees them, and with the charts redrawing and
//! the main thread kept busy besides (30 ms of work every 40 ms, a phone far slower than
//! this machine); and for a minimal hand-written JavaScript fetch reader as the reference. Also counted: the TCP connections the server accepted during each case,
//! which shows whether the worker shares the page's connection pool.
//! Run with `cargo xtask bench`.

use std::time::Duration;

use anyhow::{Context, bail};
use firsttoken_core::plan::Plan;
use firsttoken_core::share::Study;
use firsttoken_core::stats::percentile;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use serde_json::{Value, json};
use thirtyfour::prelude::*;

const REQUESTS: u32 = 100;
const KNOBS: &str = "first_token_ms=100&itl_ms=5&tokens=10";

/// Keeps the page's main thread busy 30 ms out of every 40.
const BUSY: &str = "window.__busy = setInterval(() => { const end = performance.now() + 30; \
                    while (performance.now() < end) {} }, 40);";

/// A minimal reader: fetch, read chunks, stamp each, find the first content event.
const REFERENCE: &str = r#"
const [url, n, done] = [arguments[0], arguments[1], arguments[2]];
const body = JSON.stringify({model: 'reference', stream: true, messages: [{role: 'user', content: 'hi'}]});
const out = [];
(async () => {
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const response = await fetch(url, {method: 'POST', headers: {'content-type': 'application/json'}, body, cache: 'no-store'});
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '', ttft = null, server = null;
    for (;;) {
      const {done: end, value} = await reader.read();
      const t = performance.now() - t0;
      if (end) break;
      buffer += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const data = JSON.parse(event.slice(6));
        const content = data.choices && data.choices[0] && data.choices[0].delta && data.choices[0].delta.content;
        if (ttft === null && content) ttft = t;
        if (data.server_timings) server = data.server_timings.first_token_written_ms;
      }
    }
    out.push(ttft - server);
  }
  done(out);
})();
"#;

/// What the page does while the engine measures.
#[derive(Clone, Copy, PartialEq)]
enum Ui {
    /// Nothing redraws (`?charts=off`).
    Still,
    /// The live charts, as a beta user sees them.
    Charts,
    /// The live charts, and the main thread busy 30 ms of every 40.
    ChartsAndBusy,
}

struct Case {
    name: String,
    bias: Vec<f64>,
    timer_p99: Option<f64>,
    connections: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let browser = Browser::start(DESKTOP).await?;
    browser
        .driver
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(300)),
            Some(Duration::from_secs(60)),
            Some(Duration::from_secs(0)),
        ))
        .await?;
    let mut cases = Vec::new();
    for (placement, ui) in [
        ("worker", Ui::Still),
        ("worker", Ui::Charts),
        ("worker", Ui::ChartsAndBusy),
        ("page", Ui::Still),
        ("page", Ui::Charts),
        ("page", Ui::ChartsAndBusy),
        ("reference", Ui::Still),
        ("reference", Ui::ChartsAndBusy),
    ] {
        cases.push(measure_case(&server, &browser, placement, ui).await?);
    }
    println!(
        "\nBias on loopback: browser TTFT minus the demo server's own time to write the first token\n\
         ({REQUESTS} sequential requests per case, demo {KNOBS}; headless Chromium)\n"
    );
    println!(
        "{:<46} {:>7} {:>10} {:>8} {:>8} {:>17} {:>11}",
        "case", "samples", "median ms", "p99 ms", "max ms", "timer late p99 ms", "connections"
    );
    for case in &cases {
        println!(
            "{:<46} {:>7} {:>10.2} {:>8.2} {:>8.2} {:>17} {:>11}",
            case.name,
            case.bias.len(),
            percentile(&case.bias, 50.0).unwrap_or(f64::NAN),
            percentile(&case.bias, 99.0).unwrap_or(f64::NAN),
            case.bias.iter().copied().fold(f64::NAN, f64::max),
            case.timer_p99.map_or("—".to_owned(), |t| format!("{t:.1}")),
            case.connections,
        );
    }
    println!(
        "\n\"connections\": TCP connections the server accepted during the case, page load included\n\
         (each case loads the app afresh)."
    );
    browser.quit().await
}

async fn measure_case(
    server: &TestServer,
    browser: &Browser,
    placement: &str,
    ui: Ui,
) -> anyhow::Result<Case> {
    let busy = ui == Ui::ChartsAndBusy;
    let driver = &browser.driver;
    let before = server.connections_accepted();
    let name = format!(
        "{}, {}",
        match placement {
            "reference" => "hand-written JS reader",
            "page" => "engine on the page's thread",
            _ => "engine in its worker",
        },
        match (placement, ui) {
            ("reference", Ui::Still) => "page idle",
            ("reference", _) => "main thread busy",
            (_, Ui::Still) => "page still",
            (_, Ui::Charts) => "live charts",
            (_, Ui::ChartsAndBusy) => "live charts + main thread busy",
        }
    );
    let url = server.url(&format!("/v1/chat/completions?{KNOBS}"));
    let (bias, timer_p99) = if placement == "reference" {
        driver.goto(server.url("/")).await?;
        driver
            .query(By::Css("[data-testid=make-link]"))
            .first()
            .await?;
        if busy {
            driver.execute(BUSY, Vec::new()).await?;
        }
        let result = driver
            .execute_async(REFERENCE, vec![json!(url), json!(REQUESTS)])
            .await?;
        let bias = result
            .json()
            .as_array()
            .context("biases")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        (bias, None)
    } else {
        run_in_app(server, browser, placement, ui).await?
    };
    Ok(Case {
        name,
        bias,
        timer_p99,
        connections: server.connections_accepted() - before,
    })
}

/// Runs the demo from a share link on the app's own page, uploads, and reads the record.
async fn run_in_app(
    server: &TestServer,
    browser: &Browser,
    placement: &str,
    ui: Ui,
) -> anyhow::Result<(Vec<f64>, Option<f64>)> {
    let driver = &browser.driver;
    let study = Study {
        title: "Engine bias".into(),
        plan: Plan::steady(server.demo_target(KNOBS), REQUESTS),
        collector: None,
        carries_token: false,
    };
    let mut query = Vec::new();
    if placement == "page" {
        query.push("engine=page");
    }
    if ui == Ui::Still {
        query.push("charts=off");
    }
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
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
    if ui == Ui::ChartsAndBusy {
        driver.execute(BUSY, Vec::new()).await?;
    }
    let runs_before = server.db.run_ids().await?.len();
    driver
        .find(By::Css("[data-testid=consent]"))
        .await?
        .click()
        .await?;
    driver
        .find(By::Css("[data-testid=start-button]"))
        .await?
        .click()
        .await?;
    browser
        .wait_for_text("[data-testid=run-status]", Duration::from_secs(240), |t| {
            t.starts_with("Finished")
        })
        .await?;
    browser
        .wait_for_count("[data-testid=stored-run-link]", 1, Duration::from_secs(30))
        .await?;
    let ids = server.db.run_ids().await?;
    anyhow::ensure!(ids.len() == runs_before + 1, "the run was not stored");
    let run_id = ids.last().context("a run")?;
    let record: Value =
        serde_json::from_str(&server.db.run_record(run_id).await?.context("stored")?)?;
    let in_worker = record["engine"]["in_worker"].as_bool() == Some(true);
    if in_worker != (placement == "worker") {
        bail!("asked for the engine in the {placement}, the record says in_worker = {in_worker}");
    }
    let bias = record["samples"]
        .as_array()
        .context("samples")?
        .iter()
        .filter_map(|s| {
            Some(s["ttft_ms"].as_f64()? - s["stream_timings"]["first_token_written_ms"].as_f64()?)
        })
        .collect();
    Ok((bias, record["engine"]["timer_lateness_p99_ms"].as_f64()))
}
