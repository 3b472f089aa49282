//! What operators and tools read: `/healthz`, `/metrics` (Prometheus text format), the
//! API's OpenAPI document and the result schema it refers to.

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

/// 200 while the database answers, 503 when it does not (a load balancer takes the
/// instance out).
async fn healthz(State(state): State<AppState>) -> Response {
    let healthy = state.db.healthy().await;
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

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
