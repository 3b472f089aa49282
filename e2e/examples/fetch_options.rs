//! Whether the way the engine asks differs from the way the JS reader of `engine_bias`
//! ([`firsttoken_e2e::READER`]) asks: that reader in one dedicated worker, 3 requests at
//! once against the demo, as it is; with one of the engine's `fetch()` options at a time
//! (`credentials: "omit"`, an `AbortSignal`, a `Headers` object); with all three; with the
//! body the engine sends the demo; and with the engine's pause after each batch (the page
//! told, drawing in its next frame, then two frames more and 30 ms, then the answer:
//! noticed at once, with a line of the page's text changed, and noticed in 2 ms polls as
//! the engine's `Drawn::wait` does). The variants take turns in blocks of 99 requests,
//! each block after one warm-up request (`FIRSTTOKEN_BENCH_ROUNDS` rounds, 10 by default,
//! about 6 minutes). Prints each variant's median, p90 and p99 bias: browser TTFT minus
//! the demo's own time to write its first token. Run with `cargo xtask bench
//! fetch_options`.

use std::time::Duration;

use anyhow::Context;
use firsttoken_crowd::stats::percentile;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::{PAGE_SIDE, READER, TestServer, bench_setting};
use serde_json::json;
use thirtyfour::TimeoutConfiguration;

/// The variants, in the order the script numbers them.
const VARIANTS: [&str; 9] = [
    "as the JS reader",
    "credentials omit",
    "abort signal",
    "Headers object",
    "all three",
    "the engine's body",
    "page handshake",
    "handshake, page text",
    "handshake, 2 ms polls",
];

/// Runs `n` requests of variant `v`, 3 at once, with [`READER`] in a worker the page
/// keeps between calls ([`PAGE_SIDE`] answers its pause); WebDriver's callback is the last
/// argument.
const SCRIPT: &str = r#"
const [url, v, n, reader, done] = [arguments[0], arguments[1], arguments[2], arguments[3], arguments[arguments.length - 1]];
const source = reader + `
const engineBody = '{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello?"}]}';
function options(v) {
  return () => {
    const i = plain();
    if (v === 5) i.body = engineBody;
    if (v === 1 || v === 4) i.credentials = 'omit';
    if (v === 2 || v === 4) i.signal = new AbortController().signal;
    if (v === 3 || v === 4) i.headers = new Headers({'content-type': 'application/json'});
    return i;
  };
}
onmessage = async (e) => {
  if (answered(e.data)) return;
  const {url, v, n} = e.data;
  const after = v < 6 ? null : () => pause(v < 8);
  postMessage(await run(url, n, 3, 1, after, options(v)));
};`;
if (!window.__worker) window.__worker = new Worker(URL.createObjectURL(new Blob([source], {type: 'text/javascript'})));
const worker = window.__worker;
worker.onmessage = (e) => {
  if (e.data !== 'frame') return done(e.data);
  answerAfterDrawing(worker, v >= 7 ? drawLine : () => {});
};
worker.onerror = (e) => done({error: e.message || String(e)});
worker.postMessage({url, v, n});
"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(60)),
            Some(Duration::from_secs(0)),
        ))
        .await?;
    driver.goto(server.url("/")).await?;
    let target = server.url("/v1/chat/completions?first_token_ms=50&itl_ms=5&tokens=10");
    let rounds: u32 = bench_setting("FIRSTTOKEN_BENCH_ROUNDS", 10, |text| {
        text.trim()
            .parse()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .context("a number of rounds from 1 to 1000")
    })?;
    let script = format!("{PAGE_SIDE}\n{SCRIPT}");
    let mut out = vec![Vec::new(); VARIANTS.len()];
    for round in 0..rounds {
        for (v, values) in out.iter_mut().enumerate() {
            let result = driver
                .execute_async(
                    &script,
                    vec![json!(target), json!(v), json!(99), json!(READER)],
                )
                .await?;
            let block: Vec<f64> = serde_json::from_value(result.json().clone())
                .map_err(|e| anyhow::anyhow!("{e}: {}", result.json()))?;
            values.extend(block);
        }
        eprintln!("round {} of {rounds}", round + 1);
    }
    println!(
        "\nA JS reader in a worker, 3 at once: bias ms (browser TTFT minus the demo's time to \
         its first token)\n"
    );
    for (name, values) in VARIANTS.iter().zip(&out) {
        println!(
            "{name:<18} n={:>5} median {:.2} p90 {:.2} p99 {:.2}",
            values.len(),
            percentile(values, 50.0).unwrap_or(f64::NAN),
            percentile(values, 90.0).unwrap_or(f64::NAN),
            percentile(values, 99.0).unwrap_or(f64::NAN),
        );
    }
    browser.quit().await
}
