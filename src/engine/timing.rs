//! What Resource Timing tells about a finished request: whether its connection was new,
//! the protocol, DNS, connect and TLS times, and the response's `Server-Timing` entries.
//!
//! A streaming request's entry appears only once its body has been read to the end, and
//! the buffer holds 250 entries unless enlarged: the engine enlarges it, reads a request's
//! entry after the stream ends, matches it by URL and start time, and clears the buffer
//! whenever no request is in flight.

use firsttoken_core::schema::{Connection, MAX_TIMING_ENTRIES, ServerTimingEntry};
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming, PerformanceServerTiming};

/// Room for the largest batch of requests between two clears.
pub fn enlarge_buffer(performance: &Performance) {
    performance.set_resource_timing_buffer_size(2000);
}

pub fn clear(performance: &Performance) {
    performance.clear_resource_timings();
}

/// The entry of the request to `url` that started at `t0` (the one closest after it).
fn entry(performance: &Performance, url: &str, t0: f64) -> Option<PerformanceResourceTiming> {
    performance
        .get_entries_by_name_with_entry_type(url, "resource")
        .iter()
        .filter_map(|e| e.dyn_into::<PerformanceResourceTiming>().ok())
        // fetch() records its start a moment after t0 was read; allow for timer rounding.
        .filter(|e| e.start_time() >= t0 - 1.0)
        .min_by(|a, b| a.start_time().total_cmp(&b.start_time()))
}

/// The connection and Server-Timing of the request to `url` started at `t0`. Without
/// `Timing-Allow-Origin` a cross-origin entry hides all of it; then both are empty.
pub fn read(
    performance: &Performance,
    url: &str,
    t0: f64,
) -> (Option<Connection>, Vec<ServerTimingEntry>) {
    let Some(e) = entry(performance, url, t0) else {
        return (None, Vec::new());
    };
    let server_timing = e
        .server_timing()
        .iter()
        .filter_map(|t| t.dyn_into::<PerformanceServerTiming>().ok())
        .take(MAX_TIMING_ENTRIES)
        .map(|t| ServerTimingEntry {
            name: t.name().chars().take(64).collect(),
            duration_ms: if t.duration().is_finite() {
                t.duration().max(0.0)
            } else {
                0.0
            },
            description: Some(
                t.description()
                    .chars()
                    .take(128)
                    .filter(|c| !c.is_control())
                    .collect::<String>(),
            )
            .filter(|d| !d.is_empty()),
        })
        .filter(|t| !t.name.is_empty())
        .collect();
    // A cross-origin entry without Timing-Allow-Origin reports zeros for everything
    // between fetchStart and responseEnd.
    if e.connect_start() == 0.0 && e.fetch_start() > 0.0 {
        return (None, server_timing);
    }
    let span = |start: f64, end: f64| (end > start).then_some(end - start);
    let reused =
        e.connect_start() == e.connect_end() && e.domain_lookup_start() == e.domain_lookup_end();
    let tls_start = e.secure_connection_start();
    let protocol = e.next_hop_protocol();
    let conn = Connection {
        reused,
        // The runner decides this, knowing what earlier requests of the run saw.
        new_connection: None,
        protocol: (!protocol.is_empty()).then_some(protocol),
        dns_ms: span(e.domain_lookup_start(), e.domain_lookup_end()),
        connect_ms: span(e.connect_start(), e.connect_end()),
        tls_ms: (tls_start > 0.0)
            .then(|| span(tls_start, e.connect_end()))
            .flatten(),
    };
    (Some(conn), server_timing)
}
