//! `POST /api/v1/runs` stores a run once, with the digest of the uploader's delete token
//! (or answers with a token it made);
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
use firsttoken_core::api::{DELETE_TOKEN_SHA256, StoredRun};
use firsttoken_core::schema::{MAX_RECORD_BYTES, Run, is_uuid};

use crate::AppState;
use crate::db::{Deleted, Stored, now_ms};
use crate::error::AppError;
use crate::limit::{Prefix, RateLimiter};

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

type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// The client's network, for budgets.
fn client_prefix(state: &AppState, headers: &HeaderMap, peer: &Peer) -> Option<Prefix> {
    let peer = peer.as_ref().map(|Extension(ConnectInfo(p))| *p);
    state.client_address(headers, peer).map(Prefix::from)
}

/// Takes `amount` from the network's hourly `budget`, if there is one.
fn spend(
    budget: Option<&RateLimiter>,
    prefix: Option<Prefix>,
    amount: f64,
    now: std::time::Instant,
    what: &'static str,
) -> Result<(), AppError> {
    match (budget, prefix) {
        (Some(budget), Some(prefix)) => {
            budget
                .take(prefix, amount, now)
                .map_err(|retry| AppError::OverBudget {
                    what,
                    retry_after: retry.0,
                })
        }
        _ => Ok(()),
    }
}

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
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if !state.config.accepts_upload_from(origin, host) {
        return Err(AppError::Forbidden(format!(
            "uploads from pages on {} are not accepted here: this collector takes runs from its own pages (--accept-upload-origin adds others)",
            origin.unwrap_or_default()
        )));
    }
    let max_body = state.config.max_body_bytes;
    // The size, the rate and the byte budget are checked before a byte of the body is
    // read. Without a declared length the largest allowed body is taken from the budget,
    // and what was not sent is given back after reading.
    crate::body::check_declared_size(headers, max_body)?;
    let token_digest = delete_token_digest(headers)?;
    rate_limit(state, headers, peer)?;
    let prefix = client_prefix(state, headers, peer);
    let now = std::time::Instant::now();
    let reserved = crate::body::declared_size(headers).unwrap_or(max_body as u64) as f64;
    // The upload's share of the bytes in flight, held until it is stored or refused:
    // what many large uploads at once may take is bounded, and past it they are told
    // to come back rather than queued.
    let kib = (reserved as usize).div_ceil(1024).max(1) as u32;
    let _in_flight = state
        .upload_kib
        .clone()
        .try_acquire_many_owned(kib)
        .map_err(|_| AppError::Busy {
            what: "upload bytes in flight (--upload-bytes-in-flight)",
            retry_after: 2,
        })?;
    spend(
        state.bytes_budget.as_deref(),
        prefix,
        reserved,
        now,
        "upload bytes (--upload-bytes-per-hour)",
    )?;
    let body = crate::body::read(
        body,
        headers,
        max_body,
        Duration::from_secs(state.config.body_read_timeout_secs),
    )
    .await?;
    if let (Some(budget), Some(prefix)) = (&state.bytes_budget, prefix) {
        budget.give_back(prefix, (reserved - body.len() as f64).max(0.0));
    }
    // Parsing, checking and writing the record take real CPU on a large run: on a
    // thread of the blocking pool, so the runtime's threads go on serving (the demo's
    // streams among them).
    let (run, record) = tokio::task::spawn_blocking(move || read_run(&body))
        .await
        .map_err(anyhow::Error::from)??;
    for (i, target) in run.targets.iter().enumerate() {
        if !state.config.accepts_target_origin(&target.origin) {
            return Err(AppError::Invalid {
                field: Some(format!("targets[{i}].origin")),
                message: format!(
                    "this collector accepts runs for {} only, not {}",
                    state.config.accept_target_origins.join(", "),
                    target.origin
                ),
            });
        }
    }
    if state.config.signed_studies_only {
        let signed = match &run.study_id {
            Some(id) => state.db.signed_study(id).await?.is_some(),
            None => false,
        };
        if !signed {
            return Err(AppError::Invalid {
                field: Some("study_id".into()),
                message: "this collector accepts only runs of links its operator signed (--signed-studies-only), and this run's study is not one".into(),
            });
        }
    }
    let samples = run.samples.len() as f64;
    if let (Some(budget), Some(prefix)) = (&state.samples_budget, prefix) {
        let per_hour = state.config.samples_per_hour;
        if samples > per_hour as f64 {
            return Err(AppError::Invalid {
                field: Some("samples".into()),
                message: format!(
                    "the run has {samples} samples; this collector accepts at most {per_hour} per network an hour"
                ),
            });
        }
        spend(
            Some(budget),
            Some(prefix),
            samples,
            now,
            "samples (--samples-per-hour)",
        )?;
    }
    let give_back_samples = || {
        if let (Some(budget), Some(prefix)) = (&state.samples_budget, prefix) {
            budget.give_back(prefix, samples);
        }
    };
    if let Err(e) = state.check_storage(record.len() as u64).await {
        give_back_samples();
        return Err(e);
    }
    let url = format!("{}/api/v1/runs/{}", state.config.base_path, run.run_id);
    let (run_id, stored_samples, demo) = (
        run.run_id.clone(),
        run.samples.len(),
        run.main_target().demo,
    );
    // Where it came from, as a tag kept two days (db/sources.rs): an operator can purge
    // one source's runs, and no address is kept.
    let received_at = now_ms();
    let source_tag = match prefix.and_then(Prefix::block) {
        Some(block) => Some(state.db.source_tag(block.octets(), received_at).await?),
        None => None,
    };
    let (status, delete_token) = match state
        .db
        .store_run(
            run,
            &record,
            received_at,
            token_digest.as_deref(),
            source_tag,
        )
        .await?
    {
        Stored::Created { delete_token } => {
            state.metrics.upload_accepted();
            // No run id: with a proxy's access log, an id and a time say whose run it is.
            tracing::info!(samples = stored_samples, demo, "run stored");
            (StatusCode::CREATED, delete_token)
        }
        Stored::AlreadyStored => {
            give_back_samples();
            state.metrics.upload_repeated();
            (StatusCode::OK, None)
        }
        Stored::IdTaken => {
            give_back_samples();
            return Err(AppError::Conflict(format!(
                "a different run is already stored under run_id {run_id}"
            )));
        }
        Stored::Deleted => {
            give_back_samples();
            return Err(AppError::Gone(format!(
                "run {run_id} was deleted from this collector with its token; it is not stored again"
            )));
        }
    };
    Ok((
        status,
        [(header::LOCATION, url.clone())],
        Json(StoredRun {
            run_id,
            url,
            delete_token,
        }),
    )
        .into_response())
}

