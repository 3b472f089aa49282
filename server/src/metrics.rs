//! Counters for `/metrics`, in Prometheus' text format: uploads accepted and rejected by
//! reason, and request latency by route.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::AppState;

/// Upper bounds of the latency histogram's buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default)]
pub struct Metrics {
    uploads_accepted: AtomicU64,
    uploads_repeated: AtomicU64,
    uploads_rejected: Mutex<BTreeMap<&'static str, u64>>,
    requests: Mutex<BTreeMap<(String, &'static str, u16), Histogram>>,
    connections_accepted: AtomicU64,
    connections_refused: AtomicU64,
    connections_open: AtomicU64,
    requests_shed: AtomicU64,
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    pub fn upload_accepted(&self) {
        self.uploads_accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn upload_repeated(&self) {
        self.uploads_repeated.fetch_add(1, Ordering::Relaxed);
    }

    /// An upload refused, by reason (`malformed_json`, `invalid`, `too_large`, …).
    pub fn upload_rejected(&self, reason: &'static str) {
        if let Ok(mut rejected) = self.uploads_rejected.lock() {
            *rejected.entry(reason).or_default() += 1;
        }
    }

    /// A connection accepted from the listener (before the cap is checked).
    pub fn connection_accepted(&self) {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection answered 503 and closed: too many were open.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A request answered 503 because too many were in flight.
    pub fn request_shed(&self) {
        self.requests_shed.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections accepted since the start.
    pub fn connections_accepted(&self) -> u64 {
        self.connections_accepted.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn connections_open(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// Label sets of the latency histogram: bounded by routes × methods × statuses.
    pub fn request_series(&self) -> usize {
        self.requests.lock().map_or(0, |r| r.len())
    }

    fn observe(&self, route: String, method: &'static str, status: u16, elapsed: Duration) {
        let Ok(mut requests) = self.requests.lock() else {
            return;
        };
        let histogram = requests.entry((route, method, status)).or_default();
        let seconds = elapsed.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(histogram.buckets.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    }

    /// Everything, in Prometheus' text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP firsttoken_uploads_accepted_total Runs stored.");
        let _ = writeln!(out, "# TYPE firsttoken_uploads_accepted_total counter");
        let _ = writeln!(
            out,
            "firsttoken_uploads_accepted_total {}",
            self.uploads_accepted.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP firsttoken_uploads_repeated_total Uploads of a run already stored (answered, not stored again)."
        );
        let _ = writeln!(out, "# TYPE firsttoken_uploads_repeated_total counter");
        let _ = writeln!(
            out,
            "firsttoken_uploads_repeated_total {}",
            self.uploads_repeated.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP firsttoken_uploads_rejected_total Uploads refused, by reason."
        );
        let _ = writeln!(out, "# TYPE firsttoken_uploads_rejected_total counter");
        if let Ok(rejected) = self.uploads_rejected.lock() {
            for (reason, count) in rejected.iter() {
                let _ = writeln!(
                    out,
                    "firsttoken_uploads_rejected_total{{reason=\"{reason}\"}} {count}"
                );
            }
        }
        for (name, help, kind, value) in [
            (
                "firsttoken_connections_accepted_total",
                "Connections accepted.",
                "counter",
                self.connections_accepted.load(Ordering::Relaxed),
            ),
            (
                "firsttoken_connections_refused_total",
                "Connections answered 503 and closed: too many were open.",
                "counter",
                self.connections_refused.load(Ordering::Relaxed),
            ),
            (
                "firsttoken_connections_open",
                "Connections open now.",
                "gauge",
                self.connections_open.load(Ordering::Relaxed),
            ),
            (
                "firsttoken_requests_shed_total",
                "Requests answered 503: too many were in flight.",
                "counter",
                self.requests_shed.load(Ordering::Relaxed),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {value}");
        }
        let _ = writeln!(
            out,
            "# HELP firsttoken_http_request_duration_seconds Time to the response head, by route."
        );
        let _ = writeln!(
            out,
            "# TYPE firsttoken_http_request_duration_seconds histogram"
        );
        if let Ok(requests) = self.requests.lock() {
            for ((route, method, status), h) in requests.iter() {
                let labels = format!("route=\"{route}\",method=\"{method}\",status=\"{status}\"");
                for (bound, count) in BUCKETS.iter().zip(h.buckets) {
                    let _ = writeln!(
                        out,
                        "firsttoken_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
                    );
                }
                let _ = writeln!(
                    out,
                    "firsttoken_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(
                    out,
                    "firsttoken_http_request_duration_seconds_sum{{{labels}}} {}",
                    h.sum
                );
                let _ = writeln!(
                    out,
                    "firsttoken_http_request_duration_seconds_count{{{labels}}} {}",
                    h.count
                );
            }
        }
        out
    }
}

/// The method as a label: one of the methods the server knows, or `other`. Hyper accepts
/// any token as a method, and a label per string a client made up would grow without
/// bound.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// Times every request to its response head. Routes are their patterns
/// (`/api/v1/runs/{run_id}`), never the paths, so ids do not become labels.
pub async fn record(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "other".to_owned(), |p| p.as_str().to_owned());
    let method = method_label(request.method());
    let start = Instant::now();
    let response = next.run(request).await;
    state
        .metrics
        .observe(route, method, response.status().as_u16(), start.elapsed());
    response
}
