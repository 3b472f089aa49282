//! What a beta user's browser downloads for a share link, and how long the page takes to
//! become usable. Measured in headless Chromium on a 360×740 phone:
//!
//! - **First visit**, cache off: each file's size (Resource Timing), when the HTML was
//!   parsed, when the last wasm arrived, when the landing was first painted (by the
//!   painter, `paint/`, before the app arrives) and when the app's Start button was there
//!   to press (a script the browser runs before the page's own records when the button
//!   appears; the painted one is another element, disabled); on loopback and under Chrome DevTools Protocol
//!   emulation of a cellular link (150 ms round trip, 1.6 Mbps down, 750 kbps up).
//! - **A whole run**, as a beta user makes it (cache on, a fresh browser): open the link,
//!   consent, Start, wait for the end. Every byte the page's server sent (the page, its
//!   files, and whatever the engine's worker loaded) is counted by a TCP proxy in front of
//!   it, headers included; the target is on another server, so its streams are not.
//! - **A repeat visit** in the same browser: the bytes the page's server sent again.
//!
//! Run with `cargo xtask bench first_load`, which builds the app first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, PHONE};
use serde_json::{Value, json};
use thirtyfour::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The network a pass runs on: a name and CDP's emulation parameters (None: loopback).
type Network = (&'static str, Option<Value>);

/// Answers once the Start button is in the page and the first contentful paint has been
/// recorded (a frame or more after the button is in the page), without being asked again.
const LANDED: &str = r#"
const done = arguments[arguments.length - 1];
let answered = false;
const check = () => {
  if (answered || !document.querySelector('[data-testid=start-button]')) return;
  if (performance.getEntriesByName('first-contentful-paint').length === 0) return;
  answered = true;
  done(true);
};
new MutationObserver(check).observe(document, {subtree: true, childList: true});
new PerformanceObserver(check).observe({type: 'paint', buffered: true});
check();
"#;

/// The goals the page is held to (see `docs/src/benchmarks/first_load.md`).
const GOAL_RUN_BYTES: f64 = 150_000.0;
const GOAL_PAINT_MS: f64 = 1500.0;
const GOAL_START_MS: f64 = 2500.0;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    // The target on a server of its own, so that the proxy counts only the page's bytes.
    let target = TestServer::collector().await?;
    let proxy = CountingProxy::start(server.address).await?;
    let mut plan = Plan::steady(
        target.demo_target("first_token_ms=50&itl_ms=5&tokens=10"),
        5,
    );
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady { requests: 5 },
    ];
    let study = Study {
        title: "First load".into(),
        plan,
        collector: None,
        carries_token: false,
        study_id: None,
    };
    let link = format!("http://{}/run#{}", proxy.address, study.to_fragment());

    let networks: [Network; 2] = [
        ("loopback", None),
        (
            "cellular (150 ms RTT, 1.6 Mbps down)",
            Some(json!({
                "offline": false,
                "latency": 150,
                "downloadThroughput": 1_600_000 / 8,
                "uploadThroughput": 750_000 / 8,
            })),
        ),
    ];
    let mut sizes = None;
    let mut times = Vec::new();
    for (name, emulation) in networks {
        // A fresh browser each time: nothing cached, no open connection.
        let browser = Browser::start(PHONE).await?;
        let cdp = browser.driver.cdp();
        cdp.send_raw("Network.enable", json!({})).await?;
        cdp.send_raw("Network.setCacheDisabled", json!({ "cacheDisabled": true }))
            .await?;
        cdp.send_raw(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": WATCH_START }),
        )
        .await?;
        if let Some(conditions) = emulation {
            cdp.send_raw("Network.emulateNetworkConditions", conditions)
                .await?;
        }
        browser.driver.goto(&link).await?;
        // Waited for from inside the page: polling WebDriver while the page loads would
        // put DevTools work on the thread that compiles and paints it.
        browser.driver.execute_async(LANDED, Vec::new()).await?;
        let report = browser
            .driver
            .execute(MEASURE, Vec::new())
            .await?
            .json()
            .clone();
        times.push((name, report.clone()));
        sizes.get_or_insert(report["entries"].clone());
        browser.quit().await?;
    }

    // A whole run, then a repeat visit, in one browser with its cache on.
    let browser = Browser::start(PHONE).await?;
    let before = proxy.sent();
    browser.driver.goto(&link).await?;
    browser.consent_and_start().await?;
    browser
        .wait_for_text("[data-testid=run-status]", Duration::from_secs(120), |t| {
            t.starts_with("Finished")
        })
        .await?;
    let whole_run = proxy.sent() - before;
    let before = proxy.sent();
    browser.driver.goto("about:blank").await?;
    browser.driver.goto(&link).await?;
    browser
        .driver
        .query(By::Css("[data-testid=start-button]"))
        .first()
        .await?;
    let repeat = proxy.sent() - before;
    browser.quit().await?;

    println!("\nFirst visit to a share link (headless Chromium, 360×740, as served):\n");
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "file", "raw bytes", "as served", "transfer"
    );
    let mut totals = [0.0; 3];
    for entry in sizes
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let number = |key: &str| entry[key].as_f64().unwrap_or(0.0);
        let row = [number("decoded"), number("encoded"), number("transfer")];
        for (total, value) in totals.iter_mut().zip(row) {
            *total += value;
        }
        println!(
            "{:<44} {:>10} {:>10} {:>10}",
            entry["name"].as_str().unwrap_or("?"),
            row[0],
            row[1],
            row[2]
        );
    }
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "total", totals[0], totals[1], totals[2]
    );
    println!(
        "\n\"as served\": the body as it came (brotli or gzip); \"transfer\" adds the response headers.\n"
    );
    println!(
        "{:<40} {:>10} {:>10} {:>12} {:>10}",
        "network", "HTML ms", "wasm ms", "painted ms", "Start ms"
    );
    for (name, report) in &times {
        let ms = |key: &str| {
            report[key]
                .as_f64()
                .map_or("—".to_owned(), |v| format!("{v:.0}"))
        };
        println!(
            "{name:<40} {:>10} {:>10} {:>12} {:>10}",
            ms("dom_content_loaded"),
            ms("wasm_received"),
            ms("first_contentful_paint"),
            ms("start_button")
        );
    }
    println!(
        "\n\"painted\": the first contentful paint (the landing: title, what is measured, what is sent, Start; drawn by the painter, or by the app if it came first); \"Start\": when the app's Start button was in the page, ready to press.\n"
    );
    println!(
        "A whole run (open the link, consent, Start, to the end; cache on): {whole_run} bytes from the page's server, headers included."
    );
    println!("A repeat visit in the same browser: {repeat} bytes.\n");

    let cellular = &times[1].1;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let paint = cellular["first_contentful_paint"]
        .as_f64()
        .unwrap_or(f64::INFINITY);
    let start = cellular["start_button"].as_f64().unwrap_or(f64::INFINITY);
    println!(
        "Goals: a whole run ≤ {GOAL_RUN_BYTES:.0} bytes: {} ({whole_run}); landing painted on cellular ≤ {GOAL_PAINT_MS:.0} ms: {} ({paint:.0}); Start working on cellular ≤ {GOAL_START_MS:.0} ms: {} ({start:.0}).",
        verdict(whole_run as f64 <= GOAL_RUN_BYTES),
        verdict(paint <= GOAL_PAINT_MS),
        verdict(start <= GOAL_START_MS),
    );
    Ok(())
}

