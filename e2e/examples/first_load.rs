//! What a beta user's browser downloads on a first visit to a share link, and how long the
//! page takes to become usable: on loopback, and under Chrome DevTools Protocol network
//! emulation of a cellular link (150 ms round trip, 1.6 Mbps down, 750 kbps up), cache
//! off. Measured in headless Chromium from Resource Timing and the paint timeline.
//! Run with `cargo xtask bench`, which builds the app first.

use firsttoken_core::plan::Plan;
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, PHONE};
use serde_json::{Value, json};
use thirtyfour::prelude::*;

/// The network a pass runs on: a name and CDP's emulation parameters (None: loopback).
type Network = (&'static str, Option<Value>);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let study = Study {
        title: "First load".into(),
        plan: Plan::quick(server.demo_target("")),
        collector: None,
        carries_token: false,
        study_id: None,
    };
    let link = server.link(&study);
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
        if let Some(conditions) = emulation {
            cdp.send_raw("Network.emulateNetworkConditions", conditions)
                .await?;
        }
        browser.driver.goto(&link).await?;
        browser
            .driver
            .query(By::Css("[data-testid=start-button]"))
            .first()
            .await?;
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

    println!("\nFirst visit to a share link (headless Chromium, 360×740, gzip as served):\n");
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "file", "raw bytes", "gzip bytes", "transfer"
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
        "\n\"transfer\" includes response headers. The measuring engine's worker (engine_worker.js and its wasm) loads when Start is pressed.\n"
    );
    println!(
        "{:<40} {:>14} {:>14} {:>16}",
        "network", "HTML parsed ms", "wasm in ms", "first paint ms"
    );
    for (name, report) in times {
        let ms = |key: &str| {
            report[key]
                .as_f64()
                .map_or("—".to_owned(), |v| format!("{v:.0}"))
        };
        println!(
            "{name:<40} {:>14} {:>14} {:>16}",
            ms("dom_content_loaded"),
            ms("wasm_received"),
            ms("first_contentful_paint")
        );
    }
    println!(
        "\n\"first paint\": the first contentful paint, which on this page is the app itself (the HTML holds nothing else)."
    );
    Ok(())
}

const MEASURE: &str = r#"
    const navigation = performance.getEntriesByType('navigation')[0];
    const resources = performance.getEntriesByType('resource');
    const wasm = resources.filter(e => e.name.endsWith('.wasm')).map(e => e.responseEnd);
    const paint = performance.getEntriesByName('first-contentful-paint')[0];
    return {
        dom_content_loaded: navigation.domContentLoadedEventEnd,
        wasm_received: wasm.length ? Math.max(...wasm) : null,
        first_contentful_paint: paint ? paint.startTime : null,
        entries: [navigation, ...resources].map(e => ({
            name: new URL(e.name).pathname,
            transfer: e.transferSize,
            encoded: e.encodedBodySize,
            decoded: e.decodedBodySize,
        })),
    };
"#;
