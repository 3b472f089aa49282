//! What Resource Timing tells about finished requests: whether each one's connection was
//! new, the protocol, DNS, connect and TLS times, and the response's `Server-Timing`
//! entries.
//!
//! Three facts shape this module:
//! - A streaming request's entry appears only once its body has been read to the end,
//!   and a moment *after* the reader says done (Chromium delivers it separately from the
//!   body), so a completed request whose entry is not there yet is waited for, briefly.
//! - An entry is named by the URL requested, not the one a redirect led to.
//! - The requests of a concurrency batch share one URL and start within a millisecond
//!   (the clock is coarsened to 0.1 ms in Chromium, 1 ms in Firefox), so start times
//!   can tie, and tied entries come in the order their responses completed. Entries are
//!   matched to requests by start, ties by end ([`firsttoken_core::entries`]), and only
//!   where the counts leave no doubt.
//!
//! The buffer holds 250 entries unless enlarged: the engine enlarges it, reads a batch's
//! entries when every request of the batch has ended, and clears the buffer afterwards.

use std::collections::BTreeMap;

use firsttoken_core::entries::{self, Asked, Entry};
use firsttoken_core::schema::{Connection, ServerTimingEntry};
use wasm_bindgen::JsCast;
use web_sys::{Performance, PerformanceResourceTiming, PerformanceServerTiming};

use crate::platform::Scope;

/// Room for the largest batch of requests between two clears.
pub fn enlarge_buffer(performance: &Performance) {
    performance.set_resource_timing_buffer_size(2000);
}

pub fn clear(performance: &Performance) {
    performance.clear_resource_timings();
}

/// How long to wait, at most, for entries of completed requests that have not appeared
/// yet, and how often to look. The wait comes after the requests ended, so it delays only
/// the next request, never a measurement.
const LATE_ENTRY_WAIT_MS: u32 = 500;
const LATE_ENTRY_STEP_MS: u32 = 5;

/// One request of a batch, as the matching needs it.
#[derive(Debug, Clone, Copy)]
pub struct Requested<'a> {
    /// The requested URL as the browser writes it, the name of its entry.
    pub name: Option<&'a str>,
    /// `performance.now()` just before its `fetch()`.
    pub t0: f64,
    /// The body was read to its end: the browser makes an entry for it.
    pub completed: bool,
    /// `performance.now()` when its reader saw the body end, if it did.
    pub ended: Option<f64>,
}

/// What Resource Timing says of one request: its connection (`None` without an entry,
/// or without detail for a cross-origin target that sends no `Timing-Allow-Origin`) and
/// its `Server-Timing` entries.
pub type Timing = (Option<Connection>, Vec<ServerTimingEntry>);

/// The entries of a batch of requests, each request's own, in the order given.
pub async fn read_batch(
    scope: &Scope,
    requests: &[Requested<'_>],
    clock_step_ms: f64,
) -> Vec<Timing> {
    let performance = scope.performance();
    // Entries of an earlier batch that arrived after it was cleared started before this
    // batch did.
    let since = requests.iter().map(|r| r.t0).fold(f64::INFINITY, f64::min) - 1.0;
    let expected = requests
        .iter()
        .filter(|r| r.completed && r.name.is_some())
        .count();
    let mut entries = entries_since(&performance, requests, since);
    let mut waited = 0;
    while entries.values().map(Vec::len).sum::<usize>() < expected && waited < LATE_ENTRY_WAIT_MS {
        scope.sleep(LATE_ENTRY_STEP_MS).await;
        waited += LATE_ENTRY_STEP_MS;
        entries = entries_since(&performance, requests, since);
    }
    let mut out: Vec<Timing> = requests.iter().map(|_| (None, Vec::new())).collect();
    for (name, found) in entries {
        let mine: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].name == Some(name.as_str()))
            .collect();
        // Entries of requests whose starts tie come in the order they completed, not
        // started: `entries::pair` pairs those by their ends.
        let asked: Vec<Asked> = mine
            .iter()
            .map(|&i| Asked {
                start: requests[i].t0,
                end: requests[i].ended.filter(|_| requests[i].completed),
            })
            .collect();
        let timed: Vec<Entry> = found
            .iter()
            .map(|e| Entry {
                start: e.start_time(),
                end: e.response_end(),
            })
            .collect();
        for (k, entry) in entries::pair(&asked, &timed, clock_step_ms)
            .into_iter()
            .enumerate()
        {
            if let Some(entry) = entry {
                out[mine[k]] = read(&found[entry]);
            }
        }
    }
    out
}

/// The batch's entries by name, each list in start order.
fn entries_since(
    performance: &Performance,
    requests: &[Requested<'_>],
    since: f64,
) -> BTreeMap<String, Vec<PerformanceResourceTiming>> {
    let mut by_name: BTreeMap<String, Vec<PerformanceResourceTiming>> = BTreeMap::new();
    for entry in performance
        .get_entries_by_type("resource")
        .iter()
        .filter_map(|e| e.dyn_into::<PerformanceResourceTiming>().ok())
        .filter(|e| e.start_time() >= since)
    {
        let name = entry.name();
        if requests.iter().any(|r| r.name == Some(name.as_str())) {
            by_name.entry(name).or_default().push(entry);
        }
    }
    for list in by_name.values_mut() {
        // A stable sort: entries with equal (coarsened) start times keep the order the
        // browser added them in.
        list.sort_by(|a, b| a.start_time().total_cmp(&b.start_time()));
    }
    by_name
}

/// One entry's connection and Server-Timing, as the browser gave them; values a record
/// cannot hold are dropped when the sample is made, and counted
/// ([`firsttoken_core::outcome::Observation::into_sample`]).
fn read(e: &PerformanceResourceTiming) -> Timing {
    let server_timing = e
        .server_timing()
        .iter()
        .filter_map(|t| t.dyn_into::<PerformanceServerTiming>().ok())
        .map(|t| ServerTimingEntry {
            name: t.name(),
            duration_ms: t.duration(),
            description: Some(t.description()).filter(|d| !d.is_empty()),
        })
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
        reused: Some(reused),
        // The runner decides this, knowing what earlier requests of the run saw.
        new_connection: None,
        protocol: (!protocol.is_empty()).then_some(protocol),
        dns_ms: span(e.domain_lookup_start(), e.domain_lookup_end()),
        connect_ms: span(e.connect_start(), e.connect_end()),
        tls_ms: (tls_start > 0.0)
            .then(|| span(tls_start, e.connect_end()))
            .flatten(),
        sent_ms: (e.request_start() > 0.0).then(|| (e.request_start() - e.start_time()).max(0.0)),
        wait_ms: (e.request_start() > 0.0 && e.response_start() >= e.request_start())
            .then(|| e.response_start() - e.request_start()),
    };
    (Some(conn), server_timing)
}
