//! The engine's bias on loopback: the TTFT the browser measured minus the demo server's own
//! time from receiving the request to writing the first token (which the demo reports in
//! its final event), at 1, 3 and 5 requests at once, beside a minimal hand-written
//! JavaScript fetch reader doing the same in the same browser, all in one run.
//!
//! Each level is measured three ways: the JS reader on the app's page (the reference),
//! the engine in its Web Worker with the page still (`?charts=off`: nothing redraws but
//! the progress line), and the engine with the live charts redrawing as a beta user sees
//! them. At 1 at once three more cases show what the worker is for: the main thread kept
//! busy (30 ms of work every 40 ms, a phone far slower than this machine) under the JS
//! reader, the engine in its worker, and the same engine on the page's thread. Also counted: the TCP connections the
//! server accepted during each case (the page load's included), which shows whether the
//! worker shares the page's connection pool. Run with `cargo xtask bench`.

use std::time::Duration;

use anyhow::{Context, bail};
use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_core::stats::percentile;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use serde_json::{Value, json};
use thirtyfour::prelude::*;

/// Requests per case: at least this many, in whole batches.
const REQUESTS: u32 = 100;
const KNOBS: &str = "first_token_ms=100&itl_ms=5&tokens=10";
/// The concurrency levels. More than six at once would queue in the browser over the
/// demo's HTTP/1.1 (six connections per host), which measures the queue, not the engine.
const LEVELS: [u32; 3] = [1, 3, 5];

/// Keeps the page's main thread busy 30 ms out of every 40.
const BUSY: &str = "window.__busy = setInterval(() => { const end = performance.now() + 30; \
                    while (performance.now() < end) {} }, 40);";

/// A minimal reader: fetch, read chunks, stamp each, find the first content event; `k`
/// requests at once, batch after batch, as the engine's concurrency phase sends them.
const REFERENCE: &str = r#"
const [url, n, k, done] = [arguments[0], arguments[1], arguments[2], arguments[3]];
const body = JSON.stringify({model: 'reference', stream: true, messages: [{role: 'user', content: 'hi'}]});
async function one() {
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
  return ttft - server;
}
(async () => {
  const out = [];
  for (let sent = 0; sent < n; sent += k) {
    out.push(...await Promise.all(Array.from({length: k}, one)));
  }
  done(out);
})();
"#;

/// Who measures, and what the page does meanwhile.
#[derive(Clone, Copy, PartialEq)]
enum Reader {
    /// The hand-written JS reader on the app's page.
    Reference,
    /// The engine in its worker, the page still (`?charts=off`).
    Still,
    /// The engine in its worker, the live charts redrawing.
    Charts,
    /// The same engine on the page's own thread (`?engine=page`), the live charts
    /// redrawing.
    Page,
}

struct Case {
    level: u32,
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
    for level in LEVELS {
        for reader in [Reader::Reference, Reader::Still, Reader::Charts] {
            cases.push(measure_case(&server, &browser, level, reader, false).await?);
        }
    }
    for reader in [Reader::Reference, Reader::Charts, Reader::Page] {
        cases.push(measure_case(&server, &browser, 1, reader, true).await?);
    }
    println!(
        "\nBias on loopback: browser TTFT minus the demo server's own time to write the first token\n\
         ({REQUESTS} requests per case in whole batches, demo {KNOBS}; headless Chromium; one run)\n"
    );
    println!(
        "{:>8} {:<52} {:>7} {:>10} {:>8} {:>15} {:>15} {:>17} {:>11}",
        "at once",
        "case",
        "samples",
        "median ms",
        "p99 ms",
        "median vs JS ms",
        "p99 vs JS ms",
        "timer late p99 ms",
        "connections"
    );
    for case in &cases {
        let reference = cases
            .iter()
            .find(|c| c.level == case.level && c.name.starts_with("JS reader"))
            .filter(|c| !c.name.contains("busy") || case.name.contains("busy"));
        let median = percentile(&case.bias, 50.0).unwrap_or(f64::NAN);
        let p99 = percentile(&case.bias, 99.0).unwrap_or(f64::NAN);
        let against = |p: f64, own: f64| {
            reference
                .filter(|r| r.name != case.name)
                .and_then(|r| percentile(&r.bias, p))
                .map_or("—".to_owned(), |r| format!("{:+.2}", own - r))
        };
        println!(
            "{:>8} {:<52} {:>7} {:>10.2} {:>8.2} {:>15} {:>15} {:>17} {:>11}",
            case.level,
            case.name,
            case.bias.len(),
            median,
            p99,
            against(50.0, median),
            against(99.0, p99),
            case.timer_p99.map_or("—".to_owned(), |t| format!("{t:.1}")),
            case.connections,
        );
    }
    println!(
        "\n\"vs JS\": the case's figure minus the JS reader's at the same level (busy against busy).\n\
         \"connections\": TCP connections the server accepted during the case, page load included\n\
         (each case loads the app afresh)."
    );
    browser.quit().await
}

async fn measure_case(
    server: &TestServer,
    browser: &Browser,
    level: u32,
    reader: Reader,
    busy: bool,
) -> anyhow::Result<Case> {
    let driver = &browser.driver;
    let before = server.connections_accepted();
    let name = format!(
        "{}{}",
        match reader {
            Reader::Reference => "JS reader on the page",
            Reader::Still => "engine in its worker, page still",
            Reader::Charts => "engine in its worker, live charts",
            Reader::Page => "engine on the page's thread, live charts",
        },
        if busy { ", main thread busy" } else { "" }
    );
    let (bias, timer_p99) = match reader {
        Reader::Reference => {
            driver.goto("about:blank").await?;
            driver.goto(server.url("/")).await?;
            driver
                .query(By::Css("[data-testid=make-link]"))
                .first()
                .await?;
            if busy {
                driver.execute(BUSY, Vec::new()).await?;
            }
            let url = server.url(&format!("/v1/chat/completions?{KNOBS}"));
            let result = driver
                .execute_async(REFERENCE, vec![json!(url), json!(REQUESTS), json!(level)])
                .await?;
            let bias = result
                .json()
                .as_array()
                .context("biases")?
                .iter()
                .filter_map(Value::as_f64)
                .collect();
            (bias, None)
        }
        _ => run_in_app(server, browser, level, reader, busy).await?,
    };
    Ok(Case {
        level,
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
    level: u32,
    reader: Reader,
    busy: bool,
) -> anyhow::Result<(Vec<f64>, Option<f64>)> {
    let driver = &browser.driver;
    let mut plan = Plan::steady(server.demo_target(KNOBS), REQUESTS);
    if level > 1 {
        plan.phases = vec![PhasePlan::Concurrency {
            levels: vec![level],
            requests_per_level: REQUESTS,
        }];
    }
    let study = Study {
        title: "Engine bias".into(),
        plan,
        collector: None,
        carries_token: false,
    };
    let query = match reader {
        Reader::Still => "?charts=off",
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
    if busy {
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
    if in_worker != (reader != Reader::Page) {
        bail!("the record says in_worker = {in_worker}, not where the case asked");
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
