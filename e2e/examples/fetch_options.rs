//! Whether the way the engine asks differs from the way the JS reader of `engine_bias`
//! asks: that reader in one dedicated worker, 3 requests at once against the demo, as it
//! is; with one of the engine's `fetch()` options at a time (`credentials: "omit"`, an
//! `AbortSignal`, a `Headers` object); with all three; with the body the engine sends the
//! demo; and with the engine's pause between batches (the page told, two frames and 30 ms,
//! then the answer: alone, with a line of the page's text changed, and noticed in 2 ms
//! polls as the engine's `Drawn::wait` does). The variants take turns in blocks of 99 requests, each block after one
//! warm-up request (`FIRSTTOKEN_BENCH_ROUNDS` rounds, 10 by default, about 6 minutes).
//! Prints each variant's median, p90 and p99 bias: browser TTFT minus the demo's own time
//! to write its first token. Run with `cargo xtask bench fetch_options`.

use firsttoken_core::stats::percentile;
use std::time::Duration;

use anyhow::Context;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::{TestServer, bench_setting};
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

/// Runs `n` requests of variant `v`, 3 at once, in a worker the page keeps between calls;
/// WebDriver's callback is the last argument.
const SCRIPT: &str = r#"
const [url, v, n, done] = [arguments[0], arguments[1], arguments[2], arguments[arguments.length - 1]];
const source = `
const body = JSON.stringify({model: 'reference', stream: true, messages: [{role: 'user', content: 'hi'}]});
const engineBody = '{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello?"}]}';
function init(v) {
  const i = {method: 'POST', headers: {'content-type': 'application/json'}, body: v === 5 ? engineBody : body};
  if (v === 1 || v === 4) i.credentials = 'omit';
  if (v === 2 || v === 4) i.signal = new AbortController().signal;
  if (v === 3 || v === 4) i.headers = new Headers({'content-type': 'application/json'});
  return i;
}
async function one(url, v) {
  const options = init(v);
  const t0 = performance.now();
  const response = await fetch(url, options);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', ttft = null, server = null;
  for (;;) {
    const {done: end, value} = await reader.read();
    const t = performance.now() - t0;
    if (end) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf('\\n\\n')) >= 0) {
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
// The engine's pause between batches: the page is told, draws, waits two frames and
// 30 ms, and answers; variant 8 notices the answer in 2 ms polls, as the engine does.
let drawn = true;
let wake = null;
async function handshake(v) {
  drawn = false;
  const answered = new Promise((resolve) => { wake = resolve; });
  postMessage('frame');
  if (v === 8) {
    while (!drawn) await new Promise((resolve) => setTimeout(resolve, 2));
  } else {
    await answered;
  }
}
onmessage = async (e) => {
  if (e.data === 'drawn') { drawn = true; wake(); return; }
  const {url, v, n} = e.data;
  const out = [];
  await one(url, v);
  for (let sent = 0; sent < n; sent += 3) {
    out.push(...await Promise.all([one(url, v), one(url, v), one(url, v)]));
    if (v >= 6) await handshake(v);
  }
  postMessage(out);
};`;
if (!window.__worker) window.__worker = new Worker(URL.createObjectURL(new Blob([source], {type: 'text/javascript'})));
const worker = window.__worker;
let batches = 0;
worker.onmessage = (e) => {
  if (e.data !== 'frame') return done(e.data);
  if (v >= 7) {
    const line = document.getElementById('batches') || document.body.appendChild(document.createElement('p'));
    line.id = 'batches';
    line.textContent = `batch ${++batches}`;
  }
  requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => worker.postMessage('drawn'), 30)));
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
    let mut out = vec![Vec::new(); VARIANTS.len()];
    for round in 0..rounds {
        for (v, values) in out.iter_mut().enumerate() {
            let result = driver
                .execute_async(SCRIPT, vec![json!(target), json!(v), json!(99)])
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
