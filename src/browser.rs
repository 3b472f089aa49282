//! What the page learns about its browser and network, coarsely (ARCHITECTURE.md, "What may leave the browser"):
//! the user-agent string is reduced to family, major version, OS and mobile before it is
//! kept anywhere; the Network Information API is read where the browser has it.

use firsttoken_core::schema::{Client, NetworkLabel, NetworkReading, Unavailable};
use firsttoken_pages::client::describe;
use js_sys::Reflect;

/// What the Network Information API says now, where the browser has it.
pub fn network_reading() -> Option<NetworkReading> {
    let navigator = web_sys::window()?.navigator();
    let connection = Reflect::get(&navigator, &"connection".into())
        .ok()
        .filter(|c| c.is_object())?;
    let read = |name: &str| Reflect::get(&connection, &name.into()).ok();
    Some(NetworkReading {
        effective_type: read("effectiveType").and_then(|v| v.as_string()),
        rtt_ms: read("rtt").and_then(|v| v.as_f64()),
        downlink_mbps: read("downlink").and_then(|v| v.as_f64()),
    })
}

/// The client part of a record, with the network the user picked and the Network
/// Information reading taken when the run started.
pub fn client(network: NetworkLabel, at_start: Option<NetworkReading>) -> Client {
    let Some(window) = web_sys::window() else {
        return Client {
            network,
            at_start,
            ..Client::default()
        };
    };
    let navigator = window.navigator();
    let description = describe(&navigator.user_agent().unwrap_or_default());
    let connection = Reflect::get(&navigator, &"connection".into())
        .ok()
        .filter(|c| c.is_object());
    let read = |name: &str| {
        connection
            .as_ref()
            .and_then(|c| Reflect::get(c, &name.into()).ok())
    };
    Client {
        browser: description.browser.map(str::to_owned),
        browser_major: description.browser_major,
        os: description.os.map(str::to_owned),
        mobile: Some(description.mobile),
        network,
        effective_type: read("effectiveType").and_then(|v| v.as_string()),
        rtt_ms: read("rtt").and_then(|v| v.as_f64()),
        downlink_mbps: read("downlink").and_then(|v| v.as_f64()),
        at_start,
    }
}

/// What the page reads of the browser itself and this browser does not give: the
/// Network Information API (only Chromium has it), and IndexedDB where it failed to open
/// (`indexed_db_open`: whether the upload queue's store opened). The engine adds what it
/// lacks of Resource Timing ([`crate::engine::features`]).
pub fn page_unavailable(indexed_db_open: bool) -> Vec<Unavailable> {
    let network_information = web_sys::window()
        .and_then(|w| Reflect::get(&w.navigator(), &"connection".into()).ok())
        .is_some_and(|c| c.is_object());
    [
        (network_information, Unavailable::NetworkInformation),
        (indexed_db_open, Unavailable::IndexedDb),
    ]
    .into_iter()
    .filter(|(has, _)| !has)
    .map(|(_, missing)| missing)
    .collect()
}

/// This page's origin (`http://127.0.0.1:8080`).
pub fn page_origin() -> String {
    web_sys::window()
        .and_then(|w| w.location().origin().ok())
        .unwrap_or_default()
}

/// The path prefix the app is served under (`/firsttoken` with `--base-path`), from the
/// `<meta name="firsttoken-base">` the server writes into the page; empty at the root
/// (and under `trunk serve`, which writes none).
pub fn base_path() -> String {
    web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| {
            d.query_selector("meta[name=firsttoken-base]")
                .ok()
                .flatten()
        })
        .and_then(|meta| meta.get_attribute("content"))
        .map(|base| base.trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// Where this server's app, collector and demo are: the page's origin and the base path
/// (`https://chat.example.com/firsttoken`).
pub fn app_root() -> String {
    format!("{}{}", page_origin(), base_path())
}

/// `Date.now()`: wall-clock Unix milliseconds, for the record's start time only (every
/// measured time comes from `performance.now()`).
pub fn unix_now_ms() -> u64 {
    js_sys::Date::now() as u64
}