/// The digest sent in [`DELETE_TOKEN_SHA256`], when one is: 64 hex digits, lowercased.
fn delete_token_digest(headers: &HeaderMap) -> Result<Option<String>, AppError> {
    let Some(value) = headers.get(DELETE_TOKEN_SHA256) else {
        return Ok(None);
    };
    let digest = value
        .to_str()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(Some(digest))
    } else {
        Err(AppError::BadRequest(format!(
            "{DELETE_TOKEN_SHA256} must be the SHA-256 of the delete token as 64 hex digits"
        )))
    }
}

/// An upload's run, checked, and the record stored for it: what the collector itself
/// writes, not the client's bytes, so the same run always gives the same record, whatever
/// whitespace or key order the client used.
fn read_run(body: &[u8]) -> Result<(Run, String), AppError> {
    let run = parse_run(body)?;
    run.validate().map_err(|e| AppError::Invalid {
        message: e.to_string(),
        field: Some(e.field),
    })?;
    let record = serde_json::to_string(&run).map_err(anyhow::Error::from)?;
    // A run is bounded as a whole too (core's schema/size.rs): the page never makes a
    // larger one, so only a hand-made upload meets this.
    if record.len() > MAX_RECORD_BYTES {
        return Err(AppError::Invalid {
            field: None,
            message: format!(
                "the run is {} bytes as JSON; a run may be at most {MAX_RECORD_BYTES}",
                record.len()
            ),
        });
    }
    Ok((run, record))
}

/// Parses an upload: not JSON at all is a 400; JSON of the wrong shape is a 422 naming
/// the field serde stopped at.
fn parse_run(body: &[u8]) -> Result<Run, AppError> {
    // A well-formed upload costs one plain typed parse (`cargo xtask bench ingest_cost`
    // measures each pass). Only when it fails are the two passes below made, which
    // accept exactly what it accepts and say what is wrong.
    if let Ok(run) = serde_json::from_slice::<Run>(body) {
        return Ok(run);
    }
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
            tracing::info!("run deleted by its uploader");
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
