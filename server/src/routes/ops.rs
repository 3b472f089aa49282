//! What operators and tools read: `/healthz`, `/metrics` (Prometheus text format), the
//! API's OpenAPI document and the result schema it refers to.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::AppState;

/// The API, described (OpenAPI 3.1).
pub const OPENAPI: &str = include_str!("../../openapi.json");
/// The result record's JSON Schema, which the OpenAPI document refers to.
pub const RUN_SCHEMA: &str = include_str!("../../../core/schema/run.v1.json");

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/v1/openapi.json", get(|| async { json(OPENAPI) }))
        .route(
            "/api/v1/schema/run.v1.json",
            get(|| async { json(RUN_SCHEMA) }),
        )
}

fn json(text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// How recent a good answer from the database must be for `/healthz` to say so at once.
const HEALTH_FRESH_FOR: Duration = Duration::from_secs(3);
/// How old the last answer may be before a check is started in the background.
const HEALTH_RECHECK_AFTER: Duration = Duration::from_secs(1);
/// The longest `/healthz` waits for the database itself.
const HEALTH_CHECK_LIMIT: Duration = Duration::from_secs(2);

/// When the database last answered, so `/healthz` need not wait in line with uploads for
/// a connection: a load balancer asking every second gets its answer at once, while one
/// check at a time runs in the background. A database that stops answering is reported
/// within [`HEALTH_FRESH_FOR`] and [`HEALTH_CHECK_LIMIT`].
#[derive(Debug, Default)]
pub struct Health {
    last_ok: Mutex<Option<Instant>>,
    checking: AtomicBool,
}

impl Health {
    fn last_ok(&self) -> Option<Instant> {
        self.last_ok.lock().ok().and_then(|t| *t)
    }

    async fn check(&self, db: &crate::Db) -> bool {
        let healthy = tokio::time::timeout(HEALTH_CHECK_LIMIT, db.healthy())
            .await
            .unwrap_or(false);
        if healthy && let Ok(mut last) = self.last_ok.lock() {
            *last = Some(Instant::now());
        }
        healthy
    }
}

/// 200 while the database answers, 503 when it does not (a load balancer takes the
/// instance out).
async fn healthz(State(state): State<AppState>) -> Response {
    let health = state.health.clone();
    let age = health.last_ok().map(|t| t.elapsed());
    let healthy = match age {
        Some(age) if age < HEALTH_FRESH_FOR => {
            if age >= HEALTH_RECHECK_AFTER && !health.checking.swap(true, Ordering::AcqRel) {
                let db = state.db.clone();
                tokio::spawn(async move {
                    health.check(&db).await;
                    health.checking.store(false, Ordering::Release);
                });
            }
            true
        }
        _ => health.check(&state.db).await,
    };
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if healthy { "ok" } else { "database unavailable" },
        "database": state.db.backend(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    (status, Json(body)).into_response()
}

async fn metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    peer: super::access::Peer,
) -> Response {
    if let Err(e) = super::access::require(&state, &headers, &peer, super::access::Access::Metrics)
    {
        return e.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        format!(
            "{}# HELP firsttoken_upload_commits_total Transactions that stored uploads (several uploads share one when they arrive together).\n\
             # TYPE firsttoken_upload_commits_total counter\n\
             firsttoken_upload_commits_total {}\n",
            state.metrics.render(),
            state.db.commits()
        ),
    )
        .into_response()
}
