//! `POST /api/v1/runs` stores a run once and answers with a delete token;
//! `GET /api/v1/runs/{id}` returns it; `DELETE /api/v1/runs/{id}` with the token removes it;
//! `GET /api/v1/ping` answers the engine's round-trip probes.

use std::net::SocketAddr;

use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Extension, Json, Router};
use firsttoken_core::Run;
use firsttoken_core::schema::is_uuid;
use serde::Serialize;

use crate::AppState;
use crate::db::{Deleted, Stored};
use crate::error::AppError;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/runs", post(store_run))
        .route("/api/v1/runs/{run_id}", get(get_run).delete(delete_run))
        .route("/api/v1/ping", get(ping))
        // Without this, an unknown API path would get the app's index.html from the
        // static fallback: a 200 of HTML where a client expects JSON.
        .route("/api/{*path}", any(unknown_endpoint))
}

async fn unknown_endpoint(uri: axum::http::Uri) -> AppError {
    AppError::NotFound(format!("no API endpoint at {}", uri.path()))
}

/// What an upload is answered with.
#[derive(Debug, Serialize)]
struct StoredRun {
    run_id: String,
    /// Where the stored run can be read.
    url: String,
    /// Deletes the run (`DELETE url` with `Authorization: Bearer <token>`). Given once, with
    /// the upload that stored the run: a repeated upload is answered without it, since
    /// anyone who can read a run could upload it again.
    delete_token: Option<String>,
}

type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// Counts one request against the address's allowance.
fn rate_limit(state: &AppState, headers: &HeaderMap, peer: &Peer) -> Result<(), AppError> {
    let peer = peer.as_ref().map(|Extension(ConnectInfo(p))| *p);
    match state.client_address(headers, peer) {
        Some(address) => state
            .limiter
            .check(address)
            .map_err(|retry| AppError::TooManyRequests {
                retry_after: retry.0,
            }),
        None => Ok(()),
    }
}

async fn store_run(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    body: Body,
) -> Result<Response, AppError> {
    let result = store(&state, &headers, &peer, body).await;
    if let Err(e) = &result {
        state.metrics.upload_rejected(e.code());
    }
    result
}

async fn store(
    state: &AppState,
    headers: &HeaderMap,
    peer: &Peer,
    body: Body,
) -> Result<Response, AppError> {
    // Both checks come before a byte of the body is read.
    crate::body::check_declared_size(headers, state.config.max_body_bytes)?;
    rate_limit(state, headers, peer)?;
    let body = crate::body::read(
        body,
        headers,
        state.config.max_body_bytes,
        Duration::from_secs(state.config.body_read_timeout_secs),
    )
    .await?;
    let run = parse_run(&body)?;
    run.validate().map_err(|e| AppError::Invalid {
        message: e.to_string(),
        field: Some(e.field),
    })?;
    // Stored is what the collector itself writes, not the client's bytes: the same run
    // always gives the same record, whatever whitespace or key order the client used.
    let record = serde_json::to_string(&run).map_err(anyhow::Error::from)?;
    let url = format!("/api/v1/runs/{}", run.run_id);
    let (status, delete_token) = match state.db.insert_run(&run, &record, now_ms()).await? {
        Stored::Created { delete_token } => {
            state.metrics.upload_accepted();
            tracing::info!(
                run_id = %run.run_id,
                samples = run.samples.len(),
                demo = run.main_target().demo,
                "run stored"
            );
            (StatusCode::CREATED, Some(delete_token))
        }
        Stored::AlreadyStored => {
            state.metrics.upload_repeated();
            (StatusCode::OK, None)
        }
        Stored::IdTaken => {
            return Err(AppError::Conflict(format!(
                "a different run is already stored under run_id {}",
                run.run_id
            )));
        }
    };
    Ok((
        status,
        [(header::LOCATION, url.clone())],
        Json(StoredRun {
            run_id: run.run_id,
            url,
            delete_token,
        }),
    )
        .into_response())
}

/// Parses an upload: not JSON at all is a 400; JSON of the wrong shape is a 422 naming
/// the field serde stopped at.
fn parse_run(body: &[u8]) -> Result<Run, AppError> {
    // Syntax first, so that broken JSON is reported as such even where a typed parse
    // would have stopped earlier at a wrong type. This pass allocates nothing.
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|e| AppError::MalformedJson(format!("the body is not valid JSON: {e}")))?;
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        AppError::Invalid {
            field: (path != ".").then_some(path),
            message: format!(
                "the run does not have the schema's shape: {}",
                e.into_inner()
            ),
        }
    })
}

fn checked_run_id(run_id: &str) -> Result<(), AppError> {
    if is_uuid(run_id) {
        Ok(())
    } else {
        Err(AppError::BadRequest(format!(
            "{run_id:?} is not a run id (a lowercase UUID)"
        )))
    }
}

async fn get_run(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
) -> Result<Response, AppError> {
    checked_run_id(&run_id)?;
    let record = state
        .db
        .run_record(&run_id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("no run is stored under {run_id}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], record).into_response())
}

async fn delete_run(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    peer: Peer,
) -> Result<Response, AppError> {
    rate_limit(&state, &headers, &peer)?;
    checked_run_id(&run_id)?;
    let token = bearer(&headers).ok_or_else(|| {
        AppError::Forbidden("send the run's delete token as Authorization: Bearer <token>".into())
    })?;
    match state.db.delete_run(&run_id, token).await? {
        Deleted::Deleted => {
            tracing::info!(%run_id, "run deleted by its uploader");
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Deleted::NotFound => Err(AppError::NotFound(format!(
            "no run is stored under {run_id}"
        ))),
        Deleted::WrongToken => Err(AppError::Forbidden(
            "that is not this run's delete token".into(),
        )),
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

async fn ping() -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(serde_json::json!({ "ok": true })),
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