/// A TCP proxy in front of a server that counts the bytes the server sends back.
struct CountingProxy {
    address: std::net::SocketAddr,
    sent: Arc<AtomicU64>,
}

impl CountingProxy {
    async fn start(upstream: std::net::SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = relay(client, server, counter).await;
                    }
                });
            }
        });
        Ok(Self { address, sent })
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

/// Copies both ways until either side closes, counting what the server sends.
async fn relay(client: TcpStream, server: TcpStream, sent: Arc<AtomicU64>) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = tokio::io::copy(&mut client_read, &mut server_write);
    let down = async {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = server_read.read(&mut buffer).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            sent.fetch_add(n as u64, Ordering::Relaxed);
            client_write.write_all(&buffer[..n]).await?;
        }
    };
    tokio::select! {
        r = up => { r?; }
        r = down => { r?; }
    }
    Ok(())
}

/// Runs before the page's own scripts: notes when the Start button first appears.
const WATCH_START: &str = r#"
    new MutationObserver((_, observer) => {
        if (document.querySelector('[data-testid=start-button]')) {
            window.__startButtonAt = performance.now();
            observer.disconnect();
        }
    }).observe(document, { childList: true, subtree: true });
"#;

const MEASURE: &str = r#"
    const navigation = performance.getEntriesByType('navigation')[0];
    const resources = performance.getEntriesByType('resource');
    const wasm = resources.filter(e => e.name.endsWith('.wasm')).map(e => e.responseEnd);
    const paint = performance.getEntriesByName('first-contentful-paint')[0];
    return {
        dom_content_loaded: navigation.domContentLoadedEventEnd,
        wasm_received: wasm.length ? Math.max(...wasm) : null,
        first_contentful_paint: paint ? paint.startTime : null,
        start_button: window.__startButtonAt ?? null,
        entries: [navigation, ...resources].map(e => ({
            name: new URL(e.name).pathname,
            transfer: e.transferSize,
            encoded: e.encodedBodySize,
            decoded: e.decodedBodySize,
        })),
    };
"#;
